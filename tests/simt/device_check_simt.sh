#!/bin/sh
# device_check_simt.sh: tests/gpu/device-check.sh, the script the GPU
# machine runs once, as a dry run on the SIMT emulation: a bundle folder
# whose test_kernels, test_gpu_model and bench_gpu_train are the SIMT
# builds of the same sources (no hexiprof, NCCL test or hexitrain in it:
# those steps must fail or be skipped without stopping the others).  The
# real outputs go through the script's own parsing: its SUMMARY and the
# one archive in $OUT are checked.
. "$top_srcdir/tests/tap.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 missing (device-check.sh parses JSON with it)"
WORK=$(mktemp -d) || exit 99
trap 'rm -rf "$WORK"' EXIT
B=$WORK/bundle
mkdir -p "$B/tests/gpu" "$WORK/out" "$WORK/x"
printf 'hexiscale-gpu-bundle 1\ncommit simt-dry-run\ncuda 0.0 (SIMT emulation)\nsize_mib 0\n' >"$B/MANIFEST"
here=$(pwd)
for p in test_kernels test_gpu_model bench_gpu_train; do
	printf '#!/bin/sh\nexec "%s/%s_simt" "$@"\n' "$here" "$p" >"$B/tests/gpu/$p"
	chmod +x "$B/tests/gpu/$p"
done
HEXI_BUILD=$B OUT=$WORK/out HEXI_DEVICE_CHECK_BENCH_MODEL=tiny-4l \
	HEXI_DEVICE_CHECK_BUDGET_S=300 \
	bash "$top_srcdir/tests/gpu/device-check.sh" >"$WORK/log" 2>&1
st=$?
sed -n '/SUMMARY/,$p' "$WORK/log" | sed 's/^/# /'
expect_eq "device-check on the emulation: exit 1 (hexiprof is not in this bundle)" "$st" 1
S=$WORK/log
grep -q '^kernels *ok: [0-9]* checks vs CPU reference passed' "$S" &&
	pass "step 2: the kernels' checks counted from test_kernels' output" ||
	fail "step 2: no kernels line"
grep -q '^attention *not checked: cuDNN attention hs16 bf16: own (auto: cuDNN not loaded' "$S" &&
	pass "step 2: the attention line gives the bf16 verdict (cuDNN not checked, and why)" ||
	fail "step 2: attention line"
grep -q '^hexiprof *FAILED' "$S" && pass "step 3: a missing hexiprof fails its step" ||
	fail "step 3: hexiprof line"
grep -q '^gpu model *ok: a training step on the GPU equals the CPU model' "$S" &&
	pass "step 4: test_gpu_model's verdict" || fail "step 4: gpu model line"
grep -q '^train *tiny-4l (0.00B params) bf16, batch [24]x16: [0-9]* tokens/s, [0-9.]* TFLOP/s, MFU 0.0 % of 0.0 (unknown catalog peak); attention own' "$S" &&
	pass "step 4: bench_gpu_train's JSON summary parsed into the train line" ||
	fail "step 4: train line"
grep -q '^  step [0-9.]* ms: forward [0-9.]*, backward [0-9.]*, AdamW [0-9.]*; attention alone [0-9.]* + [0-9.]* ms a layer, [0-9]* % of the step$' "$S" &&
	pass "step 4: the step's breakdown (forward, backward, AdamW, attention)" ||
	fail "step 4: no breakdown line"
grep -q '^train (hexitrain) *not run: no hexitrain' "$S" &&
	pass "step 4: no hexitrain in the bundle: said so" || fail "step 4: hexitrain line"
grep -q '^result *FAIL' "$S" && pass "the summary ends with the result" ||
	fail "no result line"
if [ -f "$WORK/out/device-check.tar.gz" ] &&
	tar -xzf "$WORK/out/device-check.tar.gz" -C "$WORK/x" 2>/dev/null; then
	pass "one archive in \$OUT"
	for f in SUMMARY.txt probe.txt kernels.txt gpu-model.txt train.txt; do
		[ -s "$WORK/x/$f" ] && pass "archive holds $f" || fail "archive lacks $f"
	done
	grep -q '^result *FAIL' "$WORK/x/SUMMARY.txt" &&
		pass "the archived SUMMARY is the final one" ||
		fail "the archived SUMMARY is not the final one"
else
	fail "no archive device-check.tar.gz in \$OUT"
fi
done_testing
