#!/bin/sh
# Benchmark (make bench): chunked asymmetric gradient sync vs one
# MPI_Allreduce of the same bytes on the same ranks, for a symmetric plan
# and two asymmetric ones of an 8-layer hidden-256 model (13-27 MB of
# gradients per rank), and the sharded sync of train.zero 1/2.  Prints the
# ratio per plan (goal <= 1.1).  Add
# --json for JSON lines.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top_builddir=${top_builddir:-$(pwd)/../..}
. "$top_srcdir/tests/runtime/rt_env.sh"
need_mpi
M="$PLANS/bench-model.json"
B="$top_builddir/tests/runtime/bench_sync"
for spec in "6/3:2x8;6/3:2x8" "8/4:2x3,1x5;4/1:4x8" "6/3:3x4,2x4;6/2:1x8"; do
	"$MKPLAN" "$M" "$spec" "$WORK/p.json" || hard "mkplan $spec"
	echo "# plan $spec"
	HX_TIMEOUT=300 hx_mpirun "$(plan_ranks "$WORK/p.json")" "$B" \
		"$WORK/p.json" 10 "$@" || hard "bench_sync $spec"
done
# Sharded sync (train.zero 1 and 2: reduce-scatter + all-gather of the
# weights) on the symmetric plan and one asymmetric one, against the same
# one MPI_Allreduce of the sync bytes.
for spec in "6/3:2x8;6/3:2x8" "8/4:2x3,1x5;4/1:4x8"; do
	"$MKPLAN" "$M" "$spec" "$WORK/p.json" || hard "mkplan $spec"
	for z in 1 2; do
		jq "del(.hash) | .train.zero = $z" "$WORK/p.json" \
			>"$WORK/pz.json" || hard "jq"
		echo "# plan $spec, zero $z"
		HX_TIMEOUT=300 hx_mpirun "$(plan_ranks "$WORK/pz.json")" "$B" \
			"$WORK/pz.json" 10 "$@" || hard "bench_sync $spec zero $z"
	done
done
