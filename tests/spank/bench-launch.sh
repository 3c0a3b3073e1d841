#!/bin/bash
# bench-launch.sh - step launch overhead of hexiscale.so (BENCHMARKS, run by
# `make bench`): median wall time of `srun -N3 -n8 --gpus-per-task=1 true`
# over 20 steps without the plugin's work (--hexiscale=off), with a user
# plan file, and with --hexiscale=auto (when the planner is in
# libhexisched).  Prints the medians, the added milliseconds and the ratio
# against the baseline measured in the same run.  Goal: < 50 ms added.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir/build}
export top_srcdir top_builddir
. "$top_srcdir/tests/spank/slurm-lib.sh"
N=${HEXI_BENCH_STEPS:-20}
slurm_up
"$top_builddir/tests/spank/mkplan" good "$JOBS/good.json" || hard "mkplan"
# One allocation for all steps, so only step launch is timed; the three
# variants alternate, so load changes on the machine hit them alike.
cat >"$JOBS/bench-steps.sh" <<'SCRIPT'
#!/bin/bash
# Runs inside the allocation: N rounds of off / user plan / auto.
N=$1 PLAN=$2 OUT=$3
step_ms() {
	local t0 t1
	t0=$(date +%s%N)
	srun -N3 -n8 --gpus-per-task=1 "$@" true >/dev/null 2>&1 || { echo fail; return; }
	t1=$(date +%s%N)
	echo "$(((t1 - t0) / 1000))"
}
for i in $(seq "$N"); do
	step_ms --hexiscale=off >>"$OUT.off"
	step_ms --hexiscale="$PLAN" >>"$OUT.user"
	step_ms --hexiscale=auto --hexiscale-model=tiny-8l --hexiscale-global-batch=16 >>"$OUT.auto"
done
SCRIPT
salloc -N3 -n8 --gpus-per-task=1 bash "$JOBS/bench-steps.sh" "$N" "$JOBS/good.json" "$JOBS/t" >/dev/null 2>&1
median() {
	grep -q fail "$1" && { echo fail; return; }
	sort -n "$1" | awk '{a[NR]=$1} END {printf "%.1f\n", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)/1000}'
}
base=$(median "$JOBS/t.off") user=$(median "$JOBS/t.user") auto=$(median "$JOBS/t.auto")
echo "launch median over $N steps of 8 tasks: off $base ms, user plan $user ms, auto $auto ms"
awk -v b="$base" -v u="$user" -v a="$auto" 'BEGIN {
	printf "added: user plan %+.1f ms (ratio %.3f)", u - b, u / b
	if (a != "fail") printf ", auto %+.1f ms (ratio %.3f)", a - b, a / b
	else printf ", auto: planner not available"
	printf "\n" }'
