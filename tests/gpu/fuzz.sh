# shellcheck shell=sh
# fuzz.sh: the CUDA_VISIBLE_DEVICES parser under seed corpus + mutations.
. "$top_srcdir/tests/tap.sh"
./fuzz_devsel -n "${HEXI_FUZZ_ITERATIONS:-3000}" "$top_srcdir/tests/gpu/corpus/visible" ||
	{ echo "fuzz_devsel failed"; exit 1; }
pass "fuzz_devsel"
done_testing
