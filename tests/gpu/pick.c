/* pick.c - the runtime's device choice, built into the tests directly so
 * they run in builds without CUDA too. */
#include "rt_cuda_pick.c"
