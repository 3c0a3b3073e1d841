#!/bin/bash
# idle.sh - GPUs a plan leaves idle, on the real test cluster (issue 16.1):
# a user plan that trains on n1 and n3 and leaves n2 idle (the middle
# node, so the ranks are not the task ids) and the planner's own choice
# (--hexiscale=auto, tiny-8l: the planner may leave the slower nodes idle)
# give every task a role that matches the plan file; idle tasks have
# HEXISCALE_ROLE=idle, ranks W.. and no stage variables, training tasks
# ranks 0..W-1 in task order; the summary lists the idle GPUs as the plan
# does; --hexiscale-use-all-gpus (on srun and on sbatch), its twin
# HEXISCALE_USE_ALL_GPUS and the plugstack key use_all_gpus= give every
# task a training rank.
. "$top_srcdir/tests/spank/slurm-lib.sh"
MKPLAN=$top_builddir/tests/runtime/mkplan
[ -x "$MKPLAN" ] || hard "tests/runtime/mkplan not built"
unset HEXISCALE_USE_ALL_GPUS HEXISCALE_MODE HEXISCALE_MODEL
slurm_up
need_planner
EX=$top_srcdir/examples
export HEXI_EXAMPLES=$EX
CHECK="python3 $top_srcdir/tests/spank/check-roles.py"
GPUS="-N3 -n8 --gpus-per-task=1"
latest_plan() { ls -t "$JOBS"/hexiscale-plan.*.json 2>/dev/null | head -1; }
# task PROCID FIELD OUTPUT: one field of one task's HXROLE line
task() { sed -n "s/^HXROLE procid=$1 .* $2=\([^ ]*\).*/\1/p" "$3"; }

# 1. A user plan: pipeline 0 TP3 on n1, pipeline 1 two stages on n3, n2's
# three GPUs idle.  Block layout: tasks 0-2 on n1, 3-5 on n2, 6-7 on n3.
"$MKPLAN" tiny-8l "10/5:3x8@0;6/3:1x4@2,1x4@2" "$JOBS/mid.json" idle=1 || hard "mkplan"
srun $GPUS --hexiscale="$JOBS/mid.json" "$EX/print-role.sh" >mid.out 2>mid.err
expect_eq "user plan with idle GPUs: step exit status" "$?" 0
p=$(latest_plan)
check "user plan: every task's role matches the plan file" $CHECK "$p" mid.out
expect_eq "user plan: the idle tasks are n2's (tasks 3-5)" \
	"$(grep ' role=idle ' mid.out | sed 's/^HXROLE procid=\([0-9]*\) .*/\1/' | sort -n | paste -sd' ')" "3 4 5"
expect_eq "user plan: idle tasks' RANK 5 6 7 (after the 5 training ranks)" \
	"$(for t in 3 4 5; do task $t rank mid.out; done | paste -sd' ')" "5 6 7"
expect_eq "user plan: tasks 6 and 7 train as ranks 3 and 4" \
	"$(task 6 rank mid.out) $(task 7 rank mid.out) $(task 6 role mid.out)" "3 4 train"
expect_eq "user plan: an idle task has no stage variables" \
	"$(task 4 pipe mid.out) $(task 4 stage mid.out) $(task 4 l0 mid.out) $(task 4 mbs mid.out)" \
	"none none none none"
expect_eq "user plan: WORLD_SIZE is the training ranks, idle tasks too" \
	"$(sed -n 's/.* world=\([^ ]*\) .*/\1/p' mid.out | sort -u)" 5
check "user plan: summary header says 5 of 8 GPUs, 3 idle" \
	grep -q "hexiscale: step .*: plan [0-9a-f]\{16\} for 5 of 8 GPUs on 2 nodes, 3 idle (user plan" mid.err
check "user plan: summary lists n2's idle GPUs, their ranks and tasks" \
	grep -q "hexiscale:   idle: 3 GPUs on 1 node (ranks 5-7, Slurm tasks 3-5, HEXISCALE_ROLE=idle, train nothing): n2 (rtx4090) 0,1,2$" mid.err
expect_eq "user plan: the written plan's idle list (node:gpu:rank)" \
	"$(field "$p" "' '.join('%s:%d:%d' % (d['node'], d['gpu'], d['rank']) for d in p['idle'])")" \
	"n2:0:5 n2:1:6 n2:2:7"

# 1b. Idle GPUs on nodes that also train (single GPUs left out, DECISIONS
# 130): TP 2 on n1's GPUs 0-1 and n2's GPUs 0-1; n1's GPU 2, n2's GPU 2 and
# n3 idle.  Tasks 0,1 and 3,4 train as ranks 0-3; tasks 2,5,6,7 idle as
# ranks 4-7; local ranks count every task of a node.
"$MKPLAN" tiny-8l "4/2:2x4@0,2x4@1" "$JOBS/part.json" idle=1 || hard "mkplan"
srun $GPUS --hexiscale="$JOBS/part.json" "$EX/print-role.sh" >part.out 2>part.err
expect_eq "idle GPUs on training nodes: step exit status" "$?" 0
p=$(latest_plan)
check "idle GPUs on training nodes: every task's role matches the plan file" $CHECK "$p" part.out
expect_eq "idle GPUs on training nodes: tasks 2 5 6 7 idle" \
	"$(grep ' role=idle ' part.out | sed 's/^HXROLE procid=\([0-9]*\) .*/\1/' | sort -n | paste -sd' ')" "2 5 6 7"
expect_eq "idle GPUs on training nodes: task 2 (n1 GPU 2) idle as rank 4, local rank 2, beside TP ranks 0-1" \
	"$(task 2 rank part.out) $(task 2 role part.out) $(task 2 local_rank part.out) $(task 1 rank part.out) $(task 1 role part.out)" \
	"4 idle 2 1 train"
expect_eq "idle GPUs on training nodes: tasks 3 4 train as ranks 2 3" \
	"$(task 3 rank part.out) $(task 4 rank part.out)" "2 3"
check "idle GPUs on training nodes: summary lists them per node" \
	grep -q "hexiscale:   idle: 4 GPUs on 3 nodes (ranks 4-7, Slurm tasks 2,5-7, HEXISCALE_ROLE=idle, train nothing): n1 ([a-z0-9-]*) 2; n2 (rtx4090) 2; n3 (rtx3090) 0,1$" part.err

# 2. The planner's choice for tiny-8l on the 8 GPUs: it may leave GPUs
# idle; whatever it chose, the roles, the idle tasks and the summary agree
# with the plan file.
srun $GPUS --hexiscale=auto --hexiscale-model=tiny-8l "$EX/print-role.sh" >auto.out 2>auto.err
expect_eq "auto: step exit status" "$?" 0
p=$(latest_plan)
ni=$(field "$p" "len(p.get('idle', []))")
w=$(field "$p" "p['world_size']")
echo "# auto plan: $w training ranks, $ni idle GPUs"
[ "$ni" -gt 0 ] && pass "auto: the planner left GPUs idle for tiny-8l" ||
	fail "auto: no GPU idle (plan of $w ranks)"
check "auto: every task's role matches the plan file" $CHECK "$p" auto.out
expect_eq "auto: idle tasks = the plan's idle GPUs" "$(grep -c ' role=idle ' auto.out)" "$ni"
check "auto: summary counts the idle GPUs" grep -q "hexiscale:   idle: $ni GPUs on .* (ranks $w-$((w + ni - 1)), " auto.err
srun $GPUS -m cyclic --hexiscale=auto --hexiscale-model=tiny-8l "$EX/print-role.sh" >cyclic.out 2>/dev/null
check "auto, cyclic layout: training ranks 0..W-1 and idle ranks in task order" $CHECK "$(latest_plan)" cyclic.out

# 3. Every GPU a rank: the flag on srun, its twin, the plugstack key.
srun $GPUS --hexiscale=auto --hexiscale-use-all-gpus --hexiscale-model=tiny-8l "$EX/print-role.sh" >all.out 2>all.err
p=$(latest_plan)
expect_eq "--hexiscale-use-all-gpus: 8 training ranks, no idle list" \
	"$(field "$p" "p['world_size'], 'idle' in p")" "(8, False)"
expect_eq "--hexiscale-use-all-gpus: every task trains" "$(grep -c ' role=train ' all.out)" 8
check "--hexiscale-use-all-gpus: roles match, RANK = SLURM_PROCID" $CHECK "$p" all.out
check "--hexiscale-use-all-gpus: no idle line in the summary" sh -c "! grep -q 'hexiscale:   idle' all.err"
HEXISCALE_USE_ALL_GPUS=1 srun $GPUS --hexiscale=auto --hexiscale-model=tiny-8l true 2>/dev/null
expect_eq "HEXISCALE_USE_ALL_GPUS=1: 8 training ranks" "$(field "$(latest_plan)" "p['world_size']")" 8
out=$(HEXISCALE_USE_ALL_GPUS=sometimes srun $GPUS --hexiscale=auto --hexiscale-model=tiny-8l sh -c 'echo LAUNCHED' 2>&1)
[ $? -ne 0 ] && printf '%s' "$out" | grep -q "HEXISCALE_USE_ALL_GPUS: 'sometimes' is not one of yes, no, 1, 0" &&
	! printf '%s' "$out" | grep -q LAUNCHED && pass "bad HEXISCALE_USE_ALL_GPUS refused before launch" ||
	fail "bad twin: $out"
# On sbatch: the flag reaches the job's steps.
mkdir -p "$JOBS/out"
jid=$(sbatch --parsable --hexiscale-use-all-gpus -o "$JOBS/out/%j.out" -e "$JOBS/out/%j.err" "$EX/hexiscale.sbatch")
expect_eq "sbatch --hexiscale-use-all-gpus: job completed" "$(job_wait "$jid")" COMPLETED
expect_eq "sbatch --hexiscale-use-all-gpus: both steps every GPU" \
	"$(grep -c ' role=train ' "$JOBS/out/$jid.out")" 16
conf=$HEXI_SLURM_DIR/etc/plugstack.conf
good=$(cat "$conf")
echo "$good use_all_gpus=yes" >"$conf"
srun $GPUS --hexiscale=auto --hexiscale-model=tiny-8l true 2>/dev/null
expect_eq "plugstack use_all_gpus=yes: 8 training ranks" "$(field "$(latest_plan)" "p['world_size']")" 8
HEXISCALE_USE_ALL_GPUS=no srun $GPUS --hexiscale=auto --hexiscale-model=tiny-8l true 2>/dev/null
expect_eq "HEXISCALE_USE_ALL_GPUS=no beats use_all_gpus=yes" \
	"$(field "$(latest_plan)" "len(p.get('idle', [])) > 0")" True
echo "$good use_all_gpus=1" >"$conf"
out=$(srun $GPUS --hexiscale=auto --hexiscale-model=tiny-8l true 2>&1)
printf '%s' "$out" | grep -q "'use_all_gpus': '1' is not one of yes, no" &&
	pass "plugstack use_all_gpus=1 refused, naming the key" || fail "use_all_gpus=1: $out"
echo "$good" >"$conf"
no_drain
done_testing
