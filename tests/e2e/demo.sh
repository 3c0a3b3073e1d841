#!/bin/bash
# demo.sh - README's first command, shortened: examples/workflow.sh (what
# examples/demo.sh runs after building) with 4 + 4 steps on its own ports
# must show its four parts, train, resume at step 5 on the second plan,
# verify the checkpoint, exit 0, and leave no daemon or port lock behind.
. "$top_srcdir/tests/tap.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root (the demo starts munged, slurmctld, slurmd)"
[ -x "$top_builddir/runtime/hexitrain" ] || skip "hexitrain not built (needs MPI)"
[ -x "$top_builddir/checkpoint/hexickpt" ] || skip "hexickpt not built (needs HDF5, xxhash)"
out=$(mktemp /tmp/hexi-e2e-demo.XXXXXX) || hard "mktemp"
trap 'rm -f "$out"' EXIT
HEXI_DEMO_PORT_BASE=17340 HEXI_DEMO_STEPS=4 bash "$top_srcdir/examples/workflow.sh" "$top_builddir" >"$out" 2>&1
rc=$?
[ $rc -eq 77 ] && { sed 's/^/# /' "$out"; skip "the test cluster cannot run here"; }
expect_eq "demo exit status" "$rc" 0
[ $rc -eq 0 ] || sed 's/^/# /' "$out" | tail -n 30
for part in "== 0. " "== 1. The allocation and the plan" "== 2. sbatch --hexiscale=auto examples/train.sbatch" \
	"== 3. A new allocation without the A800 node" "== 4. The result"; do
	check "demo shows '$part'" grep -qF "$part" "$out"
done
check "part 1 shows the plan picture (hexiplan show)" grep -q '^  pipeline 0: batch .*micro-batch' "$out"
check "part 1 shows a predicted speed-up over the best uniform plan" \
	grep -q 'llama2-7b  HexiScale .* vs best uniform .*x speed-up' "$out"
expect_eq "both jobs completed" "$(grep -c '^  job [0-9]*: COMPLETED' "$out")" 2
check "the first job trained steps 1-4" grep -q '^  step    4  loss' "$out"
check "the second job resumed at step 5" grep -q '^  step    5  loss' "$out"
check "the second job ran on n2,n3 only" grep -q 'hexi-resume: job [0-9]* on n\[2-3\], 5 tasks' "$out"
check "the checkpoint verifies" grep -q 'step-00000008: OK: ' "$out"
check "reshard + diff: identical" grep -q 'identical tensors' "$out"
port=$(sed -n 's/.*on ports \([0-9]*\)\.\..*/\1/p' "$out")
check "no daemon of the demo left running" test -z "$(pgrep -f "hexi-demo-$port/")"
check "port lock released" test ! -e "/tmp/hexi-slurm-lock-$port"
[ -n "$port" ] && [ "$t_failed" -eq 0 ] && rm -rf "/tmp/hexi-demo-$port"
done_testing
