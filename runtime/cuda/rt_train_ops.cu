/*
 * rt_train_ops.cu - the trainer's fp32 gradient helpers on the GPU (data-
 * parallel weighting, global-norm clipping): x *= f and sum of squares;
 * the SGD update of the sharded optimizer's owned ranges.
 */
#include "rt_cuda_int.cuh"

__global__ void scale_kernel(float *x, float f, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		x[i] *= f;
}

/* __fmul_rn / __fsub_rn: never contracted into an FMA, so the rounding
 * is the CPU's w -= lr * g (and rt_cuda_model_sgd's w + (-lr * g)). */
__global__ void sgd_kernel(float *w, const float *g, float lr, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		w[i] = __fsub_rn(w[i], __fmul_rn(lr, g[i]));
}

/* Squares are summed in fp64 per thread, per warp and per block, and each
 * block's total is added to *acc (atomicAdd on double: compute capability
 * >= 6.0): the norm of a billion gradients stays as exact as the CPU's
 * (an fp32 partial sum drifts by ~1e-4, enough to move a clipping
 * decision). */
__device__ __forceinline__ double warp_sum_d(double v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__global__ void sumsq_kernel(const float *x, size_t n, double *acc)
{
	__shared__ double sh[32];
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	double v = 0.0;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		v += (double)x[i] * x[i];
	v = warp_sum_d(v);
	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < (int)(blockDim.x >> 5) ? sh[lane] : 0.0;
		v = warp_sum_d(v);
		if (lane == 0)
			atomicAdd(acc, v);
	}
}

extern "C" hexi_rc rt_cuda_scale_f32(rt_cuda_stream s, float *x, float f,
				     size_t n)
{
	if (n == 0)
		return HEXI_OK;
	scale_kernel<<<grid_for(n, 256) < 4096 ? grid_for(n, 256) : 4096, 256,
		       0, s>>>(x, f, n);
	return launch_check("scale_f32");
}

extern "C" hexi_rc rt_cuda_sgd_f32(rt_cuda_stream s, float *w, const float *g,
				   float lr, size_t n)
{
	if (n == 0)
		return HEXI_OK;
	sgd_kernel<<<grid_for(n, 256) < 4096 ? grid_for(n, 256) : 4096, 256, 0,
		     s>>>(w, g, lr, n);
	return launch_check("sgd_f32");
}

extern "C" hexi_rc rt_cuda_sumsq_f32(rt_cuda_stream s, const float *x,
				     size_t n, double *acc)
{
	if (n == 0)
		return HEXI_OK;
	sumsq_kernel<<<grid_for(n, 256) < 1024 ? grid_for(n, 256) : 1024, 256,
		       0, s>>>(x, n, acc);
	return launch_check("sumsq_f32");
}
