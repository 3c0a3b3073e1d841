/*
 * test_kernels.c - every CUDA kernel of runtime/cuda against its CPU
 * reference (runtime/rt_ops.h, rt_param_adamw, rt_sgemm_ref), in fp32 and
 * bf16.  The inputs are rounded to the dtype first and the CPU reference
 * computes in fp32 from those same values, so the tolerance only covers
 * the GPU's arithmetic order and the rounding of outputs:
 *
 *   fp32: |gpu - cpu| <= 1e-5 + 1e-4 |cpu|   (2e-4 for GEMM and attention)
 *   bf16: |gpu - cpu| <= 2e-2 + 2e-2 |cpu|   (outputs keep 8 mantissa bits)
 *
 * Prints TAP lines; exits 0 if all pass, 1 if any fails, 77 (with the
 * reason) when there is no usable CUDA device, 99 on a setup error.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_bf16.h"
#include "rt_cuda.h"
#include "rt_model.h"
#include "rt_ops.h"

static int ntest, nfail;
static rt_cuda *ctx;
static rt_cuda_stream S;

#define CHECK(call)                                                            \
	do {                                                                   \
		hexi_rc rc_ = (call);                                          \
		if (rc_ != HEXI_OK) {                                          \
			printf("Bail out! %s: %s\n", #call, hexi_errmsg(rc_)); \
			exit(99);                                              \
		}                                                              \
	} while (0)

typedef struct tol {
	double atol, rtol;
} tol;

static tol tol_of(rt_cuda_dtype dt, int heavy)
{
	if (dt == RT_CUDA_BF16)
		return (tol){2e-2, 2e-2};
	return (tol){1e-5, heavy ? 2e-4 : 1e-4};
}

static void compare(const char *what, rt_cuda_dtype dt, const float *got,
		    const float *want, size_t n, tol t)
{
	double worst = 0;
	size_t at = 0;

	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - want[i]) /
			   (t.atol + t.rtol * fabs((double)want[i]));
		if (!(e <= worst)) {
			worst = e;
			at = i;
		}
	}
	ntest++;
	if (worst <= 1.0) {
		printf("ok %d - %s %s (worst %.3g of tolerance)\n", ntest, what,
		       rt_cuda_dtype_name(dt), worst);
		return;
	}
	nfail++;
	printf("not ok %d - %s %s: element %zu got %.7g want %.7g "
	       "(atol %g rtol %g)\n",
	       ntest, what, rt_cuda_dtype_name(dt), at, (double)got[at],
	       (double)want[at], t.atol, t.rtol);
}

/* ---- host helpers ----------------------------------------------------------
 */

static uint64_t seed_state = 42;

static float urand(void)
{
	seed_state =
	    seed_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((double)(seed_state >> 33) / 2147483648.0 * 2.0 - 1.0);
}

static float bf16_round(float f)
{
	return hexi_bf16_to_float(hexi_bf16_from_float(f));
}

/* Random values in [-scale, scale], representable in dt. */
static float *hrand(size_t n, float scale, rt_cuda_dtype dt)
{
	float *x = malloc((n ? n : 1) * sizeof(float));

	if (x == NULL) {
		printf("Bail out! out of memory\n");
		exit(99);
	}
	for (size_t i = 0; i < n; i++) {
		x[i] = urand() * scale;
		if (dt == RT_CUDA_BF16)
			x[i] = bf16_round(x[i]);
	}
	return x;
}

static float *hcopy(const float *x, size_t n)
{
	float *y = hrand(n, 0, RT_CUDA_F32);

	memcpy(y, x, n * sizeof(float));
	return y;
}

/* Device copy of host floats, converted to dt. */
static void *dev(const float *h, size_t n, rt_cuda_dtype dt)
{
	void *tmp = NULL, *d = NULL;

	CHECK(rt_cuda_alloc(&tmp, n * sizeof(float)));
	CHECK(rt_cuda_upload(tmp, h, n * sizeof(float)));
	if (dt == RT_CUDA_F32)
		return tmp;
	CHECK(rt_cuda_alloc(&d, n * rt_cuda_dtype_size(dt)));
	CHECK(rt_cuda_cast(S, d, dt, tmp, RT_CUDA_F32, n));
	CHECK(rt_cuda_sync(S));
	rt_cuda_free(tmp);
	return d;
}

/* Host floats of a device array of type dt (freed by the caller). */
static float *host(const void *d, size_t n, rt_cuda_dtype dt)
{
	float *h = hrand(n, 0, RT_CUDA_F32);
	void *tmp = NULL;

	CHECK(rt_cuda_sync(S));
	if (dt == RT_CUDA_F32) {
		CHECK(rt_cuda_download(h, d, n * sizeof(float)));
		return h;
	}
	CHECK(rt_cuda_alloc(&tmp, n * sizeof(float)));
	CHECK(rt_cuda_cast(S, tmp, RT_CUDA_F32, d, dt, n));
	CHECK(rt_cuda_sync(S));
	CHECK(rt_cuda_download(h, tmp, n * sizeof(float)));
	rt_cuda_free(tmp);
	return h;
}

static void *dev_f32(const float *h, size_t n)
{
	return dev(h, n, RT_CUDA_F32);
}

/* ---- tests
 * --------------------------------------------------------------------- */

/* Shapes: several columns per thread; more rows than the backward's
 * blocks (rows per block > 1); wider than its register tiles (the
 * one-block-per-row kernel). */
static const struct {
	int BT, C;
} norm_shapes[] = {{37, 300}, {300, 2048}, {3, 9000}};

static void test_rmsnorm_shape(rt_cuda_dtype dt, int BT, int C)
{
	char what[96];
	size_t n = (size_t)BT * C;
	float *x = hrand(n, 2, dt), *w = hrand(C, 1, dt), *dy = hrand(n, 1, dt);
	float *dx0 = hrand(n, 1, dt), *dw0 = hrand(C, 1, RT_CUDA_F32);
	float *out = hrand(n, 0, dt), *rstd = hrand(BT, 0, dt);
	float *dx = hcopy(dx0, n), *dw = hcopy(dw0, C), *g;
	void *dX = dev(x, n, dt), *dW = dev(w, C, dt), *dO = dev(out, n, dt);
	void *dDY = dev(dy, n, dt), *dDX = dev(dx0, n, dt);
	float *dR = dev_f32(rstd, BT), *dDW = dev_f32(dw0, C);

	rt_rmsnorm_forward(out, rstd, x, w, BT, C, RT_NORM_EPS);
	CHECK(
	    rt_cuda_rmsnorm_forward(S, dt, dO, dR, dX, dW, BT, C, RT_NORM_EPS));
	snprintf(what, sizeof(what), "rmsnorm_forward out BT%d C%d", BT, C);
	compare(what, dt, g = host(dO, n, dt), out, n, tol_of(dt, 0));
	free(g);
	compare("rmsnorm_forward rstd", dt, g = host(dR, BT, RT_CUDA_F32), rstd,
		BT, tol_of(RT_CUDA_F32, 0));
	free(g);
	rt_rmsnorm_backward(dx, dw, dy, x, w, rstd, BT, C);
	CHECK(
	    rt_cuda_rmsnorm_backward(S, dt, dDX, dDW, dDY, dX, dW, dR, BT, C));
	snprintf(what, sizeof(what), "rmsnorm_backward dinp (+=) BT%d C%d", BT,
		 C);
	compare(what, dt, g = host(dDX, n, dt), dx, n, tol_of(dt, 0));
	free(g);
	snprintf(what, sizeof(what), "rmsnorm_backward dw (+=, fp32) BT%d C%d",
		 BT, C);
	compare(what, dt, g = host(dDW, C, RT_CUDA_F32), dw, C, tol_of(dt, 1));
	free(g);
	free(x), free(w), free(dy), free(dx0), free(dw0), free(out), free(rstd),
	    free(dx), free(dw);
	rt_cuda_free(dX), rt_cuda_free(dW), rt_cuda_free(dO), rt_cuda_free(dDY),
	    rt_cuda_free(dDX), rt_cuda_free(dR), rt_cuda_free(dDW);
}

static void test_rmsnorm(rt_cuda_dtype dt)
{
	for (size_t i = 0; i < sizeof(norm_shapes) / sizeof(*norm_shapes); i++)
		test_rmsnorm_shape(dt, norm_shapes[i].BT, norm_shapes[i].C);
}

static void test_rope(rt_cuda_dtype dt)
{
	const int B = 2, T = 50, NH = 3, hs = 64;
	size_t n = (size_t)B * T * NH * hs;
	float *x = hrand(n, 1, dt), *ref = hcopy(x, n), *g;
	void *dX = dev(x, n, dt);
	float *tab = NULL;

	CHECK(rt_cuda_rope_table_create(T, hs, RT_ROPE_THETA, &tab));
	rt_rope_forward(ref, B, T, NH, hs, RT_ROPE_THETA);
	CHECK(rt_cuda_rope_forward(S, dt, dX, tab, B, T, NH, hs));
	compare("rope_forward", dt, g = host(dX, n, dt), ref, n, tol_of(dt, 0));
	free(g);
	rt_cuda_free(dX);
	dX = dev(x, n, dt);
	memcpy(ref, x, n * sizeof(float));
	rt_rope_backward(ref, B, T, NH, hs, RT_ROPE_THETA);
	CHECK(rt_cuda_rope_backward(S, dt, dX, tab, B, T, NH, hs));
	compare("rope_backward", dt, g = host(dX, n, dt), ref, n,
		tol_of(dt, 0));
	free(g);
	free(x), free(ref);
	rt_cuda_free(dX);
	rt_cuda_free(tab);
}

/* The own kernel (sdpa NULL: backward adds into random dq/dk/dv) or
 * cuDNN's fused attention (backward sets them: they start at zero). */
static void test_attention_shape(rt_cuda_dtype dt, int B, int T, int NH,
				 int NKV, int hs, rt_cuda_sdpa *sdpa)
{
	const float d0 = sdpa != NULL ? 0.0f : 0.5f;
	size_t nq = (size_t)B * T * NH * hs, nk = (size_t)B * T * NKV * hs;
	size_t nrow = (size_t)B * NH * T;
	float *q = hrand(nq, 1, dt), *k = hrand(nk, 1, dt),
	      *v = hrand(nk, 1, dt);
	float *dout = hrand(nq, 1, dt), *out = hrand(nq, 0, dt);
	float *att = hrand(nrow * T, 0, dt);
	float *dq = hrand(nq, d0, dt), *dk = hrand(nk, d0, dt),
	      *dv = hrand(nk, d0, dt);
	void *dQ = dev(q, nq, dt), *dK = dev(k, nk, dt), *dV = dev(v, nk, dt);
	void *dO = dev(out, nq, dt), *dDO = dev(dout, nq, dt);
	void *dDQ = dev(dq, nq, dt), *dDK = dev(dk, nk, dt),
	     *dDV = dev(dv, nk, dt);
	float *lse = NULL, *delta = NULL, *g, *gout;
	char what[96];

	CHECK(rt_cuda_alloc((void **)&lse, nrow * sizeof(float)));
	CHECK(rt_cuda_alloc((void **)&delta, nrow * sizeof(float)));
	rt_attention_forward(out, att, q, k, v, B, T, NH, NKV, hs);
	if (sdpa != NULL)
		CHECK(rt_cuda_sdpa_forward(sdpa, dO, lse, dQ, dK, dV));
	else
		CHECK(rt_cuda_attention_forward(S, dt, dO, lse, dQ, dK, dV, B,
						T, NH, NKV, hs));
	snprintf(what, sizeof(what),
		 "%sattention_forward B%d T%d NH%d NKV%d hs%d",
		 sdpa ? "cuDNN " : "", B, T, NH, NKV, hs);
	compare(what, dt, gout = host(dO, nq, dt), out, nq, tol_of(dt, 1));
	/* the backward starts from the GPU's own output, as in training */
	rt_attention_backward(dq, dk, dv, dout, q, k, v, att, B, T, NH, NKV,
			      hs);
	if (sdpa != NULL)
		CHECK(rt_cuda_sdpa_backward(sdpa, dDQ, dDK, dDV, dDO, dO, dQ,
					    dK, dV, lse));
	else
		CHECK(rt_cuda_attention_backward(S, dt, dDQ, dDK, dDV, dDO, dO,
						 dQ, dK, dV, lse, delta, B, T,
						 NH, NKV, hs));
	snprintf(what, sizeof(what), "attention_backward dq hs%d", hs);
	compare(what, dt, g = host(dDQ, nq, dt), dq, nq, tol_of(dt, 1));
	free(g);
	snprintf(what, sizeof(what), "attention_backward dk hs%d", hs);
	compare(what, dt, g = host(dDK, nk, dt), dk, nk, tol_of(dt, 1));
	free(g);
	snprintf(what, sizeof(what), "attention_backward dv hs%d", hs);
	compare(what, dt, g = host(dDV, nk, dt), dv, nk, tol_of(dt, 1));
	free(g);
	free(gout);
	free(q), free(k), free(v), free(dout), free(out), free(att), free(dq),
	    free(dk), free(dv);
	rt_cuda_free(dQ), rt_cuda_free(dK), rt_cuda_free(dV), rt_cuda_free(dO),
	    rt_cuda_free(dDO), rt_cuda_free(dDQ), rt_cuda_free(dDK),
	    rt_cuda_free(dDV), rt_cuda_free(lse), rt_cuda_free(delta);
}

static const struct {
	int B, T, NH, NKV, hs;
} attn_shapes[] = {
    {2, 37, 4, 2, 16},	 /* GQA, short rows */
    {1, 130, 2, 1, 128}, /* several tiles */
    {1, 70, 3, 3, 48},	 /* hs not 2^k */
};

static void test_attention(rt_cuda_dtype dt)
{
	for (size_t i = 0; i < sizeof(attn_shapes) / sizeof(*attn_shapes); i++)
		test_attention_shape(dt, attn_shapes[i].B, attn_shapes[i].T,
				     attn_shapes[i].NH, attn_shapes[i].NKV,
				     attn_shapes[i].hs, NULL);
}

/* cuDNN's fused attention against the same CPU reference, where
 * rt_cuda_attn_pick would choose it; the reason printed where not. */
static void test_cudnn_attention(rt_cuda_dtype dt)
{
	for (size_t i = 0; i < sizeof(attn_shapes) / sizeof(*attn_shapes); i++) {
		rt_cuda_attn_kind kind;
		rt_cuda_sdpa *a = NULL;
		char why[256];
		hexi_rc rv = rt_cuda_attn_pick(
		    "auto", dt, rt_cuda_cc(ctx), attn_shapes[i].hs,
		    rt_cuda_cudnn_version(), &kind, why, sizeof(why));

		if (rv == HEXI_OK && kind == RT_CUDA_ATTN_CUDNN)
			rv = rt_cuda_sdpa_create(
			    ctx, dt, attn_shapes[i].B, attn_shapes[i].T,
			    attn_shapes[i].NH, attn_shapes[i].NKV,
			    attn_shapes[i].hs, &a);
		if (a == NULL) {
			printf("ok %d - # SKIP cuDNN attention hs%d %s: %s\n",
			       ++ntest, attn_shapes[i].hs,
			       rt_cuda_dtype_name(dt),
			       rv != HEXI_OK ? hexi_errmsg(rv) : why);
			hexi_error_clear();
			continue;
		}
		printf("# attention: %s\n", why);
		test_attention_shape(dt, attn_shapes[i].B, attn_shapes[i].T,
				     attn_shapes[i].NH, attn_shapes[i].NKV,
				     attn_shapes[i].hs, a);
		rt_cuda_sdpa_destroy(a);
	}
}

static void test_swiglu(rt_cuda_dtype dt)
{
	const size_t n = 5000;
	float *gt = hrand(n, 4, dt), *up = hrand(n, 2, dt),
	      *dy = hrand(n, 1, dt);
	float *out = hrand(n, 0, dt), *dg = hrand(n, 1, dt),
	      *du = hrand(n, 1, dt);
	void *dG = dev(gt, n, dt), *dU = dev(up, n, dt), *dDY = dev(dy, n, dt);
	void *dO = dev(out, n, dt), *dDG = dev(dg, n, dt),
	     *dDU = dev(du, n, dt);
	float *g;

	rt_swiglu_forward(out, gt, up, n);
	CHECK(rt_cuda_swiglu_forward(S, dt, dO, dG, dU, n));
	compare("swiglu_forward", dt, g = host(dO, n, dt), out, n,
		tol_of(dt, 0));
	free(g);
	rt_swiglu_backward(dg, du, dy, gt, up, n);
	CHECK(rt_cuda_swiglu_backward(S, dt, dDG, dDU, dDY, dG, dU, n));
	compare("swiglu_backward dgate (+=)", dt, g = host(dDG, n, dt), dg, n,
		tol_of(dt, 0));
	free(g);
	compare("swiglu_backward dup (+=)", dt, g = host(dDU, n, dt), du, n,
		tol_of(dt, 0));
	free(g);
	free(gt), free(up), free(dy), free(out), free(dg), free(du);
	rt_cuda_free(dG), rt_cuda_free(dU), rt_cuda_free(dDY), rt_cuda_free(dO),
	    rt_cuda_free(dDG), rt_cuda_free(dDU);
}

static void test_xent(rt_cuda_dtype dt)
{
	const int BT = 19, V = 1000;
	size_t n = (size_t)BT * V;
	float *logits = hrand(n, 6, dt), *probs = hrand(n, 0, dt);
	float *losses = hrand(BT, 0, dt), *dl = hrand(n, 0.01f, dt), *g;
	int targets[19];
	void *dL = dev(logits, n, dt), *dDL = dev(dl, n, dt);
	float *dLoss = NULL, *dLse = NULL;
	int *dT = NULL;
	float dloss = 1.0f / BT;

	for (int i = 0; i < BT; i++)
		targets[i] = (i * 379 + 11) % V;
	CHECK(rt_cuda_alloc((void **)&dLoss, BT * sizeof(float)));
	CHECK(rt_cuda_alloc((void **)&dLse, BT * sizeof(float)));
	CHECK(rt_cuda_alloc((void **)&dT, sizeof(targets)));
	CHECK(rt_cuda_upload(dT, targets, sizeof(targets)));
	rt_crossentropy_forward(losses, probs, logits, targets, BT, V);
	CHECK(rt_cuda_crossentropy_forward(S, dt, dLoss, dLse, dL, dT, BT, V));
	compare("crossentropy_forward losses", dt,
		g = host(dLoss, BT, RT_CUDA_F32), losses, BT,
		tol_of(RT_CUDA_F32, 1));
	free(g);
	rt_crossentropy_backward(dl, probs, targets, dloss, BT, V);
	CHECK(rt_cuda_crossentropy_backward(S, dt, dDL, dL, dLse, dT, dloss, BT,
					    V));
	/* dlogits are O(1/BT): tolerance scaled to that magnitude */
	compare("crossentropy_backward dlogits (+=)", dt, g = host(dDL, n, dt),
		dl, n,
		dt == RT_CUDA_BF16 ? (tol){2e-4, 2e-2} : (tol){1e-7, 1e-4});
	free(g);
	free(logits), free(probs), free(losses), free(dl);
	rt_cuda_free(dL), rt_cuda_free(dDL), rt_cuda_free(dLoss),
	    rt_cuda_free(dLse), rt_cuda_free(dT);
}

static void test_adamw(rt_cuda_dtype dt)
{
	const size_t n = 4099;
	rt_adamw_opts o;
	rt_param p;
	float *w = hrand(n, 1, RT_CUDA_F32), *g;
	float *dMaster = dev_f32(w, n), *dG = NULL, *dM = NULL, *dV = NULL;
	void *dW = NULL;

	rt_adamw_defaults(&o);
	o.weight_decay = 0.1f;
	memset(&p, 0, sizeof(p));
	p.n = n;
	p.w = w;
	p.g = hrand(n, 1, RT_CUDA_F32);
	p.m = hrand(n, 0, RT_CUDA_F32);
	p.v = hrand(n, 0, RT_CUDA_F32);
	CHECK(rt_cuda_alloc((void **)&dM, n * sizeof(float)));
	CHECK(rt_cuda_alloc((void **)&dV, n * sizeof(float)));
	if (dt == RT_CUDA_BF16)
		CHECK(rt_cuda_alloc(&dW, n * 2));
	for (int step = 1; step <= 3; step++) {
		for (size_t i = 0; i < n; i++)
			p.g[i] = urand();
		dG = dev_f32(p.g, n);
		rt_param_adamw(&p, &o, step, 1);
		CHECK(rt_cuda_adamw(S, dt, dMaster, dW, dG, dM, dV, n, o.lr,
				    o.beta1, o.beta2, o.eps, o.weight_decay,
				    step));
		rt_cuda_free(dG);
	}
	compare("adamw fp32 master weights (3 steps)", dt,
		g = host(dMaster, n, RT_CUDA_F32), p.w, n, (tol){1e-6, 1e-5});
	free(g);
	compare("adamw second moment", dt, g = host(dV, n, RT_CUDA_F32), p.v, n,
		(tol){1e-7, 1e-5});
	free(g);
	if (dt == RT_CUDA_BF16) {
		compare("adamw bf16 weight copy", dt, g = host(dW, n, dt), p.w,
			n, (tol){1e-6, 4e-3});
		free(g);
	}
	free(w), free(p.g), free(p.m), free(p.v);
	rt_cuda_free(dMaster), rt_cuda_free(dM), rt_cuda_free(dV),
	    rt_cuda_free(dW);
}

/* Embedding lookup and its scatter-add (every id, repeated),
 * against rt_embed_forward/backward. */
static void test_embed(rt_cuda_dtype dt)
{
	const int BT = 300, C = 72, V = 40;
	size_t n = (size_t)BT * C;
	int tok[300], *dTok = NULL;
	float *wte = hrand((size_t)V * C, 1, dt), *dout = hrand(n, 1, dt);
	float *out = hrand(n, 0, dt), *dw = hrand((size_t)V * C, 1, RT_CUDA_F32);
	void *dWte = dev(wte, (size_t)V * C, dt), *dDO = dev(dout, n, dt);
	void *dO = dev(out, n, dt);
	float *dDW = dev_f32(dw, (size_t)V * C), *g;

	for (int i = 0; i < BT; i++)
		tok[i] = (i * 7 + i / 13) % V; /* every id, many repeats */
	CHECK(rt_cuda_alloc((void **)&dTok, sizeof(tok)));
	CHECK(rt_cuda_upload(dTok, tok, sizeof(tok)));
	rt_embed_forward(out, tok, wte, BT, C);
	CHECK(rt_cuda_embed_forward(S, dt, dO, dTok, dWte, BT, C, V));
	compare("embed_forward", dt, g = host(dO, n, dt), out, n,
		(tol){1e-30, 0});
	free(g);
	rt_embed_backward(dw, dout, tok, BT, C);
	CHECK(rt_cuda_embed_backward(S, dt, dDW, dDO, dTok, BT, C, V));
	compare("embed_backward (+=, fp32, repeated ids)", dt,
		g = host(dDW, (size_t)V * C, RT_CUDA_F32), dw, (size_t)V * C,
		tol_of(RT_CUDA_F32, 1));
	free(g);
	free(wte), free(dout), free(out), free(dw);
	rt_cuda_free(dWte), rt_cuda_free(dDO), rt_cuda_free(dO),
	    rt_cuda_free(dDW), rt_cuda_free(dTok);
}

/* The trainer's gradient helpers: x *= f (exact) and the fp64 sum of
 * squares over more blocks than the kernel's grid (its grid-stride loop
 * and one atomicAdd per block), added to what *acc held. */
static void test_train_ops(void)
{
	const size_t n = 300007;
	float *x = hrand(n, 1, RT_CUDA_F32), *dX = dev_f32(x, n), *got;
	double *dAcc = NULL, acc = 0, want = 2.5;

	for (size_t i = 0; i < n; i++)
		want += (double)x[i] * x[i];
	CHECK(rt_cuda_alloc((void **)&dAcc, sizeof(double)));
	acc = 2.5;
	CHECK(rt_cuda_upload(dAcc, &acc, sizeof(acc)));
	CHECK(rt_cuda_sumsq_f32(S, dX, n, dAcc));
	/* S is non-blocking: the download (legacy stream) does not wait */
	CHECK(rt_cuda_sync(S));
	CHECK(rt_cuda_download(&acc, dAcc, sizeof(acc)));
	ntest++;
	if (fabs(acc - want) <= 1e-12 * want)
		printf("ok %d - sumsq_f32 of %zu values in fp64: %.12g\n", ntest,
		       n, acc);
	else {
		nfail++;
		printf("not ok %d - sumsq_f32: got %.15g want %.15g\n", ntest,
		       acc, want);
	}
	CHECK(rt_cuda_scale_f32(S, dX, 0.375f, n));
	for (size_t i = 0; i < n; i++)
		x[i] *= 0.375f;
	compare("scale_f32 (bit-exact)", RT_CUDA_F32,
		got = host(dX, n, RT_CUDA_F32), x, n, (tol){1e-30, 0});
	free(got), free(x);
	rt_cuda_free(dX), rt_cuda_free(dAcc);
}

/* The sharded optimizer's owned range [off, off + len) of a tensor
 * (DECISIONS 140): SGD exactly the CPU's w -= lr * g (no FMA), AdamW
 * rt_adamw_span's, elements outside the range untouched. */
static void test_range_optim(void)
{
	const size_t n = 5003, off = 1001, len = 2999;
	rt_adamw_opts o;
	float *w = hrand(n, 1, RT_CUDA_F32), *g = hrand(len, 1, RT_CUDA_F32);
	float *m = hrand(len, 0, RT_CUDA_F32), *v = hrand(len, 0, RT_CUDA_F32);
	float *dW = dev_f32(w, n), *dG = dev_f32(g, len), *dM = dev_f32(m, len),
	      *dV = dev_f32(v, len), *got;

	rt_adamw_defaults(&o);
	o.weight_decay = 0.1f;
	/* lr not a power of two: lr * g is rounded, so a fused multiply-
	 * subtract (nvcc's default contraction) would differ */
	CHECK(rt_cuda_sgd_f32(S, dW + off, dG, 0.3f, len));
	for (size_t j = 0; j < len; j++)
		w[off + j] -= 0.3f * g[j];
	compare("sgd_f32 on an owned range (bit-exact)", RT_CUDA_F32,
		got = host(dW, n, RT_CUDA_F32), w, n, (tol){1e-30, 0});
	free(got);
	for (int step = 1; step <= 2; step++) {
		CHECK(rt_cuda_adamw(S, RT_CUDA_F32, dW + off, NULL, dG, dM, dV,
				    len, o.lr, o.beta1, o.beta2, o.eps,
				    o.weight_decay, step));
		rt_adamw_span(w + off, g, m, v, len, &o, step, 1);
	}
	compare("adamw on an owned range (master, outside unchanged)",
		RT_CUDA_F32, got = host(dW, n, RT_CUDA_F32), w, n,
		(tol){1e-6, 1e-5});
	free(got);
	free(w), free(g), free(m), free(v);
	rt_cuda_free(dW), rt_cuda_free(dG), rt_cuda_free(dM), rt_cuda_free(dV);
}

static void test_gemm(rt_cuda_dtype dt)
{
	const int BT = 33, C = 96, OC = 80;
	float *inp = hrand((size_t)BT * C, 1, dt),
	      *w = hrand((size_t)OC * C, 1, dt);
	float *dout = hrand((size_t)BT * OC, 1, dt);
	float *out = hrand((size_t)BT * OC, 0, dt);
	float *dinp = hrand((size_t)BT * C, 1, dt);
	float *dw = hrand((size_t)OC * C, 1, RT_CUDA_F32), *g;
	void *dI = dev(inp, (size_t)BT * C, dt),
	     *dWt = dev(w, (size_t)OC * C, dt);
	void *dDO = dev(dout, (size_t)BT * OC, dt),
	     *dO = dev(out, (size_t)BT * OC, dt);
	void *dDI = dev(dinp, (size_t)BT * C, dt);
	float *dDW = dev_f32(dw, (size_t)OC * C);

	rt_matmul_forward(out, inp, w, BT, C, OC);
	CHECK(rt_cuda_matmul_forward(ctx, dt, dO, dI, dWt, BT, C, OC));
	compare("matmul_forward (cuBLAS)", dt,
		g = host(dO, (size_t)BT * OC, dt), out, (size_t)BT * OC,
		tol_of(dt, 1));
	free(g);
	rt_matmul_backward(dinp, dw, dout, inp, w, BT, C, OC);
	CHECK(rt_cuda_matmul_backward(ctx, dt, dDI, dDW, dDO, dI, dWt, BT, C,
				      OC));
	compare("matmul_backward dinp (+=)", dt,
		g = host(dDI, (size_t)BT * C, dt), dinp, (size_t)BT * C,
		tol_of(dt, 1));
	free(g);
	compare("matmul_backward dw (+=, fp32)", dt,
		g = host(dDW, (size_t)OC * C, RT_CUDA_F32), dw, (size_t)OC * C,
		tol_of(dt, 1));
	free(g);
	/* transposed operands through the generic call, fp32 output */
	for (int ta = 0; ta <= 1; ta++)
		for (int tb = 0; tb <= 1; tb++) {
			const int M = 23, N = 17, K = 40;
			float *A = hrand((size_t)M * K, 1, dt);
			float *B = hrand((size_t)K * N, 1, dt);
			float *Cm = hrand((size_t)M * N, 1, RT_CUDA_F32);
			void *dA = dev(A, (size_t)M * K, dt);
			void *dB = dev(B, (size_t)K * N, dt);
			float *dC = dev_f32(Cm, (size_t)M * N);
			char what[64];

			rt_sgemm_ref(ta, tb, M, N, K, 0.5f, A, ta ? M : K, B,
				     tb ? K : N, 1.0f, Cm, N);
			CHECK(rt_cuda_gemm(ctx, dt, RT_CUDA_F32, ta, tb, M, N,
					   K, 0.5f, dA, ta ? M : K, dB,
					   tb ? K : N, 1.0f, dC, N));
			snprintf(what, sizeof(what), "gemm ta=%d tb=%d", ta,
				 tb);
			compare(what, dt,
				g = host(dC, (size_t)M * N, RT_CUDA_F32), Cm,
				(size_t)M * N, tol_of(dt, 1));
			free(g), free(A), free(B), free(Cm);
			rt_cuda_free(dA), rt_cuda_free(dB), rt_cuda_free(dC);
		}
	free(inp), free(w), free(dout), free(out), free(dinp), free(dw);
	rt_cuda_free(dI), rt_cuda_free(dWt), rt_cuda_free(dDO),
	    rt_cuda_free(dO), rt_cuda_free(dDI), rt_cuda_free(dDW);
}

int main(void)
{
	static const rt_cuda_dtype dts[] = {RT_CUDA_F32, RT_CUDA_BF16};
	int n = 0;
	hexi_rc rv = rt_cuda_device_count(&n);

	if (rv != HEXI_OK) {
		printf("1..0 # SKIP %s\n", hexi_errmsg(rv));
		return 77;
	}
	CHECK(rt_cuda_create(0, 1, &ctx));
	S = rt_cuda_compute_stream(ctx);
	printf("# device %d: %s (cc %d)\n", rt_cuda_device(ctx),
	       rt_cuda_device_name(ctx), rt_cuda_cc(ctx));
	for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); i++) {
		test_rmsnorm(dts[i]);
		test_rope(dts[i]);
		test_attention(dts[i]);
		test_cudnn_attention(dts[i]);
		test_swiglu(dts[i]);
		test_xent(dts[i]);
		test_adamw(dts[i]);
		test_gemm(dts[i]);
		test_embed(dts[i]);
	}
	test_range_optim();
	test_train_ops();
	CHECK(rt_cuda_sync(NULL));
	rt_cuda_destroy(ctx);
	printf("1..%d\n", ntest);
	printf("%d passed, %d failed\n", ntest - nfail, nfail);
	return nfail ? 1 : 0;
}
