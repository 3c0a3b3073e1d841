#!/bin/sh
# gpu_model_emu.sh: tests/gpu/test_gpu_model on the emulated device (the
# GPU model's host logic: whole-model step and two pipeline stages vs the
# CPU model), with no gpu_emu diagnostic allowed on stderr.
. "$top_srcdir/tests/tap.sh"
WORK=$(mktemp -d) || exit 99
trap 'rm -rf "$WORK"' EXIT
./test_gpu_model_emu >"$WORK/out" 2>"$WORK/err"
st=$?
sed 's/^/# /' "$WORK/out" | grep -v '^# ok ' | head -n 20
expect_eq "test_gpu_model on the emulated device: exit status" "$st" 0
n=$(grep -c '^ok ' "$WORK/out")
[ "$n" -ge 20 ] && pass "test_gpu_model: $n checks passed" ||
	fail "test_gpu_model: only $n checks passed"
grep -q 'two stages: every gradient within tolerance' "$WORK/out" &&
	pass "the two-stage check ran" || fail "the two-stage check did not run"
if grep -q '^gpu_emu:' "$WORK/err"; then
	fail "device memory misuse or stream race"
	grep '^gpu_emu:' "$WORK/err" | head -n 5 | sed 's/^/# /'
else
	pass "no stream race or device memory misuse"
fi
done_testing
