#!/bin/sh
# mem_model_gpu.sh - the planner's GPU memory terms against what the GPU
# trainer allocates (doc/DECISIONS.md 184): bench_mem.sh with
# BENCH_MEM_GPU=1 (hexitrain_simt --backend nccl --dtype bf16 on the SIMT
# device, whose cudaMalloc sizes are a GPU's; the plans on h200) on an
# asymmetric plan of 8 ranks (a 1-layer stage, TP 2 and 3, the tables
# held by 4 and 3 ranks over 2 pipelines) at zero 0, 1 and 2, recompute
# on: every stage's prediction within 0.5 % of the largest of its ranks'
# measured device peaks (measured 0.00-0.10 %).  cuBLAS's, cuDNN's and
# NCCL's own allocations are not the model's (reserve_gib covers them) and
# are not counted here.
. "$top_srcdir/tests/simt/simt_tap.sh"
[ -x ./hexitrain_simt ] || skip "hexitrain_simt not built (no MPI)"
[ -x "$top_builddir/tests/runtime/mkplan" ] ||
	skip "mkplan not built (make -C tests/runtime mkplan)"
# LeakSanitizer would report Open MPI's own allocations (as simt_nccl.sh);
# a sanitized build runs zero 1 only (the same accounting, 8 ranks under
# ASan on 2 cores)
ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"
export ASAN_OPTIONS
zeros="0 1 2"
[ "${HEXI_SANITIZED:-0}" = 1 ] && zeros=1
# mpirun's limit per run (hx_mpirun, 120 s by default): 8 ranks under ASan
# took 99-131 s on 2 loaded cores, so the sanitized run gets 400 s
[ "${HEXI_SANITIZED:-0}" = 1 ] && HX_TIMEOUT=${HX_TIMEOUT:-400}
export HX_TIMEOUT
n=$(echo $zeros | wc -w)

BENCH_MEM_GPU=1 BENCH_MEM_SPECS="9/3:1x1,2x4,1x3;3/3:3x5,1x3" \
	BENCH_MEM_ZERO="$zeros" BENCH_MEM_RECOMPUTE=1 BENCH_MEM_GOAL=0.5 \
	BENCH_MEM_STRICT=1 sh "$top_srcdir/tests/runtime/bench_mem.sh" \
	>"$WORK/out" 2>&1
st=$?
grep -E '^MEM|^# [0-9]+ plans|skipped' "$WORK/out" | sed 's/^/# /'
[ "$st" -eq 0 ] || tail -n 20 "$WORK/out" | sed 's/^/# /'
expect_eq "bench_mem.sh (GPU trainer): every stage within 0.5 % (exit status)" \
	"$st" 0
expect_eq "all $n runs measured (zero $zeros)" \
	"$(grep -c '^MEM' "$WORK/out")" "$n"
expect_eq "no run missed the goal" "$(grep -c 'goal=MISSED' "$WORK/out")" 0
done_testing
