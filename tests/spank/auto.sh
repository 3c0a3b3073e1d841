#!/bin/bash
# auto.sh - --hexiscale=auto on the real test cluster: a batch job
# (examples/hexiscale.sbatch) whose two steps get the same plan, with every
# task's role matching the plan file and covering every GPU once; srun
# directly; salloc + srun; a step on two of the nodes; env twins and
# command-line precedence seen in the plan; planning errors stop the step.
. "$top_srcdir/tests/spank/slurm-lib.sh"
# Plans over every GPU of the step (8 ranks, 6 on two nodes): for these
# tiny models the planner would leave the slower nodes idle (issue 16.1);
# idle.sh tests that default.
export HEXISCALE_USE_ALL_GPUS=1
slurm_up
need_planner
EX=$top_srcdir/examples
export HEXI_EXAMPLES=$EX
CHECK="python3 $top_srcdir/tests/spank/check-roles.py"
GPUS="-N3 -n8 --gpus-per-task=1"
latest_plan() { ls -t "$JOBS"/hexiscale-plan.*.json 2>/dev/null | head -1; }

# Batch job: #SBATCH --hexiscale=auto, two steps.
mkdir -p "$JOBS/out"
jid=$(sbatch --parsable -o "$JOBS/out/%j.out" -e "$JOBS/out/%j.err" "$EX/hexiscale.sbatch")
expect_eq "batch job completed" "$(job_wait "$jid")" COMPLETED
p0=$JOBS/out/hexiscale-plan.$jid.0.json
p1=$JOBS/out/hexiscale-plan.$jid.1.json
check "plan files of both steps next to the job output" test -f "$p0" -a -f "$p1"
grep HXROLE "$JOBS/out/$jid.out" | head -8 >step0.out
grep HXROLE "$JOBS/out/$jid.out" | tail -n +9 >step1.out
check "step 0: every task's role matches the plan, every GPU once" $CHECK "$p0" step0.out
check "step 1: every task's role matches the plan, every GPU once" $CHECK "$p1" step1.out
expect_eq "same plan for the same allocation" "$(field "$p0" "p['hash']")" "$(field "$p1" "p['hash']")"
expect_eq "plan for the #SBATCH model" "$(field "$p0" "p['model']['name']")" tiny-8l
expect_eq "plan for the #SBATCH global batch" "$(field "$p0" "p['train']['global_batch']")" 16
check "summary block in the job's stderr" grep -q "hexiscale: step $jid.0: plan [0-9a-f]\{16\} for 8 GPUs on 3 nodes (planned, model tiny-8l" "$JOBS/out/$jid.err"

# srun directly; salloc + srun.
srun $GPUS --hexiscale=auto --hexiscale-model=tiny-8l "$EX/print-role.sh" >srun.out 2>srun.err
expect_eq "srun --hexiscale=auto" "$?" 0
check "srun: roles match the plan" $CHECK "$(latest_plan)" srun.out
timeout 60 salloc $GPUS --hexiscale=auto --hexiscale-model=tiny-8l srun "$EX/print-role.sh" >salloc.out 2>/dev/null
expect_eq "salloc + srun" "$?" 0
check "salloc: roles match the plan" $CHECK "$(latest_plan)" salloc.out

# A step on two nodes gets a plan for its 6 GPUs.
srun -N2 -n6 -w n1,n2 --gpus-per-task=1 --hexiscale=auto --hexiscale-model=tiny-8l "$EX/print-role.sh" >two.out 2>/dev/null
check "2-node step: roles match a 6-GPU plan" $CHECK "$(latest_plan)" two.out
expect_eq "2-node plan has 6 ranks" "$(field "$(latest_plan)" "p['world_size']")" 6

# Without per-task binding every task sees the node's 3 GPUs; with the
# default gpu_bind=local_rank they stay visible in local-rank order, so
# torch.cuda.set_device(LOCAL_RANK) picks each task's plan GPU.
srun -N1 -n3 -w n1 --gres=gpu:3 --hexiscale=auto --hexiscale-model=tiny-8l "$EX/print-role.sh" >narrow.out 2>/dev/null
check "3 tasks sharing 3 GPUs: roles match, device LOCAL_RANK = plan GPU" $CHECK "$(latest_plan)" narrow.out
expect_eq "tasks saw the whole step's GPUs" "$(grep -c 'step_gpus=0,1,2 ' narrow.out)" 3
expect_eq "local ranks 0, 1, 2" "$(grep -o 'local_rank=[0-9]*' narrow.out | sort -u | paste -sd' ')" \
	"local_rank=0 local_rank=1 local_rank=2"
# RANK is SLURM_PROCID in every layout (the plan is renumbered to the tasks).
srun -N3 -n8 -m cyclic --gpus-per-task=1 --hexiscale=auto --hexiscale-model=tiny-8l "$EX/print-role.sh" >cyclic.out 2>/dev/null
check "cyclic layout: RANK = SLURM_PROCID, roles match the plan file" $CHECK "$(latest_plan)" cyclic.out

# Env twins, and the command line beats them.
HEXISCALE_MODE=auto HEXISCALE_MODEL=tiny-8l HEXISCALE_GLOBAL_BATCH=24 srun $GPUS true 2>/dev/null
p=$(latest_plan)
expect_eq "HEXISCALE_MODEL twin" "$(field "$p" "p['model']['name']")" tiny-8l
expect_eq "HEXISCALE_GLOBAL_BATCH twin" "$(field "$p" "p['train']['global_batch']")" 24
HEXISCALE_MODE=auto HEXISCALE_MODEL=tiny-8l HEXISCALE_GLOBAL_BATCH=24 srun $GPUS \
	--hexiscale-model=tiny-4l --hexiscale-global-batch=32 true 2>/dev/null
p=$(latest_plan)
expect_eq "command line model beats the twin" "$(field "$p" "p['model']['name']")" tiny-4l
expect_eq "command line batch beats the twin" "$(field "$p" "p['train']['global_batch']")" 32

# A model file instead of a name; as an unprivileged user a root-only model
# file is refused (read with the user's own privileges).
srun $GPUS --hexiscale=auto --hexiscale-model="$top_srcdir/examples/models/tiny-4l.json" true 2>/dev/null
expect_eq "--hexiscale-model=FILE" "$(field "$(latest_plan)" "p['model']['name']")" tiny-4l
install -m 600 "$top_srcdir/examples/models/tiny-4l.json" "$JOBS/rootonly-model.json"
out=$(as_user srun $GPUS --hexiscale=auto --hexiscale-model="$JOBS/rootonly-model.json" sh -c 'echo LAUNCHED' 2>&1)
[ $? -ne 0 ] && printf '%s' "$out" | grep -q "hexiscale: .*model.*rootonly-model.json" &&
	! printf '%s' "$out" | grep -q LAUNCHED && pass "as nobody: root-only model file refused" ||
	fail "root-only model: $out"
out=$(as_user srun $GPUS --hexiscale=auto --hexiscale-model=tiny-8l "$EX/print-role.sh" 2>/dev/null)
printf '%s\n' "$out" >user.out
check "as nobody: planned step works" $CHECK "$(latest_plan)" user.out

# Planning errors stop the step before launch, with a message.
while IFS='|' read -r args want; do
	out=$(srun $args --hexiscale=auto sh -c 'echo LAUNCHED' 2>&1)
	rc=$?
	if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "hexiscale: .*$want" &&
		! printf '%s' "$out" | grep -q LAUNCHED; then
		pass "auto with '$args' refused: $want"
	else
		fail "auto with '$args': rc $rc: $(printf '%s' "$out" | head -3)"
	fi
done <<TABLE
$GPUS --hexiscale-model=no-such-model|model
-N1 -n4 -w n1 --gres=gpu:3|node n1: 4 tasks but the job has 3 GPUs there
-N1 -n1 -w n1|node n1: the job has no GPUs there
TABLE
no_drain
done_testing
