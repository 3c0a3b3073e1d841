#!/bin/sh
# mem_model.sh - the planner's memory model against what the CPU trainer
# allocates (doc/DECISIONS.md 184): bench_mem.sh on two asymmetric plans
# (TP 2 and 1 beside TP 4; a 1-layer stage, TP 2 and 3, the tables held by
# 4 and 3 ranks over 2 pipelines) at zero 0, 1 and 2 with recompute on
# and off.  Every stage's prediction (hexiplan simulate) must be within
# 0.5 % of the largest of its ranks' measured peaks (hexitrain --json
# "memory"); measured 0.00-0.08 %.  The GPU trainer's side is
# tests/simt/mem_model_gpu.sh.
. "$top_srcdir/tests/runtime/rt_env.sh"
need_mpi

BENCH_MEM_SPECS="8/4:2x3,1x5;4/1:4x8 9/3:1x1,2x4,1x3;3/3:3x5,1x3" \
	BENCH_MEM_ZERO="0 1 2" BENCH_MEM_GOAL=0.5 BENCH_MEM_STRICT=1 \
	sh "$top_srcdir/tests/runtime/bench_mem.sh" >"$WORK/out" 2>&1
st=$?
grep -E '^MEM|^# [0-9]+ plans' "$WORK/out" | sed 's/^/# /'
[ "$st" -eq 0 ] || tail -n 20 "$WORK/out" | sed 's/^/# /'
expect_eq "bench_mem.sh: every stage within 0.5 % (exit status)" "$st" 0
expect_eq "all 12 runs measured (2 plans x 3 zero stages x recompute)" \
	"$(grep -c '^MEM' "$WORK/out")" 12
expect_eq "no run missed the goal" "$(grep -c 'goal=MISSED' "$WORK/out")" 0
done_testing
