#!/bin/sh
# simt.sh: tests/gpu/test_kernels (every kernel against the CPU reference,
# fp32 and bf16) and test_gpu_model (a whole model step and two pipeline
# stages against the CPU model) with runtime/cuda's kernels executed by the
# SIMT emulation, in the default thread order and in two others (races);
# no "simt:" diagnostic (bad launch, barrier deadlock, write outside an
# allocation, host pointer) may appear on stderr.  Every run here defers
# stream work until the host waits (SIMT_STREAMS=deferred), as a GPU does,
# so a result read without the right synchronisation is stale and fails;
# simt_fma.sh and device_check_simt.sh run with immediate streams.
. "$top_srcdir/tests/simt/simt_tap.sh"
SIMT_STREAMS=deferred
export SIMT_STREAMS

./test_kernels_simt >"$WORK/out" 2>"$WORK/err"
st=$?
grep -E '^not ok|^# ' "$WORK/out" | head -n 20
expect_eq "test_kernels on the SIMT emulation: exit status" "$st" 0
n=$(grep -c '^ok ' "$WORK/out")
s=$(grep -c '^ok .*# SKIP' "$WORK/out")
[ "$n" -ge 60 ] && pass "test_kernels: $n checks passed ($s cuDNN skips)" ||
	fail "test_kernels: only $n checks passed"
grep -q '^ok .* attention_backward dk hs128' "$WORK/out" &&
	pass "the own attention ran (hs 128, several tiles)" ||
	fail "the own attention ran (hs 128, several tiles)"
check_diag test_kernels
grep -q '^# simt: streams deferred until the host waits' "$WORK/err" &&
	pass "test_kernels ran with deferred streams" ||
	fail "test_kernels ran with deferred streams"

check_model test_gpu_model ./test_gpu_model_simt

# Races between barriers: the same checks with the threads of each round
# and the blocks of each grid run in reverse and in a random order
# (simt.h's set_order).  A kernel that reads what another thread writes
# with no barrier between gets another result, and fails the reference.
for order in reverse random:1; do
	SIMT_ORDER=$order ./test_kernels_simt >"$WORK/out" 2>"$WORK/err"
	st=$?
	grep -E '^not ok' "$WORK/out" | head -n 10
	expect_eq "test_kernels, $order order: exit status" "$st" 0
	grep -q "^# simt: threads and blocks in $order order" "$WORK/err" &&
		pass "test_kernels ran in $order order" ||
		fail "test_kernels ran in $order order"
	check_diag "test_kernels, $order order"
	check_model "test_gpu_model, $order order" \
		env SIMT_ORDER=$order ./test_gpu_model_simt
done
SIMT_STREAMS=sideways ./test_kernels_simt >"$WORK/out" 2>"$WORK/err"
[ $? -ne 0 ] && grep -q "SIMT_STREAMS='sideways' is not a mode" "$WORK/err" &&
	pass "SIMT_STREAMS=sideways: refused, with the reason" ||
	fail "SIMT_STREAMS=sideways: refused, with the reason"
SIMT_ORDER=sideways ./test_kernels_simt >"$WORK/out" 2>"$WORK/err"
[ $? -ne 0 ] && grep -q "SIMT_ORDER='sideways' is not an order" "$WORK/err" &&
	pass "SIMT_ORDER=sideways: refused, with the reason" ||
	fail "SIMT_ORDER=sideways: refused, with the reason"

# device-check.sh's benchmark, as the GPU machine runs it (tiny-4l): step
# lines and the summary object its report reads.
./bench_gpu_train_simt --steps 3 --json >"$WORK/out" 2>"$WORK/err"
expect_eq "bench_gpu_train on the SIMT emulation: exit status" "$?" 0
expect_eq "bench_gpu_train: one JSON line per step" \
	"$(grep -c '^{"step":[123],"loss":[0-9.]*,"time_s":[0-9.]*,"tokens_per_s":[0-9.]*,"fwd_s":[0-9.]*,"bwd_s":[0-9.]*,"opt_s":[0-9.]*}$' "$WORK/out")" 3
sum=$(grep '"summary":true' "$WORK/out")
echo "# $sum"
case $sum in
*'"model":"tiny-4l"'*'"dtype":"bf16","batch":4,"seq":16,"device":"SIMT emulation on the CPU","gpu_type":"unknown"'*'"peak_tflops":0.00,"mfu":0.0000'*'"attention":"own (auto: cuDNN not loaded'*)
	pass "bench_gpu_train: the summary names model, device, unknown peak, own attention" ;;
*) fail "bench_gpu_train: the summary names model, device, unknown peak, own attention" ;;
esac
# the step's parts add up to it, and the attention timing is there
if echo "$sum" | python3 -c '
import json, sys
s = json.loads(sys.stdin.read())
parts = s["fwd_s"] + s["bwd_s"] + s["opt_s"]
step = 4 * 16 / s["tokens_per_s"]
ok = abs(parts - step) <= 0.02 * step and s["attn_fwd_ms"] > 0 and s["attn_bwd_ms"] > 0 and 0 < s["attn_share"]
sys.exit(0 if ok else 1)' 2>/dev/null; then
	pass "bench_gpu_train: forward + backward + AdamW = the step; attention timed alone"
else
	fail "bench_gpu_train: step parts or attention timing missing or inconsistent"
fi
loss=$(echo "$sum" | sed -n 's/.*"final_loss":\([0-9.]*\).*/\1/p')
awk -v l="$loss" 'BEGIN { exit !(l > 3.5 && l < 4.8) }' &&
	pass "bench_gpu_train: final loss $loss near ln 64 = 4.16 (3 steps from random init)" ||
	fail "bench_gpu_train: final loss '$loss' not near ln 64 = 4.16"
check_diag bench_gpu_train
done_testing
