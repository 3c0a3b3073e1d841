#!/bin/sh
# simt.sh: tests/gpu/test_kernels (every kernel against the CPU reference,
# fp32 and bf16) and test_gpu_model (a whole model step and two pipeline
# stages against the CPU model) with runtime/cuda's kernels executed by the
# SIMT emulation; no "simt:" diagnostic (bad launch, barrier deadlock,
# write outside an allocation, host pointer) may appear on stderr.
. "$top_srcdir/tests/tap.sh"
WORK=$(mktemp -d) || exit 99
trap 'rm -rf "$WORK"' EXIT

check_diag() {
	if grep -q '^simt:' "$WORK/err"; then
		fail "$1: no simt: diagnostic"
		grep '^simt:' "$WORK/err" | head -n 5 | sed 's/^/# /'
	else
		pass "$1: no simt: diagnostic"
	fi
}

./test_kernels_simt >"$WORK/out" 2>"$WORK/err"
st=$?
grep -E '^not ok|^# ' "$WORK/out" | head -n 20
expect_eq "test_kernels on the SIMT emulation: exit status" "$st" 0
n=$(grep -c '^ok ' "$WORK/out")
s=$(grep -c '^ok .*# SKIP' "$WORK/out")
[ "$n" -ge 60 ] && pass "test_kernels: $n checks passed ($s cuDNN skips)" ||
	fail "test_kernels: only $n checks passed"
grep -q '^ok .* attention_backward dk hs128' "$WORK/out" &&
	pass "the own attention ran (hs 128, several tiles)" ||
	fail "the own attention ran (hs 128, several tiles)"
check_diag test_kernels

HEXI_TEST_EXPECT_ATTN=own ./test_gpu_model_simt >"$WORK/out" 2>"$WORK/err"
st=$?
grep -E '^not ok|^# ' "$WORK/out" | head -n 20
expect_eq "test_gpu_model on the SIMT emulation: exit status" "$st" 0
grep -q 'two stages: every gradient within tolerance' "$WORK/out" &&
	pass "the two-stage check ran" || fail "the two-stage check did not run"
check_diag test_gpu_model
done_testing
