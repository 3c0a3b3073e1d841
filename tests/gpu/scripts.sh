# shellcheck shell=sh
# scripts.sh: the GPU device check and the fidelity script parse, and
# degrade clearly: without a GPU device-check.sh prints why it cannot run.
. "$top_srcdir/tests/tap.sh"
for s in tests/gpu/device-check.sh tests/gpu/make-bundle.sh tests/bench/fidelity.sh; do
	check "bash -n $s" bash -n "$top_srcdir/$s"
done
if command -v shellcheck >/dev/null 2>&1; then
	check "shellcheck device-check.sh" shellcheck -S warning "$top_srcdir/tests/gpu/device-check.sh"
	check "shellcheck fidelity.sh" shellcheck -S warning "$top_srcdir/tests/bench/fidelity.sh"
fi
out=$(HEXI_DEVICE_CHECK_NO_BUILD=1 HEXI_BUILD="$top_builddir" \
	timeout 60 bash "$top_srcdir/tests/gpu/device-check.sh" 2>&1)
st=$?
if [ -x "$top_builddir/tests/gpu/test_kernels" ] &&
	"$top_builddir/tests/gpu/test_kernels" >/dev/null 2>&1; then
	# a GPU is here: the check ran for real; its own summary decides
	expect_eq "device-check on a GPU machine" "$st" 0
else
	expect_eq "device-check without a GPU: exit 77" "$st" 77
	case $out in *"SUMMARY"*"no usable GPU"*) pass "device-check prints a summary with the reason" ;;
	*) fail "device-check output: $out" ;; esac
fi
done_testing
