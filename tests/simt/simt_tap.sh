# shellcheck shell=sh
# simt_tap.sh - tests/tap.sh plus what the SIMT scripts share (sourced).
# Sets WORK, a temporary folder removed on exit; check_diag NAME passes
# when $WORK/err holds no "simt:" diagnostic (bad launch, barrier deadlock,
# write outside an allocation, host pointer), else fails and shows them.
# check_model NAME CMD... runs a build of test_gpu_model (own attention):
# exit 0, its two-stage check ran, no diagnostic.
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

check_model() {
	name=$1
	shift
	HEXI_TEST_EXPECT_ATTN=own "$@" >"$WORK/out" 2>"$WORK/err"
	st=$?
	grep -E '^not ok|^# ' "$WORK/out" | head -n 20
	expect_eq "$name: exit status" "$st" 0
	grep -q 'two stages: every gradient within tolerance' "$WORK/out" &&
		pass "$name: the two-stage check ran" ||
		fail "$name: the two-stage check did not run"
	check_diag "$name"
}
