/*
 * prof_gpu.c - GPU mode: cuBLAS GEMM TFLOPS (bf16, fp16 with fp32
 * accumulation; plain fp32), device memory bandwidth (device-to-device
 * copy: bytes read + written), pinned host<->device bandwidth, GPU<->GPU
 * copies on the node, and NCCL all-reduce / sendrecv bus bandwidth and
 * small-message latency between the ranks of a job.
 *
 * Plain C against the CUDA runtime, cuBLAS and NCCL APIs (no kernels of its
 * own), so it builds with the same compiler and warnings as the rest.
 * Every figure is validated before it is timed.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_prof.h"

#ifdef HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "hexi_bf16.h"
#include "hexi_cuda_err.h"

#define SAMPLES 64

static hexi_rc nccl_err(ncclResult_t r, const char *what)
{
	if (r == ncclSuccess)
		return HEXI_OK;
	return hexi_error(HEXI_ERR_NCCL, "%s: %s (%d)", what,
			  ncclGetErrorString(r), (int)r);
}

hexi_rc hexi_prof_gpu_count(int *n)
{
	return hexi_cuda_count(n);
}

/* ---- host-side number formats -------------------------------------------- */

static uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* IEEE half, round to nearest even, for |f| in the normal half range or
 * zero (inputs here are in [-1, 1]; tiny values flush to zero). */
static uint16_t f32_to_f16(float f)
{
	uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000u;
	int32_t exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
	uint32_t man = u & 0x7fffffu, h;

	if (exp <= 0)
		return (uint16_t)sign;
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00u);
	h = ((uint32_t)exp << 10) | (man >> 13);
	if ((man & 0x1fffu) > 0x1000u ||
	    ((man & 0x1fffu) == 0x1000u && (h & 1)))
		h++;
	return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;

	if (exp == 0)
		return bits_f32(sign); /* zero (subnormals not produced) */
	if (exp == 31)
		return bits_f32(sign | 0x7f800000u | (man << 13));
	return bits_f32(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

/* ---- GEMM -----------------------------------------------------------------
 */

typedef enum { DT_BF16, DT_FP16, DT_FP32 } dtype;

static const struct {
	const char *name;
	cudaDataType_t cuda;
	size_t bytes;
	double tol; /* max |c - ref| / sum |a b| on the sample */
} dtypes[] = {
    /* the output is rounded to 8 (bf16) or 11 (fp16) mantissa bits */
    [DT_BF16] = {"bf16", CUDA_R_16BF, 2, 1e-2},
    [DT_FP16] = {"fp16", CUDA_R_16F, 2, 2e-3},
    [DT_FP32] = {"fp32", CUDA_R_32F, 4, 1e-4},
};

typedef struct gemm_arg {
	cublasHandle_t h;
	cudaStream_t s;
	dtype dt;
	int m, n, k;
	void *a, *b, *c; /* device, column-major A(m,k) B(k,n) C(m,n) */
	float *ha, *hb;	 /* host copies of the rounded inputs */
} gemm_arg;

static hexi_rc gemm_once(void *p)
{
	gemm_arg *g = p;
	float one = 1.0f, zero = 0.0f;
	cudaDataType_t t = dtypes[g->dt].cuda;
	cublasStatus_t s;

	s = cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n, g->k, &one,
			 g->a, t, g->m, g->b, t, g->k, &zero, g->c, t, g->m,
			 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	if (s != CUBLAS_STATUS_SUCCESS)
		return hexi_cublas_err(s, "cublasGemmEx");
	return hexi_cuda_err(cudaStreamSynchronize(g->s), "GEMM sync");
}

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 33;
}

/* Random values in [-1, 1] rounded to dt: host floats and device copy. */
static hexi_rc upload(dtype dt, size_t n, uint64_t seed, float *host, void *dev)
{
	size_t eb = dtypes[dt].bytes;
	unsigned char *buf = malloc(n * eb);
	hexi_rc rv;

	if (buf == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GEMM staging %zu", n * eb);
	for (size_t i = 0; i < n; i++) {
		float f =
		    (float)((double)lcg(&seed) / 2147483648.0 * 2.0 - 1.0);
		uint16_t h;

		if (dt == DT_FP32) {
			memcpy(buf + i * 4, &f, 4);
		} else {
			h = dt == DT_BF16 ? hexi_bf16_from_float(f)
					  : f32_to_f16(f);
			f = dt == DT_BF16 ? hexi_bf16_to_float(h)
					  : f16_to_f32(h);
			memcpy(buf + i * 2, &h, 2);
		}
		host[i] = f;
	}
	rv = hexi_cuda_err(cudaMemcpy(dev, buf, n * eb, cudaMemcpyHostToDevice),
			   "GEMM upload");
	free(buf);
	return rv;
}

static double out_value(dtype dt, const unsigned char *c, size_t i)
{
	uint16_t h;
	float f;

	if (dt == DT_FP32) {
		memcpy(&f, c + i * 4, 4);
		return f;
	}
	memcpy(&h, c + i * 2, 2);
	return dt == DT_BF16 ? hexi_bf16_to_float(h) : f16_to_f32(h);
}

static hexi_rc gemm_check(const gemm_arg *g, double *err)
{
	size_t eb = dtypes[g->dt].bytes, nc = (size_t)g->m * (size_t)g->n;
	unsigned char *c = malloc(nc * eb);
	uint64_t seed = 777;
	hexi_rc rv;

	*err = 0;
	if (c == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GEMM result copy");
	rv = hexi_cuda_err(cudaMemcpy(c, g->c, nc * eb, cudaMemcpyDeviceToHost),
			   "GEMM download");
	for (int s = 0; s < SAMPLES && rv == HEXI_OK; s++) {
		size_t i = lcg(&seed) % (uint64_t)g->m;
		size_t j = lcg(&seed) % (uint64_t)g->n;
		double ref = 0, mag = 0, e;

		for (size_t k = 0; k < (size_t)g->k; k++) {
			double t = (double)g->ha[k * g->m + i] *
				   (double)g->hb[j * g->k + k];
			ref += t;
			mag += fabs(t);
		}
		e = fabs(out_value(g->dt, c, j * g->m + i) - ref) /
		    (mag > 0 ? mag : 1.0);
		if (!(e <= *err))
			*err = e;
	}
	free(c);
	return rv;
}

static void gemm_free(gemm_arg *g)
{
	cudaFree(g->a);
	cudaFree(g->b);
	cudaFree(g->c);
	free(g->ha);
	free(g->hb);
}

static hexi_rc gemm_setup(gemm_arg *g)
{
	size_t eb = dtypes[g->dt].bytes;
	size_t na = (size_t)g->m * g->k, nb = (size_t)g->k * g->n;
	size_t nc = (size_t)g->m * g->n;
	hexi_rc rv;

	g->ha = malloc(na * sizeof(float));
	g->hb = malloc(nb * sizeof(float));
	if (g->ha == NULL || g->hb == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GEMM host inputs");
	if ((rv = hexi_cuda_err(cudaMalloc(&g->a, na * eb), "cudaMalloc A")) ||
	    (rv = hexi_cuda_err(cudaMalloc(&g->b, nb * eb), "cudaMalloc B")) ||
	    (rv = hexi_cuda_err(cudaMalloc(&g->c, nc * eb), "cudaMalloc C")))
		return rv;
	if ((rv = upload(g->dt, na, 1, g->ha, g->a)) != HEXI_OK)
		return rv;
	return upload(g->dt, nb, 2, g->hb, g->b);
}

static void meas_init(hexi_prof_meas *m, const char *name, int dev,
		      const char *unit)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", name);
	snprintf(m->unit, sizeof(m->unit), "%s", unit);
	m->device = dev;
}

/* One GEMM shape and dtype: validate, time, record; *tflops = median. */
static hexi_rc gemm_bench(const hexi_prof_opts *o, cublasHandle_t h,
			  cudaStream_t s, int dev, dtype dt,
			  const hexi_prof_shape *sh, hexi_prof_report *r,
			  double *tflops)
{
	gemm_arg g = {h,    s,	  dt,	(int)sh->m, (int)sh->n, (int)sh->k,
		      NULL, NULL, NULL, NULL,	    NULL};
	char name[HEXI_PROF_NAME_MAX];
	hexi_prof_meas m;
	double flop = 2.0 * (double)sh->m * (double)sh->n * (double)sh->k;
	hexi_rc rv;

	snprintf(name, sizeof(name), "gpu.gemm.%s", dtypes[dt].name);
	meas_init(&m, name, dev, "TFLOP/s");
	snprintf(m.shape, sizeof(m.shape), "%ldx%ldx%ld", sh->m, sh->n, sh->k);
	if ((rv = gemm_setup(&g)) != HEXI_OK || (rv = gemm_once(&g)) ||
	    (rv = gemm_check(&g, &m.check_err)))
		goto out;
	if (!(m.check_err <= dtypes[dt].tol)) {
		rv = hexi_error(HEXI_ERR_MISMATCH,
				"GPU %d GEMM %s %s: result check failed: "
				"relative error %.3g > %.3g",
				dev, dtypes[dt].name, m.shape, m.check_err,
				dtypes[dt].tol);
		goto out;
	}
	if ((rv = hexi_prof_time_min(gemm_once, &g, o->warmup, o->repeats,
				     o->min_sample_s, &m.stat)) != HEXI_OK)
		goto out;
	m.value = flop / m.stat.median_s / 1e12;
	m.best = flop / m.stat.min_s / 1e12;
	*tflops = m.value;
	rv = hexi_prof_report_add(r, &m);
out:
	gemm_free(&g);
	return rv;
}

/* ---- copies -----------------------------------------------------------------
 */

typedef struct copy_arg {
	void *dst, *src;
	size_t bytes;
	enum cudaMemcpyKind kind;
	int dst_dev, src_dev; /* for peer copies, else -1 */
	cudaStream_t s;
} copy_arg;

static hexi_rc copy_once(void *p)
{
	copy_arg *c = p;
	cudaError_t e;

	if (c->dst_dev >= 0)
		e = cudaMemcpyPeerAsync(c->dst, c->dst_dev, c->src, c->src_dev,
					c->bytes, c->s);
	else
		e = cudaMemcpyAsync(c->dst, c->src, c->bytes, c->kind, c->s);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(c->s);
	return hexi_cuda_err(e, "copy");
}

/* Fill src (via host), copy once, compare dst (via host). */
static hexi_rc copy_check(copy_arg *c, unsigned char *host, int src_host,
			  int dst_host)
{
	hexi_rc rv;

	for (size_t i = 0; i < c->bytes; i++)
		host[i] = (unsigned char)(i * 31u + 5u);
	if (!src_host && (rv = hexi_cuda_err(cudaMemcpy(c->src, host, c->bytes,
							cudaMemcpyHostToDevice),
					     "copy check fill")))
		return rv;
	if (src_host)
		memcpy(c->src, host, c->bytes);
	if ((rv = copy_once(c)) != HEXI_OK)
		return rv;
	memset(host, 0, c->bytes);
	if (dst_host)
		memcpy(host, c->dst, c->bytes);
	else if ((rv = hexi_cuda_err(cudaMemcpy(host, c->dst, c->bytes,
						cudaMemcpyDeviceToHost),
				     "copy check read")))
		return rv;
	for (size_t i = 0; i < c->bytes; i++)
		if (host[i] != (unsigned char)(i * 31u + 5u))
			return hexi_error(HEXI_ERR_MISMATCH,
					  "copy of %zu bytes: byte %zu wrong",
					  c->bytes, i);
	return HEXI_OK;
}

static hexi_rc copy_bench(const hexi_prof_opts *o, copy_arg *c,
			  const char *name, int dev, double factor,
			  int src_host, int dst_host, hexi_prof_report *r,
			  double *gbps)
{
	unsigned char *host = malloc(c->bytes);
	hexi_prof_meas m;
	hexi_rc rv;

	if (host == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "copy check buffer");
	meas_init(&m, name, dev, "GB/s");
	snprintf(m.shape, sizeof(m.shape), "%zuB", c->bytes);
	rv = copy_check(c, host, src_host, dst_host);
	free(host);
	if (rv != HEXI_OK ||
	    (rv = hexi_prof_time_min(copy_once, c, o->warmup, o->repeats,
				     o->min_sample_s, &m.stat)) != HEXI_OK)
		return rv;
	m.value = factor * (double)c->bytes / m.stat.median_s / 1e9;
	m.best = factor * (double)c->bytes / m.stat.min_s / 1e9;
	*gbps = m.value;
	return hexi_prof_report_add(r, &m);
}

static hexi_rc mem_bench(const hexi_prof_opts *o, int dev, cudaStream_t s,
			 hexi_prof_gpu *g, hexi_prof_report *r)
{
	size_t bytes = o->quick ? (size_t)64 << 20 : (size_t)512 << 20;
	size_t hbytes = o->quick ? (size_t)32 << 20 : (size_t)256 << 20;
	void *d0 = NULL, *d1 = NULL, *h = NULL;
	copy_arg c = {NULL, NULL, 0, cudaMemcpyDeviceToDevice, -1, -1, s};
	hexi_rc rv;

	if ((rv = hexi_cuda_err(cudaMalloc(&d0, bytes), "cudaMalloc")) ||
	    (rv = hexi_cuda_err(cudaMalloc(&d1, bytes), "cudaMalloc")) ||
	    (rv = hexi_cuda_err(cudaMallocHost(&h, hbytes), "cudaMallocHost")))
		goto out;
	c.dst = d1;
	c.src = d0;
	c.bytes = bytes;
	/* a device copy reads and writes every byte */
	if ((rv = copy_bench(o, &c, "gpu.mem.copy", dev, 2.0, 0, 0, r,
			     &g->mem_bw_gbps)))
		goto out;
	c.bytes = hbytes;
	c.kind = cudaMemcpyHostToDevice;
	c.src = h;
	c.dst = d0;
	if ((rv =
		 copy_bench(o, &c, "gpu.h2d", dev, 1.0, 1, 0, r, &g->h2d_gbps)))
		goto out;
	c.kind = cudaMemcpyDeviceToHost;
	c.src = d0;
	c.dst = h;
	rv = copy_bench(o, &c, "gpu.d2h", dev, 1.0, 0, 1, r, &g->d2h_gbps);
out:
	cudaFree(d0);
	cudaFree(d1);
	cudaFreeHost(h);
	return rv;
}

/* GPU<->GPU on the node: dev a to dev b (peer access when possible). */
static hexi_rc peer_bench(const hexi_prof_opts *o, int a, int b,
			  hexi_profile *p, hexi_prof_report *r)
{
	size_t bytes = o->quick ? (size_t)32 << 20 : (size_t)256 << 20;
	void *da = NULL, *db = NULL;
	cudaStream_t s = NULL;
	int can = 0;
	copy_arg c = {NULL, NULL, bytes, cudaMemcpyDefault, b, a, NULL};
	hexi_rc rv;

	cudaDeviceCanAccessPeer(&can, a, b);
	if ((rv = hexi_cuda_err(cudaSetDevice(b), "cudaSetDevice")) ||
	    (rv = hexi_cuda_err(cudaMalloc(&db, bytes), "cudaMalloc peer")) ||
	    (rv = hexi_cuda_err(cudaSetDevice(a), "cudaSetDevice")) ||
	    (rv = hexi_cuda_err(cudaMalloc(&da, bytes), "cudaMalloc peer")) ||
	    (rv = hexi_cuda_err(cudaStreamCreate(&s), "cudaStreamCreate")))
		goto out;
	if (can) {
		cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);

		if (e != cudaSuccess &&
		    e != cudaErrorPeerAccessAlreadyEnabled) {
			rv = hexi_cuda_err(e, "cudaDeviceEnablePeerAccess");
			goto out;
		}
		cudaGetLastError();
	}
	c.src = da;
	c.dst = db;
	c.s = s;
	rv = copy_bench(o, &c, can ? "gpu.p2p" : "gpu.p2p.staged", a, 1.0, 0, 0,
			r, &p->intra_bw_gbps);
out:
	if (s != NULL)
		cudaStreamDestroy(s);
	cudaFree(da);
	cudaSetDevice(b);
	cudaFree(db);
	return rv;
}

static hexi_rc one_device(const hexi_prof_opts *o, int dev, hexi_prof_gpu *g,
			  hexi_prof_report *r)
{
	hexi_prof_shape shapes[2 * HEXI_PROF_MAX_SHAPES];
	int n = hexi_prof_default_shapes("gpu", o->quick, shapes,
					 HEXI_PROF_MAX_SHAPES);
	double *best[] = {&g->gemm_tflops_bf16, &g->gemm_tflops_fp16,
			  &g->gemm_tflops_fp32};
	struct cudaDeviceProp prop;
	cublasHandle_t h = NULL;
	cudaStream_t s = NULL;
	hexi_rc rv;

	if (o->only_given)
		n = 0;
	for (int i = 0; i < o->nshapes; i++)
		shapes[n++] = o->shapes[i];
	hexi_prof_gpu_init(g, dev);
	if ((rv = hexi_cuda_err(cudaSetDevice(dev), "cudaSetDevice")) ||
	    (rv = hexi_cuda_err(cudaGetDeviceProperties(&prop, dev),
				"cudaGetDeviceProperties")))
		return rv;
	snprintf(g->name, sizeof(g->name), "%s", prop.name);
	snprintf(g->type, sizeof(g->type), "%s",
		 o->gpu_type[0] ? o->gpu_type
				: hexi_prof_gpu_type_guess(prop.name));
	if (strcmp(g->type, "unknown") == 0)
		hexi_log(HEXI_LOG_WARN,
			 "GPU %d '%s' is no type of the built-in catalog: "
			 "the profile names type 'unknown', which the planner "
			 "refuses; give --gpu-type=NAME of a type in the "
			 "site's catalog file",
			 dev, prop.name);
	if ((rv = hexi_cuda_err(cudaStreamCreate(&s), "cudaStreamCreate")) ||
	    (rv = hexi_cublas_err(cublasCreate(&h), "cublasCreate")) ||
	    (rv = hexi_cublas_err(cublasSetStream(h, s), "cublasSetStream")))
		goto out;
	for (int d = DT_BF16; d <= DT_FP32 && rv == HEXI_OK; d++) {
		double flop = 0, time_s = 0;

		*best[d] = 0;
		for (int i = 0; i < n && rv == HEXI_OK; i++) {
			double t = 0, f = 2.0 * shapes[i].m * shapes[i].n *
					  shapes[i].k;

			rv = gemm_bench(o, h, s, dev, (dtype)d, &shapes[i], r,
					&t);
			if (t > *best[d])
				*best[d] = t;
			flop += f;
			time_s += t > 0 ? f / (t * 1e12) : 0;
		}
		if (o->rate_mean && time_s > 0)
			*best[d] = flop / time_s / 1e12;
	}
	if (rv == HEXI_OK)
		rv = mem_bench(o, dev, s, g, r);
out:
	if (h != NULL)
		cublasDestroy(h);
	if (s != NULL)
		cudaStreamDestroy(s);
	return rv;
}

hexi_rc hexi_prof_gpu_run(const hexi_prof_opts *o, const int *devices, int ndev,
			  hexi_profile *p, hexi_prof_report *r)
{
	hexi_rc rv;

	for (int i = 0; i < ndev; i++) {
		if (p->ngpus >= HEXI_PROF_MAX_GPUS)
			return hexi_error(HEXI_ERR_RANGE, "more than %d GPUs",
					  HEXI_PROF_MAX_GPUS);
		rv = one_device(o, devices[i], &p->gpus[p->ngpus], r);
		if (rv != HEXI_OK)
			return rv;
		p->ngpus++;
	}
	if (ndev >= 2)
		return peer_bench(o, devices[0], devices[1], p, r);
	return HEXI_OK;
}

/* ---- NCCL between ranks -----------------------------------------------------
 */

typedef struct nccl_arg {
	ncclComm_t comm;
	cudaStream_t s;
	int rank, size;
	size_t count; /* floats */
	float *send, *recv;
	int sendrecv;
} nccl_arg;

static hexi_rc nccl_once(void *p)
{
	nccl_arg *a = p;
	ncclResult_t r;

	if (!a->sendrecv) {
		r = ncclAllReduce(a->send, a->recv, a->count, ncclFloat32,
				  ncclSum, a->comm, a->s);
	} else {
		r = ncclGroupStart();
		if (r == ncclSuccess)
			r = ncclSend(a->send, a->count, ncclFloat32,
				     (a->rank + 1) % a->size, a->comm, a->s);
		if (r == ncclSuccess)
			r = ncclRecv(a->recv, a->count, ncclFloat32,
				     (a->rank - 1 + a->size) % a->size, a->comm,
				     a->s);
		if (r == ncclSuccess)
			r = ncclGroupEnd();
	}
	if (r != ncclSuccess)
		return nccl_err(r, a->sendrecv ? "ncclSend/Recv"
					       : "ncclAllReduce");
	return hexi_cuda_err(cudaStreamSynchronize(a->s), "NCCL sync");
}

static float nccl_want(const nccl_arg *a, size_t i)
{
	int n = a->size;

	if (!a->sendrecv)
		return (float)(n * (n + 1) / 2) + (float)n * (float)(i % 7);
	return (float)((a->rank - 1 + n) % n + 1) + (float)(i % 7);
}

static hexi_rc nccl_check(nccl_arg *a)
{
	float *h = malloc(a->count * sizeof(float));
	hexi_rc rv;

	if (h == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "NCCL check buffer");
	for (size_t i = 0; i < a->count; i++)
		h[i] = (float)(a->rank + 1) + (float)(i % 7);
	rv = hexi_cuda_err(cudaMemcpy(a->send, h, a->count * sizeof(float),
				      cudaMemcpyHostToDevice),
			   "NCCL fill");
	if (rv == HEXI_OK)
		rv = nccl_once(a);
	if (rv == HEXI_OK)
		rv = hexi_cuda_err(cudaMemcpy(h, a->recv,
					      a->count * sizeof(float),
					      cudaMemcpyDeviceToHost),
				   "NCCL read");
	for (size_t i = 0; i < a->count && rv == HEXI_OK; i++)
		if (h[i] != nccl_want(a, i))
			rv = hexi_error(HEXI_ERR_MISMATCH,
					"NCCL %s rank %d: element %zu is %g, "
					"want %g",
					a->sendrecv ? "sendrecv" : "all-reduce",
					a->rank, i, (double)h[i],
					(double)nccl_want(a, i));
	free(h);
	return rv;
}

/* Time one collective of bytes; busbw factor per nccl-tests. */
static hexi_rc nccl_bench(hexi_prof_mpi *m, const hexi_prof_opts *o,
			  nccl_arg *a, size_t bytes, int dev,
			  hexi_prof_report *r, hexi_prof_meas *ms)
{
	double factor = a->sendrecv ? 1.0 : 2.0 * (a->size - 1) / a->size;
	double bad = 0;
	hexi_rc rv;

	a->count = bytes / sizeof(float);
	rv = nccl_check(a);
	bad = rv != HEXI_OK;
	/* every rank learns whether any check failed before timing */
	if (hexi_prof_mpi_reduce_double(m, &bad, 1) != HEXI_OK || bad)
		return rv != HEXI_OK ? rv
				     : hexi_error(HEXI_ERR_MISMATCH,
						  "NCCL check failed on "
						  "another rank");
	meas_init(ms,
		  a->sendrecv ? "nccl.sendrecv.busbw" : "nccl.allreduce.busbw",
		  dev, "GB/s");
	snprintf(ms->shape, sizeof(ms->shape), "%zuB", bytes);
	if ((rv = hexi_prof_time(nccl_once, a, o->warmup, o->repeats,
				 &ms->stat)) != HEXI_OK)
		return rv;
	ms->value = (double)bytes / ms->stat.median_s / 1e9 * factor;
	ms->best = (double)bytes / ms->stat.min_s / 1e9 * factor;
	if (bytes <= 64) {
		/* small messages: the figure that matters is the time */
		snprintf(ms->name, sizeof(ms->name), "%s",
			 a->sendrecv ? "nccl.sendrecv.lat"
				     : "nccl.allreduce.lat");
		snprintf(ms->unit, sizeof(ms->unit), "s");
		ms->value = ms->stat.median_s;
		ms->best = ms->stat.min_s;
	}
	return a->rank == 0 ? hexi_prof_report_add(r, ms) : HEXI_OK;
}

hexi_rc hexi_prof_nccl(hexi_prof_mpi *m, const hexi_prof_opts *o, int device,
		       hexi_profile *p, hexi_prof_report *r)
{
	nccl_arg a = {
	    NULL, NULL, hexi_prof_mpi_rank(m), hexi_prof_mpi_size(m), 0, NULL,
	    NULL, 0};
	size_t big = o->max_msg_bytes & ~(size_t)3;
	ncclUniqueId id;
	hexi_prof_meas ms;
	hexi_rc rv;
	int multi = hexi_prof_mpi_nnodes(m) > 1;

	if (a.size < 2)
		return HEXI_OK;
	if ((rv = hexi_cuda_err(cudaSetDevice(device), "cudaSetDevice")))
		return rv;
	memset(&id, 0, sizeof(id));
	if (a.rank == 0 &&
	    (rv = nccl_err(ncclGetUniqueId(&id), "ncclGetUniqueId")) != HEXI_OK)
		return rv;
	if ((rv = hexi_prof_mpi_bcast(m, &id, sizeof(id), 0)) != HEXI_OK)
		return rv;
	if ((rv = nccl_err(ncclCommInitRank(&a.comm, a.size, id, a.rank),
			   "ncclCommInitRank")) ||
	    (rv = hexi_cuda_err(cudaStreamCreate(&a.s), "cudaStreamCreate")) ||
	    (rv = hexi_cuda_err(cudaMalloc((void **)&a.send, big),
				"cudaMalloc")) ||
	    (rv = hexi_cuda_err(cudaMalloc((void **)&a.recv, big),
				"cudaMalloc")))
		goto out;
	for (a.sendrecv = 0; a.sendrecv <= 1 && rv == HEXI_OK; a.sendrecv++)
		rv = nccl_bench(m, o, &a, big, device, r, &ms);
	if (rv != HEXI_OK)
		goto out;
	/* ms holds the large sendrecv: the link bandwidth of the ring, from
	 * its time (ms.value is that time itself where -s is 64 bytes, the
	 * row then being a latency: stored as a bandwidth it made every
	 * plan's transfers take days) */
	if (big < HEXI_PROF_BW_MIN_BYTES)
		hexi_log(HEXI_LOG_WARN,
			 "NCCL link: --max-msg %zu bytes is below 1M, mostly "
			 "latency: its bandwidth is reported, not recorded in "
			 "the profile",
			 big);
	else if (multi)
		p->inter_bw_gbps = (double)big / ms.stat.median_s / 1e9;
	else
		p->intra_bw_gbps = (double)big / ms.stat.median_s / 1e9;
	a.sendrecv = 1;
	if ((rv = nccl_bench(m, o, &a, 8, device, r, &ms)) != HEXI_OK)
		goto out;
	if (multi)
		p->inter_lat_s = ms.stat.median_s;
	else
		p->intra_lat_s = ms.stat.median_s;
	a.sendrecv = 0;
	rv = nccl_bench(m, o, &a, 8, device, r, &ms);
out:
	if (a.comm != NULL)
		ncclCommDestroy(a.comm);
	if (a.s != NULL)
		cudaStreamDestroy(a.s);
	cudaFree(a.send);
	cudaFree(a.recv);
	return rv;
}

#else /* !HAVE_CUDA */

hexi_rc hexi_prof_gpu_count(int *n)
{
	*n = 0;
	return hexi_error(HEXI_ERR_UNSUPPORTED,
			  "GPU mode: built without CUDA (configure "
			  "--with-cuda)");
}

hexi_rc hexi_prof_gpu_run(const hexi_prof_opts *o, const int *devices, int ndev,
			  hexi_profile *p, hexi_prof_report *r)
{
	return hexi_prof_gpu_count(&ndev);
}

hexi_rc hexi_prof_nccl(hexi_prof_mpi *m, const hexi_prof_opts *o, int device,
		       hexi_profile *p, hexi_prof_report *r)
{
	return hexi_prof_gpu_count(&device);
}

#endif
