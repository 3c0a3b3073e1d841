/*
 * cublas_v2.h (tests/simt) - cublasGemmEx and what runtime/cuda calls
 * around it, on host memory (tests/simt/runtime.c): column-major, cuBLAS's
 * argument checks (leading dimensions, types), fp32 accumulation, C not
 * read when beta is 0.  Values as in cuBLAS 12/13.
 */
#ifndef CUBLAS_V2_H_
#define CUBLAS_V2_H_

#include "cuda_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cublasContext *cublasHandle_t;

typedef enum {
	CUBLAS_STATUS_SUCCESS = 0,
	CUBLAS_STATUS_NOT_INITIALIZED = 1,
	CUBLAS_STATUS_ALLOC_FAILED = 3,
	CUBLAS_STATUS_INVALID_VALUE = 7,
	CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;

typedef enum cudaDataType_t {
	CUDA_R_32F = 0,
	CUDA_R_16BF = 14
} cudaDataType_t;
typedef cudaDataType_t cudaDataType;

typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

const char *cublasGetStatusName(cublasStatus_t s);
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
			    cublasOperation_t tb, int m, int n, int k,
			    const void *alpha, const void *A,
			    cudaDataType_t Atype, int lda, const void *B,
			    cudaDataType_t Btype, int ldb, const void *beta,
			    void *C, cudaDataType_t Ctype, int ldc,
			    cublasComputeType_t ct, cublasGemmAlgo_t algo);

#ifdef __cplusplus
}
#endif

#endif
