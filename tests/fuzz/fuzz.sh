#!/bin/sh
# fuzz.sh: replay the profile corpus, then bounded deterministic mutations
# (the coverage-guided runs are tests/fuzz/libfuzzer.sh, `make fuzz`).
exec ./fuzz_profile -n "${HEXI_FUZZ_ITERATIONS:-3000}" "$srcdir/corpus/profile"
