/*
 * hexi_cuda_err.h - one translation of CUDA runtime and cuBLAS status codes
 * into hexi_rc + hexi_error() text, shared by the profiler and the
 * runtime's GPU path (neither depends on the other).  Header-only and
 * included only by files compiled with HAVE_CUDA, so common/ itself never
 * needs the CUDA headers.  Include <cuda_runtime_api.h> and/or
 * <cublas_v2.h> first; each helper is defined when its header was seen.
 */
#ifndef HEXI_CUDA_ERR_H
#define HEXI_CUDA_ERR_H

#include "hexi_common.h"

#ifdef __CUDA_RUNTIME_API_H__
/* HEXI_OK on cudaSuccess, else HEXI_ERR_CUDA with "what: name (code: text)". */
static inline hexi_rc hexi_cuda_err(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return HEXI_OK;
	return hexi_error(HEXI_ERR_CUDA, "%s: %s (%d: %s)", what,
			  cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
}

/* cudaGetDeviceCount as HEXI_ERR_NODEV with the driver's reason. */
static inline hexi_rc hexi_cuda_count(int *n)
{
	int c = 0;
	cudaError_t e = cudaGetDeviceCount(&c);

	*n = 0;
	if (e != cudaSuccess)
		return hexi_error(HEXI_ERR_NODEV,
				  "no CUDA device: cudaGetDeviceCount returned "
				  "%d (%s)",
				  (int)e, cudaGetErrorString(e));
	*n = c;
	return HEXI_OK;
}
#endif

#if defined(CUBLAS_V2_H_) || defined(CUBLAS_API_H_)
/* HEXI_OK on CUBLAS_STATUS_SUCCESS, else HEXI_ERR_CUDA with cuBLAS's name
 * of the status. */
static inline hexi_rc hexi_cublas_err(cublasStatus_t s, const char *what)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return HEXI_OK;
	return hexi_error(HEXI_ERR_CUDA, "%s: cuBLAS %s (%d)", what,
			  cublasGetStatusName(s), (int)s);
}
#endif

#endif /* HEXI_CUDA_ERR_H */
