/* cuda_runtime.h (tests/simt): the runtime API, and in C++ (the .cu
 * sources rewritten by cu2cc.pl) the emulated device side, simt.h. */
#ifndef HEXI_SIMT_CUDA_RUNTIME_H
#define HEXI_SIMT_CUDA_RUNTIME_H
#include "cuda_runtime_api.h"
#ifdef __cplusplus
#include "simt.h"
#endif
#endif
