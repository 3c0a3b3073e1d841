/*
 * rt_train_ops.cu - the trainer's fp32 gradient helpers on the GPU (data-
 * parallel weighting, global-norm clipping): x *= f and sum of squares.
 */
#include "rt_cuda_int.cuh"

__global__ void scale_kernel(float *x, float f, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		x[i] *= f;
}

/* Each block sums its squares in fp32 per thread and adds the block's
 * total to *acc in fp64 (atomicAdd on double: compute capability >= 6.0). */
__global__ void sumsq_kernel(const float *x, size_t n, double *acc)
{
	__shared__ float sh[32];
	float v = 0.0f;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		v += x[i] * x[i];
	v = block_sum(v, sh);
	if (threadIdx.x == 0)
		atomicAdd(acc, (double)v);
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

extern "C" hexi_rc rt_cuda_sumsq_f32(rt_cuda_stream s, const float *x,
				     size_t n, double *acc)
{
	if (n == 0)
		return HEXI_OK;
	sumsq_kernel<<<grid_for(n, 256) < 1024 ? grid_for(n, 256) : 1024, 256,
		       0, s>>>(x, n, acc);
	return launch_check("sumsq_f32");
}
