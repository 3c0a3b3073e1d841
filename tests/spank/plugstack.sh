#!/bin/bash
# plugstack.sh - the admin's side on the real test cluster: plugstack keys
# default_mode=on, model, global_batch, plan_dir and a topology file take
# effect in the plans; default_mode=on steps aside (with a message) from
# GPU steps it cannot plan; unknown, duplicate and bad keys are reported
# naming the key but block only what asks for HexiScale (not --help, not
# plain jobs); no node is drained.
. "$top_srcdir/tests/spank/slurm-lib.sh"
TOPO=$top_srcdir/examples/clusters/pair-matrix.json
HEXI_PLUGSTACK_ARGS="default_mode=on model=tiny-8l global_batch=16 plan_dir=$HEXI_SLURM_DIR/jobs/plans topology=$TOPO"
export HEXI_PLUGSTACK_ARGS
slurm_up
need_planner
mkdir -p "$JOBS/plans"
latest_plan() { ls -t "$JOBS"/plans/hexiscale-plan.*.json 2>/dev/null | head -1; }

out=$(srun -N3 -n8 --gpus-per-task=1 sh -c 'echo $HEXISCALE_RANK' 2>/dev/null | sort -n | paste -sd' ')
expect_eq "default_mode=on: planned without the option" "$out" "0 1 2 3 4 5 6 7"
p=$(latest_plan)
check "plan_dir= used" test -n "$p"
expect_eq "model= default" "$(field "$p" "p['model']['name']")" tiny-8l
expect_eq "global_batch= default" "$(field "$p" "p['train']['global_batch']")" 16
expect_eq "topology= pair bandwidths" "$(field "$p" "p['cluster']['inter_bw_gbps']")" \
	"[[0.0, 0.7, 0.7], [0.7, 0.0, 1.25], [0.7, 1.25, 0.0]]"
expect_eq "topology= latency" "$(field "$p" "p['cluster']['inter_lat_s']")" 0.0001
srun -N2 -n5 -w n2,n3 --gpus-per-task=1 true 2>/dev/null
expect_eq "topology= pairs matched by node name" "$(field "$(latest_plan)" "p['cluster']['inter_bw_gbps']")" \
	"[[0.0, 1.25], [1.25, 0.0]]"
out=$(srun -N1 -n1 -w n1 sh -c 'echo ${HEXISCALE_RANK:-none}' 2>&1)
expect_eq "default_mode=on leaves a step without GPUs alone" "$out" none
out=$(srun -N1 -n1 -w n1 --hexiscale=auto true 2>&1)
printf '%s' "$out" | grep -q "node n1: the job has no GPUs there" && pass "explicit auto without GPUs refused" || fail "$out"
out=$(srun -N3 -n8 --gpus-per-task=1 --hexiscale=off sh -c 'echo ${HEXISCALE_RANK:-none}' 2>/dev/null | sort -u)
expect_eq "--hexiscale=off beats default_mode=on" "$out" none

# default_mode=on never refuses an ordinary GPU step it cannot plan.
out=$(srun -N1 -n1 -w n1 --gres=gpu:3 sh -c 'echo ${HEXISCALE_RANK:-none} $CUDA_VISIBLE_DEVICES' 2>"$JOBS/aside1.err")
st=$?
expect_eq "default_mode=on: one task on 3 GPUs runs unplanned, all 3 GPUs visible" "$st $out" "0 none 0,1,2"
check "... and says why it stepped aside" grep -q "not planned (default_mode=on.*1 tasks for 3 GPUs" "$JOBS/aside1.err"
out=$(srun -N1 -n2 -w n1 --gres=gpu:3 sh -c 'echo ${HEXISCALE_RANK:-none} $CUDA_VISIBLE_DEVICES' 2>/dev/null | sort -u)
expect_eq "default_mode=on: 2 tasks sharing 3 GPUs are not narrowed" "$out" "none 0,1,2"
out=$(HEXISCALE_MODEL=llama2-70b srun -N1 -n2 -w n3 --gpus-per-task=1 sh -c 'echo ${HEXISCALE_RANK:-none}' 2>"$JOBS/aside2.err" | sort -u)
st=$?
expect_eq "default_mode=on: a model that does not fit steps aside" "$st $out" "0 none"
check "... with the planner's reason" grep -q "not planned (default_mode=on" "$JOBS/aside2.err"
out=$(srun -N1 -n2 -w n3 --gpus-per-task=1 --hexiscale=auto --hexiscale-model=llama2-70b true 2>&1)
[ $? -ne 0 ] && pass "explicit --hexiscale=auto that does not fit is still refused" || fail "explicit auto: $out"

# Bad plugstack lines (srun and sbatch read plugstack.conf each time): the
# message names the key; --help, plain jobs and default_mode are unharmed;
# only asking for HexiScale is refused.
conf=$HEXI_SLURM_DIR/etc/plugstack.conf
good=$(cat "$conf")
while IFS='|' read -r arg want; do
	echo "required $HEXI_PLUGIN libsched=$HEXI_LIBSCHED $arg" >"$conf"
	for cmd in srun sbatch; do
		# (</dev/null: srun would pass this loop's table to its task)
		if [ $cmd = srun ]; then out=$(srun -N1 -n1 true 2>&1 </dev/null); else out=$(sbatch -N1 -n1 --wrap true 2>&1 </dev/null); fi
		rc=$?
		[ $rc -eq 0 ] && printf '%s' "$out" | grep -q "hexiscale: plugstack.conf: .*$want" &&
			pass "$cmd: plugstack '$arg' reported, plain job runs" || fail "$cmd plugstack '$arg': rc $rc: $out"
		if [ $cmd = srun ]; then out=$(srun -N1 -n1 --gpus-per-task=1 --hexiscale=auto true 2>&1 </dev/null)
		else out=$(sbatch -N1 -n1 --gpus-per-task=1 --hexiscale=auto --wrap true 2>&1 </dev/null); fi
		rc=$?
		[ $rc -ne 0 ] && printf '%s' "$out" | grep -q "plugstack.conf: .*$want.*cannot run until" &&
			pass "$cmd --hexiscale=auto: refused, naming '$arg'" || fail "$cmd --hexiscale=auto with '$arg': rc $rc: $out"
	done
	out=$(sbatch --help 2>&1 </dev/null)
	[ $? -eq 0 ] && printf '%s' "$out" | grep -q -- "--hexiscale=" &&
		pass "sbatch --help with '$arg': works, lists --hexiscale" || fail "sbatch --help with '$arg': $out"
done <<TABLE
bogus=1|'bogus' is unknown
inter_bw_gbps=fast|'inter_bw_gbps'
inter_lat_s=-1|'inter_lat_s'
catalog=relative.json|'catalog'.*absolute
default_mode=maybe|'default_mode'
time_budget_s=0|'time_budget_s'
global_batch|not key=value
model=tiny-8l model=tiny-4l|'model' is given twice
TABLE
# gpu_bind=single: each task sees only its GPU (device 0).
echo "required $HEXI_PLUGIN libsched=$HEXI_LIBSCHED plan_dir=$JOBS/plans gpu_bind=single" >"$conf"
srun -N3 -n8 --gpus-per-task=1 --hexiscale=auto --hexiscale-model=tiny-8l \
	"$top_srcdir/examples/print-role.sh" >single.out 2>/dev/null </dev/null
check "gpu_bind=single: roles match, CUDA_VISIBLE_DEVICES = the task's GPU only" \
	python3 "$top_srcdir/tests/spank/check-roles.py" --bind single "$(latest_plan)" single.out
srun -N1 -n3 -w n1 --gres=gpu:3 --hexiscale=auto --hexiscale-model=tiny-8l \
	"$top_srcdir/examples/print-role.sh" >single3.out 2>/dev/null </dev/null
expect_eq "gpu_bind=single: 3 tasks sharing 3 GPUs narrowed to distinct ones" \
	"$(grep -o 'cvd=[0-9,]*' single3.out | sort -u | wc -l)" 3
echo "$good" >"$conf"
expect_eq "good plugstack line works again" "$(srun -N1 -n1 -w n1 --gpus-per-task=1 sh -c 'echo $WORLD_SIZE' 2>/dev/null)" 1
no_drain
done_testing
