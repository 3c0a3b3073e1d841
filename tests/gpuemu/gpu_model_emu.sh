#!/bin/sh
# gpu_model_emu.sh: tests/gpu/test_gpu_model on the emulated device (the
# GPU model's host logic: whole-model step and two pipeline stages vs the
# CPU model), with no gpu_emu diagnostic allowed on stderr.
. "$top_srcdir/tests/tap.sh"
WORK=$(mktemp -d) || exit 99
trap 'rm -rf "$WORK"' EXIT
HEXI_TEST_EXPECT_ATTN=own ./test_gpu_model_emu >"$WORK/out" 2>"$WORK/err"
st=$?
sed 's/^/# /' "$WORK/out" | grep -v '^# ok ' | head -n 20
expect_eq "test_gpu_model on the emulated device: exit status" "$st" 0
n=$(grep -c '^ok ' "$WORK/out")
[ "$n" -ge 20 ] && pass "test_gpu_model: $n checks passed" ||
	fail "test_gpu_model: only $n checks passed"
grep -q 'two stages: every gradient within tolerance' "$WORK/out" &&
	pass "the two-stage check ran" || fail "the two-stage check did not run"
if grep -q '^gpu_emu:' "$WORK/err"; then
	fail "device memory misuse or stream race"
	grep '^gpu_emu:' "$WORK/err" | head -n 5 | sed 's/^/# /'
else
	pass "no stream race or device memory misuse"
fi

# The attention choice on the emulated device (compute capability and cuDNN
# version emulated): auto takes cuDNN for bf16 and the result still equals
# the CPU model; a cuDNN that refuses the plans falls back to the own
# kernel, saying so; a forced or bad HEXI_ATTENTION fails model creation.
HEXI_GPU_EMU_CC=90 HEXI_GPU_EMU_CUDNN=91900 HEXI_TEST_EXPECT_ATTN=cudnn \
	./test_gpu_model_emu >"$WORK/cudnn" 2>"$WORK/err2"
expect_eq "emulated sm_90 + cuDNN 9.19: bf16 picks cuDNN, equal to the CPU model" "$?" 0
grep -q '^# bf16: attention cudnn (auto: bf16, sm_90, hs 16, cuDNN 91900)' "$WORK/cudnn" &&
	pass "the choice and its reason are printed" || fail "the choice and its reason are printed"
grep -q '^# fp32: attention own (auto: fp32' "$WORK/cudnn" &&
	pass "fp32 keeps the own kernel" || fail "fp32 keeps the own kernel"
grep -q '^# bf16: attention own (HEXI_ATTENTION=own)' "$WORK/cudnn" &&
	pass "the own path ran too" || fail "the own path ran too"
HEXI_GPU_EMU_CC=80 HEXI_GPU_EMU_CUDNN=91900 HEXI_GPU_EMU_CUDNN_REFUSE=1 \
	HEXI_TEST_EXPECT_ATTN=own ./test_gpu_model_emu >"$WORK/refuse" 2>&1
expect_eq "cuDNN refusing the plans: the own kernel, still equal" "$?" 0
grep -q 'attention own (auto: cuDNN refused the plans: cuDNN SDPA: no engine' "$WORK/refuse" &&
	pass "the fallback says why" || fail "the fallback says why"
# cuDNN's forward with the own backward (cuDNN refused only the backward
# plan): still equal, and the attention line says so
HEXI_GPU_EMU_CC=90 HEXI_GPU_EMU_CUDNN=91900 HEXI_GPU_EMU_CUDNN_REFUSE_BWD=1 \
	HEXI_TEST_EXPECT_ATTN=cudnn ./test_gpu_model_emu >"$WORK/refuse-bwd" 2>&1
expect_eq "cuDNN refusing the backward plan only: still equal" "$?" 0
grep -q '^# bf16: attention cudnn (auto: .*); backward: own kernel (cuDNN refused: cuDNN SDPA backward: no engine (emulated refusal))' \
	"$WORK/refuse-bwd" && pass "the attention line names the own backward and why" ||
	fail "the attention line names the own backward and why: $(grep -m1 'attention cudnn' "$WORK/refuse-bwd")"
HEXI_GPU_EMU_CC=75 HEXI_GPU_EMU_CUDNN=91900 HEXI_TEST_EXPECT_ATTN=own \
	./test_gpu_model_emu >"$WORK/old" 2>&1
expect_eq "compute capability 7.5: the own kernel" "$?" 0
HEXI_ATTENTION=cudnn ./test_gpu_model_emu >"$WORK/forced" 2>&1
[ $? -ne 0 ] && grep -q 'HEXI_ATTENTION=cudnn: ' "$WORK/forced" &&
	pass "HEXI_ATTENTION=cudnn without cuDNN fails, naming it" ||
	fail "HEXI_ATTENTION=cudnn without cuDNN fails, naming it"
HEXI_ATTENTION=fast ./test_gpu_model_emu >"$WORK/bad" 2>&1
[ $? -ne 0 ] && grep -q "HEXI_ATTENTION='fast': auto, own or cudnn" "$WORK/bad" &&
	pass "a bad HEXI_ATTENTION is refused" || fail "a bad HEXI_ATTENTION is refused"
done_testing
