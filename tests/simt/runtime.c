/*
 * runtime.c (tests/simt) - the CUDA runtime and cuBLAS calls of
 * runtime/cuda on host memory.  Device memory is malloc'd with GUARD bytes
 * of 0xff on both sides and its contents start as 0xff too (a NaN in fp32
 * and bf16: what a kernel reads before anyone wrote shows up in its
 * result); every allocation is registered, so copies, memsets and kernel
 * arguments are checked to be device memory of the right extent, and the
 * guards are checked after every kernel (a write past either end is
 * reported with the kernel's name).  Streams and events are handles only:
 * every call completes before it returns.  Diagnostics go to stderr,
 * prefixed "simt:"; tests/simt/simt.sh fails on any.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cublas_v2.h"
#include "hexi_bf16.h"
#include "simt_asan.h"
#include "cuda_runtime_api.h"

#define GUARD 64

/* Under AddressSanitizer the guards are poisoned instead of checked after
 * each kernel: a read or write into them is then reported at once, with
 * the kernel's stack. */
#ifdef SIMT_ASAN
#include <sanitizer/asan_interface.h>
#define guard_poison(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define guard_unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define guard_poison(p, n) ((void)(p), (void)(n))
#define guard_unpoison(p, n) ((void)(p), (void)(n))
#endif

typedef struct block {
	unsigned char *base; /* GUARD, then size bytes, then GUARD */
	size_t size;
	struct block *next;
} block;

static block *blocks;
static cudaError_t last_error;

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void report(const char *fmt, ...)
{
	va_list ap;

	fputs("simt: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static block *find(const void *p)
{
	const unsigned char *c = p;

	for (block *b = blocks; b != NULL; b = b->next)
		if (c >= b->base + GUARD && c < b->base + GUARD + b->size)
			return b;
	return NULL;
}

int simt_is_device(const void *p)
{
	return find(p) != NULL;
}

/* [p, p + n) inside one device allocation. */
static int dev_range(const void *p, size_t n, const char *what)
{
	block *b = find(p);

	if (b == NULL) {
		report("%p (%zu bytes): not device memory (%s)", p, n, what);
		return 0;
	}
	if ((size_t)((const unsigned char *)p - (b->base + GUARD)) + n >
	    b->size) {
		report("%p + %zu bytes: past the end of its allocation (%s)",
		       p, n, what);
		return 0;
	}
	return 1;
}

static int host_range(const void *p, size_t n, const char *what)
{
	if (n > 0 && find(p) != NULL) {
		report("%p (%zu bytes): device memory where host memory is "
		       "expected (%s)",
		       p, n, what);
		return 0;
	}
	return 1;
}

void simt_launch_failed(void)
{
	last_error = cudaErrorLaunchFailure;
}

void simt_check_guards(const char *kernel)
{
#ifdef SIMT_ASAN
	(void)kernel; /* the guards are poisoned: ASan has reported already */
#else
	for (block *b = blocks; b != NULL; b = b->next)
		for (size_t i = 0; i < GUARD; i++)
			if (b->base[i] != 0xff ||
			    b->base[GUARD + b->size + i] != 0xff) {
				fprintf(stderr,
					"simt: kernel %s wrote %s the %zu-byte "
					"allocation at %p\n",
					kernel,
					b->base[i] != 0xff ? "before" : "past",
					b->size, (void *)(b->base + GUARD));
				last_error = cudaErrorLaunchFailure;
				memset(b->base, 0xff, GUARD);
				memset(b->base + GUARD + b->size, 0xff, GUARD);
				break;
			}
#endif
}

const char *cudaGetErrorName(cudaError_t e)
{
	switch (e) {
	case cudaSuccess: return "cudaSuccess";
	case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
	case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
	case cudaErrorInvalidConfiguration:
		return "cudaErrorInvalidConfiguration";
	case cudaErrorNoDevice: return "cudaErrorNoDevice";
	case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
	case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
	}
	return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidConfiguration:
		return "invalid configuration argument";
	case cudaErrorNoDevice: return "no CUDA-capable device is detected";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorLaunchFailure:
		return "unspecified launch failure (see the simt: line)";
	}
	return "unknown error";
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;

	last_error = cudaSuccess;
	return e;
}

cudaError_t cudaGetDeviceCount(int *n)
{
	*n = 1;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
	return d == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

/* $HEXI_SIMT_CC (e.g. 80) sets the compute capability; 90 by default. */
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
	const char *cc = getenv("HEXI_SIMT_CC");
	int v = cc != NULL ? atoi(cc) : 90;

	if (d != 0)
		return cudaErrorInvalidDevice;
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "SIMT emulation on the CPU");
	memcpy(p->uuid.bytes, "hexiscale-simt-0", 16);
	p->totalGlobalMem = (size_t)1 << 32;
	p->multiProcessorCount = 1;
	p->major = v / 10;
	p->minor = v % 10;
	return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
	*least = 0;
	*greatest = -5;
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	return cudaSuccess;
}

static int stream_obj, event_obj; /* the handles' targets */

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags,
					 int priority)
{
	(void)flags, (void)priority;
	*s = (cudaStream_t)&stream_obj;
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	return s == (cudaStream_t)&stream_obj ? cudaSuccess
					      : cudaErrorInvalidValue;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	(void)s;
	return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f)
{
	(void)s, (void)f;
	return e == (cudaEvent_t)&event_obj ? cudaSuccess
					    : cudaErrorInvalidValue;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	*e = (cudaEvent_t)&event_obj;
	return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
	(void)flags;
	return cudaEventCreate(e);
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	(void)s;
	return e == (cudaEvent_t)&event_obj ? cudaSuccess
					    : cudaErrorInvalidValue;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	return e == (cudaEvent_t)&event_obj ? cudaSuccess
					    : cudaErrorInvalidValue;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
	block *b = malloc(sizeof(*b));

	*p = NULL;
	if (b == NULL || bytes > ((size_t)1 << 40) ||
	    (b->base = malloc(bytes + 2 * GUARD)) == NULL) {
		free(b);
		return cudaErrorMemoryAllocation;
	}
	memset(b->base, 0xff, bytes + 2 * GUARD);
	guard_poison(b->base, GUARD);
	guard_poison(b->base + GUARD + bytes, GUARD);
	b->size = bytes;
	b->next = blocks;
	blocks = b;
	*p = b->base + GUARD;
	return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
	if (p == NULL)
		return cudaSuccess;
	for (block **bp = &blocks; *bp != NULL; bp = &(*bp)->next)
		if ((*bp)->base + GUARD == p) {
			block *b = *bp;

			*bp = b->next;
			guard_unpoison(b->base, b->size + 2 * GUARD);
			free(b->base);
			free(b);
			return cudaSuccess;
		}
	report("cudaFree(%p): not the start of a device allocation", p);
	return cudaErrorInvalidValue;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s)
{
	(void)s;
	if (bytes == 0)
		return cudaSuccess;
	if (!dev_range(p, bytes, "cudaMemset"))
		return cudaErrorInvalidValue;
	memset(p, v, bytes);
	return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t bytes)
{
	return cudaMemsetAsync(p, v, bytes, NULL);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
			    enum cudaMemcpyKind kind, cudaStream_t s)
{
	int ok;

	(void)s;
	if (bytes == 0)
		return cudaSuccess;
	switch (kind) {
	case cudaMemcpyHostToDevice:
		ok = dev_range(dst, bytes, "cudaMemcpy to device") &&
		     host_range(src, bytes, "cudaMemcpy from host");
		break;
	case cudaMemcpyDeviceToHost:
		ok = dev_range(src, bytes, "cudaMemcpy from device") &&
		     host_range(dst, bytes, "cudaMemcpy to host");
		break;
	case cudaMemcpyDeviceToDevice:
		ok = dev_range(src, bytes, "cudaMemcpy from device") &&
		     dev_range(dst, bytes, "cudaMemcpy to device");
		break;
	default:
		ok = 0;
		report("cudaMemcpy kind %d: not used by runtime/cuda", (int)kind);
	}
	if (!ok)
		return cudaErrorInvalidValue;
	memmove(dst, src, bytes);
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
		       enum cudaMemcpyKind kind)
{
	return cudaMemcpyAsync(dst, src, bytes, kind, NULL);
}

/* ---- cuBLAS ---------------------------------------------------------------- */

static int blas_obj;

const char *cublasGetStatusName(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED:
		return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
	case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
	}
	return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
	*h = (cublasHandle_t)&blas_obj;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
	return h == (cublasHandle_t)&blas_obj ? CUBLAS_STATUS_SUCCESS
					      : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
	(void)s;
	return h == (cublasHandle_t)&blas_obj ? CUBLAS_STATUS_SUCCESS
					      : CUBLAS_STATUS_NOT_INITIALIZED;
}

static float elem(const void *p, cudaDataType_t t, size_t i)
{
	return t == CUDA_R_16BF ? hexi_bf16_to_float(((const uint16_t *)p)[i])
				: ((const float *)p)[i];
}

static size_t esize(cudaDataType_t t)
{
	return t == CUDA_R_16BF ? 2 : 4;
}

/* Elements a column-major (rows x cols, ld) operand spans. */
static size_t span(int rows, int cols, int ld)
{
	return cols == 0 ? 0 : (size_t)ld * (cols - 1) + rows;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
			    cublasOperation_t tb, int m, int n, int k,
			    const void *alpha, const void *A,
			    cudaDataType_t Atype, int lda, const void *B,
			    cudaDataType_t Btype, int ldb, const void *beta,
			    void *C, cudaDataType_t Ctype, int ldc,
			    cublasComputeType_t ct, cublasGemmAlgo_t algo)
{
	int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
	int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
	float al, be;

	(void)algo;
	if (h != (cublasHandle_t)&blas_obj)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	/* cuBLAS's own checks */
	if (m < 0 || n < 0 || k < 0 || (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) ||
	    (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) ||
	    lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) ||
	    ldc < (m > 1 ? m : 1))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (ct != CUBLAS_COMPUTE_32F || Atype != Btype ||
	    (Atype != CUDA_R_32F && Atype != CUDA_R_16BF) ||
	    (Ctype != CUDA_R_32F && Ctype != Atype))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	if ((k > 0 && (!dev_range(A, span(ar, ac, lda) * esize(Atype),
				  "cublasGemmEx A") ||
		       !dev_range(B, span(br, bc, ldb) * esize(Btype),
				  "cublasGemmEx B"))) ||
	    !dev_range(C, span(m, n, ldc) * esize(Ctype), "cublasGemmEx C"))
		return CUBLAS_STATUS_INVALID_VALUE;
	memcpy(&al, alpha, sizeof(al));
	memcpy(&be, beta, sizeof(be));
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			float acc = 0.0f, r;
			size_t c = (size_t)j * ldc + i;

			for (int p = 0; p < k; p++) {
				size_t ai = ta == CUBLAS_OP_N
						? (size_t)p * lda + i
						: (size_t)i * lda + p;
				size_t bi = tb == CUBLAS_OP_N
						? (size_t)j * ldb + p
						: (size_t)p * ldb + j;
#ifdef SIMT_FMA
				/* cuBLAS accumulates with FMA (simt_fma.sh) */
				acc = fmaf(elem(A, Atype, ai),
					   elem(B, Btype, bi), acc);
#else
				acc += elem(A, Atype, ai) * elem(B, Btype, bi);
#endif
			}
			/* beta 0: C is not read (it may hold NaN) */
			r = al * acc + (be != 0.0f ? be * elem(C, Ctype, c) : 0.0f);
			if (Ctype == CUDA_R_16BF)
				((uint16_t *)C)[c] = hexi_bf16_from_float(r);
			else
				((float *)C)[c] = r;
		}
	return CUBLAS_STATUS_SUCCESS;
}
