/*
 * rt_cuda_int.cuh - helpers shared by the .cu files: element loads and
 * stores in fp32 for either dtype, warp reductions, launch checks.
 */
#ifndef HEXI_RT_CUDA_INT_CUH
#define HEXI_RT_CUDA_INT_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "rt_cuda.h"

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float ld(const float *p, size_t i)
{
	return p[i];
}

__device__ __forceinline__ float ld(const bf16 *p, size_t i)
{
	return __bfloat162float(p[i]);
}

__device__ __forceinline__ void st(float *p, size_t i, float v)
{
	p[i] = v;
}

__device__ __forceinline__ void st(bf16 *p, size_t i, float v)
{
	p[i] = __float2bfloat16(v); /* round to nearest even */
}

/* Sum over the 32 lanes; every lane gets the result. */
__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* Sum over a block of blockDim.x (a multiple of 32, <= 1024) threads; every
 * thread gets the result.  sh: 32 floats of shared memory. */
__device__ __forceinline__ float block_sum(float v, float *sh)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int nw = blockDim.x >> 5;

	v = warp_sum(v);
	__syncthreads();
	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	v = lane < nw ? sh[lane] : 0.0f;
	return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float *sh)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int nw = blockDim.x >> 5;

	v = warp_max(v);
	__syncthreads();
	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	v = lane < nw ? sh[lane] : -INFINITY;
	return warp_max(v);
}

/*
 * One launch for either activation dtype: the statement(s) after dt are
 * compiled twice, with E the element type (bf16 or float), so a templated
 * kernel is written once at its call site:
 *   DT_DISPATCH(dt, k<<<g, b, 0, s>>>((E *)out, (const E *)in, n));
 */
#define DT_DISPATCH(dt, ...)                                                   \
	do {                                                                   \
		if ((dt) == RT_CUDA_BF16) {                                    \
			typedef bf16 E;                                        \
			__VA_ARGS__;                                           \
		} else {                                                       \
			typedef float E;                                       \
			__VA_ARGS__;                                           \
		}                                                              \
	} while (0)

/* After a launch: the launch error, if any, as hexi_rc. */
static inline hexi_rc launch_check(const char *kernel)
{
	cudaError_t e = cudaGetLastError();

	if (e == cudaSuccess)
		return HEXI_OK;
	return hexi_error(HEXI_ERR_CUDA, "kernel %s: %s (%s)", kernel,
			  cudaGetErrorName(e), cudaGetErrorString(e));
}

static inline unsigned grid_for(size_t n, unsigned block)
{
	size_t g = (n + block - 1) / block;

	return g > 65535u * 32u ? 65535u * 32u : (unsigned)g;
}

#endif
