#!/bin/sh
# simt_fma.sh: runtime/cuda's kernels contracted as nvcc contracts them.
# nvcc's default (-fmad=true, which runtime/cuda keeps) turns a * b + c into
# one fused multiply-add, rounded once, so a GPU's results differ from the
# CPU reference's, which rounds twice.  Here the kernels are built with
# -mfma -ffp-contract=fast and the emulated cuBLAS accumulates with fmaf
# (libsimt_fma.a; the CPU reference and the host C code as always).
# tests/gpu's test_kernels and test_gpu_model must still pass: every
# tolerance holds for contracted arithmetic, and the checks that claim
# bit-exactness (SGD's __fmul_rn/__fsub_rn) are not fused.  The compiler's choice of which products to fuse is not nvcc's;
# what is checked is that contraction anywhere does not fail the tests.
. "$top_srcdir/tests/simt/simt_tap.sh"
[ -x ./test_kernels_fma_simt ] && [ -x ./test_gpu_model_fma_simt ] ||
	skip "no contracted build: configure found no FMA code generation for the C++ compiler (x86-64 -mfma; 'checking whether ... builds FMA code' in config.log)"
grep -qw fma /proc/cpuinfo 2>/dev/null ||
	skip "this CPU has no FMA instructions (no 'fma' flag in /proc/cpuinfo): the contracted build cannot run here"
command -v objdump >/dev/null 2>&1 ||
	skip "objdump (binutils) not found: cannot show that the build is contracted"

# The build really contracts: fused multiply-adds in each kernel file, and
# in the emulated cuBLAS (runtime.c), which accumulates with fmaf.
for f in rt_kernels.simt rt_attention.simt rt_train_ops.simt runtime; do
	o=libsimt_fma_a-$f.o
	n=$(objdump -d "$o" 2>/dev/null | grep -cE 'vfn?m(add|sub)[0-9]{3}')
	[ "${n:-0}" -gt 0 ] &&
		pass "$f contracted: $n FMA instructions in $o" ||
		fail "$f contracted: no FMA instruction in $o"
done

# largest "worst X of tolerance" of a test_kernels output
worst() {
	sed -n 's/.*(worst \([0-9.e+-]*\) of tolerance).*/\1/p' "$1" |
		sort -g | tail -n 1
}

./test_kernels_simt >"$WORK/plain" 2>/dev/null
./test_kernels_fma_simt >"$WORK/out" 2>"$WORK/err"
st=$?
grep -E '^not ok' "$WORK/out" | head -n 20
expect_eq "test_kernels, contracted: exit status" "$st" 0
n=$(grep -c '^ok ' "$WORK/out")
expect_eq "test_kernels, contracted: as many checks pass as uncontracted" \
	"$n" "$(grep -c '^ok ' "$WORK/plain")"
grep -q '^ok .* sgd_f32 on an owned range (bit-exact)' "$WORK/out" &&
	pass "SGD's update stays bit-exact (the _rn intrinsics are not fused)" ||
	fail "SGD's update stays bit-exact (the _rn intrinsics are not fused)"
echo "# largest error, in units of its tolerance: $(worst "$WORK/out") contracted, $(worst "$WORK/plain") not"
d=$(grep '^ok .*(worst' "$WORK/out" | grep -cvxF -f "$WORK/plain")
[ "$d" -gt 0 ] &&
	pass "contraction changed the results of $d of the checks (the kernels ran contracted)" ||
	fail "contraction changed no result: the contracted kernels did not run"
check_diag "test_kernels, contracted"

check_model "test_gpu_model, contracted" ./test_gpu_model_fma_simt

# and in a thread order where a warp runs ahead (races, DECISIONS 166)
SIMT_ORDER=random:1 ./test_kernels_fma_simt >"$WORK/out" 2>"$WORK/err"
expect_eq "test_kernels, contracted, random:1 order: exit status" "$?" 0
check_diag "test_kernels, contracted, random:1 order"
done_testing
