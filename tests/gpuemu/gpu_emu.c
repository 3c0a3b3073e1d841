/*
 * gpu_emu.c - host-memory emulation of runtime/cuda/rt_cuda.h (TEST DOUBLE,
 * linked only into test programs of tests/gpuemu, never installed).
 *
 * "Device memory" is calloc'd host memory recorded in a registry, so every
 * kernel checks that its device arguments lie inside one allocation (a host
 * pointer or an overrun handed to a kernel is an error here, as an illegal
 * address would be on a GPU).  Streams are dummy handles and every call
 * runs synchronously, while a stream-order checker reports accesses that a
 * GPU would not order (see below).
 *
 * Arithmetic: fp32 kernels call the CPU reference operators of rt_ops.h
 * wherever the contract matches (so an fp32 GPU-trainer run is comparable
 * with the CPU trainer to rounding).  Attention and cross-entropy keep the
 * GPU contract: the forward saves lse and no (T,T) or (BT,V) array survives
 * the call; the backward recomputes probabilities from the inputs and lse.
 * bf16 tensors are uint16 bf16 bits: inputs are widened to fp32, the fp32
 * path runs, outputs are rounded to nearest even on store, as the CUDA
 * kernels' ld()/st() do.
 *
 * Also rt_comm_nccl_create: host memory being the device memory, the
 * "NCCL" communicator is a second MPI communicator (or the self backend),
 * wrapped to refuse host buffers and buffers with pending launches.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hexi_bf16.h"
#include "rt_comm.h"
#include "gpu_emu.h"
#include "rt_cuda.h"
#include "rt_ops.h"

#define HS_MAX 128 /* rt_attention.cu's largest head size */

struct rt_cuda {
	int device;
	char compute_tag, comm_tag; /* their addresses are the streams */
};

/* ---- bf16 ---------------------------------------------------------------- */

/* As __bfloat162float / __float2bfloat16 (hexi_bf16.h). */
#define bf2f hexi_bf16_to_float
#define f2bf hexi_bf16_from_float

size_t rt_cuda_dtype_size(rt_cuda_dtype dt)
{
	return dt == RT_CUDA_BF16 ? 2 : 4;
}

const char *rt_cuda_dtype_name(rt_cuda_dtype dt)
{
	return dt == RT_CUDA_BF16 ? "bf16" : "fp32";
}

/* ---- device memory registry ---------------------------------------------- */

typedef struct emu_block {
	char *p;
	size_t bytes;
} emu_block;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static emu_block *reg;
static size_t nreg, capreg;

static hexi_rc reg_add(void *p, size_t bytes)
{
	hexi_rc rc = HEXI_OK;

	pthread_mutex_lock(&reg_lock);
	if (nreg == capreg) {
		size_t cap = capreg ? 2 * capreg : 64;
		emu_block *r = realloc(reg, cap * sizeof(*r));
		if (r == NULL) {
			rc = hexi_error(HEXI_ERR_NOMEM, "gpu_emu: registry");
			goto out;
		}
		reg = r;
		capreg = cap;
	}
	reg[nreg].p = p;
	reg[nreg].bytes = bytes;
	nreg++;
out:
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

static void pend_drop(int sid, const char *lo, const char *hi);

/* Remove the block starting at p and what is pending in it (cudaFree
 * waits for the device); 0 if there is none. */
static int reg_del(void *p)
{
	int found = 0;

	pthread_mutex_lock(&reg_lock);
	for (size_t i = 0; i < nreg; i++)
		if (reg[i].p == p) {
			pend_drop(-1, reg[i].p, reg[i].p + reg[i].bytes);
			reg[i] = reg[--nreg];
			found = 1;
			break;
		}
	pthread_mutex_unlock(&reg_lock);
	return found;
}

/* 1 if [p, p+bytes) lies inside one device allocation. */
static int reg_has(const void *p, size_t bytes)
{
	const char *c = p;
	int ok = 0;

	pthread_mutex_lock(&reg_lock);
	for (size_t i = 0; i < nreg && !ok; i++)
		if (c >= reg[i].p && c <= reg[i].p + reg[i].bytes &&
		    bytes <= (size_t)(reg[i].p + reg[i].bytes - c))
			ok = 1;
	pthread_mutex_unlock(&reg_lock);
	return ok;
}

/* ---- stream-order checker -------------------------------------------------
 *
 * Everything runs at once here, but on a GPU a launch only queues work on
 * its stream.  So every device range a launch reads or writes is recorded
 * as pending on its stream until rt_cuda_sync of that stream (or of the
 * device); rt_cuda_stream_wait(W, S) orders S's pending work before W's
 * later work.  An access that a real GPU would not order after a pending
 * conflicting access (read after write, write after read or write) is a
 * race: a launch on another stream, a host copy (cudaMemcpy on the legacy
 * stream does not wait for the non-blocking streams of rt_cuda_create), or
 * a communication call (NCCL runs on streams of its own, so buffers must be
 * complete before they are handed over).  Races are printed on stderr as
 * "gpu_emu: stream race: ..." and counted; results are unaffected.
 */
#define MAX_STREAMS 32
#define SID_HOST    (-1) /* synchronous host<->device copy */
#define SID_COMM    (-2) /* communication backend (NCCL's own streams) */

typedef struct emu_pend {
	const char *lo, *hi;
	int sid; /* stream the access was queued on (0: NULL stream) */
	int write;
	uint32_t after; /* streams ordered after it by stream_wait */
	const char *kernel, *arg;
} emu_pend;

static const void *streams[MAX_STREAMS]; /* [0]: the NULL stream */
static int nstreams = 1;
static emu_pend *pend;
static size_t npend, cappend;
static unsigned long nraces;
static int launch_sid; /* stream of the launch being checked */

/* Small id of a stream handle (under reg_lock). */
static int stream_id(rt_cuda_stream s)
{
	if (s == NULL)
		return 0;
	for (int i = 1; i < nstreams; i++)
		if (streams[i] == (const void *)s)
			return i;
	if (nstreams == MAX_STREAMS)
		return MAX_STREAMS - 1; /* shares the last id: conservative */
	streams[nstreams] = s;
	return nstreams++;
}

static const char *sid_name(int sid)
{
	return sid == SID_HOST	 ? "a host copy"
	       : sid == SID_COMM ? "a communication call"
				 : "a launch";
}

/* Check one access against the pending ones, then record it if queued. */
static void order(const char *kernel, const char *arg, const void *p,
		  size_t bytes, int write)
{
	const char *lo = p, *hi = lo + bytes;
	int sid = launch_sid;

	for (size_t i = 0; i < npend; i++) {
		const emu_pend *e = &pend[i];
		if (e->hi <= lo || e->lo >= hi || (!write && !e->write))
			continue;
		if (sid >= 0 && (e->sid == sid || (e->after >> sid) & 1u))
			continue;
		/* cudaMemcpy waits for the NULL stream's work */
		if (sid == SID_HOST && e->sid == 0)
			continue;
		if (nraces++ < 20)
			fprintf(stderr,
				"gpu_emu: stream race: %s (%s) %s %s while "
				"%s's %s of %s on stream %d is pending (no "
				"sync or stream_wait in between)\n",
				kernel, sid_name(sid),
				write ? "writes" : "reads", arg, e->kernel,
				e->write ? "write" : "read", e->arg, e->sid);
		break;
	}
	if (sid < 0)
		return;
	if (npend == cappend) {
		size_t cap = cappend ? 2 * cappend : 256;
		emu_pend *q = realloc(pend, cap * sizeof(*q));
		if (q == NULL)
			return; /* checking degrades, results do not */
		pend = q;
		cappend = cap;
	}
	pend[npend++] = (emu_pend){lo, hi, sid, write, 0, kernel, arg};
}

/* Forget pending accesses of stream sid (-1: every stream) inside
 * [lo, hi) (lo NULL: everywhere). */
static void pend_drop(int sid, const char *lo, const char *hi)
{
	size_t j = 0;

	for (size_t i = 0; i < npend; i++) {
		const emu_pend *e = &pend[i];
		if ((sid < 0 || e->sid == sid) &&
		    (lo == NULL || (e->lo >= lo && e->hi <= hi)))
			continue;
		pend[j++] = *e;
	}
	npend = j;
}

/* A device argument of a kernel: NULL (with bytes > 0) is a bad argument;
 * memory outside every allocation is what a GPU reports as an illegal
 * address; then the stream-order check. */
static hexi_rc dev_(const char *kernel, const char *arg, const void *p,
		    size_t bytes, int write)
{
	if (bytes == 0)
		return HEXI_OK;
	if (p == NULL)
		return hexi_error(HEXI_ERR_INVAL, "%s: %s is NULL", kernel,
				  arg);
	if (!reg_has(p, bytes))
		return hexi_error(HEXI_ERR_CUDA,
				  "kernel %s: %s (%p, %zu bytes) is not inside "
				  "one device allocation (host pointer or "
				  "overrun; an illegal address on a GPU)",
				  kernel, arg, p, bytes);
	pthread_mutex_lock(&reg_lock);
	order(kernel, arg, p, bytes, write);
	pthread_mutex_unlock(&reg_lock);
	return HEXI_OK;
}

static hexi_rc dev(const char *kernel, const char *arg, const void *p,
		   size_t bytes)
{
	return dev_(kernel, arg, p, bytes, 0);
}

static hexi_rc devw(const char *kernel, const char *arg, const void *p,
		    size_t bytes)
{
	return dev_(kernel, arg, p, bytes, 1);
}

/* Every launch starts with this: the stream its accesses are queued on. */
static void launch(rt_cuda_stream s)
{
	pthread_mutex_lock(&reg_lock);
	launch_sid = stream_id(s);
	pthread_mutex_unlock(&reg_lock);
}

/* A synchronous cudaMemcpy: after the NULL stream's work, before its own
 * accesses are checked. */
static void host_copy(void)
{
	pthread_mutex_lock(&reg_lock);
	pend_drop(0, NULL, NULL);
	launch_sid = SID_HOST;
	pthread_mutex_unlock(&reg_lock);
}

unsigned long gpu_emu_races(void)
{
	unsigned long n;

	pthread_mutex_lock(&reg_lock);
	n = nraces;
	pthread_mutex_unlock(&reg_lock);
	return n;
}

/* ---- fp32 views of device tensors ---------------------------------------- */

/* Temporary fp32 copies of bf16 tensors for one call (at most NTMP). */
#define NTMP 12
typedef struct emu_tmp {
	float *f[NTMP];
	int n;
	int nomem;
} emu_tmp;

static float *tmp_alloc(emu_tmp *t, size_t n)
{
	float *f;

	if (t->n == NTMP || (f = calloc(n ? n : 1, sizeof(float))) == NULL) {
		t->nomem = 1;
		return NULL;
	}
	t->f[t->n++] = f;
	return f;
}

static void tmp_free(emu_tmp *t)
{
	for (int i = 0; i < t->n; i++)
		free(t->f[i]);
	t->n = 0;
}

/* fp32 view of n elements of type dt at p: p itself for fp32, else a
 * widened copy (load) or a zeroed buffer (!load). */
static float *view(emu_tmp *t, rt_cuda_dtype dt, const void *p, size_t n,
		   int load)
{
	float *f;

	if (dt == RT_CUDA_F32)
		return (float *)(uintptr_t)p;
	if ((f = tmp_alloc(t, n)) == NULL)
		return NULL;
	if (load && p != NULL)
		for (size_t i = 0; i < n; i++)
			f[i] = bf2f(((const uint16_t *)p)[i]);
	return f;
}

/* Store an fp32 view back into p (rounded for bf16). */
static void store(rt_cuda_dtype dt, void *p, const float *f, size_t n)
{
	if (dt == RT_CUDA_F32 || p == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		((uint16_t *)p)[i] = f2bf(f[i]);
}

static hexi_rc nomem(const char *kernel)
{
	return hexi_error(HEXI_ERR_NOMEM, "gpu_emu %s: host buffers", kernel);
}

/* ---- context --------------------------------------------------------------
 */

hexi_rc rt_cuda_device_count(int *n)
{
	*n = 1;
	return HEXI_OK;
}

hexi_rc rt_cuda_create(int local_rank, int local_size, rt_cuda **out)
{
	rt_cuda *c = NULL;
	hexi_rc rv;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU context");
	if ((rv = rt_cuda_pick_device(getenv("CUDA_VISIBLE_DEVICES"),
				      local_rank, local_size, 1, 0,
				      &c->device)) != HEXI_OK) {
		hexi_error_prefix(rv, "local rank %d", local_rank);
		free(c);
		return rv;
	}
	*out = c;
	return HEXI_OK;
}

void rt_cuda_destroy(rt_cuda *c)
{
	size_t n, bytes = 0;

	if (c == NULL)
		return;
	free(c);
	/* every user of the device is gone by now (hexi_rt_destroy): report
	 * what was never freed (the emu tests look for this line) */
	pthread_mutex_lock(&reg_lock);
	n = nreg;
	for (size_t i = 0; i < nreg; i++)
		bytes += reg[i].bytes;
	pthread_mutex_unlock(&reg_lock);
	if (n > 0)
		fprintf(stderr,
			"gpu_emu: %zu device allocation(s) (%zu bytes) still "
			"live at rt_cuda_destroy\n",
			n, bytes);
	if (gpu_emu_races() > 0)
		fprintf(stderr, "gpu_emu: %lu stream race(s) in all\n",
			gpu_emu_races());
}

int rt_cuda_device(const rt_cuda *c)
{
	return c->device;
}

const char *rt_cuda_device_name(const rt_cuda *c)
{
	(void)c;
	return "host emulation";
}

/* Every emulating process is its own "GPU", unless the test sets
 * HEXI_GPU_EMU_ONE_GPU=1: then every rank "shares" one (the refusal test
 * of the runtime's one-GPU-per-rank check). */
uint64_t rt_cuda_device_id(const rt_cuda *c)
{
	uint64_t h = 14695981039346656037ull;
	const char *one = getenv("HEXI_GPU_EMU_ONE_GPU");

	if (one != NULL && strcmp(one, "1") == 0)
		return 42;
	uint64_t v[2] = {(uint64_t)getpid(), (uint64_t)c->device};

	for (int i = 0; i < 2; i++)
		h = (h ^ v[i]) * 1099511628211ull;
	return h & (((uint64_t)1 << 52) - 1);
}

/* 0, or $HEXI_GPU_EMU_CC (e.g. 90) to drive the attention choice. */
int rt_cuda_cc(const rt_cuda *c)
{
	const char *e = getenv("HEXI_GPU_EMU_CC");

	(void)c;
	return e != NULL ? atoi(e) : 0;
}

rt_cuda_stream rt_cuda_compute_stream(const rt_cuda *c)
{
	return (rt_cuda_stream)(uintptr_t)&c->compute_tag;
}

rt_cuda_stream rt_cuda_comm_stream(const rt_cuda *c)
{
	return (rt_cuda_stream)(uintptr_t)&c->comm_tag;
}

hexi_rc rt_cuda_sync(rt_cuda_stream s)
{
	pthread_mutex_lock(&reg_lock);
	pend_drop(s == NULL ? -1 : stream_id(s), NULL, NULL);
	pthread_mutex_unlock(&reg_lock);
	return HEXI_OK;
}

hexi_rc rt_cuda_stream_wait(rt_cuda_stream waiter, rt_cuda_stream on)
{
	int w, o;

	pthread_mutex_lock(&reg_lock);
	w = stream_id(waiter);
	o = stream_id(on);
	for (size_t i = 0; i < npend; i++)
		if (pend[i].sid == o || (pend[i].after >> o) & 1u)
			pend[i].after |= 1u << w;
	pthread_mutex_unlock(&reg_lock);
	return HEXI_OK;
}

hexi_rc rt_cuda_alloc(void **p, size_t bytes)
{
	hexi_rc rv;

	*p = NULL;
	if (bytes == 0)
		return HEXI_OK;
	if ((*p = calloc(1, bytes)) == NULL)
		return hexi_error(HEXI_ERR_CUDA,
				  "cudaMalloc: out of memory (%zu bytes)",
				  bytes);
	if ((rv = reg_add(*p, bytes)) != HEXI_OK) {
		free(*p);
		*p = NULL;
	}
	return rv;
}

void rt_cuda_free(void *p)
{
	if (p == NULL)
		return;
	if (!reg_del(p)) {
		/* cudaFree's error is ignored by the real one too; say it */
		fprintf(stderr,
			"gpu_emu: rt_cuda_free(%p): not the start of a live "
			"device allocation (double free or host pointer)\n",
			p);
		return;
	}
	free(p);
}

hexi_rc rt_cuda_upload(void *dst, const void *src, size_t bytes)
{
	hexi_rc rv;

	if (bytes == 0)
		return HEXI_OK;
	host_copy();
	if ((rv = devw("upload", "dst", dst, bytes)) != HEXI_OK)
		return rv;
	if (src == NULL)
		return hexi_error(HEXI_ERR_INVAL, "upload: src is NULL");
	memcpy(dst, src, bytes);
	return HEXI_OK;
}

hexi_rc rt_cuda_download(void *dst, const void *src, size_t bytes)
{
	hexi_rc rv;

	if (bytes == 0)
		return HEXI_OK;
	host_copy();
	if ((rv = dev("download", "src", src, bytes)) != HEXI_OK)
		return rv;
	if (dst == NULL)
		return hexi_error(HEXI_ERR_INVAL, "download: dst is NULL");
	memcpy(dst, src, bytes);
	return HEXI_OK;
}

hexi_rc rt_cuda_memset0(rt_cuda_stream s, void *p, size_t bytes)
{
	hexi_rc rv;

	launch(s);
	if ((rv = devw("memset", "p", p, bytes)) != HEXI_OK)
		return rv;
	if (bytes > 0)
		memset(p, 0, bytes);
	return HEXI_OK;
}

hexi_rc rt_cuda_copy(rt_cuda_stream s, void *dst, const void *src, size_t bytes)
{
	hexi_rc rv;

	launch(s);
	if ((rv = devw("device copy", "dst", dst, bytes)) != HEXI_OK ||
	    (rv = dev("device copy", "src", src, bytes)) != HEXI_OK)
		return rv;
	if (bytes > 0)
		memmove(dst, src, bytes);
	return HEXI_OK;
}

/* ---- GEMM ------------------------------------------------------------------
 */

/* Elements spanned by a row-major (rows, cols) matrix of row stride ld. */
static size_t span(int rows, int cols, int ld)
{
	if (rows <= 0 || cols <= 0)
		return 0;
	return (size_t)(rows - 1) * (size_t)ld + (size_t)cols;
}

hexi_rc rt_cuda_gemm(rt_cuda *c, rt_cuda_dtype dt, rt_cuda_dtype ct, int ta,
		     int tb, int M, int N, int K, float alpha, const void *A,
		     int lda, const void *B, int ldb, float beta, void *C,
		     int ldc)
{
	emu_tmp t = {.n = 0};
	size_t na, nb, nc;
	int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
	float *a, *b, *cc;
	hexi_rc rv;

	launch(c != NULL ? rt_cuda_compute_stream(c) : NULL);
	if (M < 0 || N < 0 || K < 0 || lda < 1 || ldb < 1 || ldc < 1)
		return hexi_error(HEXI_ERR_INVAL, "gemm: M %d N %d K %d", M, N,
				  K);
	if (M == 0 || N == 0)
		return HEXI_OK;
	/* cuBLAS refuses leading dimensions below the row length */
	if (lda < ac || ldb < bc || ldc < N)
		return hexi_error(HEXI_ERR_CUDA,
				  "gemm %dx%dx%d (%s -> %s): cuBLAS "
				  "CUBLAS_STATUS_INVALID_VALUE (7) "
				  "(lda %d ldb %d ldc %d too small)",
				  M, N, K, rt_cuda_dtype_name(dt),
				  rt_cuda_dtype_name(ct), lda, ldb, ldc);
	na = span(ar, ac, lda);
	nb = span(br, bc, ldb);
	nc = span(M, N, ldc);
	if ((rv = dev("gemm", "A", A, na * rt_cuda_dtype_size(dt))) ||
	    (rv = dev("gemm", "B", B, nb * rt_cuda_dtype_size(dt))) ||
	    (rv = devw("gemm", "C", C, nc * rt_cuda_dtype_size(ct))))
		return rv;
	a = view(&t, dt, A, na, 1);
	b = view(&t, dt, B, nb, 1);
	cc = view(&t, ct, C, nc, beta != 0.0f);
	if (t.nomem) {
		tmp_free(&t);
		return nomem("gemm");
	}
	if (beta == 0.0f) /* BLAS semantics: C is not read */
		for (int i = 0; i < M; i++)
			memset(cc + (size_t)i * ldc, 0,
			       (size_t)N * sizeof(float));
	if (K == 0) {
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++)
				cc[(size_t)i * ldc + j] *= beta;
	} else {
		rt_sgemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, cc, ldc);
	}
	store(ct, C, cc, nc);
	tmp_free(&t);
	return HEXI_OK;
}

/* ---- elementwise and row kernels ------------------------------------------
 */

#define ES(dt) rt_cuda_dtype_size(dt)

hexi_rc rt_cuda_embed_forward(rt_cuda_stream s, rt_cuda_dtype dt, void *out,
			      const int *tokens, const void *wte, int BT, int C,
			      int V)
{
	size_t n = (size_t)BT * C;
	emu_tmp t = {.n = 0};
	float *o, *w;
	hexi_rc rv;

	launch(s);
	if (BT < 0 || C < 1 || V < 1)
		return hexi_error(HEXI_ERR_INVAL, "embed: BT %d C %d V %d", BT,
				  C, V);
	if (n == 0)
		return HEXI_OK;
	if ((rv = devw("embed_forward", "out", out, n * ES(dt))) ||
	    (rv = dev("embed_forward", "tokens", tokens,
		      (size_t)BT * sizeof(int))) ||
	    (rv = dev("embed_forward", "wte", wte, (size_t)V * C * ES(dt))))
		return rv;
	o = view(&t, dt, out, n, 0);
	w = view(&t, dt, wte, (size_t)V * C, 1);
	if (t.nomem) {
		tmp_free(&t);
		return nomem("embed_forward");
	}
	/* out-of-range ids give zero rows, as the kernel */
	for (int i = 0; i < BT; i++) {
		int tok = tokens[i];
		for (int j = 0; j < C; j++)
			o[(size_t)i * C + j] =
			    tok >= 0 && tok < V ? w[(size_t)tok * C + j] : 0.0f;
	}
	store(dt, out, o, n);
	tmp_free(&t);
	return HEXI_OK;
}

hexi_rc rt_cuda_embed_backward(rt_cuda_stream s, rt_cuda_dtype dt, float *dwte,
			       const void *dout, const int *tokens, int BT,
			       int C, int V)
{
	size_t n = (size_t)BT * C;
	emu_tmp t = {.n = 0};
	float *d;
	hexi_rc rv;

	launch(s);
	if (BT < 0 || C < 1 || V < 1)
		return hexi_error(HEXI_ERR_INVAL, "embed: BT %d C %d V %d", BT,
				  C, V);
	if (n == 0)
		return HEXI_OK;
	if ((rv = devw("embed_backward", "dwte", dwte,
		       (size_t)V * C * sizeof(float))) ||
	    (rv = dev("embed_backward", "dout", dout, n * ES(dt))) ||
	    (rv = dev("embed_backward", "tokens", tokens,
		      (size_t)BT * sizeof(int))))
		return rv;
	if ((d = view(&t, dt, dout, n, 1)) == NULL)
		return nomem("embed_backward");
	for (int i = 0; i < BT; i++) {
		int tok = tokens[i];
		if (tok >= 0 && tok < V)
			for (int j = 0; j < C; j++)
				dwte[(size_t)tok * C + j] +=
				    d[(size_t)i * C + j];
	}
	tmp_free(&t);
	return HEXI_OK;
}

hexi_rc rt_cuda_add(rt_cuda_stream s, rt_cuda_dtype dt, void *out,
		    const void *a, const void *b, size_t n)
{
	hexi_rc rv;

	launch(s);
	if (n == 0)
		return HEXI_OK;
	if ((rv = devw("add", "out", out, n * ES(dt))) ||
	    (rv = dev("add", "a", a, n * ES(dt))) ||
	    (rv = dev("add", "b", b, n * ES(dt))))
		return rv;
	for (size_t i = 0; i < n; i++) {
		if (dt == RT_CUDA_F32)
			((float *)out)[i] =
			    ((const float *)a)[i] + ((const float *)b)[i];
		else
			((uint16_t *)out)[i] =
			    f2bf(bf2f(((const uint16_t *)a)[i]) +
				 bf2f(((const uint16_t *)b)[i]));
	}
	return HEXI_OK;
}

hexi_rc rt_cuda_cast(rt_cuda_stream s, void *out, rt_cuda_dtype to,
		     const void *in, rt_cuda_dtype from, size_t n)
{
	hexi_rc rv;

	launch(s);
	if (n == 0)
		return HEXI_OK;
	if ((rv = devw("cast", "out", out, n * ES(to))) ||
	    (rv = dev("cast", "in", in, n * ES(from))))
		return rv;
	for (size_t i = 0; i < n; i++) {
		float v = from == RT_CUDA_F32 ? ((const float *)in)[i]
					      : bf2f(((const uint16_t *)in)[i]);
		if (to == RT_CUDA_F32)
			((float *)out)[i] = v;
		else
			((uint16_t *)out)[i] = f2bf(v);
	}
	return HEXI_OK;
}

hexi_rc rt_cuda_rmsnorm_forward(rt_cuda_stream s, rt_cuda_dtype dt, void *out,
				float *rstd, const void *inp, const void *w,
				int BT, int C, float eps)
{
	size_t n = (size_t)BT * C;
	emu_tmp t = {.n = 0};
	float *o, *x, *wf;
	hexi_rc rv;

	launch(s);
	if (BT < 0 || C < 1)
		return hexi_error(HEXI_ERR_INVAL, "rmsnorm: BT %d C %d", BT, C);
	if (BT == 0)
		return HEXI_OK;
	if ((rv = devw("rmsnorm_forward", "out", out, n * ES(dt))) ||
	    (rv = devw("rmsnorm_forward", "rstd", rstd,
		       (size_t)BT * sizeof(float))) ||
	    (rv = dev("rmsnorm_forward", "inp", inp, n * ES(dt))) ||
	    (rv = dev("rmsnorm_forward", "w", w, (size_t)C * ES(dt))))
		return rv;
	o = view(&t, dt, out, n, 0);
	x = view(&t, dt, inp, n, 1);
	wf = view(&t, dt, w, (size_t)C, 1);
	if (t.nomem) {
		tmp_free(&t);
		return nomem("rmsnorm_forward");
	}
	rt_rmsnorm_forward(o, rstd, x, wf, BT, C, eps);
	store(dt, out, o, n);
	tmp_free(&t);
	return HEXI_OK;
}

hexi_rc rt_cuda_rmsnorm_backward(rt_cuda_stream s, rt_cuda_dtype dt, void *dinp,
				 float *dw, const void *dout, const void *inp,
				 const void *w, const float *rstd, int BT,
				 int C)
{
	size_t n = (size_t)BT * C;
	emu_tmp t = {.n = 0};
	float *dx, *dy, *x, *wf;
	hexi_rc rv;

	launch(s);
	if (BT < 0 || C < 1)
		return hexi_error(HEXI_ERR_INVAL, "rmsnorm: BT %d C %d", BT, C);
	if (BT == 0)
		return HEXI_OK;
	if ((rv = devw("rmsnorm_backward", "dinp", dinp, n * ES(dt))) ||
	    (rv = devw("rmsnorm_backward", "dw", dw,
		       (size_t)C * sizeof(float))) ||
	    (rv = dev("rmsnorm_backward", "dout", dout, n * ES(dt))) ||
	    (rv = dev("rmsnorm_backward", "inp", inp, n * ES(dt))) ||
	    (rv = dev("rmsnorm_backward", "w", w, (size_t)C * ES(dt))) ||
	    (rv = dev("rmsnorm_backward", "rstd", rstd,
		      (size_t)BT * sizeof(float))))
		return rv;
	dx = view(&t, dt, dinp, n, 1);
	dy = view(&t, dt, dout, n, 1);
	x = view(&t, dt, inp, n, 1);
	wf = view(&t, dt, w, (size_t)C, 1);
	if (t.nomem) {
		tmp_free(&t);
		return nomem("rmsnorm_backward");
	}
	rt_rmsnorm_backward(dx, dw, dy, x, wf, rstd, BT, C);
	store(dt, dinp, dx, n);
	tmp_free(&t);
	return HEXI_OK;
}

/* The kernel's arithmetic: every pair of x (B,T,NH,hs) rotated by the
 * table's (cos, sign * sin) of its position; the table itself is
 * rt_cuda_host.c's, shared with the GPU build, so comparing this with
 * rt_rope_forward checks the table. */
static void rope_apply(float *x, const float *tab, int B, int T, int NH, int hs,
		       float sign)
{
	size_t half = (size_t)hs / 2, rows = (size_t)B * T * NH;

	for (size_t row = 0; row < rows; row++) {
		size_t t = (row / (size_t)NH) % (size_t)T;
		for (size_t i = 0; i < half; i++) {
			float cs = tab[(t * half + i) * 2];
			float sn = sign * tab[(t * half + i) * 2 + 1];
			float *p = x + row * (size_t)hs + 2 * i;
			float x0 = p[0], x1 = p[1];
			p[0] = x0 * cs - x1 * sn;
			p[1] = x0 * sn + x1 * cs;
		}
	}
}

static hexi_rc rope(rt_cuda_stream s, rt_cuda_dtype dt, void *x,
		    const float *tab, int B, int T, int NH, int hs, float sign)
{
	emu_tmp t = {.n = 0};
	size_t n;
	float *f;
	hexi_rc rv;

	launch(s);
	if (B < 0 || T < 0 || NH < 1 || hs < 2 || hs % 2 || tab == NULL)
		return hexi_error(
		    HEXI_ERR_INVAL,
		    "rope: B %d T %d NH %d hs %d (even), table %s", B, T, NH,
		    hs, tab ? "given" : "missing");
	n = (size_t)B * T * NH * hs;
	if (n == 0)
		return HEXI_OK;
	if ((rv = devw("rope", "x", x, n * ES(dt))) != HEXI_OK ||
	    (rv = dev("rope", "table", tab, (size_t)T * hs * sizeof(float))) !=
		HEXI_OK)
		return rv;
	if ((f = view(&t, dt, x, n, 1)) == NULL)
		return nomem("rope");
	rope_apply(f, tab, B, T, NH, hs, sign);
	store(dt, x, f, n);
	tmp_free(&t);
	return HEXI_OK;
}

hexi_rc rt_cuda_rope_forward(rt_cuda_stream s, rt_cuda_dtype dt, void *x,
			     const float *tab, int B, int T, int NH, int hs)
{
	return rope(s, dt, x, tab, B, T, NH, hs, 1.0f);
}

hexi_rc rt_cuda_rope_backward(rt_cuda_stream s, rt_cuda_dtype dt, void *dx,
			      const float *tab, int B, int T, int NH, int hs)
{
	return rope(s, dt, dx, tab, B, T, NH, hs, -1.0f);
}

/* ---- attention -------------------------------------------------------------
 */

static hexi_rc attn_check(const char *what, int B, int T, int NH, int NKV,
			  int hs)
{
	if (B < 0 || T < 0 || NH < 1 || NKV < 1 || NH % NKV || hs < 1 ||
	    hs > HS_MAX || B > 65535 || NH > 65535)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: B %d T %d NH %d NKV %d hs %d (NH a "
				  "multiple of NKV, hs <= %d)",
				  what, B, T, NH, NKV, hs, HS_MAX);
	return HEXI_OK;
}

/* Scores (T,T) of head h of sample 0 of q, k (B=1 pointers), exactly as
 * rt_attention_forward computes them (one GEMM, scale folded in). */
static void scores(float *a, const float *q, const float *k, int T, int NH,
		   int NKV, int hs, int h)
{
	const int G = NH / NKV, qs = NH * hs, ks = NKV * hs;
	const float scale = 1.0f / sqrtf((float)hs);

	rt_sgemm(0, 1, T, T, hs, scale, q + (size_t)h * hs, qs,
		 k + (size_t)(h / G) * hs, ks, 0.0f, a, T);
}

hexi_rc rt_cuda_attention_forward(rt_cuda_stream s, rt_cuda_dtype dt, void *out,
				  float *lse, const void *q, const void *k,
				  const void *v, int B, int T, int NH, int NKV,
				  int hs)
{
	emu_tmp t = {.n = 0};
	size_t nq, nk;
	float *o, *qf, *kf, *vf, *att, *sc;
	hexi_rc rv = attn_check("attention_forward", B, T, NH, NKV, hs);

	launch(s);
	if (rv != HEXI_OK || B == 0 || T == 0)
		return rv;
	nq = (size_t)B * T * NH * hs;
	nk = (size_t)B * T * NKV * hs;
	if ((rv = devw("attention_forward", "out", out, nq * ES(dt))) ||
	    (rv = devw("attention_forward", "lse", lse,
		       (size_t)B * NH * T * sizeof(float))) ||
	    (rv = dev("attention_forward", "q", q, nq * ES(dt))) ||
	    (rv = dev("attention_forward", "k", k, nk * ES(dt))) ||
	    (rv = dev("attention_forward", "v", v, nk * ES(dt))))
		return rv;
	o = view(&t, dt, out, nq, 0);
	qf = view(&t, dt, q, nq, 1);
	kf = view(&t, dt, k, nk, 1);
	vf = view(&t, dt, v, nk, 1);
	/* per-call scratch: one sample's probabilities, one head's scores */
	att = tmp_alloc(&t, (size_t)NH * T * T);
	sc = tmp_alloc(&t, (size_t)T * T);
	if (t.nomem) {
		tmp_free(&t);
		return nomem("attention_forward");
	}
	for (int b = 0; b < B; b++) {
		size_t qo = (size_t)b * T * NH * hs,
		       ko = (size_t)b * T * NKV * hs;

		rt_attention_forward(o + qo, att, qf + qo, kf + ko, vf + ko, 1,
				     T, NH, NKV, hs);
		for (int h = 0; h < NH; h++) {
			float *l = lse + ((size_t)b * NH + h) * T;

			scores(sc, qf + qo, kf + ko, T, NH, NKV, hs, h);
			for (int i = 0; i < T; i++) {
				const float *r = sc + (size_t)i * T;
				float mx = -INFINITY;
				double sum = 0.0;

				for (int j = 0; j <= i; j++)
					mx = r[j] > mx ? r[j] : mx;
				for (int j = 0; j <= i; j++)
					sum += expf(r[j] - mx);
				l[i] = (float)((double)mx + log(sum));
			}
		}
	}
	store(dt, out, o, nq);
	tmp_free(&t);
	return HEXI_OK;
}

hexi_rc rt_cuda_attention_backward(rt_cuda_stream s, rt_cuda_dtype dt, void *dq,
				   void *dk, void *dv, const void *dout,
				   const void *out, const void *q,
				   const void *k, const void *v,
				   const float *lse, float *delta, int B, int T,
				   int NH, int NKV, int hs)
{
	emu_tmp t = {.n = 0};
	size_t nq, nk;
	float *dqf, *dkf, *dvf, *dof, *of, *qf, *kf, *vf, *att, *work;
	hexi_rc rv = attn_check("attention_backward", B, T, NH, NKV, hs);

	launch(s);
	if (rv != HEXI_OK || B == 0 || T == 0)
		return rv;
	nq = (size_t)B * T * NH * hs;
	nk = (size_t)B * T * NKV * hs;
	if ((rv = devw("attention_backward", "dq", dq, nq * ES(dt))) ||
	    (rv = devw("attention_backward", "dk", dk, nk * ES(dt))) ||
	    (rv = devw("attention_backward", "dv", dv, nk * ES(dt))) ||
	    (rv = dev("attention_backward", "dout", dout, nq * ES(dt))) ||
	    (rv = dev("attention_backward", "out", out, nq * ES(dt))) ||
	    (rv = dev("attention_backward", "q", q, nq * ES(dt))) ||
	    (rv = dev("attention_backward", "k", k, nk * ES(dt))) ||
	    (rv = dev("attention_backward", "v", v, nk * ES(dt))) ||
	    (rv = dev("attention_backward", "lse", lse,
		      (size_t)B * NH * T * sizeof(float))) ||
	    (rv = devw("attention_backward", "delta", delta,
		       (size_t)B * NH * T * sizeof(float))))
		return rv;
	dqf = view(&t, dt, dq, nq, 1);
	dkf = view(&t, dt, dk, nk, 1);
	dvf = view(&t, dt, dv, nk, 1);
	dof = view(&t, dt, dout, nq, 1);
	of = view(&t, dt, out, nq, 1);
	qf = view(&t, dt, q, nq, 1);
	kf = view(&t, dt, k, nk, 1);
	vf = view(&t, dt, v, nk, 1);
	att = tmp_alloc(&t, (size_t)NH * T * T);
	work = tmp_alloc(&t, (size_t)T * T);
	if (t.nomem) {
		tmp_free(&t);
		return nomem("attention_backward");
	}
	/* delta (B,NH,T) = rowsum(dout * out): written like the kernel's */
	for (int b = 0; b < B; b++)
		for (int i = 0; i < T; i++)
			for (int h = 0; h < NH; h++) {
				size_t r = (((size_t)b * T + i) * NH + h) * hs;
				float d = 0.0f;
				for (int e = 0; e < hs; e++)
					d += dof[r + e] * of[r + e];
				delta[((size_t)b * NH + h) * T + i] = d;
			}
	for (int b = 0; b < B; b++) {
		size_t qo = (size_t)b * T * NH * hs,
		       ko = (size_t)b * T * NKV * hs;

		/* probabilities recomputed from q, k and lse only */
		for (int h = 0; h < NH; h++) {
			float *a = att + (size_t)h * T * T;
			const float *l = lse + ((size_t)b * NH + h) * T;

			scores(a, qf + qo, kf + ko, T, NH, NKV, hs, h);
			for (int i = 0; i < T; i++)
				for (int j = 0; j < T; j++)
					a[(size_t)i * T + j] =
					    j <= i ? expf(a[(size_t)i * T + j] -
							  l[i])
						   : 0.0f;
		}
		rt_attention_backward_ws(dqf + qo, dkf + ko, dvf + ko, work,
					 dof + qo, qf + qo, kf + ko, vf + ko,
					 att, 1, T, NH, NKV, hs);
	}
	store(dt, dq, dqf, nq);
	store(dt, dk, dkf, nk);
	store(dt, dv, dvf, nk);
	tmp_free(&t);
	return HEXI_OK;
}

/* ---- SwiGLU ----------------------------------------------------------------
 */

hexi_rc rt_cuda_swiglu_forward(rt_cuda_stream s, rt_cuda_dtype dt, void *out,
			       const void *gate, const void *up, size_t N)
{
	emu_tmp t = {.n = 0};
	float *o, *g, *u;
	hexi_rc rv;

	launch(s);
	if (N == 0)
		return HEXI_OK;
	if ((rv = devw("swiglu_forward", "out", out, N * ES(dt))) ||
	    (rv = dev("swiglu_forward", "gate", gate, N * ES(dt))) ||
	    (rv = dev("swiglu_forward", "up", up, N * ES(dt))))
		return rv;
	o = view(&t, dt, out, N, 0);
	g = view(&t, dt, gate, N, 1);
	u = view(&t, dt, up, N, 1);
	if (t.nomem) {
		tmp_free(&t);
		return nomem("swiglu_forward");
	}
	rt_swiglu_forward(o, g, u, N);
	store(dt, out, o, N);
	tmp_free(&t);
	return HEXI_OK;
}

hexi_rc rt_cuda_swiglu_backward(rt_cuda_stream s, rt_cuda_dtype dt, void *dgate,
				void *dup, const void *dout, const void *gate,
				const void *up, size_t N)
{
	emu_tmp t = {.n = 0};
	float *dg, *du, *d, *g, *u;
	hexi_rc rv;

	launch(s);
	if (N == 0)
		return HEXI_OK;
	if ((rv = devw("swiglu_backward", "dgate", dgate, N * ES(dt))) ||
	    (rv = devw("swiglu_backward", "dup", dup, N * ES(dt))) ||
	    (rv = dev("swiglu_backward", "dout", dout, N * ES(dt))) ||
	    (rv = dev("swiglu_backward", "gate", gate, N * ES(dt))) ||
	    (rv = dev("swiglu_backward", "up", up, N * ES(dt))))
		return rv;
	dg = view(&t, dt, dgate, N, 1);
	du = view(&t, dt, dup, N, 1);
	d = view(&t, dt, dout, N, 1);
	g = view(&t, dt, gate, N, 1);
	u = view(&t, dt, up, N, 1);
	if (t.nomem) {
		tmp_free(&t);
		return nomem("swiglu_backward");
	}
	rt_swiglu_backward(dg, du, d, g, u, N);
	store(dt, dgate, dg, N);
	store(dt, dup, du, N);
	tmp_free(&t);
	return HEXI_OK;
}

/* ---- cross-entropy ---------------------------------------------------------
 */

/* Targets must be in [0,V): the kernel would read outside the row. */
static hexi_rc targets_ok(const char *kernel, const int *targets, int BT, int V)
{
	for (int i = 0; i < BT; i++)
		if (targets[i] < 0 || targets[i] >= V)
			return hexi_error(HEXI_ERR_CUDA,
					  "kernel %s: target[%d] = %d outside "
					  "[0,%d) (an illegal address on a "
					  "GPU)",
					  kernel, i, targets[i], V);
	return HEXI_OK;
}

hexi_rc rt_cuda_crossentropy_forward(rt_cuda_stream s, rt_cuda_dtype dt,
				     float *losses, float *lse,
				     const void *logits, const int *targets,
				     int BT, int V)
{
	size_t n = (size_t)BT * V;
	emu_tmp t = {.n = 0};
	float *x, *probs;
	hexi_rc rv;

	launch(s);
	if (BT < 0 || V < 1)
		return hexi_error(HEXI_ERR_INVAL, "crossentropy: BT %d V %d",
				  BT, V);
	if (BT == 0)
		return HEXI_OK;
	if ((rv = devw("crossentropy_forward", "losses", losses,
		       (size_t)BT * sizeof(float))) ||
	    (rv = devw("crossentropy_forward", "lse", lse,
		       (size_t)BT * sizeof(float))) ||
	    (rv = dev("crossentropy_forward", "logits", logits, n * ES(dt))) ||
	    (rv = dev("crossentropy_forward", "targets", targets,
		      (size_t)BT * sizeof(int))) ||
	    (rv = targets_ok("crossentropy_forward", targets, BT, V)))
		return rv;
	x = view(&t, dt, logits, n, 1);
	probs = tmp_alloc(&t, (size_t)V); /* one row at a time, discarded */
	if (t.nomem) {
		tmp_free(&t);
		return nomem("crossentropy_forward");
	}
	for (int i = 0; i < BT; i++) {
		const float *r = x + (size_t)i * V;
		float mx = r[0];
		double sum = 0.0;

		rt_crossentropy_forward(losses + i, probs, r, targets + i, 1,
					V);
		for (int j = 1; j < V; j++)
			mx = r[j] > mx ? r[j] : mx;
		for (int j = 0; j < V; j++)
			sum += exp((double)r[j] - mx);
		lse[i] = (float)((double)mx + log(sum));
	}
	tmp_free(&t);
	return HEXI_OK;
}

hexi_rc rt_cuda_crossentropy_backward(rt_cuda_stream s, rt_cuda_dtype dt,
				      void *dlogits, const void *logits,
				      const float *lse, const int *targets,
				      float dloss, int BT, int V)
{
	size_t n = (size_t)BT * V;
	emu_tmp t = {.n = 0};
	float *d, *x;
	hexi_rc rv;

	launch(s);
	if (BT < 0 || V < 1)
		return hexi_error(HEXI_ERR_INVAL, "crossentropy: BT %d V %d",
				  BT, V);
	if (BT == 0)
		return HEXI_OK;
	if ((rv = devw("crossentropy_backward", "dlogits", dlogits,
		       n * ES(dt))) ||
	    (rv = dev("crossentropy_backward", "logits", logits, n * ES(dt))) ||
	    (rv = dev("crossentropy_backward", "lse", lse,
		      (size_t)BT * sizeof(float))) ||
	    (rv = dev("crossentropy_backward", "targets", targets,
		      (size_t)BT * sizeof(int))) ||
	    (rv = targets_ok("crossentropy_backward", targets, BT, V)))
		return rv;
	d = view(&t, dt, dlogits, n, 1);
	x = view(&t, dt, logits, n, 1);
	if (t.nomem) {
		tmp_free(&t);
		return nomem("crossentropy_backward");
	}
	for (int i = 0; i < BT; i++)
		for (int j = 0; j < V; j++) {
			size_t e = (size_t)i * V + j;
			float p = expf(x[e] - lse[i]) -
				  (j == targets[i] ? 1.0f : 0.0f);
			d[e] += dloss * p;
		}
	store(dt, dlogits, d, n);
	tmp_free(&t);
	return HEXI_OK;
}

/* ---- optimizer and trainer helpers ------------------------------------------
 */

hexi_rc rt_cuda_adamw(rt_cuda_stream s, rt_cuda_dtype dt, float *master,
		      void *w, const float *g, float *m, float *v, size_t n,
		      float lr, float beta1, float beta2, float eps,
		      float weight_decay, int step)
{
	float c1 = (float)(1.0 - pow((double)beta1, step));
	float c2 = (float)(1.0 - pow((double)beta2, step));
	hexi_rc rv;

	launch(s);
	if (step < 1 || !(lr >= 0) || !(beta1 >= 0 && beta1 < 1) ||
	    !(beta2 >= 0 && beta2 < 1) || !(eps > 0))
		return hexi_error(HEXI_ERR_INVAL,
				  "adamw: step %d lr %g betas %g %g eps %g",
				  step, (double)lr, (double)beta1,
				  (double)beta2, (double)eps);
	if (n == 0)
		return HEXI_OK;
	if ((rv = devw("adamw", "master", master, n * sizeof(float))) ||
	    (w != NULL && (rv = devw("adamw", "w", w, n * ES(dt)))) ||
	    (rv = dev("adamw", "g", g, n * sizeof(float))) ||
	    (rv = devw("adamw", "m", m, n * sizeof(float))) ||
	    (rv = devw("adamw", "v", v, n * sizeof(float))))
		return rv;
	for (size_t i = 0; i < n; i++) {
		float gi = g[i];
		float mi = beta1 * m[i] + (1.0f - beta1) * gi;
		float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
		float p = master[i];

		m[i] = mi;
		v[i] = vi;
		p -= lr *
		     ((mi / c1) / (sqrtf(vi / c2) + eps) + weight_decay * p);
		master[i] = p;
		if (w == NULL)
			continue;
		if (dt == RT_CUDA_BF16)
			((uint16_t *)w)[i] = f2bf(p);
		else
			((float *)w)[i] = p;
	}
	return HEXI_OK;
}

hexi_rc rt_cuda_scale_f32(rt_cuda_stream s, float *x, float f, size_t n)
{
	hexi_rc rv;

	launch(s);
	if (n == 0)
		return HEXI_OK;
	if ((rv = devw("scale_f32", "x", x, n * sizeof(float))) != HEXI_OK)
		return rv;
	for (size_t i = 0; i < n; i++)
		x[i] *= f;
	return HEXI_OK;
}

hexi_rc rt_cuda_sgd_f32(rt_cuda_stream s, float *w, const float *g, float lr,
			size_t n)
{
	hexi_rc rv;

	launch(s);
	if (n == 0)
		return HEXI_OK;
	if ((rv = devw("sgd_f32", "w", w, n * sizeof(float))) ||
	    (rv = dev("sgd_f32", "g", g, n * sizeof(float))))
		return rv;
	for (size_t i = 0; i < n; i++) {
		float d = lr * g[i]; /* rounded first, as the kernel */
		w[i] -= d;
	}
	return HEXI_OK;
}

hexi_rc rt_cuda_sumsq_f32(rt_cuda_stream s, const float *x, size_t n,
			  double *acc)
{
	double sum = 0.0;
	hexi_rc rv;

	launch(s);
	if (n == 0)
		return HEXI_OK;
	if ((rv = dev("sumsq_f32", "x", x, n * sizeof(float))) ||
	    (rv = devw("sumsq_f32", "acc", acc, sizeof(double))))
		return rv;
	for (size_t i = 0; i < n; i++)
		sum += (double)x[i] * x[i];
	*acc += sum;
	return HEXI_OK;
}

/* ---- the "NCCL" backend
 * ------------------------------------------------------ */

/*
 * A wrapper around the MPI (or self) backend with the NCCL backend's
 * rules: buffers must be device memory, complete (no pending launch
 * touches them: the stream-order checker) when handed over.  Groups are
 * the inner backend's groups of the same ranks.
 */
typedef struct emu_comm {
	rt_comm base;
	rt_comm *inner;
	char dp_tag;	      /* its address: the stream dp */
	rt_cuda_stream after; /* rt_comm_nccl_order_after, or NULL */
} emu_comm;

typedef struct emu_group {
	rt_group base;
	rt_group *inner;
} emu_group;

static const rt_comm_ops emu_comm_ops;

static hexi_rc comm_buf(const char *what, const void *buf, size_t bytes,
			int write)
{
	const char *lax = getenv("HEXI_GPU_EMU_LAX");

	if (bytes > 0 && buf != NULL && !reg_has(buf, bytes) && lax != NULL &&
	    strcmp(lax, "1") == 0) {
		/* diagnosis only: say it, go on as the MPI backend can */
		fprintf(stderr,
			"gpu_emu: %s of %zu bytes of HOST memory (%p): NCCL "
			"needs device memory\n",
			what, bytes, buf);
		return HEXI_OK;
	}
	pthread_mutex_lock(&reg_lock);
	launch_sid = SID_COMM;
	pthread_mutex_unlock(&reg_lock);
	return dev_(what, "buffer", buf, bytes, write);
}

static size_t dt_bytes(rt_dtype dt)
{
	return dt == RT_F64 ? sizeof(double) : sizeof(float);
}

static hexi_rc emu_group_create(rt_comm *c, const int *ranks, int n,
				rt_group **out)
{
	emu_comm *ec = (emu_comm *)c;
	emu_group *g = NULL;
	rt_group *ig = NULL;
	hexi_rc rc;

	*out = NULL;
	if ((rc = rt_comm_group_get(ec->inner, ranks, n, &ig)) != HEXI_OK)
		return rc;
	if (ig == NULL)
		return hexi_error(HEXI_ERR_INVAL,
				  "emulated NCCL: rank %d is not in the group",
				  c->rank);
	if ((g = calloc(1, sizeof(*g))) == NULL ||
	    (g->base.ranks = malloc(sizeof(int) * (size_t)ig->n)) == NULL) {
		free(g);
		return hexi_error(HEXI_ERR_NOMEM, "emulated NCCL group");
	}
	memcpy(g->base.ranks, ig->ranks, sizeof(int) * (size_t)ig->n);
	g->base.comm = c;
	g->base.n = ig->n;
	g->base.me = ig->me;
	g->inner = ig;
	*out = &g->base;
	return HEXI_OK;
}

static void emu_group_destroy(rt_group *g)
{
	if (g == NULL)
		return;
	free(g->ranks);
	free(g); /* the inner group belongs to the inner comm */
}

static hexi_rc emu_allreduce(rt_group *g, void *buf, size_t count, rt_dtype dt)
{
	rt_group *ig = ((emu_group *)g)->inner;
	hexi_rc rc = comm_buf("NCCL all-reduce", buf, count * dt_bytes(dt), 1);

	return rc != HEXI_OK ? rc
			     : ig->comm->ops->allreduce_sum(ig, buf, count, dt);
}

/* Non-blocking all-reduce, as comm_nccl.c: on the communicator's stream
 * dp, after an event on the producer stream (rt_comm_nccl_order_after),
 * so what the compute stream queued before is ordered before it and
 * anything it queues later that touches the buffer is a race until test
 * reports it done or wait returns (then the buffer is the host's again,
 * as after a wait for dp).  Underneath, the MPI backend's non-blocking
 * all-reduce on the same host memory. */
typedef struct emu_req {
	rt_req base;
	rt_req *inner;
	emu_comm *ec;
	const char *lo, *hi;   /* the buffer in flight on dp */
	const char *lo2, *hi2; /* reduce-scatter: the receive buffer too */
} emu_req;

static hexi_rc emu_iallreduce(rt_group *g, void *buf, size_t count, rt_dtype dt,
			      rt_req **req)
{
	rt_group *ig = ((emu_group *)g)->inner;
	emu_comm *ec = (emu_comm *)g->comm;
	rt_cuda_stream dp = (rt_cuda_stream)(uintptr_t)&ec->dp_tag;
	size_t bytes = count * dt_bytes(dt);
	emu_req *r;
	hexi_rc rc;

	*req = NULL;
	if (ig->comm->ops->iallreduce_sum == NULL)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "emulated NCCL: no non-blocking all-reduce "
				  "underneath");
	if (ec->after != NULL)
		rt_cuda_stream_wait(dp, ec->after);
	launch(dp);
	if ((rc = devw("NCCL all-reduce (dp)", "buffer", buf, bytes)) !=
	    HEXI_OK)
		return rc;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "emulated NCCL: request");
	rc = ig->comm->ops->iallreduce_sum(ig, buf, count, dt, &r->inner);
	if (rc != HEXI_OK) {
		free(r);
		return rc;
	}
	r->base.root = g->ranks[0];
	r->ec = ec;
	r->lo = buf;
	r->hi = r->lo + bytes;
	*req = &r->base;
	return HEXI_OK;
}

/* The sharded sync's overlap (comm_nccl.c: one ncclReduce per member in
 * a group on dp): reads member blocks [cut[0], cut[n]) of send, writes
 * the caller's block into recv, both pending on dp until done. */
static hexi_rc emu_ireduce_scatterv(rt_group *g, const void *send, void *recv,
				    const size_t *cut, rt_dtype dt,
				    rt_req **req)
{
	rt_group *ig = ((emu_group *)g)->inner;
	emu_comm *ec = (emu_comm *)g->comm;
	rt_cuda_stream dp = (rt_cuda_stream)(uintptr_t)&ec->dp_tag;
	size_t es = dt_bytes(dt);
	const char *from = (const char *)send + cut[0] * es;
	size_t sb = (cut[g->n] - cut[0]) * es;
	size_t rb = (cut[g->me + 1] - cut[g->me]) * es;
	emu_req *r;
	hexi_rc rc;

	*req = NULL;
	if (ig->comm->ops->ireduce_scatterv_sum == NULL)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "emulated NCCL: no non-blocking "
				  "reduce-scatter underneath");
	if (ec->after != NULL)
		rt_cuda_stream_wait(dp, ec->after);
	launch(dp);
	if ((rc = dev("NCCL reduce (dp)", "send", from, sb)) != HEXI_OK ||
	    (rc = devw("NCCL reduce (dp)", "recv", recv, rb)) != HEXI_OK)
		return rc;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "emulated NCCL: request");
	rc = ig->comm->ops->ireduce_scatterv_sum(ig, send, recv, cut, dt,
						 &r->inner);
	if (rc != HEXI_OK) {
		free(r);
		return rc;
	}
	r->base.root = g->ranks[0];
	r->ec = ec;
	r->lo = from;
	r->hi = from + sb;
	r->lo2 = recv;
	r->hi2 = r->lo2 + rb;
	*req = &r->base;
	return HEXI_OK;
}

static void emu_req_done(emu_req *r)
{
	rt_cuda_stream dp = (rt_cuda_stream)(uintptr_t)&r->ec->dp_tag;

	pthread_mutex_lock(&reg_lock);
	pend_drop(stream_id(dp), r->lo, r->hi);
	if (r->lo2 != NULL)
		pend_drop(stream_id(dp), r->lo2, r->hi2);
	pthread_mutex_unlock(&reg_lock);
	free(r);
}

static hexi_rc emu_test(rt_req *rb, int *done)
{
	emu_req *r = (emu_req *)rb;
	rt_comm *in = r->ec->inner;
	hexi_rc rc = in->ops->test(r->inner, done);

	if (rc == HEXI_OK && *done)
		emu_req_done(r);
	return rc;
}

static hexi_rc emu_wait(rt_req *rb)
{
	emu_req *r = (emu_req *)rb;
	rt_comm *in = r->ec->inner;
	hexi_rc rc = in->ops->wait(r->inner);

	emu_req_done(r);
	return rc;
}

/* HEXI_GPU_EMU_NO_ORDER=1 (negative control of emu_train.sh): forget the
 * producer stream, so a bucket handed to NCCL while the backward's work on
 * it is queued must be reported as a stream race. */
void rt_comm_nccl_order_after(rt_comm *c, void *stream)
{
	const char *no = getenv("HEXI_GPU_EMU_NO_ORDER");

	if (no != NULL && strcmp(no, "1") == 0)
		stream = NULL;
	if (c != NULL && c->ops == &emu_comm_ops)
		((emu_comm *)c)->after = stream;
}

/* The sharded sync's pair (comm_nccl.c: ncclReduceScatter, in-place
 * ncclAllGather); like NCCL, no variable-count versions. */
static hexi_rc emu_reduce_scatter(rt_group *g, const void *send, void *recv,
				  size_t count, rt_dtype dt)
{
	rt_group *ig = ((emu_group *)g)->inner;
	size_t b = count * dt_bytes(dt);
	hexi_rc rc = comm_buf("NCCL reduce-scatter", send, b * (size_t)g->n, 0);

	if (rc == HEXI_OK)
		rc = comm_buf("NCCL reduce-scatter", recv, b, 1);
	if (rc == HEXI_OK && ig->comm->ops->reduce_scatter_sum == NULL)
		rc = hexi_error(HEXI_ERR_UNSUPPORTED,
				"emulated NCCL: backend %s has no "
				"reduce-scatter",
				ig->comm->ops->name);
	return rc != HEXI_OK ? rc
			     : ig->comm->ops->reduce_scatter_sum(ig, send, recv,
								 count, dt);
}

static hexi_rc emu_allgather(rt_group *g, void *buf, size_t count, rt_dtype dt)
{
	rt_group *ig = ((emu_group *)g)->inner;
	hexi_rc rc = comm_buf("NCCL all-gather", buf,
			      count * dt_bytes(dt) * (size_t)g->n, 1);

	if (rc == HEXI_OK && ig->comm->ops->allgather == NULL)
		rc = hexi_error(HEXI_ERR_UNSUPPORTED,
				"emulated NCCL: backend %s has no all-gather",
				ig->comm->ops->name);
	return rc != HEXI_OK ? rc
			     : ig->comm->ops->allgather(ig, buf, count, dt);
}

static hexi_rc emu_bcast(rt_group *g, void *buf, size_t bytes, int root)
{
	rt_group *ig = ((emu_group *)g)->inner;
	hexi_rc rc = comm_buf("NCCL broadcast", buf, bytes, 1);

	return rc != HEXI_OK ? rc : ig->comm->ops->bcast(ig, buf, bytes, root);
}

static hexi_rc emu_send(rt_comm *c, const void *buf, size_t bytes, int peer,
			int tag)
{
	rt_comm *in = ((emu_comm *)c)->inner;
	hexi_rc rc = comm_buf("NCCL send", buf, bytes, 0);

	return rc != HEXI_OK ? rc : in->ops->send(in, buf, bytes, peer, tag);
}

static hexi_rc emu_recv(rt_comm *c, void *buf, size_t bytes, int peer, int tag)
{
	rt_comm *in = ((emu_comm *)c)->inner;
	hexi_rc rc = comm_buf("NCCL receive", buf, bytes, 1);

	return rc != HEXI_OK ? rc : in->ops->recv(in, buf, bytes, peer, tag);
}

static hexi_rc emu_flush(rt_comm *c)
{
	rt_comm *in = ((emu_comm *)c)->inner;

	return in->ops->flush(in);
}

static hexi_rc emu_barrier(rt_comm *c, rt_group *g)
{
	rt_comm *in = ((emu_comm *)c)->inner;

	return in->ops->barrier(in, g != NULL ? ((emu_group *)g)->inner : NULL);
}

static void emu_abort_all(rt_comm *c, int code)
{
	rt_comm *in = ((emu_comm *)c)->inner;

	in->ops->abort_all(in, code);
}

static void emu_comm_destroy(rt_comm *c)
{
	rt_comm_destroy(((emu_comm *)c)->inner);
	free(c);
}

static const rt_comm_ops emu_comm_ops = {
    .name = "nccl",
    .group_create = emu_group_create,
    .group_destroy = emu_group_destroy,
    .allreduce_sum = emu_allreduce,
    .iallreduce_sum = emu_iallreduce,
    .ireduce_scatterv_sum = emu_ireduce_scatterv,
    .test = emu_test,
    .wait = emu_wait,
    .reduce_scatter_sum = emu_reduce_scatter,
    .allgather = emu_allgather,
    .bcast = emu_bcast,
    .send = emu_send,
    .recv = emu_recv,
    .flush = emu_flush,
    .barrier = emu_barrier,
    .abort_all = emu_abort_all,
    .destroy = emu_comm_destroy,
};

hexi_rc rt_comm_nccl_create(rt_comm *bootstrap, int device, rt_comm **out)
{
	emu_comm *ec = NULL;
	rt_comm *in = NULL;
	hexi_rc rc;

	(void)device;
	*out = NULL;
	if (bootstrap == NULL)
		return hexi_error(HEXI_ERR_INVAL,
				  "NCCL communicator: no bootstrap comm");
	/* a second split of MPI_COMM_WORLD: every task of the emulated runs
	 * trains (they have no idle tasks, which would not take part) */
	rc = strcmp(bootstrap->ops->name, "mpi") == 0
		 ? rt_comm_mpi_create(bootstrap->rank, 1, &in)
		 : rt_comm_self_create(&in);
	if (rc != HEXI_OK)
		return rc;
	if ((ec = calloc(1, sizeof(*ec))) == NULL) {
		rt_comm_destroy(in);
		return hexi_error(HEXI_ERR_NOMEM, "emulated NCCL communicator");
	}
	ec->base.ops = &emu_comm_ops;
	ec->base.rank = in->rank;
	ec->base.size = in->size;
	ec->inner = in;
	*out = &ec->base;
	return HEXI_OK;
}

/* ---- cuDNN's fused attention, emulated ----------------------------------- */

/* rt_cuda_cudnn_version() is $HEXI_GPU_EMU_CUDNN (0 when unset: "absent");
 * the plans are the emulated own kernel behind the cuDNN contract (backward
 * SETS dq, dk, dv), counted by gpu_emu_sdpa_calls(), so the selection and
 * the model's dispatch are tested here; $HEXI_GPU_EMU_CUDNN_REFUSE=1 makes
 * create fail as a cuDNN without an engine would, and
 * $HEXI_GPU_EMU_CUDNN_REFUSE_BWD=1 refuses only the backward plan (the own
 * backward then ADDS, as on a GPU). */

static unsigned long sdpa_calls;

unsigned long gpu_emu_sdpa_calls(void)
{
	return sdpa_calls;
}

long rt_cuda_cudnn_version(void)
{
	const char *e = getenv("HEXI_GPU_EMU_CUDNN");

	return e != NULL ? strtol(e, NULL, 10) : 0;
}

struct rt_cuda_sdpa {
	rt_cuda *c;
	rt_cuda_dtype dt;
	int B, T, NH, NKV, hs;
	int own_bwd;  /* the backward plan was refused */
	float *delta; /* (B,NH,T) scratch of the own backward */
};

hexi_rc rt_cuda_sdpa_create(rt_cuda *c, rt_cuda_dtype dt, int B, int T, int NH,
			    int NKV, int hs, rt_cuda_sdpa **out)
{
	rt_cuda_sdpa *a;
	hexi_rc rv;

	*out = NULL;
	if (rt_cuda_cudnn_version() <= 0)
		return hexi_error(HEXI_ERR_UNSUPPORTED, "cuDNN: not loaded");
	if (getenv("HEXI_GPU_EMU_CUDNN_REFUSE") != NULL)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "cuDNN SDPA: no engine (emulated refusal)");
	if ((rv = attn_check("cuDNN SDPA", B, T, NH, NKV, hs)) != HEXI_OK)
		return rv;
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return nomem("cuDNN SDPA");
	*a = (rt_cuda_sdpa){
	    .c = c,
	    .dt = dt,
	    .B = B,
	    .T = T,
	    .NH = NH,
	    .NKV = NKV,
	    .hs = hs,
	    .own_bwd = getenv("HEXI_GPU_EMU_CUDNN_REFUSE_BWD") != NULL};
	rv = rt_cuda_alloc((void **)&a->delta,
			   (size_t)B * NH * (T ? T : 1) * sizeof(float));
	if (rv != HEXI_OK) {
		free(a);
		return rv;
	}
	*out = a;
	return HEXI_OK;
}

void rt_cuda_sdpa_destroy(rt_cuda_sdpa *a)
{
	if (a == NULL)
		return;
	rt_cuda_free(a->delta);
	free(a);
}

const char *rt_cuda_sdpa_backward_why(const rt_cuda_sdpa *a)
{
	return a->own_bwd ? "cuDNN SDPA backward: no engine (emulated refusal)"
			  : NULL;
}

hexi_rc rt_cuda_sdpa_forward(rt_cuda_sdpa *a, void *out, float *lse,
			     const void *q, const void *k, const void *v)
{
	sdpa_calls++;
	return rt_cuda_attention_forward(rt_cuda_compute_stream(a->c), a->dt,
					 out, lse, q, k, v, a->B, a->T, a->NH,
					 a->NKV, a->hs);
}

hexi_rc rt_cuda_sdpa_backward(rt_cuda_sdpa *a, void *dq, void *dk, void *dv,
			      const void *dout, const void *out, const void *q,
			      const void *k, const void *v, const float *lse)
{
	rt_cuda_stream s = rt_cuda_compute_stream(a->c);
	size_t e = rt_cuda_dtype_size(a->dt), BT = (size_t)a->B * a->T;
	hexi_rc rv;

	sdpa_calls++;
	if (a->own_bwd) /* the own kernel adds: the model zeroed dq, dk, dv */
		return rt_cuda_attention_backward(
		    s, a->dt, dq, dk, dv, dout, out, q, k, v, lse, a->delta,
		    a->B, a->T, a->NH, a->NKV, a->hs);
	if ((rv = rt_cuda_memset0(s, dq, BT * a->NH * a->hs * e)) != HEXI_OK ||
	    (rv = rt_cuda_memset0(s, dk, BT * a->NKV * a->hs * e)) != HEXI_OK ||
	    (rv = rt_cuda_memset0(s, dv, BT * a->NKV * a->hs * e)) != HEXI_OK)
		return rv;
	return rt_cuda_attention_backward(s, a->dt, dq, dk, dv, dout, out, q, k,
					  v, lse, a->delta, a->B, a->T, a->NH,
					  a->NKV, a->hs);
}
