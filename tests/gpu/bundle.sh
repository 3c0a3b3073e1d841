# shellcheck shell=sh
# bundle.sh: the GPU bundle (tests/gpu/make-bundle.sh) travels: at most 40
# MiB, every library its binaries load comes from the bundle, the system or
# the CUDA image (cuBLAS, NCCL), jansson and cudart are static, and
# device-check.sh run from it on a machine without a GPU probes, says why
# and exits 77, leaving ONE archive of its logs in $OUT.  Skips when no
# bundle was built (building one takes minutes: make-bundle.sh).
. "$top_srcdir/tests/tap.sh"
B=${HEXI_BUNDLE:-$top_srcdir/bundle-gpu}
[ -f "$B/MANIFEST" ] || skip "no bundle in $B (build it: tests/gpu/make-bundle.sh)"
command -v ldd >/dev/null 2>&1 || skip "no ldd"
cuda_lib=/usr/local/cuda/lib64
[ -d "$cuda_lib" ] || skip "no $cuda_lib for the image's cuBLAS/NCCL"
tmp=$(mktemp -d) || hard "mktemp"
trap 'rm -rf "$tmp"' EXIT

mib=$(du -sm "$B" | cut -f1)
expect_eq "bundle size <= 40 MiB ($mib MiB)" "$([ "$mib" -le 40 ] && echo ok)" ok
bins="profiler/hexiprof scheduler/hexiplan runtime/hexitrain tests/gpu/test_kernels
 tests/gpu/test_nccl.t tests/gpu/test_gpu_model tests/gpu/bench_gpu_train
 tests/gpu/test_cudnn_plan.t"
for b in $bins; do
	[ -x "$B/$b" ] || { fail "$b is in the bundle"; continue; }
	LD_LIBRARY_PATH=$cuda_lib ldd "$B/$b" >"$tmp/ldd" 2>&1
	# resolved outside the bundle: only glibc/libstdc++ (system) and the
	# image's cuBLAS / NCCL
	out=$(awk '$2 == "=>" { print $1, $3 }' "$tmp/ldd" | while read -r lib path; do
		case $path in
		"$B"/*) ;;
		/lib/x86_64-linux-gnu/* | /usr/lib/x86_64-linux-gnu/* | /lib64/*)
			case $lib in libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | libstdc++.so* | libgcc_s.so*) ;;
			*) echo "$lib=$path" ;; esac ;;
		"$cuda_lib"/* | /usr/local/cuda*/*)
			case $lib in libcublas.so* | libcublasLt.so* | libnccl.so*) ;; *) echo "$lib=$path" ;; esac ;;
		*) echo "$lib=$path" ;;
		esac
	done)
	expect_eq "$b: nothing loaded from outside the bundle/system/image" "$out" ""
	expect_eq "$b: every library found" "$(grep -c 'not found' "$tmp/ldd")" 0
	expect_eq "$b: no shared cudart or jansson" \
		"$(grep -c -E 'libcudart|libjansson' "$tmp/ldd")" 0
done
LD_LIBRARY_PATH=$cuda_lib ldd "$B/scheduler/hexiplan" >"$tmp/ldd" 2>&1
grep -q "libmetis.so.5 => $B/.*lib/libmetis.so.5" "$tmp/ldd" &&
	pass "hexiplan loads the bundle's libmetis" || fail "hexiplan loads the bundle's libmetis"

# device-check.sh from the bundle, no GPU here: probe, reason, exit 77, one
# archive; the bundle is used without a build step
mkdir -p "$tmp/out"
OUT=$tmp/out HEXI_BUILD=$B timeout 120 bash "$top_srcdir/tests/gpu/device-check.sh" >"$tmp/dc" 2>&1
st=$?
if LD_LIBRARY_PATH=$cuda_lib "$B/tests/gpu/test_kernels" >/dev/null 2>&1; then
	expect_eq "device-check from the bundle on a GPU machine" "$st" 0
else
	expect_eq "device-check from the bundle without a GPU: exit 77" "$st" 77
	grep -q 'no usable GPU' "$tmp/dc" && pass "the summary gives the reason" ||
		fail "the summary gives the reason: $(tail -n 5 "$tmp/dc")"
fi
grep -q '^bundle ' "$tmp/dc" && pass "the summary names the bundle" ||
	fail "the summary names the bundle"
grep -q '^build  *skipped' "$tmp/dc" && pass "no build step from the bundle" ||
	fail "no build step from the bundle"
expect_eq "one file in \$OUT" "$(ls "$tmp/out" | tr '\n' ' ')" "device-check.tar.gz "
tar -xzf "$tmp/out/device-check.tar.gz" -C "$tmp/out" 2>/dev/null
for f in SUMMARY.txt probe.txt kernels.txt; do
	[ -s "$tmp/out/$f" ] && pass "archive holds $f" || fail "archive holds $f"
done
grep -q 'nvidia-smi' "$tmp/out/probe.txt" && grep -q '^nccl ' "$tmp/out/probe.txt" &&
	pass "the probe reports the GPU tools and NCCL's place" ||
	fail "the probe reports the GPU tools and NCCL's place"
done_testing
