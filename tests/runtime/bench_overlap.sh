#!/bin/sh
# Benchmark (make bench): the gradient sync overlapped with the last
# micro-batch's backward (default) vs after it (--no-overlap), on a plan
# where the sync is a visible share of the step: two TP-1 pipelines of the
# hidden-256 model, one sample each (27 MB of gradients per rank, little
# compute).  Runs both in turn REPS times and prints the median step time
# of each and their ratio (goal: overlap / no-overlap < 1).  The timed
# numbers are the ranks' own step times (time_s, rank 0's line of the
# JSON); steps 1-2 are warm-up.  --json: one JSON line.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top_builddir=${top_builddir:-$(pwd)/../..}
. "$top_srcdir/tests/runtime/rt_env.sh"
need_mpi
command -v jq >/dev/null 2>&1 || skip "jq not installed"
REPS=${REPS:-3}
SPEC=${SPEC:-"1/1:1x8;1/1:1x8"}
"$MKPLAN" "$PLANS/bench-model.json" "$SPEC" "$WORK/p.json" || hard "mkplan"
np=$(plan_ranks "$WORK/p.json")
for r in $(seq "$REPS"); do
	for mode in on off; do
		opt=
		[ "$mode" = off ] && opt=--no-overlap
		# shellcheck disable=SC2086
		HX_TIMEOUT=300 hx_mpirun "$np" "$HT" --plan "$WORK/p.json" \
			--steps 8 --json $opt 2>/dev/null | tail -n +3 |
			jq -r '"\(.time_s) \(.dp_sync_s)"' >>"$WORK/$mode" ||
			hard "hexitrain ($mode)"
	done
done
med() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
on=$(cut -d' ' -f1 "$WORK/on" | med)
off=$(cut -d' ' -f1 "$WORK/off" | med)
son=$(cut -d' ' -f2 "$WORK/on" | med)
soff=$(cut -d' ' -f2 "$WORK/off" | med)
ratio=$(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.3f", a / b}')
if [ "${1:-}" = --json ]; then
	printf '{"bench":"overlap","plan":"%s","ranks":%d,"overlap_s":%s,' \
		"$SPEC" "$np" "$on"
	printf '"no_overlap_s":%s,"sync_wait_overlap_s":%s,' "$off" "$son"
	printf '"sync_no_overlap_s":%s,"ratio":%s}\n' "$soff" "$ratio"
else
	echo "overlap $SPEC ($np ranks): step $on s (sync wait $son s) vs" \
		"--no-overlap $off s (sync $soff s): ratio $ratio (goal < 1)"
fi
