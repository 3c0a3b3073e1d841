# shellcheck shell=sh
# gpu-model.sh: a training step of the whole model on the GPU equals the
# CPU model's (test_gpu_model).  Exit 77 with the reason without a GPU.
. "$top_srcdir/tests/tap.sh"
[ -x ./test_gpu_model ] || skip "built without CUDA (configure --with-cuda)"
./test_gpu_model
st=$?
case $st in
0) exit 0 ;;
77) exit 77 ;;
*) echo "test_gpu_model: exit $st"; exit 1 ;;
esac
