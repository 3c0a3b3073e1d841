#!/bin/sh
# Benchmark (make bench): hexitrain single-process training throughput vs
# the OpenBLAS sgemm rate measured in the same run (CPU MFU), with one BLAS
# thread and with the default.  Add --json for JSON lines.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top_builddir=${top_builddir:-$(pwd)/../..}
. "$top_srcdir/tests/runtime/rt_env.sh"
B="$top_builddir/tests/runtime/bench_mfu"
OPENBLAS_NUM_THREADS=1 "$B" "$PLANS/bench-model.json" 8 5 "$@" ||
	hard "bench_mfu"
unset OPENBLAS_NUM_THREADS
"$B" "$PLANS/bench-model.json" 8 5 "$@" || hard "bench_mfu"
