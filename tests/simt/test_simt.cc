/*
 * test_simt.cc - the SIMT emulation itself (tests/simt/simt.h): warp and
 * block reductions of rt_cuda_int.cuh give exact sums for every block
 * shape the kernels use, shared memory is one per block, and what a GPU
 * would not forgive is refused: a shuffle in a divergent branch, a
 * barrier half a warp never reaches, a write past a cudaMalloc block, a
 * host pointer as kernel argument, a launch over CUDA's limits.  Also
 * cuBLAS's argument checks and bf16 rounding.  The "simt:" lines these
 * refusals print on stderr are expected here.
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>

#include "cublas_v2.h"
#include "rt_cuda_int.cuh"
#include "tap.h"

#include "simt_asan.h"

/* out[block] = sum over the block of (t + 1) and max over t, via the
 * reductions the kernels use. */
__global__ void sum_kernel(float *sum, float *mx)
{
	__shared__ float sh[32];
	float v = (float)(threadIdx.x + 1);
	float s = block_sum(v, sh);
	float m = block_max(v, sh);

	if (threadIdx.x == 0) {
		sum[blockIdx.x] = s;
		mx[blockIdx.x] = m;
	}
}

/* Each thread reads its neighbour's value through shared memory. */
__global__ void rotate_kernel(int *out)
{
	__shared__ int sh[1024];
	unsigned n = blockDim.x, t = threadIdx.x;

	sh[t] = (int)(blockIdx.x * 10000 + t);
	__syncthreads();
	out[blockIdx.x * n + t] = sh[(t + 1) % n];
}

/* Reads shared memory no thread of this block wrote. */
__global__ void read_unwritten_shared(float *out)
{
	__shared__ float sh[64];

	out[threadIdx.x] = sh[threadIdx.x];
}

__global__ void half_warp_shuffle(float *out)
{
	float v = 1.0f;

	if ((threadIdx.x & 31) < 16)
		v = warp_sum(v);
	out[threadIdx.x] = v;
}

__global__ void split_barrier(float *out)
{
	float v = 1.0f;

	if ((threadIdx.x & 31) < 16)
		__syncthreads();
	else
		v = warp_sum(v);
	out[threadIdx.x] = v;
}

__global__ void write_one_past(float *p, int n)
{
	if (threadIdx.x == 0)
		p[n] = 1.0f;
}

__global__ void read_one_past(float *out, const float *p, int n)
{
	if (threadIdx.x == 0)
		out[0] = p[n];
}

__global__ void fill(float *p, float v)
{
	p[threadIdx.x] = v;
}

static float *dev_alloc(size_t n)
{
	void *p = nullptr;

	if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess)
		tap_bail("cudaMalloc");
	return static_cast<float *>(p);
}

static void test_reductions(void)
{
	static const unsigned blocks[] = {32, 64, 96, 128, 256, 512, 1024};

	for (unsigned b : blocks) {
		float *s = dev_alloc(3), *m = dev_alloc(3);

		SIMT_LAUNCH(sum_kernel, 3, b, 0, nullptr)(s, m);
		is_int(cudaGetLastError(), cudaSuccess, "block_sum/max, %u threads: launch", b);
		ok(s[0] == b * (b + 1) / 2.0f && s[2] == s[0],
		   "block_sum of 1..%u = %g (every block)", b, (double)s[0]);
		ok(m[1] == (float)b, "block_max = %u", b);
		cudaFree(s), cudaFree(m);
	}
}

static void test_shared(void)
{
	const unsigned n = 256, g = 2;
	int *out = nullptr;
	int bad = 0;

	cudaMalloc((void **)&out, n * g * sizeof(int));
	SIMT_LAUNCH(rotate_kernel, g, n, 0, nullptr)(out);
	is_int(cudaGetLastError(), cudaSuccess, "shared memory kernel: launch");
	for (unsigned b = 0; b < g; b++)
		for (unsigned t = 0; t < n; t++)
			bad += out[b * n + t] != (int)(b * 10000 + (t + 1) % n);
	is_int(bad, 0, "every thread sees its neighbour's write after __syncthreads");
	{
		float *o = dev_alloc(64);

		SIMT_LAUNCH(read_unwritten_shared, 2, 64, 0, nullptr)(o);
		ok(std::isnan(o[0]) && std::isnan(o[63]),
		   "shared memory starts every block as NaN (0xff bytes)");
		cudaFree(o);
	}
	cudaFree(out);
}

static void test_refusals(void)
{
	float *p = dev_alloc(64), host[64];

	std::fprintf(stderr, "test_simt: the simt: lines below are expected\n");
	SIMT_LAUNCH(half_warp_shuffle, 1, 64, 0, nullptr)(p);
	is_int(cudaGetLastError(), cudaErrorLaunchFailure,
	       "a shuffle in a branch half the warp skips is refused");
	SIMT_LAUNCH(split_barrier, 1, 64, 0, nullptr)(p);
	is_int(cudaGetLastError(), cudaErrorLaunchFailure,
	       "__syncthreads and a shuffle in one warp: deadlock reported");
#ifdef SIMT_ASAN
	/* the guards are poisoned: ASan ends the process at the access */
	for (int write = 0; write <= 1; write++) {
		pid_t pid = fork();
		int st = 0;

		if (pid == 0) {
			if (write)
				SIMT_LAUNCH(write_one_past, 1, 32, 0, nullptr)(p, 64);
			else
				SIMT_LAUNCH(read_one_past, 1, 32, 0, nullptr)(p, p, 64);
			_exit(0);
		}
		ok(pid > 0 && waitpid(pid, &st, 0) == pid &&
			   !(WIFEXITED(st) && WEXITSTATUS(st) == 0),
		   "ASan: a %s one past a cudaMalloc block ends the kernel's "
		   "process (status %#x)",
		   write ? "write" : "read", st);
	}
#else
	SIMT_LAUNCH(write_one_past, 1, 32, 0, nullptr)(p, 64);
	is_int(cudaGetLastError(), cudaErrorLaunchFailure,
	       "a write one past a cudaMalloc block is caught");
	SIMT_LAUNCH(fill, 1, 32, 0, nullptr)(p, 2.0f);
	is_int(cudaGetLastError(), cudaSuccess, "the guard is restored after a report");
#endif
	SIMT_LAUNCH(fill, 1, 32, 0, nullptr)(host, 2.0f);
	is_int(cudaGetLastError(), cudaErrorLaunchFailure,
	       "a host pointer as kernel argument is refused");
	SIMT_LAUNCH(fill, 1, 1025, 0, nullptr)(p, 1.0f);
	is_int(cudaGetLastError(), cudaErrorLaunchFailure, "1025 threads per block refused");
	SIMT_LAUNCH(fill, dim3(1, 65536), 32, 0, nullptr)(p, 1.0f);
	is_int(cudaGetLastError(), cudaErrorLaunchFailure, "grid.y 65536 refused");
	is_int(cudaGetLastError(), cudaSuccess, "cudaGetLastError clears the error");
	cudaFree(p);
	p = dev_alloc(4);
	ok(std::isnan(p[0]) && std::isnan(p[3]),
	   "fresh cudaMalloc memory reads as NaN (0xff bytes)");
	cudaFree(p);
	is_int(cudaMemcpy(host, host + 1, 4, cudaMemcpyHostToDevice),
	       cudaErrorInvalidValue, "cudaMemcpy to a host pointer as device refused");
}

static void test_blas(void)
{
	cublasHandle_t h;
	float *A = dev_alloc(6), *B = dev_alloc(6), *C = dev_alloc(4);
	float one = 1.0f, zero = 0.0f;

	cublasCreate(&h);
	for (int i = 0; i < 6; i++)
		A[i] = (float)(i + 1), B[i] = (float)(i + 1);
	/* column-major A 2x3 = [1 3 5; 2 4 6], B^T with B 2x3: C = A B^T */
	is_int(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, 2, 2, 3, &one, A,
			    CUDA_R_32F, 2, B, CUDA_R_32F, 2, &zero, C,
			    CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
			    CUBLAS_GEMM_DEFAULT),
	       CUBLAS_STATUS_SUCCESS, "cublasGemmEx N,T");
	ok(C[0] == 35 && C[1] == 44 && C[2] == 44 && C[3] == 56,
	   "A A^T = [35 44; 44 56] (beta 0 ignores C's NaN): %g %g %g %g",
	   (double)C[0], (double)C[1], (double)C[2], (double)C[3]);
	is_int(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A,
			    CUDA_R_32F, 1, B, CUDA_R_32F, 3, &zero, C,
			    CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
			    CUBLAS_GEMM_DEFAULT),
	       CUBLAS_STATUS_INVALID_VALUE, "lda < m refused as cuBLAS does");
	cublasDestroy(h);
	cudaFree(A), cudaFree(B), cudaFree(C);
}

static void test_bf16(void)
{
	ok(__bfloat162float(__float2bfloat16(1.00390625f)) == 1.0f,
	   "bf16: 1 + 2^-8 rounds to even (1)");
	ok(__bfloat162float(__float2bfloat16(1.01171875f)) == 1.015625f,
	   "bf16: 1 + 3*2^-8 rounds to even (1 + 2^-6)");
	ok(std::isnan(__bfloat162float(__float2bfloat16(NAN))), "bf16: NaN stays NaN");
}

int main(void)
{
	test_reductions();
	test_shared();
	test_refusals();
	test_blas();
	test_bf16();
	return tap_done();
}
