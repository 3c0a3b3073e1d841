#!/bin/sh
# fuzz.sh - replay the manifest and checkpoint-directory corpora, then
# bounded deterministic mutations of each.
. "$top_srcdir/tests/tap.sh"
[ -x ./fuzz_manifest ] && [ -x ./fuzz_open ] || hard "fuzz_manifest or fuzz_open not built"
n=${HEXI_FUZZ_ITERATIONS:-3000}
check "fuzz_manifest: corpus + $n mutations" ./fuzz_manifest -n "$n" "$top_srcdir/tests/checkpoint/corpus/manifest/"
m=${HEXI_FUZZ_OPEN_ITERATIONS:-600}
check "fuzz_open: corpus + $m mutations of a checkpoint directory" ./fuzz_open -n "$m" "$top_srcdir/tests/checkpoint/corpus/open/"
done_testing
