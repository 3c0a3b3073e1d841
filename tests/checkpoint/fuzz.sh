#!/bin/sh
# fuzz.sh - replay the manifest corpus, then bounded deterministic mutations.
. "$top_srcdir/tests/tap.sh"
[ -x ./fuzz_manifest ] || hard "fuzz_manifest not built"
n=${HEXI_FUZZ_ITERATIONS:-3000}
check "fuzz_manifest: corpus + $n mutations" ./fuzz_manifest -n "$n" "$top_srcdir/tests/checkpoint/corpus/manifest/"
done_testing
