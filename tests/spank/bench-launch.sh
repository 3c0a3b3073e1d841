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
# One allocation for all steps, so only step launch is timed.
median_ms() {
	local i t0 t1
	for i in $(seq "$N"); do
		t0=$(date +%s%N)
		srun -N3 -n8 --gpus-per-task=1 "$@" true >/dev/null 2>&1 || { echo fail; return; }
		t1=$(date +%s%N)
		echo $(((t1 - t0) / 1000))
	done | sort -n | awk '{a[NR]=$1} END {if (a[1]=="fail") print "fail"; else printf "%.1f\n", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)/1000}'
}
export -f median_ms
export N
salloc -N3 -n8 --gpus-per-task=1 bash -c '
base=$(median_ms --hexiscale=off)
user=$(median_ms --hexiscale='"$JOBS"'/good.json)
auto=$(median_ms --hexiscale=auto --hexiscale-model=tiny-8l --hexiscale-global-batch=16)
echo "launch median over $N steps of 8 tasks: off ${base} ms, user plan ${user} ms, auto ${auto} ms"
awk -v b="$base" -v u="$user" -v a="$auto" "BEGIN {
  printf \"added: user plan %+.1f ms (ratio %.3f)\", u-b, u/b;
  if (a != \"fail\") printf \", auto %+.1f ms (ratio %.3f)\", a-b, a/b; else printf \", auto: planner not available\";
  printf \"\n\" }"
' 2>&1 | grep -v "^salloc:"
