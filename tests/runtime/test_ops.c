/*
 * test_ops.c - every CPU operator's backward against central finite
 * differences of its forward.
 *
 * For an op with output y, the objective is L = sum(y * r) with a fixed
 * random r, evaluated in double from the fp32 forward.  The analytic
 * gradient is the op's backward with dout = r.  Each input element is moved
 * by +-eps (eps = 1e-2 in fp32, the step actually taken is used) and
 * fd = (L+ - L-) / (2 eps) in double.  Pass: ||fd - g|| / ||g|| <= 5e-4
 * over the checked elements AND every |fd - g| <= 1e-3 * max(1, max|g|).
 * The truncation error of the step is O(eps^2) ~ 1e-4 relative and fp32
 * rounding of L is ~1e-6 absolute, so both bounds have a margin of ~10x
 * while a wrong factor, sign or index fails by orders of magnitude.
 */
#include "config.h"

#include "rt_ops.h"
#include "tap.h"

#include <stdint.h>

#define FD_EPS	1e-2f
#define FD_RTOL 5e-4
#define FD_ATOL 1e-3

static uint64_t rng_state = 0x12345678abcdefULL;

static float frand(void) /* uniform [-1, 1) */
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)(rng_state >> 40) * 0x1p-23f - 1.0f;
}

static float *rvec(size_t n, float scale)
{
	float *p = malloc(n * sizeof(float));
	if (!p)
		tap_bail("out of memory");
	for (size_t i = 0; i < n; i++)
		p[i] = frand() * scale;
	return p;
}

static float *zvec(size_t n)
{
	float *p = calloc(n, sizeof(float));
	if (!p)
		tap_bail("out of memory");
	return p;
}

/* An op under test: fwd fills out (nout) from the context's inputs. */
typedef struct op {
	void (*fwd)(struct op *o);
	float *out, *r; /* (nout) output, projection */
	size_t nout;
	/* op-specific fields */
	float *a, *b, *c, *w, *aux;
	int *ids;
	int d0, d1, d2, d3, d4;
} op;

static double objective(op *o)
{
	o->fwd(o);
	double s = 0.0;
	for (size_t i = 0; i < o->nout; i++)
		s += (double)o->out[i] * o->r[i];
	return s;
}

/* Compare g (n) with central differences of the objective wrt x (n). */
static void check_grad(op *o, const char *what, float *x, const float *g,
		       size_t n)
{
	double num = 0.0, den = 0.0, gmax = 0.0, emax = 0.0;
	for (size_t i = 0; i < n; i++)
		if (fabs(g[i]) > gmax)
			gmax = fabs(g[i]);
	for (size_t i = 0; i < n; i++) {
		float old = x[i];
		float xp = old + FD_EPS, xm = old - FD_EPS;
		x[i] = xp;
		double lp = objective(o);
		x[i] = xm;
		double lm = objective(o);
		x[i] = old;
		double fd = (lp - lm) / ((double)xp - (double)xm);
		double e = fabs(fd - g[i]);
		num += e * e;
		den += (double)g[i] * g[i];
		if (e > emax)
			emax = e;
	}
	o->fwd(o);
	double rel = den > 0 ? sqrt(num / den) : sqrt(num);
	ok(rel <= FD_RTOL && emax <= FD_ATOL * (gmax > 1 ? gmax : 1),
	   "%s: |fd-g|/|g| = %.2e, max err %.2e (max|g| %.3g)", what, rel, emax,
	   gmax);
}

/* ---- GEMM ------------------------------------------------------------- */

static void test_sgemm(void)
{
	const int M = 7, N = 5, K = 9;
	const size_t nc = (size_t)M * N;
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			float *A = rvec((size_t)M * K, 1);
			float *B = rvec((size_t)K * N, 1);
			float *C0 = rvec(nc, 1), *C1 = zvec(nc), *C2 = zvec(nc);
			int lda = ta ? M : K, ldb = tb ? K : N;
			memcpy(C1, C0, nc * sizeof(float));
			memcpy(C2, C0, nc * sizeof(float));
			rt_sgemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 0.25f,
				 C1, N);
			rt_sgemm_ref(ta, tb, M, N, K, 0.5f, A, lda, B, ldb,
				     0.25f, C2, N);
			double emax = 0.0;
			for (int i = 0; i < M * N; i++) {
				int r = i / N, c = i % N;
				double acc = 0.25 * C0[i];
				for (int p = 0; p < K; p++)
					acc +=
					    0.5 *
					    (ta ? A[p * M + r] : A[r * K + p]) *
					    (tb ? B[c * K + p] : B[p * N + c]);
				emax = fmax(emax, fabs(C1[i] - acc));
				emax = fmax(emax, fabs(C2[i] - acc));
			}
			ok(emax < 1e-5,
			   "sgemm ta=%d tb=%d (blas %d) and ref vs double: max "
			   "diff %.2e",
			   ta, tb, rt_sgemm_is_blas(), emax);
			free(A);
			free(B);
			free(C0);
			free(C1);
			free(C2);
		}
}

/* ---- matmul ----------------------------------------------------------- */

static void fwd_matmul(op *o)
{
	rt_matmul_forward(o->out, o->a, o->w, o->d0, o->d1, o->d2);
}

static void fwd_matmul_tw(op *o)
{
	rt_matmul_tw_forward(o->out, o->a, o->w, o->d0, o->d1, o->d2);
}

static void test_matmul(int tw)
{
	const int BT = 6, C = 5, OC = 4;
	op o = {.fwd = tw ? fwd_matmul_tw : fwd_matmul,
		.d0 = BT,
		.d1 = C,
		.d2 = OC};
	o.nout = (size_t)BT * OC;
	o.out = zvec(o.nout);
	o.r = rvec(o.nout, 1);
	o.a = rvec((size_t)BT * C, 1);
	o.w = rvec((size_t)C * OC, 1);
	float *da = zvec((size_t)BT * C), *dw = zvec((size_t)C * OC);
	if (tw)
		rt_matmul_tw_backward(da, dw, o.r, o.a, o.w, BT, C, OC);
	else
		rt_matmul_backward(da, dw, o.r, o.a, o.w, BT, C, OC);
	check_grad(&o, tw ? "matmul_tw dinp" : "matmul dinp", o.a, da,
		   (size_t)BT * C);
	check_grad(&o, tw ? "matmul_tw dw" : "matmul dw", o.w, dw,
		   (size_t)C * OC);
	/* backward accumulates: a second call doubles the gradients */
	float d0 = da[3], w0 = dw[2];
	if (tw)
		rt_matmul_tw_backward(da, dw, o.r, o.a, o.w, BT, C, OC);
	else
		rt_matmul_backward(da, dw, o.r, o.a, o.w, BT, C, OC);
	ok(fabsf(da[3] - 2 * d0) < 1e-5f && fabsf(dw[2] - 2 * w0) < 1e-5f,
	   "%s backward accumulates", tw ? "matmul_tw" : "matmul");
	free(o.out);
	free(o.r);
	free(o.a);
	free(o.w);
	free(da);
	free(dw);
}

/* ---- embedding -------------------------------------------------------- */

static void fwd_embed(op *o)
{
	rt_embed_forward(o->out, o->ids, o->w, o->d0, o->d1);
}

static void test_embed(void)
{
	const int BT = 7, C = 4, V = 5;
	int ids[7] = {0, 3, 3, 1, 4, 0, 3};
	op o = {.fwd = fwd_embed, .d0 = BT, .d1 = C, .ids = ids};
	o.nout = (size_t)BT * C;
	o.out = zvec(o.nout);
	o.r = rvec(o.nout, 1);
	o.w = rvec((size_t)V * C, 1);
	float *dw = zvec((size_t)V * C);
	rt_embed_backward(dw, o.r, ids, BT, C);
	check_grad(&o, "embed dwte", o.w, dw, (size_t)V * C);
	o.fwd(&o);
	ok(o.out[1 * C + 2] == o.w[3 * C + 2], "embed row copy");
	free(o.out);
	free(o.r);
	free(o.w);
	free(dw);
}

/* ---- rmsnorm ---------------------------------------------------------- */

static void fwd_rmsnorm(op *o)
{
	rt_rmsnorm_forward(o->out, o->aux, o->a, o->w, o->d0, o->d1,
			   RT_NORM_EPS);
}

static void test_rmsnorm(void)
{
	const int BT = 5, C = 8;
	op o = {.fwd = fwd_rmsnorm, .d0 = BT, .d1 = C};
	o.nout = (size_t)BT * C;
	o.out = zvec(o.nout);
	o.r = rvec(o.nout, 1);
	o.a = rvec(o.nout, 2);
	o.w = rvec(C, 1);
	o.aux = zvec(BT);
	float *da = zvec(o.nout), *dw = zvec(C);
	o.fwd(&o);
	rt_rmsnorm_backward(da, dw, o.r, o.a, o.w, o.aux, BT, C);
	check_grad(&o, "rmsnorm dinp", o.a, da, o.nout);
	check_grad(&o, "rmsnorm dw", o.w, dw, C);
	double ss = 0;
	for (int c = 0; c < C; c++)
		ss += (double)o.a[C + c] * o.a[C + c];
	is_near(o.aux[1], 1.0 / sqrt(ss / C + RT_NORM_EPS), 1e-6,
		"rmsnorm rstd value");
	free(o.out);
	free(o.r);
	free(o.a);
	free(o.w);
	free(o.aux);
	free(da);
	free(dw);
}

/* ---- RoPE ------------------------------------------------------------- */

static void fwd_rope(op *o)
{
	memcpy(o->out, o->a, o->nout * sizeof(float));
	rt_rope_forward(o->out, o->d0, o->d1, o->d2, o->d3, RT_ROPE_THETA);
}

static void test_rope(void)
{
	const int B = 2, T = 5, NH = 3, hs = 4;
	op o = {.fwd = fwd_rope, .d0 = B, .d1 = T, .d2 = NH, .d3 = hs};
	o.nout = (size_t)B * T * NH * hs;
	o.out = zvec(o.nout);
	o.r = rvec(o.nout, 1);
	o.a = rvec(o.nout, 1);
	float *da = zvec(o.nout);
	memcpy(da, o.r, o.nout * sizeof(float));
	rt_rope_backward(da, B, T, NH, hs, RT_ROPE_THETA);
	check_grad(&o, "rope dinp", o.a, da, o.nout);
	o.fwd(&o);
	/* position 0 is not rotated; position 1, pair 0 turns by 1 rad */
	size_t p1 = (size_t)(1 * NH + 0) * hs;
	ok(o.out[0] == o.a[0] && o.out[1] == o.a[1] &&
	       fabsf(o.out[p1] - (o.a[p1] * cosf(1) - o.a[p1 + 1] * sinf(1))) <
		   1e-6f,
	   "rope angles (t=0 identity, t=1 pair 0 by 1 rad)");
	free(o.out);
	free(o.r);
	free(o.a);
	free(da);
}

/* ---- attention -------------------------------------------------------- */

static void fwd_attn(op *o)
{
	rt_attention_forward(o->out, o->aux, o->a, o->b, o->c, o->d0, o->d1,
			     o->d2, o->d3, o->d4);
}

static void test_attention(int NH, int NKV)
{
	const int B = 2, T = 5, hs = 4;
	char name[64];
	op o = {
	    .fwd = fwd_attn, .d0 = B, .d1 = T, .d2 = NH, .d3 = NKV, .d4 = hs};
	size_t nq = (size_t)B * T * NH * hs, nkv = (size_t)B * T * NKV * hs;
	o.nout = nq;
	o.out = zvec(nq);
	o.r = rvec(nq, 1);
	o.a = rvec(nq, 1);
	o.b = rvec(nkv, 1);
	o.c = rvec(nkv, 1);
	o.aux = zvec((size_t)B * NH * T * T);
	float *dq = zvec(nq), *dk = zvec(nkv), *dv = zvec(nkv);
	o.fwd(&o);
	rt_attention_backward(dq, dk, dv, o.r, o.a, o.b, o.c, o.aux, B, T, NH,
			      NKV, hs);
	snprintf(name, sizeof(name), "attention H%d KV%d dq", NH, NKV);
	check_grad(&o, name, o.a, dq, nq);
	snprintf(name, sizeof(name), "attention H%d KV%d dk", NH, NKV);
	check_grad(&o, name, o.b, dk, nkv);
	snprintf(name, sizeof(name), "attention H%d KV%d dv", NH, NKV);
	check_grad(&o, name, o.c, dv, nkv);
	/* the GEMM version with a workspace gives the same gradients */
	float *dq2 = zvec(nq), *dk2 = zvec(nkv), *dv2 = zvec(nkv);
	float *work = rvec((size_t)T * T, 1); /* junk: must be overwritten */
	rt_attention_backward_ws(dq2, dk2, dv2, work, o.r, o.a, o.b, o.c, o.aux,
				 B, T, NH, NKV, hs);
	snprintf(name, sizeof(name), "attention_ws H%d KV%d dq", NH, NKV);
	check_grad(&o, name, o.a, dq2, nq);
	snprintf(name, sizeof(name), "attention_ws H%d KV%d dk", NH, NKV);
	check_grad(&o, name, o.b, dk2, nkv);
	snprintf(name, sizeof(name), "attention_ws H%d KV%d dv", NH, NKV);
	check_grad(&o, name, o.c, dv2, nkv);
	double dmax = 0.0;
	for (size_t i = 0; i < nq; i++)
		dmax = fmax(dmax, fabs(dq[i] - dq2[i]));
	for (size_t i = 0; i < nkv; i++)
		dmax = fmax(dmax,
			    fmax(fabs(dk[i] - dk2[i]), fabs(dv[i] - dv2[i])));
	ok(dmax < 1e-5,
	   "attention H%d KV%d: loop and GEMM backward agree (%.1e)", NH, NKV,
	   dmax);
	free(dq2);
	free(dk2);
	free(dv2);
	free(work);
	/* causal rows: probabilities sum to 1, nothing above the diagonal */
	double worst = 0.0;
	int leak = 0;
	for (int r = 0; r < B * NH * T; r++) {
		int t = r % T;
		double s = 0.0;
		for (int t2 = 0; t2 < T; t2++) {
			s += o.aux[(size_t)r * T + t2];
			leak |= t2 > t && o.aux[(size_t)r * T + t2] != 0.0f;
		}
		if (fabs(s - 1.0) > worst)
			worst = fabs(s - 1.0);
	}
	ok(worst < 1e-6 && !leak, "attention H%d KV%d causal softmax rows", NH,
	   NKV);
	free(o.out);
	free(o.r);
	free(o.a);
	free(o.b);
	free(o.c);
	free(o.aux);
	free(dq);
	free(dk);
	free(dv);
}

/* ---- SwiGLU, residual ------------------------------------------------- */

static void fwd_swiglu(op *o)
{
	rt_swiglu_forward(o->out, o->a, o->b, o->nout);
}

static void fwd_residual(op *o)
{
	rt_residual_forward(o->out, o->a, o->b, o->nout);
}

static void test_pointwise(int swiglu)
{
	const size_t N = 24;
	op o = {.fwd = swiglu ? fwd_swiglu : fwd_residual, .nout = N};
	o.out = zvec(N);
	o.r = rvec(N, 1);
	o.a = rvec(N, 3);
	o.b = rvec(N, 1);
	float *da = zvec(N), *db = zvec(N);
	if (swiglu)
		rt_swiglu_backward(da, db, o.r, o.a, o.b, N);
	else
		rt_residual_backward(da, db, o.r, N);
	check_grad(&o, swiglu ? "swiglu dgate" : "residual da", o.a, da, N);
	check_grad(&o, swiglu ? "swiglu dup" : "residual db", o.b, db, N);
	free(o.out);
	free(o.r);
	free(o.a);
	free(o.b);
	free(da);
	free(db);
}

/* ---- cross-entropy ---------------------------------------------------- */

static void fwd_ce(op *o)
{
	rt_crossentropy_forward(o->out, o->aux, o->a, o->ids, o->d0, o->d1);
}

static void test_crossentropy(void)
{
	const int BT = 6, V = 7;
	const float dloss = 0.7f;
	int tg[6] = {0, 6, 2, 2, 5, 1};
	op o = {.fwd = fwd_ce, .d0 = BT, .d1 = V, .ids = tg};
	o.nout = BT;
	o.out = zvec(BT);
	o.r = zvec(BT);
	for (int i = 0; i < BT; i++)
		o.r[i] = dloss;
	o.a = rvec((size_t)BT * V, 3);
	o.aux = zvec((size_t)BT * V);
	float *dl = zvec((size_t)BT * V);
	o.fwd(&o);
	rt_crossentropy_backward(dl, o.aux, tg, dloss, BT, V);
	check_grad(&o, "crossentropy dlogits", o.a, dl, (size_t)BT * V);
	double s = 0.0;
	for (int j = 0; j < V; j++)
		s += exp((double)o.a[2 * V + j]);
	is_near(o.out[2], log(s) - o.a[2 * V + 2], 1e-5,
		"crossentropy loss value");
	free(o.out);
	free(o.r);
	free(o.a);
	free(o.aux);
	free(dl);
}

int main(void)
{
	test_sgemm();
	test_matmul(0);
	test_matmul(1);
	test_embed();
	test_rmsnorm();
	test_rope();
	test_attention(4, 4);
	test_attention(6, 2);
	test_pointwise(1);
	test_pointwise(0);
	test_crossentropy();
	return tap_done();
}
