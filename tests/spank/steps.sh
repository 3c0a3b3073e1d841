#!/bin/bash
# steps.sh - a --hexiscale=auto step that gets other GPUs than the job's
# first ones, because another step of the job holds those: srun plans on
# the job's first GPUs of each node (it cannot see the step's), and each
# task runs on Slurm's GPU at the same position among the step's GPUs of
# its node (doc/DECISIONS.md 174).  With the whole step's GPUs visible
# (--gres) and with per-task binding (--gpus-per-task), under
# gpu_bind=local_rank; a step that holds the planned GPUs is unchanged.
. "$top_srcdir/tests/spank/slurm-lib.sh"
export HEXISCALE_USE_ALL_GPUS=1
slurm_up
need_planner
EX=$top_srcdir/examples
CHECK="python3 $top_srcdir/tests/spank/check-roles.py"

# In one allocation of n1's 3 GPUs: a plain step holds GPU 0 while two
# HexiScale steps of 2 tasks run, one with --gres=gpu:2, one with
# --gpus-per-task=1, and one task with --gres=gpu:2; then, GPU 0 free again, a step that gets GPUs 0, 1.
cat >"$JOBS/inner.sh" <<'IN'
#!/bin/bash
rm -f "$JOBS/held" "$JOBS/release"
srun -n1 --gres=gpu:1 --exact sh -c 'echo "$SLURM_STEP_GPUS" >"$JOBS/held.tmp"; mv "$JOBS/held.tmp" "$JOBS/held"
	for i in $(seq 600); do [ -e "$JOBS/release" ] && exit 0; sleep 0.1; done' &
for i in $(seq 600); do [ -e "$JOBS/held" ] && break; sleep 0.1; done
srun -n2 --gres=gpu:2 --exact --hexiscale=auto --hexiscale-model=tiny-8l "$EX/print-role.sh" >gres.out 2>gres.err
echo "gres=$?" >>rc.out
srun -n2 --gpus-per-task=1 --exact --hexiscale=auto --hexiscale-model=tiny-8l "$EX/print-role.sh" >pertask.out 2>pertask.err
echo "pertask=$?" >>rc.out
srun -n1 --gres=gpu:2 --exact --hexiscale=auto --hexiscale-model=tiny-8l "$EX/print-role.sh" >wide.out 2>wide.err
echo "wide=$?" >>rc.out
touch "$JOBS/release"
wait
srun -n2 --gres=gpu:2 --exact --hexiscale=auto --hexiscale-model=tiny-8l "$EX/print-role.sh" >free.out 2>free.err
echo "free=$?" >>rc.out
IN
chmod +x "$JOBS/inner.sh"
rm -f rc.out
env JOBS="$JOBS" EX="$EX" timeout 180 salloc -N1 -n3 -w n1 --gres=gpu:3 "$JOBS/inner.sh" >salloc.out 2>&1
expect_eq "allocation ran" "$?" 0
expect_eq "the plain step held GPU 0" "$(cat "$JOBS/held" 2>/dev/null)" 0
expect_eq "all four HexiScale steps succeeded" "$(paste -sd' ' rc.out 2>/dev/null)" "gres=0 pertask=0 wide=0 free=0"

for c in gres pertask; do
	p=$(sed -n 's/.* plan=\([^ ]*\) .*/\1/p' $c.out | head -1)
	expect_eq "$c: the plan (made in srun) puts the ranks on n1's GPUs 0, 1" \
		"$(field "$p" "sorted(d['gpu'] for q in p['pipelines'] for s in q['stages'] for d in s['devices'])")" "[0, 1]"
	check "$c: every task on Slurm's GPU at its plan GPU's position (0->1, 1->2), roles as planned" \
		$CHECK --gpu-map 0:1,1:2 "$p" $c.out
	expect_eq "$c: HEXISCALE_GPU of the two tasks" "$(grep -o ' gpu=[0-9]*' $c.out | sort | paste -sd' ')" " gpu=1  gpu=2"
done
expect_eq "--gres: both tasks see the step's GPUs 1,2" "$(grep -c 'cvd=1,2 .*step_gpus=1,2 ' gres.out)" 2
expect_eq "--gpus-per-task: each task bound to one, CUDA_VISIBLE_DEVICES 1,2" \
	"$(grep -o 'cvd=[^ ]* .*step_gpus=[^ ]*' pertask.out | sed 's/ .* / /' | sort | paste -sd' ')" \
	"cvd=1,2 step_gpus=1 cvd=1,2 step_gpus=2"
p=$(sed -n 's/.* plan=\([^ ]*\) .*/\1/p' wide.out | head -1)
check "one task on GPUs 1,2: plan GPU 0 is Slurm's 1" $CHECK --gpu-map 0:1 "$p" wide.out
expect_eq "one task on GPUs 1,2: HEXISCALE_GPU 1, device 0 of CUDA_VISIBLE_DEVICES" \
	"$(grep -o ' gpu=[0-9]* .* cvd=[^ ]*' wide.out | sed 's/ gtype.*cvd=/ cvd=/')" " gpu=1 cvd=1"
p=$(sed -n 's/.* plan=\([^ ]*\) .*/\1/p' free.out | head -1)
check "GPUs 0, 1 free: the step runs on the planned GPUs" $CHECK "$p" free.out
expect_eq "GPUs 0, 1 free: HEXISCALE_GPU 0 and 1" "$(grep -o ' gpu=[0-9]*' free.out | sort | paste -sd' ')" " gpu=0  gpu=1"
no_drain
done_testing
