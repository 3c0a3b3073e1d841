# shellcheck shell=sh
# fuzz.sh: replay the seed corpus and bounded mutations through the parsers.
. "$top_srcdir/tests/tap.sh"
./fuzz_prof_args -n "${HEXI_FUZZ_ITERATIONS:-3000}" "$top_srcdir/tests/profiler/corpus/args" ||
	{ echo "fuzz_prof_args failed"; exit 1; }
pass "fuzz_prof_args"
done_testing
