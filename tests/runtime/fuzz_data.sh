#!/bin/sh
# fuzz_data.sh - replay the safetensors, config.json and token file
# corpora, then bounded deterministic mutations (tests/fuzz_main.c).
. "$top_srcdir/tests/tap.sh"
n=${HEXI_FUZZ_ITERATIONS:-3000}
C="$top_srcdir/tests/runtime/corpus"
if [ -x ./fuzz_safetensors ]; then
	check "fuzz_safetensors: corpus + $n mutations" ./fuzz_safetensors \
		-n "$n" "$C/safetensors/"
else
	echo "# fuzz_safetensors not built (no HDF5/jansson checkpoint build)"
fi
if [ -x ./fuzz_hfconfig ]; then
	check "fuzz_hfconfig: corpus + $n mutations" ./fuzz_hfconfig \
		-n "$n" "$C/hfconfig/"
else
	echo "# fuzz_hfconfig not built (no HDF5/jansson checkpoint build)"
fi
[ -x ./fuzz_tokfile ] || hard "fuzz_tokfile not built"
check "fuzz_tokfile: corpus + $n mutations" ./fuzz_tokfile -n "$n" \
	"$C/tokfile/"
done_testing
