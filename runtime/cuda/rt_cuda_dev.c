/*
 * rt_cuda_dev.c - GPU context of a task: device choice, streams, memory,
 * and the cuBLAS GEMMs (row-major interface over column-major cuBLAS).
 * Plain C against the CUDA runtime and cuBLAS APIs.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "hexi_cuda_err.h"
#include "rt_cuda.h"

struct rt_cuda {
	int device;
	int cc;
	uint64_t id; /* hash of the UUID */
	char name[256];
	cudaStream_t compute, comm;
	cublasHandle_t blas;
};

size_t rt_cuda_dtype_size(rt_cuda_dtype dt)
{
	return dt == RT_CUDA_BF16 ? 2 : 4;
}

const char *rt_cuda_dtype_name(rt_cuda_dtype dt)
{
	return dt == RT_CUDA_BF16 ? "bf16" : "fp32";
}

hexi_rc rt_cuda_device_count(int *n)
{
	hexi_rc rv = hexi_cuda_count(n);

	if (rv == HEXI_OK && *n < 1)
		rv = hexi_error(HEXI_ERR_NODEV,
				"no CUDA device: cudaGetDeviceCount found 0");
	return rv;
}

hexi_rc rt_cuda_create(int local_rank, int local_size, rt_cuda **out)
{
	rt_cuda *c = NULL;
	struct cudaDeviceProp prop;
	int n = 0, lo = 0, hi = 0;
	hexi_rc rv;

	if ((rv = rt_cuda_device_count(&n)) != HEXI_OK)
		return rv;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU context");
	if ((rv =
		 rt_cuda_pick_device(getenv("CUDA_VISIBLE_DEVICES"), local_rank,
				     local_size, n, 0, &c->device)) != HEXI_OK)
		goto fail;
	if ((rv = hexi_cuda_err(cudaSetDevice(c->device), "cudaSetDevice")) ||
	    (rv = hexi_cuda_err(cudaGetDeviceProperties(&prop, c->device),
				"cudaGetDeviceProperties")) ||
	    (rv = hexi_cuda_err(cudaDeviceGetStreamPriorityRange(&lo, &hi),
				"cudaDeviceGetStreamPriorityRange")))
		goto fail;
	snprintf(c->name, sizeof(c->name), "%s", prop.name);
	c->id = 14695981039346656037ull; /* FNV-1a of the UUID bytes */
	for (size_t i = 0; i < sizeof(prop.uuid.bytes); i++)
		c->id = (c->id ^ (unsigned char)prop.uuid.bytes[i]) *
			1099511628211ull;
	c->id &= ((uint64_t)1 << 52) - 1;
	c->cc = prop.major * 10 + prop.minor;
	/* hi is the numerically smaller, i.e. higher, priority */
	if ((rv = hexi_cuda_err(cudaStreamCreateWithPriority(
				    &c->compute, cudaStreamNonBlocking, hi),
				"compute stream")) ||
	    (rv = hexi_cuda_err(cudaStreamCreateWithPriority(
				    &c->comm, cudaStreamNonBlocking, lo),
				"communication stream")) ||
	    (rv = hexi_cublas_err(cublasCreate(&c->blas), "cublasCreate")) ||
	    (rv = hexi_cublas_err(cublasSetStream(c->blas, c->compute),
				  "cublasSetStream")))
		goto fail;
	*out = c;
	return HEXI_OK;
fail:
	hexi_error_prefix(rv, "local rank %d", local_rank);
	rt_cuda_destroy(c);
	return rv;
}

void rt_cuda_destroy(rt_cuda *c)
{
	if (c == NULL)
		return;
	if (c->blas != NULL)
		cublasDestroy(c->blas);
	if (c->comm != NULL)
		cudaStreamDestroy(c->comm);
	if (c->compute != NULL)
		cudaStreamDestroy(c->compute);
	free(c);
}

int rt_cuda_device(const rt_cuda *c)
{
	return c->device;
}

uint64_t rt_cuda_device_id(const rt_cuda *c)
{
	return c->id;
}

const char *rt_cuda_device_name(const rt_cuda *c)
{
	return c->name;
}

int rt_cuda_cc(const rt_cuda *c)
{
	return c->cc;
}

rt_cuda_stream rt_cuda_compute_stream(const rt_cuda *c)
{
	return c->compute;
}

rt_cuda_stream rt_cuda_comm_stream(const rt_cuda *c)
{
	return c->comm;
}

hexi_rc rt_cuda_sync(rt_cuda_stream s)
{
	if (s == NULL)
		return hexi_cuda_err(cudaDeviceSynchronize(), "device sync");
	return hexi_cuda_err(cudaStreamSynchronize(s), "stream sync");
}

hexi_rc rt_cuda_stream_wait(rt_cuda_stream waiter, rt_cuda_stream on)
{
	cudaEvent_t ev = NULL;
	hexi_rc rv;

	if ((rv = hexi_cuda_err(
		 cudaEventCreateWithFlags(&ev, cudaEventDisableTiming),
		 "cudaEventCreate")) ||
	    (rv = hexi_cuda_err(cudaEventRecord(ev, on), "cudaEventRecord")) ||
	    (rv = hexi_cuda_err(cudaStreamWaitEvent(waiter, ev, 0),
				"cudaStreamWaitEvent")))
		goto out;
out:
	if (ev != NULL)
		cudaEventDestroy(ev); /* released once the wait is done */
	return rv;
}

hexi_rc rt_cuda_alloc(void **p, size_t bytes)
{
	hexi_rc rv;

	*p = NULL;
	if (bytes == 0)
		return HEXI_OK;
	if ((rv = hexi_cuda_err(cudaMalloc(p, bytes), "cudaMalloc")) !=
	    HEXI_OK) {
		/* returned as a value: out of the runtime's last-error state,
		 * or a caller that falls back (cuDNN's workspace: the own
		 * attention kernel) fails its next launch check with it */
		(void)cudaGetLastError();
		*p = NULL;
		return hexi_error_prefix(rv, "%zu bytes", bytes);
	}
	/* cudaMemset of device memory is asynchronous to the host and the
	 * compute and NCCL streams are non-blocking (not ordered after the
	 * legacy stream): wait here, so the memory is zero when this returns,
	 * as rt_cuda.h promises. */
	if ((rv = hexi_cuda_err(cudaMemsetAsync(*p, 0, bytes, cudaStreamLegacy),
				"cudaMemset")) != HEXI_OK ||
	    (rv = hexi_cuda_err(cudaStreamSynchronize(cudaStreamLegacy),
				"cudaMemset (wait)")) != HEXI_OK) {
		cudaFree(*p);
		*p = NULL;
	}
	return rv;
}

void rt_cuda_free(void *p)
{
	if (p != NULL)
		cudaFree(p);
}

/* A pageable host-to-device cudaMemcpy may return once the data is staged,
 * before the DMA reaches dst, and kernels on the non-blocking compute
 * stream are not ordered after it: wait for the legacy stream, so the copy
 * is complete when this returns (rt_cuda.h: synchronous). */
hexi_rc rt_cuda_upload(void *dst, const void *src, size_t bytes)
{
	hexi_rc rv;

	if (bytes == 0)
		return HEXI_OK;
	if ((rv = hexi_cuda_err(cudaMemcpyAsync(dst, src, bytes,
						cudaMemcpyHostToDevice,
						cudaStreamLegacy),
				"upload")) != HEXI_OK)
		return rv;
	return hexi_cuda_err(cudaStreamSynchronize(cudaStreamLegacy),
			     "upload (wait)");
}

hexi_rc rt_cuda_download(void *dst, const void *src, size_t bytes)
{
	return hexi_cuda_err(
	    cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "download");
}

hexi_rc rt_cuda_memset0(rt_cuda_stream s, void *p, size_t bytes)
{
	return hexi_cuda_err(cudaMemsetAsync(p, 0, bytes, (cudaStream_t)s),
			     "memset");
}

hexi_rc rt_cuda_copy(rt_cuda_stream s, void *dst, const void *src, size_t bytes)
{
	return hexi_cuda_err(cudaMemcpyAsync(dst, src, bytes,
					     cudaMemcpyDeviceToDevice,
					     (cudaStream_t)s),
			     "device copy");
}

static cudaDataType_t cuda_type(rt_cuda_dtype dt)
{
	return dt == RT_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

hexi_rc rt_cuda_gemm(rt_cuda *c, rt_cuda_dtype dt, rt_cuda_dtype ct, int ta,
		     int tb, int M, int N, int K, float alpha, const void *A,
		     int lda, const void *B, int ldb, float beta, void *C,
		     int ldc)
{
	cublasStatus_t st;

	if (M < 0 || N < 0 || K < 0 || lda < 1 || ldb < 1 || ldc < 1)
		return hexi_error(HEXI_ERR_INVAL, "gemm: M %d N %d K %d", M, N,
				  K);
	if (M == 0 || N == 0)
		return HEXI_OK;
	/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T,
	 * and a row-major matrix read column-major is its transpose. */
	st = cublasGemmEx(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
			  ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B,
			  cuda_type(dt), ldb, A, cuda_type(dt), lda, &beta, C,
			  cuda_type(ct), ldc, CUBLAS_COMPUTE_32F,
			  CUBLAS_GEMM_DEFAULT);
	if (st != CUBLAS_STATUS_SUCCESS)
		return hexi_error(HEXI_ERR_CUDA,
				  "gemm %dx%dx%d (%s -> %s): cuBLAS status %d",
				  M, N, K, rt_cuda_dtype_name(dt),
				  rt_cuda_dtype_name(ct), (int)st);
	return HEXI_OK;
}
