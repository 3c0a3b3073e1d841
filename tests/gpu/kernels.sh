# shellcheck shell=sh
# kernels.sh: every CUDA kernel against its CPU reference (test_kernels).
# Exit 77 with the reason when the build has no CUDA or there is no usable
# GPU (e.g. "no CUDA device: cudaGetDeviceCount returned 35 (...)").
. "$top_srcdir/tests/tap.sh"
[ -x ./test_kernels ] || skip "built without CUDA (configure --with-cuda)"
./test_kernels
st=$?
case $st in
0) exit 0 ;;
77) exit 77 ;;
*) echo "test_kernels: exit $st"; exit 1 ;;
esac
