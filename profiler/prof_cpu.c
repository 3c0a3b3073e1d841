/*
 * prof_cpu.c - CPU mode: OpenBLAS sgemm GFLOP/s over several shapes, each
 * validated on a sample of entries against a double-precision reference
 * before it is timed.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_prof.h"

#ifdef HAVE_OPENBLAS
#include <cblas.h>

/* OpenBLAS extension (declared in its cblas.h on Debian; repeated here so
 * other cblas.h variants compile). */
int openblas_get_num_threads(void);

#define SAMPLES 64
/* fp32 accumulation error grows ~ sqrt(K) eps relative to sum |a b|; a
 * wrong result (transposed operand, missing block) is O(1). */
#define SGEMM_TOL(k) (2e-6 * sqrt((double)(k)) + 1e-6)

typedef struct gemm_arg {
	long m, n, k;
	int ta, tb;	  /* A stored (k,m), B stored (n,k) */
	int acc;	  /* beta 1: C += A B */
	float *a, *b, *c; /* A(m,k) B(k,n) C(m,n), row-major */
} gemm_arg;

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 33;
}

static void fill(float *x, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)((double)lcg(&seed) / 2147483648.0 * 2.0 - 1.0);
}

static hexi_rc run_sgemm(void *p)
{
	gemm_arg *g = p;

	cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
		    g->tb ? CblasTrans : CblasNoTrans, (int)g->m, (int)g->n,
		    (int)g->k, 1.0f, g->a, (int)(g->ta ? g->m : g->k), g->b,
		    (int)(g->tb ? g->k : g->n), g->acc ? 1.0f : 0.0f, g->c,
		    (int)g->n);
	return HEXI_OK;
}

/* Max over a sample of |c - ref| / sum_k |a b|. */
static double sgemm_error(const gemm_arg *g)
{
	uint64_t seed = 12345;
	double worst = 0;

	for (int s = 0; s < SAMPLES; s++) {
		long i = (long)(lcg(&seed) % (uint64_t)g->m);
		long j = (long)(lcg(&seed) % (uint64_t)g->n);
		double ref = 0, mag = 0, e;

		for (long k = 0; k < g->k; k++) {
			double t =
			    (double)g->a[g->ta ? k * g->m + i : i * g->k + k] *
			    (double)g->b[g->tb ? j * g->k + k : k * g->n + j];
			ref += t;
			mag += fabs(t);
		}
		e = fabs((double)g->c[i * g->n + j] - ref) /
		    (mag > 0 ? mag : 1.0);
		if (!(e <= worst)) /* NaN propagates as worst */
			worst = e;
	}
	return worst;
}

static hexi_rc gemm_alloc(gemm_arg *g, long m, long n, long k)
{
	g->m = m;
	g->n = n;
	g->k = k;
	g->a = malloc((size_t)(m * k) * sizeof(float));
	g->b = malloc((size_t)(k * n) * sizeof(float));
	g->c = malloc((size_t)(m * n) * sizeof(float));
	if (g->a == NULL || g->b == NULL || g->c == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "sgemm %ldx%ldx%ld: buffers",
				  m, n, k);
	fill(g->a, (size_t)(m * k), 1);
	fill(g->b, (size_t)(k * n), 2);
	return HEXI_OK;
}

static void gemm_free(gemm_arg *g)
{
	free(g->a);
	free(g->b);
	free(g->c);
}

hexi_rc hexi_prof_cpu_sgemm_check(long m, long n, long k, double *err)
{
	gemm_arg g = {0};
	hexi_rc rv;

	if ((rv = gemm_alloc(&g, m, n, k)) != HEXI_OK)
		goto out;
	run_sgemm(&g);
	*err = sgemm_error(&g);
	rv = HEXI_OK;
out:
	gemm_free(&g);
	return rv;
}

static hexi_rc one_shape(const hexi_prof_opts *o, const hexi_prof_shape *s,
			 hexi_prof_meas *m)
{
	gemm_arg g = {0};
	hexi_rc rv;
	double flop = 2.0 * (double)s->m * (double)s->n * (double)s->k;

	memset(m, 0, sizeof(*m));
	m->device = -1;
	snprintf(m->name, sizeof(m->name), "cpu.sgemm");
	snprintf(
	    m->shape, sizeof(m->shape), "%ldx%ldx%ld%s%s", s->m, s->n, s->k,
	    s->ta || s->tb || s->acc
		? (s->ta ? (s->tb ? ":tt" : ":tn") : (s->tb ? ":nt" : ":nn"))
		: "",
	    s->acc ? "a" : "");
	snprintf(m->unit, sizeof(m->unit), "GFLOP/s");
	if ((rv = gemm_alloc(&g, s->m, s->n, s->k)) != HEXI_OK)
		goto out;
	g.ta = s->ta;
	g.tb = s->tb;
	g.acc = s->acc;
	/* with beta 1 the check run accumulates into zeros: C = A B */
	memset(g.c, 0, (size_t)(s->m * s->n) * sizeof(float));
	run_sgemm(&g);
	m->check_err = sgemm_error(&g);
	if (!(m->check_err <= SGEMM_TOL(s->k))) {
		rv = hexi_error(HEXI_ERR_MISMATCH,
				"sgemm %s: result check failed: relative "
				"error %.3g > %.3g",
				m->shape, m->check_err, SGEMM_TOL(s->k));
		goto out;
	}
	rv = hexi_prof_time_min(run_sgemm, &g, o->warmup, o->repeats,
				o->min_sample_s, &m->stat);
	if (rv != HEXI_OK)
		goto out;
	m->value = flop / m->stat.median_s / 1e9;
	m->best = flop / m->stat.min_s / 1e9;
out:
	gemm_free(&g);
	return rv;
}

typedef struct elt_arg {
	size_t n;
	float *a, *b, *c, *m, *v;
} elt_arg;

/* The element-wise work of a training step as the CPU runtime does it
 * (scalar loops with expf/sqrtf, not STREAM-like copies): a SwiGLU
 * forward a = silu(b) * c (12 bytes per element) and an AdamW update of
 * parameters b with gradients c and moments m, v (28 bytes per element). */
static hexi_rc run_elt(void *p)
{
	elt_arg *t = p;

	for (size_t i = 0; i < t->n; i++)
		t->a[i] = t->b[i] / (1.0f + expf(-t->b[i])) * t->c[i];
	for (size_t i = 0; i < t->n; i++) {
		float g = t->c[i];
		t->m[i] = 0.9f * t->m[i] + 0.1f * g;
		t->v[i] = 0.999f * t->v[i] + 0.001f * g * g;
		t->b[i] -= 1e-3f * (t->m[i] / (sqrtf(t->v[i]) + 1e-8f) +
				    0.01f * t->b[i]);
	}
	return HEXI_OK;
}

/* Largest relative error of one run from fresh inputs, on a sample. */
static double elt_error(elt_arg *t)
{
	double worst = 0;

	fill(t->b, t->n, 7);
	fill(t->c, t->n, 8);
	memset(t->m, 0, t->n * sizeof(float));
	memset(t->v, 0, t->n * sizeof(float));
	run_elt(t);
	fill(t->b, t->n, 7);
	for (size_t i = 0; i < t->n; i += 1 + t->n / SAMPLES) {
		double x = t->b[i], g = t->c[i];
		double want = x / (1.0 + exp(-x)) * g, m = 0.1 * g;
		double e = fabs(t->a[i] - want) / (fabs(want) + 1e-6) +
			   fabs(t->m[i] - m) / (fabs(m) + 1e-6);
		worst = e > worst ? e : worst;
	}
	return worst;
}

/* Effective memory bandwidth of the runtime's element-wise kernels on one
 * thread (bytes they move over their time), working set o->membw_bytes:
 * what the cost model's memory-bound terms divide by on this CPU. */
static hexi_rc mem_bw(const hexi_prof_opts *o, hexi_profile *p,
		      hexi_prof_report *r)
{
	elt_arg t = {0};
	hexi_prof_meas m;
	hexi_rc rv = HEXI_OK;
	double bytes;

	t.n = o->membw_bytes / (5 * sizeof(float));
	if (t.n < 1024)
		t.n = 1024;
	bytes = 40.0 * (double)t.n;
	t.a = malloc(t.n * sizeof(float));
	t.b = malloc(t.n * sizeof(float));
	t.c = malloc(t.n * sizeof(float));
	t.m = malloc(t.n * sizeof(float));
	t.v = malloc(t.n * sizeof(float));
	if (!t.a || !t.b || !t.c || !t.m || !t.v) {
		rv = hexi_error(HEXI_ERR_NOMEM, "memory bandwidth: %zu floats",
				t.n);
		goto out;
	}
	memset(&m, 0, sizeof(m));
	m.device = -1;
	snprintf(m.name, sizeof(m.name), "cpu.membw");
	snprintf(m.shape, sizeof(m.shape), "%.0fB", 5.0 * 4.0 * t.n);
	snprintf(m.unit, sizeof(m.unit), "GB/s");
	m.check_err = elt_error(&t);
	if (!(m.check_err <= 1e-4)) {
		rv = hexi_error(HEXI_ERR_MISMATCH,
				"memory bandwidth: element-wise check failed: "
				"relative error %.3g",
				m.check_err);
		goto out;
	}
	rv = hexi_prof_time_min(run_elt, &t, o->warmup, o->repeats,
				o->min_sample_s, &m.stat);
	if (rv != HEXI_OK)
		goto out;
	m.value = bytes / m.stat.median_s / 1e9;
	m.best = bytes / m.stat.min_s / 1e9;
	p->cpu_mem_bw_gbps = m.value;
	rv = hexi_prof_report_add(r, &m);
out:
	free(t.a);
	free(t.b);
	free(t.c);
	free(t.m);
	free(t.v);
	return rv;
}

hexi_rc hexi_prof_cpu(const hexi_prof_opts *o, hexi_profile *p,
		      hexi_prof_report *r)
{
	hexi_prof_shape shapes[2 * HEXI_PROF_MAX_SHAPES];
	int n = hexi_prof_default_shapes("cpu", o->quick, shapes,
					 HEXI_PROF_MAX_SHAPES);
	double best = 0, flop = 0, time_s = 0;

	if (o->only_given)
		n = 0;
	for (int i = 0; i < o->nshapes; i++)
		shapes[n++] = o->shapes[i];
	for (int i = 0; i < n; i++) {
		hexi_prof_meas m;
		hexi_rc rv = one_shape(o, &shapes[i], &m);

		if (rv != HEXI_OK)
			return rv;
		if ((rv = hexi_prof_report_add(r, &m)) != HEXI_OK)
			return rv;
		/* The cost model wants what the model's GEMMs sustain: the
		 * best median over the shapes, or (rate_mean) all of their
		 * FLOPs over all of their median times. */
		if (m.value > best)
			best = m.value;
		flop += 2.0 * shapes[i].m * shapes[i].n * shapes[i].k;
		time_s += m.stat.median_s;
	}
	p->cpu_gemm_gflops =
	    o->rate_mean && time_s > 0 ? flop / time_s / 1e9 : best;
	p->cpu_threads = openblas_get_num_threads();
	return mem_bw(o, p, r);
}

#else /* !HAVE_OPENBLAS */

hexi_rc hexi_prof_cpu(const hexi_prof_opts *o, hexi_profile *p,
		      hexi_prof_report *r)
{
	return hexi_error(HEXI_ERR_UNSUPPORTED,
			  "CPU mode: built without OpenBLAS (configure "
			  "--with-openblas)");
}

hexi_rc hexi_prof_cpu_sgemm_check(long m, long n, long k, double *err)
{
	return hexi_error(HEXI_ERR_UNSUPPORTED, "built without OpenBLAS");
}

#endif
