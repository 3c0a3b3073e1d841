/*
 * test_emu_ops.c - the host emulation of rt_cuda.h (gpu_emu.c) against the
 * CPU reference operators of rt_ops.h, for fp32 and bf16.
 *
 * Every device tensor is made from fp32 host data; for bf16 the reference
 * gets the same inputs rounded to bf16 (so the only bf16 error left is the
 * rounding of the outputs on store, <= 2^-9 relative per element, plus the
 * rounding of a += output's old value).  Error metric per tensor:
 * max |got - want| / max |want|.  Tolerances: fp32 1e-5 (the emulation
 * calls the same ops, or recomputes softmax probabilities from lse, which
 * differs by float rounding only), bf16 1e-2 (~5 bf16 half-ulps).
 * Attention and cross-entropy go through the GPU contract: the forward's
 * lse, a backward that sees only q, k, v, out, dout and lse (the reference
 * backward gets the CPU forward's probabilities).  Each kernel family also
 * has a bad-size call that must fail with HEXI_ERR_INVAL naming the kernel,
 * and host pointers / overruns must be refused.
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gpu_emu.h"
#include "rt_comm.h"
#include "rt_cuda.h"
#include "rt_model.h"
#include "rt_ops.h"
#include "tap.h"

#define TOL_F32	 1e-5
#define TOL_BF16 1e-2

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static float frand(void) /* uniform [-1, 1) */
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)(rng >> 40) * 0x1p-23f - 1.0f;
}

static float *hvec(size_t n, float scale)
{
	float *p = malloc((n ? n : 1) * sizeof(float));
	if (p == NULL)
		tap_bail("out of memory");
	for (size_t i = 0; i < n; i++)
		p[i] = frand() * scale;
	return p;
}

static float *hzero(size_t n)
{
	float *p = calloc(n ? n : 1, sizeof(float));
	if (p == NULL)
		tap_bail("out of memory");
	return p;
}

static void must(hexi_rc rc, const char *what)
{
	if (rc != HEXI_OK) {
		printf("# %s: %s\n", what, hexi_errmsg(rc));
		tap_bail(what);
	}
}

/* Device tensor of type dt from host fp32 h (n); h is replaced by what the
 * device holds (rounded to bf16 for bf16), so references use those. */
static void *dput(rt_cuda_dtype dt, float *h, size_t n)
{
	void *f = NULL, *d = NULL;

	must(rt_cuda_alloc(&f, n * sizeof(float)), "alloc");
	must(rt_cuda_upload(f, h, n * sizeof(float)), "upload");
	if (dt == RT_CUDA_F32)
		return f;
	must(rt_cuda_alloc(&d, n * 2), "alloc");
	must(rt_cuda_cast(NULL, d, dt, f, RT_CUDA_F32, n), "cast");
	must(rt_cuda_cast(NULL, f, RT_CUDA_F32, d, dt, n), "cast back");
	must(rt_cuda_download(h, f, n * sizeof(float)), "download");
	rt_cuda_free(f);
	return d;
}

/* Host fp32 copy of device tensor d (n, type dt); caller frees. */
static float *dget(rt_cuda_dtype dt, const void *d, size_t n)
{
	float *h = hzero(n);
	void *f = NULL;

	must(rt_cuda_sync(NULL), "sync"); /* GEMMs run on the compute stream */
	if (dt == RT_CUDA_F32) {
		must(rt_cuda_download(h, d, n * sizeof(float)), "download");
		return h;
	}
	must(rt_cuda_alloc(&f, n * sizeof(float)), "alloc");
	must(rt_cuda_cast(NULL, f, RT_CUDA_F32, d, dt, n), "cast");
	must(rt_cuda_download(h, f, n * sizeof(float)), "download");
	rt_cuda_free(f);
	return h;
}

static int *iput(const int *h, size_t n)
{
	void *d = NULL;
	must(rt_cuda_alloc(&d, n * sizeof(int)), "alloc");
	must(rt_cuda_upload(d, h, n * sizeof(int)), "upload");
	return d;
}

static double maxdev(const float *got, const float *want, size_t n)
{
	double e = 0.0, m = 0.0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]);
		if (!(d <= e)) /* NaN counts */
			e = d;
		if (fabs((double)want[i]) > m)
			m = fabs((double)want[i]);
	}
	return m > 0 ? e / m : e;
}

static double worst[2]; /* largest deviation seen per dtype */

/* Compare device tensor d with host reference want; frees nothing. */
static void cmp(rt_cuda_dtype dt, const char *what, const void *d,
		const float *want, size_t n, int is_f32)
{
	float *got = dget(is_f32 ? RT_CUDA_F32 : dt, d, n);
	double e = maxdev(got, want, n);
	double tol = dt == RT_CUDA_F32 ? TOL_F32 : TOL_BF16;

	if (e > worst[dt])
		worst[dt] = e;
	if (!ok(e <= tol, "%s %s: max dev %.3g <= %g", rt_cuda_dtype_name(dt),
		what, e, tol))
		tap_diag("  first values got %g want %g", (double)got[0],
			 (double)want[0]);
	free(got);
}

static void expect_err(hexi_rc rc, hexi_rc want, const char *name,
		       const char *what)
{
	const char *m = rc != HEXI_OK ? hexi_errmsg(rc) : "";
	ok(rc == want && strstr(m, name) != NULL, "%s refused (%s): %s", what,
	   hexi_errname(want), m);
	hexi_error_clear();
}

/* ---- per-family tests --------------------------------------------------- */

static void t_context(void)
{
	rt_cuda *c = NULL;
	int n = 0;

	is_int(rt_cuda_dtype_size(RT_CUDA_F32), 4, "fp32 is 4 bytes");
	is_int(rt_cuda_dtype_size(RT_CUDA_BF16), 2, "bf16 is 2 bytes");
	is_str(rt_cuda_dtype_name(RT_CUDA_BF16), "bf16", "bf16 name");
	ok(rt_cuda_device_count(&n) == HEXI_OK && n == 1, "one device");
	must(rt_cuda_create(0, 1, &c), "create");
	is_str(rt_cuda_device_name(c), "host emulation", "device name");
	is_int(rt_cuda_cc(c), 0, "compute capability 0");
	is_int(rt_cuda_device(c), 0, "ordinal 0");
	ok(rt_cuda_compute_stream(c) != NULL && rt_cuda_comm_stream(c) &&
	       rt_cuda_compute_stream(c) != rt_cuda_comm_stream(c),
	   "two distinct streams");
	ok(rt_cuda_sync(NULL) == HEXI_OK &&
	       rt_cuda_sync(rt_cuda_comm_stream(c)) == HEXI_OK &&
	       rt_cuda_stream_wait(rt_cuda_comm_stream(c),
				   rt_cuda_compute_stream(c)) == HEXI_OK,
	   "sync and stream_wait");
	rt_cuda_destroy(c);
	setenv("CUDA_VISIBLE_DEVICES", "", 1);
	expect_err(rt_cuda_create(0, 1, &c), HEXI_ERR_NODEV,
		   "CUDA_VISIBLE_DEVICES", "create with every device hidden");
	unsetenv("CUDA_VISIBLE_DEVICES");
}

static void t_memory(void)
{
	float h[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[8], z = 1.0f;
	float *d = NULL, *e = NULL;
	int zero = 1;

	must(rt_cuda_alloc((void **)&d, sizeof(h)), "alloc");
	must(rt_cuda_alloc((void **)&e, sizeof(h)), "alloc");
	must(rt_cuda_download(back, d, sizeof(h)), "download");
	for (int i = 0; i < 8; i++)
		zero &= back[i] == 0.0f;
	ok(zero, "alloc returns zeroed memory");
	must(rt_cuda_upload(d, h, sizeof(h)), "upload");
	must(rt_cuda_copy(NULL, e, d, sizeof(h)), "copy");
	must(rt_cuda_memset0(NULL, d + 2, 3 * sizeof(float)), "memset0");
	must(rt_cuda_download(back, e, sizeof(h)), "download");
	ok(memcmp(back, h, sizeof(h)) == 0, "upload, copy, download");
	must(rt_cuda_download(back, d, sizeof(h)), "download");
	ok(back[1] == 2 && back[2] == 0 && back[4] == 0 && back[5] == 6,
	   "memset0 zeroes exactly its range");
	expect_err(rt_cuda_upload(d + 4, h, sizeof(h)), HEXI_ERR_CUDA, "upload",
		   "upload past the end of an allocation");
	expect_err(rt_cuda_scale_f32(NULL, h, 2.0f, 8), HEXI_ERR_CUDA,
		   "scale_f32", "host pointer given to a kernel");
	expect_err(rt_cuda_copy(NULL, e, &z, sizeof(z)), HEXI_ERR_CUDA,
		   "device copy", "host source of a device copy");
	rt_cuda_free(d);
	rt_cuda_free(e);
	{
		void *p = (void *)1;
		ok(rt_cuda_alloc(&p, 0) == HEXI_OK && p == NULL,
		   "alloc of 0 bytes gives NULL");
	}
}

static void t_cast(void)
{
	/* bf16 has 7 stored mantissa bits: ulp(1) = 2^-7 */
	float in[6] = {1.0f + 0x1p-8f,		  /* tie -> even 1.0 */
		       1.0f + 0x1p-7f + 0x1p-8f,  /* tie -> even 1+2^-6 */
		       1.0f + 0x1p-8f + 0x1p-20f, /* above the tie */
		       -3.0f,
		       65536.0f * 65536.0f,
		       NAN};
	float want[5] = {1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -3.0f,
			 65536.0f * 65536.0f};
	void *f = NULL, *b = NULL;
	float back[6];
	uint16_t bits[6];

	must(rt_cuda_alloc(&f, sizeof(in)), "alloc");
	must(rt_cuda_alloc(&b, sizeof(bits)), "alloc");
	must(rt_cuda_upload(f, in, sizeof(in)), "upload");
	must(rt_cuda_cast(NULL, b, RT_CUDA_BF16, f, RT_CUDA_F32, 6), "cast");
	must(rt_cuda_download(bits, b, sizeof(bits)), "download");
	must(rt_cuda_cast(NULL, f, RT_CUDA_F32, b, RT_CUDA_BF16, 6), "cast");
	must(rt_cuda_download(back, f, sizeof(back)), "download");
	for (int i = 0; i < 5; i++)
		ok(back[i] == want[i],
		   "bf16 round to nearest even: %.9g -> %.9g", (double)in[i],
		   (double)back[i]);
	is_int(bits[0], 0x3f80, "1+2^-8 stored as bf16 bits 0x3f80");
	ok(isnan(back[5]), "NaN stays NaN");
	rt_cuda_free(f);
	rt_cuda_free(b);
}

static void t_matmul(rt_cuda *c, rt_cuda_dtype dt)
{
	const int BT = 6, C = 5, OC = 7;
	float *inp = hvec((size_t)BT * C, 1), *w = hvec((size_t)OC * C, 1);
	float *dout = hvec((size_t)BT * OC, 1);
	float *dinp = hvec((size_t)BT * C, 0.5f);
	float *dw = hvec((size_t)OC * C, 0.5f), *out = hzero((size_t)BT * OC);
	void *d_inp = dput(dt, inp, (size_t)BT * C);
	void *d_w = dput(dt, w, (size_t)OC * C);
	void *d_dout = dput(dt, dout, (size_t)BT * OC);
	void *d_out = dput(dt, out, (size_t)BT * OC);
	void *d_dinp = dput(dt, dinp, (size_t)BT * C);
	float *d_dw = dput(RT_CUDA_F32, dw, (size_t)OC * C);

	for (int tw = 0; tw < 2; tw++) {
		const char *nm = tw ? "matmul_tw" : "matmul";
		char what[64];

		if (tw) {
			must(rt_cuda_matmul_tw_forward(c, dt, d_out, d_inp, d_w,
						       BT, C, OC),
			     "tw fwd");
			rt_matmul_tw_forward(out, inp, w, BT, C, OC);
		} else {
			must(rt_cuda_matmul_forward(c, dt, d_out, d_inp, d_w,
						    BT, C, OC),
			     "fwd");
			rt_matmul_forward(out, inp, w, BT, C, OC);
		}
		snprintf(what, sizeof(what), "%s forward", nm);
		cmp(dt, what, d_out, out, (size_t)BT * OC, 0);
		if (tw) {
			must(rt_cuda_matmul_tw_backward(c, dt, d_dinp, d_dw,
							d_dout, d_inp, d_w, BT,
							C, OC),
			     "tw bwd");
			rt_matmul_tw_backward(dinp, dw, dout, inp, w, BT, C,
					      OC);
		} else {
			must(rt_cuda_matmul_backward(c, dt, d_dinp, d_dw,
						     d_dout, d_inp, d_w, BT, C,
						     OC),
			     "bwd");
			rt_matmul_backward(dinp, dw, dout, inp, w, BT, C, OC);
		}
		snprintf(what, sizeof(what), "%s backward dinp +=", nm);
		cmp(dt, what, d_dinp, dinp, (size_t)BT * C, 0);
		snprintf(what, sizeof(what), "%s backward dw (fp32) +=", nm);
		cmp(dt, what, d_dw, dw, (size_t)OC * C, 1);
	}
	/* dinp NULL skips it */
	must(rt_cuda_matmul_backward(c, dt, NULL, d_dw, d_dout, d_inp, d_w, BT,
				     C, OC),
	     "bwd NULL dinp");
	rt_matmul_backward(NULL, dw, dout, inp, w, BT, C, OC);
	cmp(dt, "matmul backward, dinp NULL: dw +=", d_dw, dw, (size_t)OC * C,
	    1);
	if (dt == RT_CUDA_F32) {
		/* strided, transposed GEMM with alpha and beta vs the plain-C
		 * reference: C (3,4) in rows of 6 = 0.5 A^T (3x5 of (5,3)) B +
		 * 2 C */
		float A[15], B[20], Cm[18];
		float *dA, *dB, *dC;
		for (int i = 0; i < 15; i++)
			A[i] = frand();
		for (int i = 0; i < 20; i++)
			B[i] = frand();
		for (int i = 0; i < 18; i++)
			Cm[i] = frand();
		dA = dput(dt, A, 15);
		dB = dput(dt, B, 20);
		dC = dput(dt, Cm, 18);
		must(rt_cuda_gemm(c, dt, dt, 1, 0, 3, 4, 5, 0.5f, dA, 3, dB, 4,
				  2.0f, dC, 6),
		     "gemm");
		rt_sgemm_ref(1, 0, 3, 4, 5, 0.5f, A, 3, B, 4, 2.0f, Cm, 6);
		cmp(dt, "gemm A^T B, alpha 0.5 beta 2, ldc 6", dC, Cm, 18, 0);
		expect_err(rt_cuda_gemm(c, dt, dt, 0, 0, 3, 4, 5, 1.0f, dA, 3,
					dB, 4, 0.0f, dC, 6),
			   HEXI_ERR_CUDA, "gemm", "gemm with lda < K");
		expect_err(rt_cuda_gemm(c, dt, dt, 0, 0, 4, 6, 3, 1.0f, dA, 3,
					dB, 6, 0.0f, dC, 6),
			   HEXI_ERR_CUDA, "gemm", "gemm reading past B");
		rt_cuda_free(dA);
		rt_cuda_free(dB);
		rt_cuda_free(dC);
	}
	expect_err(rt_cuda_matmul_forward(c, dt, d_out, d_inp, d_w, -1, C, OC),
		   HEXI_ERR_INVAL, "gemm", "matmul with BT -1");
	rt_cuda_free(d_inp);
	rt_cuda_free(d_w);
	rt_cuda_free(d_dout);
	rt_cuda_free(d_out);
	rt_cuda_free(d_dinp);
	rt_cuda_free(d_dw);
	free(inp);
	free(w);
	free(dout);
	free(dinp);
	free(dw);
	free(out);
}

static void t_embed_add_norm(rt_cuda_dtype dt)
{
	const int BT = 7, C = 6, V = 5;
	int tok[7] = {0, 3, 3, 4, 1, 3, 0};
	int *d_tok = iput(tok, 7);
	float *wte = hvec((size_t)V * C, 1), *out = hzero((size_t)BT * C);
	float *dout = hvec((size_t)BT * C, 1), *dwte = hvec((size_t)V * C, 1);
	float *x = hvec((size_t)BT * C, 2), *w = hvec((size_t)C, 1);
	float *dx = hvec((size_t)BT * C, 0.5f), *dw = hvec((size_t)C, 0.5f);
	float rstd[7];
	void *d_wte = dput(dt, wte, (size_t)V * C);
	void *d_out = dput(dt, out, (size_t)BT * C);
	void *d_dout = dput(dt, dout, (size_t)BT * C);
	float *d_dwte = dput(RT_CUDA_F32, dwte, (size_t)V * C);
	void *d_x = dput(dt, x, (size_t)BT * C);
	void *d_w = dput(dt, w, (size_t)C);
	void *d_dx = dput(dt, dx, (size_t)BT * C);
	float *d_dw = dput(RT_CUDA_F32, dw, (size_t)C);
	float *d_rstd = NULL;
	rt_cuda_stream s = NULL;

	must(rt_cuda_alloc((void **)&d_rstd, sizeof(rstd)), "alloc");
	must(rt_cuda_embed_forward(s, dt, d_out, d_tok, d_wte, BT, C, V),
	     "embed fwd");
	rt_embed_forward(out, tok, wte, BT, C);
	cmp(dt, "embed forward", d_out, out, (size_t)BT * C, 0);
	must(rt_cuda_embed_backward(s, dt, d_dwte, d_dout, d_tok, BT, C, V),
	     "embed bwd");
	rt_embed_backward(dwte, dout, tok, BT, C);
	cmp(dt, "embed backward dwte += (repeated ids)", d_dwte, dwte,
	    (size_t)V * C, 1);
	expect_err(rt_cuda_embed_forward(s, dt, d_out, d_tok, d_wte, BT, 0, V),
		   HEXI_ERR_INVAL, "embed", "embed with C 0");

	/* residual: out = a + b, aliased with a */
	must(rt_cuda_add(s, dt, d_x, d_x, d_dout, (size_t)BT * C), "add");
	for (int i = 0; i < BT * C; i++)
		x[i] += dout[i];
	cmp(dt, "add (out aliases a)", d_x, x, (size_t)BT * C, 0);
	{ /* the reference input is what the device holds now */
		float *xr = dget(dt, d_x, (size_t)BT * C);
		memcpy(x, xr, (size_t)BT * C * sizeof(float));
		free(xr);
	}

	must(rt_cuda_rmsnorm_forward(s, dt, d_out, d_rstd, d_x, d_w, BT, C,
				     RT_NORM_EPS),
	     "rmsnorm fwd");
	rt_rmsnorm_forward(out, rstd, x, w, BT, C, RT_NORM_EPS);
	cmp(dt, "rmsnorm forward", d_out, out, (size_t)BT * C, 0);
	cmp(dt, "rmsnorm rstd (fp32)", d_rstd, rstd, (size_t)BT, 1);
	must(rt_cuda_rmsnorm_backward(s, dt, d_dx, d_dw, d_dout, d_x, d_w,
				      d_rstd, BT, C),
	     "rmsnorm bwd");
	rt_rmsnorm_backward(dx, dw, dout, x, w, rstd, BT, C);
	cmp(dt, "rmsnorm backward dinp +=", d_dx, dx, (size_t)BT * C, 0);
	cmp(dt, "rmsnorm backward dw (fp32) +=", d_dw, dw, (size_t)C, 1);
	expect_err(rt_cuda_rmsnorm_forward(s, dt, d_out, d_rstd, d_x, d_w, -2,
					   C, RT_NORM_EPS),
		   HEXI_ERR_INVAL, "rmsnorm", "rmsnorm with BT -2");
	rt_cuda_free(d_tok);
	rt_cuda_free(d_wte);
	rt_cuda_free(d_out);
	rt_cuda_free(d_dout);
	rt_cuda_free(d_dwte);
	rt_cuda_free(d_x);
	rt_cuda_free(d_w);
	rt_cuda_free(d_dx);
	rt_cuda_free(d_dw);
	rt_cuda_free(d_rstd);
	free(wte);
	free(out);
	free(dout);
	free(dwte);
	free(x);
	free(w);
	free(dx);
	free(dw);
}

static void t_rope_swiglu(rt_cuda_dtype dt)
{
	const int B = 2, T = 5, NH = 3, hs = 8;
	const size_t n = (size_t)B * T * NH * hs, N = 40;
	float *x = hvec(n, 1), *g = hvec(N, 3), *u = hvec(N, 1);
	float *out = hzero(N), *dout = hvec(N, 1), *dg = hvec(N, 0.5f),
	      *du = hvec(N, 0.5f);
	void *d_x = dput(dt, x, n), *d_g = dput(dt, g, N),
	     *d_u = dput(dt, u, N);
	void *d_out = dput(dt, out, N), *d_dout = dput(dt, dout, N);
	void *d_dg = dput(dt, dg, N), *d_du = dput(dt, du, N);
	rt_cuda_stream s = NULL;
	float *tab = NULL;

	must(rt_cuda_rope_table_create(T, hs, RT_ROPE_THETA, &tab),
	     "rope table");
	must(rt_cuda_rope_forward(s, dt, d_x, tab, B, T, NH, hs), "rope fwd");
	rt_rope_forward(x, B, T, NH, hs, RT_ROPE_THETA);
	cmp(dt, "rope forward", d_x, x, n, 0);
	{
		float *xr = dget(dt, d_x, n);
		memcpy(x, xr, n * sizeof(float));
		free(xr);
	}
	must(rt_cuda_rope_backward(s, dt, d_x, tab, B, T, NH, hs), "rope bwd");
	rt_rope_backward(x, B, T, NH, hs, RT_ROPE_THETA);
	cmp(dt, "rope backward", d_x, x, n, 0);
	expect_err(rt_cuda_rope_forward(s, dt, d_x, tab, B, T, NH, 7),
		   HEXI_ERR_INVAL, "rope", "rope with odd head size");
	expect_err(rt_cuda_rope_forward(s, dt, d_x, NULL, B, T, NH, hs),
		   HEXI_ERR_INVAL, "rope", "rope without a table");
	rt_cuda_free(tab);
	{
		float *bad = NULL;
		expect_err(rt_cuda_rope_table_create(T, 7, RT_ROPE_THETA, &bad),
			   HEXI_ERR_INVAL, "rope table", "odd head size table");
		expect_err(rt_cuda_rope_table_create(0, hs, RT_ROPE_THETA, &bad),
			   HEXI_ERR_INVAL, "rope table", "empty table");
		expect_err(rt_cuda_rope_table_create(T, hs, 1.0f, &bad),
			   HEXI_ERR_INVAL, "rope table", "theta 1");
		ok(bad == NULL, "no table on error");
	}

	must(rt_cuda_swiglu_forward(s, dt, d_out, d_g, d_u, N), "swiglu fwd");
	rt_swiglu_forward(out, g, u, N);
	cmp(dt, "swiglu forward", d_out, out, N, 0);
	must(rt_cuda_swiglu_backward(s, dt, d_dg, d_du, d_dout, d_g, d_u, N),
	     "swiglu bwd");
	rt_swiglu_backward(dg, du, dout, g, u, N);
	cmp(dt, "swiglu backward dgate +=", d_dg, dg, N, 0);
	cmp(dt, "swiglu backward dup +=", d_du, du, N, 0);
	expect_err(rt_cuda_swiglu_forward(s, dt, d_out, d_g, d_u, N + 1),
		   HEXI_ERR_CUDA, "swiglu_forward", "swiglu past its buffers");
	rt_cuda_free(d_x);
	rt_cuda_free(d_g);
	rt_cuda_free(d_u);
	rt_cuda_free(d_out);
	rt_cuda_free(d_dout);
	rt_cuda_free(d_dg);
	rt_cuda_free(d_du);
	free(x);
	free(g);
	free(u);
	free(out);
	free(dout);
	free(dg);
	free(du);
}

static void t_attention(rt_cuda_dtype dt)
{
	const int B = 2, T = 6, NH = 4, NKV = 2, hs = 8;
	const size_t nq = (size_t)B * T * NH * hs,
		     nk = (size_t)B * T * NKV * hs;
	const size_t nl = (size_t)B * NH * T;
	float *q = hvec(nq, 1), *k = hvec(nk, 1), *v = hvec(nk, 1);
	float *out = hzero(nq), *att = hzero(nl * T), *dout = hvec(nq, 1);
	float *dq = hvec(nq, 0.3f), *dk = hvec(nk, 0.3f), *dv = hvec(nk, 0.3f);
	float *lse = hzero(nl);
	void *d_q = dput(dt, q, nq), *d_k = dput(dt, k, nk),
	     *d_v = dput(dt, v, nk);
	void *d_out = dput(dt, out, nq), *d_dout = dput(dt, dout, nq);
	void *d_dq = dput(dt, dq, nq), *d_dk = dput(dt, dk, nk),
	     *d_dv = dput(dt, dv, nk);
	float *d_lse = NULL, *d_delta = NULL;
	const float scale = 1.0f / sqrtf((float)hs);
	rt_cuda_stream s = NULL;

	must(rt_cuda_alloc((void **)&d_lse, nl * sizeof(float)), "alloc");
	must(rt_cuda_alloc((void **)&d_delta, nl * sizeof(float)), "alloc");
	must(rt_cuda_attention_forward(s, dt, d_out, d_lse, d_q, d_k, d_v, B, T,
				       NH, NKV, hs),
	     "attention fwd");
	rt_attention_forward(out, att, q, k, v, B, T, NH, NKV, hs);
	cmp(dt, "attention forward (GQA 4/2)", d_out, out, nq, 0);
	/* lse of every row in double, plain loops */
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				const float *qr =
				    q + (((size_t)b * T + t) * NH + h) * hs;
				double sc[16], mx = -INFINITY, sum = 0.0;
				for (int t2 = 0; t2 <= t; t2++) {
					const float *kr =
					    k + (((size_t)b * T + t2) * NKV +
						 h / (NH / NKV)) *
						    hs;
					double d = 0.0;
					for (int i = 0; i < hs; i++)
						d += (double)qr[i] * kr[i];
					sc[t2] = d * scale;
					mx = sc[t2] > mx ? sc[t2] : mx;
				}
				for (int t2 = 0; t2 <= t; t2++)
					sum += exp(sc[t2] - mx);
				lse[((size_t)b * NH + h) * T + t] =
				    (float)(mx + log(sum));
			}
	cmp(dt, "attention lse (B,NH,T)", d_lse, lse, nl, 1);
	{ /* the backward reference sees the device's (rounded) out */
		float *o = dget(dt, d_out, nq);
		rt_attention_backward(dq, dk, dv, dout, q, k, v, att, B, T, NH,
				      NKV, hs);
		must(rt_cuda_attention_backward(s, dt, d_dq, d_dk, d_dv, d_dout,
						d_out, d_q, d_k, d_v, d_lse,
						d_delta, B, T, NH, NKV, hs),
		     "attention bwd");
		cmp(dt, "attention backward dq += (from lse)", d_dq, dq, nq, 0);
		cmp(dt, "attention backward dk +=", d_dk, dk, nk, 0);
		cmp(dt, "attention backward dv +=", d_dv, dv, nk, 0);
		/* delta = rowsum(dout * out), laid out (B,NH,T) */
		for (int b = 0; b < B; b++)
			for (int t = 0; t < T; t++)
				for (int h = 0; h < NH; h++) {
					size_t r =
					    (((size_t)b * T + t) * NH + h) * hs;
					double d = 0.0;
					for (int i = 0; i < hs; i++)
						d += (double)dout[r + i] *
						     o[r + i];
					lse[((size_t)b * NH + h) * T + t] =
					    (float)d;
				}
		cmp(dt, "attention delta scratch = rowsum(dO*O)", d_delta, lse,
		    nl, 1);
		free(o);
	}
	expect_err(rt_cuda_attention_forward(s, dt, d_out, d_lse, d_q, d_k, d_v,
					     B, T, NH, 3, hs),
		   HEXI_ERR_INVAL, "attention_forward",
		   "attention with NH not a multiple of NKV");
	expect_err(rt_cuda_attention_backward(s, dt, d_dq, d_dk, d_dv, d_dout,
					      d_out, d_q, d_k, d_v, d_lse,
					      d_delta, B, T, NH, NKV, 130),
		   HEXI_ERR_INVAL, "attention_backward",
		   "attention with head size 130");
	rt_cuda_free(d_q);
	rt_cuda_free(d_k);
	rt_cuda_free(d_v);
	rt_cuda_free(d_out);
	rt_cuda_free(d_dout);
	rt_cuda_free(d_dq);
	rt_cuda_free(d_dk);
	rt_cuda_free(d_dv);
	rt_cuda_free(d_lse);
	rt_cuda_free(d_delta);
	free(q);
	free(k);
	free(v);
	free(out);
	free(att);
	free(dout);
	free(dq);
	free(dk);
	free(dv);
	free(lse);
}

static void t_xent(rt_cuda_dtype dt)
{
	const int BT = 5, V = 11;
	const size_t n = (size_t)BT * V;
	int tg[5] = {0, 10, 3, 3, 7};
	int *d_tg = iput(tg, 5);
	float *x = hvec(n, 4), *probs = hzero(n), *dx = hvec(n, 0.2f);
	float losses[5], lse[5];
	void *d_x = dput(dt, x, n), *d_dx = dput(dt, dx, n);
	float *d_loss = NULL, *d_lse = NULL;
	rt_cuda_stream s = NULL;

	must(rt_cuda_alloc((void **)&d_loss, sizeof(losses)), "alloc");
	must(rt_cuda_alloc((void **)&d_lse, sizeof(lse)), "alloc");
	must(rt_cuda_crossentropy_forward(s, dt, d_loss, d_lse, d_x, d_tg, BT,
					  V),
	     "xent fwd");
	rt_crossentropy_forward(losses, probs, x, tg, BT, V);
	cmp(dt, "crossentropy losses", d_loss, losses, (size_t)BT, 1);
	for (int i = 0; i < BT; i++) {
		double mx = x[(size_t)i * V], sum = 0.0;
		for (int j = 1; j < V; j++)
			mx = x[(size_t)i * V + j] > mx ? x[(size_t)i * V + j]
						       : mx;
		for (int j = 0; j < V; j++)
			sum += exp(x[(size_t)i * V + j] - mx);
		lse[i] = (float)(mx + log(sum));
	}
	cmp(dt, "crossentropy lse", d_lse, lse, (size_t)BT, 1);
	must(rt_cuda_crossentropy_backward(s, dt, d_dx, d_x, d_lse, d_tg, 0.25f,
					   BT, V),
	     "xent bwd");
	rt_crossentropy_backward(dx, probs, tg, 0.25f, BT, V);
	cmp(dt, "crossentropy backward dlogits += (from lse)", d_dx, dx, n, 0);
	expect_err(rt_cuda_crossentropy_forward(s, dt, d_loss, d_lse, d_x, d_tg,
						BT, 0),
		   HEXI_ERR_INVAL, "crossentropy", "crossentropy with V 0");
	tg[2] = V;
	must(rt_cuda_upload(d_tg, tg, sizeof(tg)), "upload");
	expect_err(rt_cuda_crossentropy_forward(s, dt, d_loss, d_lse, d_x, d_tg,
						BT, V),
		   HEXI_ERR_CUDA, "crossentropy_forward",
		   "crossentropy with a target out of range");
	rt_cuda_free(d_tg);
	rt_cuda_free(d_x);
	rt_cuda_free(d_dx);
	rt_cuda_free(d_loss);
	rt_cuda_free(d_lse);
	free(x);
	free(probs);
	free(dx);
}

static void t_optim(rt_cuda_dtype dt)
{
	const size_t n = 37;
	float *w = hvec(n, 1), *g = hvec(n, 0.1f), *m = hzero(n), *v = hzero(n);
	float *d_master = dput(RT_CUDA_F32, w, n),
	      *d_g = dput(RT_CUDA_F32, g, n);
	float *d_m = dput(RT_CUDA_F32, m, n), *d_v = dput(RT_CUDA_F32, v, n);
	void *d_w = NULL;
	double acc = 0.5, *d_acc = NULL, want = 0.5;
	rt_adamw_opts o = {.lr = 0.01f,
			   .beta1 = 0.9f,
			   .beta2 = 0.95f,
			   .eps = 1e-6f,
			   .weight_decay = 0.1f};
	rt_param p = {.w = w, .g = g, .m = m, .v = v, .n = n};
	rt_cuda_stream s = NULL;

	must(rt_cuda_alloc(&d_w, n * rt_cuda_dtype_size(dt)), "alloc");
	for (int step = 1; step <= 3; step++) {
		must(rt_cuda_adamw(s, dt, d_master,
				   dt == RT_CUDA_F32 ? NULL : d_w, d_g, d_m,
				   d_v, n, o.lr, o.beta1, o.beta2, o.eps,
				   o.weight_decay, step),
		     "adamw");
		rt_param_adamw(&p, &o, step, 1);
	}
	cmp(dt, "adamw 3 steps: fp32 master", d_master, w, n, 1);
	cmp(dt, "adamw: m", d_m, m, n, 1);
	cmp(dt, "adamw: v", d_v, v, n, 1);
	if (dt == RT_CUDA_BF16)
		cmp(dt, "adamw: bf16 copy of the weights", d_w, w, n, 0);
	expect_err(rt_cuda_adamw(s, dt, d_master, NULL, d_g, d_m, d_v, n, o.lr,
				 o.beta1, o.beta2, o.eps, 0, 0),
		   HEXI_ERR_INVAL, "adamw", "adamw at step 0");

	/* scale and sum of squares (accumulates into the device double) */
	must(rt_cuda_alloc((void **)&d_acc, sizeof(double)), "alloc");
	must(rt_cuda_upload(d_acc, &acc, sizeof(acc)), "upload");
	must(rt_cuda_scale_f32(s, d_g, -2.0f, n), "scale");
	must(rt_cuda_sumsq_f32(s, d_g, n, d_acc), "sumsq");
	must(rt_cuda_sumsq_f32(s, d_g, n, d_acc), "sumsq");
	for (size_t i = 0; i < n; i++) {
		g[i] *= -2.0f;
		want += 2.0 * (double)g[i] * g[i];
	}
	cmp(dt, "scale_f32 x *= -2", d_g, g, n, 1);
	must(rt_cuda_download(&acc, d_acc, sizeof(acc)), "download");
	is_near(acc, want, 1e-12, "sumsq_f32 twice: acc += sum x^2 (%.12g)",
		acc);
	expect_err(rt_cuda_sumsq_f32(s, d_g, n, &acc), HEXI_ERR_CUDA,
		   "sumsq_f32", "sumsq into a host double");
	rt_cuda_free(d_master);
	rt_cuda_free(d_g);
	rt_cuda_free(d_m);
	rt_cuda_free(d_v);
	rt_cuda_free(d_w);
	rt_cuda_free(d_acc);
	free(w);
	free(g);
	free(m);
	free(v);
}

/* The sharded optimizer's update of an owned range [off, off + len) of a
 * tensor (DECISIONS 140): SGD and AdamW on pointers into the fp32 master
 * weights, with range-sized gradient and moments; the CPU's arithmetic
 * on the range (SGD bit-exact), nothing outside it touched. */
static void t_range_optim(void)
{
	const size_t n = 41, off = 7, len = 23;
	float *w = hvec(n, 1), *w0 = hzero(n), *g = hvec(len, 0.1f);
	float *m = hzero(len), *v = hzero(len), *got;
	float *d_w = dput(RT_CUDA_F32, w, n), *d_g = dput(RT_CUDA_F32, g, len);
	float *d_m = dput(RT_CUDA_F32, m, len),
	      *d_v = dput(RT_CUDA_F32, v, len);
	rt_adamw_opts o = {.lr = 0.01f,
			   .beta1 = 0.9f,
			   .beta2 = 0.95f,
			   .eps = 1e-6f,
			   .weight_decay = 0.1f};
	int same = 1;

	memcpy(w0, w, n * sizeof(float));
	must(rt_cuda_sgd_f32(NULL, d_w + off, d_g, 0.5f, len), "sgd_f32");
	for (size_t j = 0; j < len; j++)
		w[off + j] -= 0.5f * g[j];
	got = dget(RT_CUDA_F32, d_w, n);
	for (size_t i = 0; i < n; i++)
		same &= memcmp(&got[i], &w[i], sizeof(float)) == 0;
	ok(same,
	   "sgd_f32 on [%zu, %zu) of %zu: the CPU's w -= lr * g, "
	   "bit for bit, the rest untouched",
	   off, off + len, n);
	free(got);
	for (int step = 1; step <= 2; step++) {
		must(rt_cuda_adamw(NULL, RT_CUDA_F32, d_w + off, NULL, d_g, d_m,
				   d_v, len, o.lr, o.beta1, o.beta2, o.eps,
				   o.weight_decay, step),
		     "adamw on a range");
		rt_adamw_span(w + off, g, m, v, len, &o, step, 1);
	}
	cmp(RT_CUDA_F32, "adamw on a range (2 steps): master", d_w, w, n, 1);
	cmp(RT_CUDA_F32, "adamw on a range: m", d_m, m, len, 1);
	got = dget(RT_CUDA_F32, d_w, n);
	ok(memcmp(got, w0, off * sizeof(float)) == 0 &&
	       memcmp(got + off + len, w0 + off + len,
		      (n - off - len) * sizeof(float)) == 0,
	   "adamw on a range: elements outside it unchanged");
	expect_err(rt_cuda_sgd_f32(NULL, w, d_g, 0.5f, len), HEXI_ERR_CUDA,
		   "sgd_f32", "sgd on host weights");
	free(got);
	rt_cuda_free(d_w);
	rt_cuda_free(d_g);
	rt_cuda_free(d_m);
	rt_cuda_free(d_v);
	free(w);
	free(w0);
	free(g);
	free(m);
	free(v);
}

/* The stream-order checker: what a GPU would not order is counted. */
static void t_races(rt_cuda *c)
{
	rt_cuda_stream cs = rt_cuda_compute_stream(c),
		       ms = rt_cuda_comm_stream(c);
	float h[16] = {0}, *a = NULL, *b = NULL;
	unsigned long r0 = gpu_emu_races();

	must(rt_cuda_alloc((void **)&a, sizeof(h)), "alloc");
	must(rt_cuda_alloc((void **)&b, sizeof(h)), "alloc");
	must(rt_cuda_scale_f32(cs, a, 2.0f, 16), "scale");
	must(rt_cuda_scale_f32(cs, a, 2.0f, 16), "scale");
	is_int(gpu_emu_races() - r0, 0, "two launches on one stream: ordered");
	must(rt_cuda_download(h, a, sizeof(h)), "download");
	is_int(gpu_emu_races() - r0, 1,
	       "download of a compute-stream result without a sync: race");
	must(rt_cuda_sync(cs), "sync");
	must(rt_cuda_download(h, a, sizeof(h)), "download");
	is_int(gpu_emu_races() - r0, 1, "after rt_cuda_sync: no race");
	must(rt_cuda_scale_f32(cs, a, 2.0f, 16), "scale");
	must(rt_cuda_copy(ms, b, a, sizeof(h)), "copy");
	is_int(gpu_emu_races() - r0, 2,
	       "comm stream reads a compute-stream write without a wait: race");
	must(rt_cuda_sync(ms), "sync");
	must(rt_cuda_scale_f32(cs, a, 2.0f, 16), "scale");
	must(rt_cuda_stream_wait(ms, cs), "stream_wait");
	must(rt_cuda_copy(ms, b, a, sizeof(h)), "copy");
	is_int(gpu_emu_races() - r0, 2, "after rt_cuda_stream_wait: no race");
	must(rt_cuda_upload(a, h, sizeof(h)), "upload");
	is_int(gpu_emu_races() - r0, 3,
	       "upload over a buffer queued launches use: race");
	must(rt_cuda_sync(NULL), "sync");
	rt_cuda_free(a);
	rt_cuda_free(b);
}

static void t_comm(void)
{
	rt_comm *self = NULL, *g = NULL;

	must(rt_comm_self_create(&self), "self comm");
	must(rt_comm_nccl_create(self, 0, &g), "nccl create");
	ok(g != NULL && g != self && g->rank == 0 && g->size == 1,
	   "emulated NCCL communicator over the self backend: rank 0 of 1");
	{
		int r0 = 0;
		rt_group *grp = NULL;
		float h[4] = {1, 2, 3, 4}, *d = NULL;

		must(rt_comm_group_get(g, &r0, 1, &grp), "group");
		must(rt_cuda_alloc((void **)&d, sizeof(h)), "alloc");
		must(rt_cuda_upload(d, h, sizeof(h)), "upload");
		ok(grp != NULL && grp->n == 1 && grp->me == 0 &&
		       rt_allreduce_f32(grp, d, 4) == HEXI_OK,
		   "all-reduce of device memory over a group of one");
		expect_err(rt_allreduce_f32(grp, h, 4), HEXI_ERR_CUDA,
			   "NCCL all-reduce", "all-reduce of host memory");
		/* the sharded sync's pair (a group of one: a copy) */
		ok(grp->comm->ops->reduce_scatter_sum != NULL &&
		       grp->comm->ops->allgather != NULL &&
		       grp->comm->ops->reduce_scatterv_sum == NULL &&
		       grp->comm->ops->allgatherv == NULL,
		   "emulated NCCL: reduce-scatter and all-gather, no "
		   "variable-count versions (as NCCL)");
		ok(grp->comm->ops->reduce_scatter_sum(grp, d, d + 2, 2,
						      RT_F32) == HEXI_OK &&
		       grp->comm->ops->allgather(grp, d, 2, RT_F32) == HEXI_OK,
		   "reduce-scatter and all-gather of device memory");
		expect_err(
		    grp->comm->ops->reduce_scatter_sum(grp, d, h, 2, RT_F32),
		    HEXI_ERR_CUDA, "NCCL reduce-scatter",
		    "reduce-scatter into host memory");
		expect_err(grp->comm->ops->allgather(grp, h, 2, RT_F32),
			   HEXI_ERR_CUDA, "NCCL all-gather",
			   "all-gather of host memory");
		rt_cuda_free(d);
	}
	rt_comm_destroy(g);
	rt_comm_destroy(self);
}

/* rt_cuda_attn_pick: which attention, as a table (mode, dtype, compute
 * capability, head size, cuDNN version -> result, kind, reason). */
static void t_attn_pick(void)
{
	static const struct {
		const char *mode;
		rt_cuda_dtype dt;
		int cc, hs;
		long ver;
		hexi_rc rc;
		rt_cuda_attn_kind kind;
		const char *why;
	} t[] = {
	    {NULL, RT_CUDA_BF16, 90, 128, 91900, HEXI_OK, RT_CUDA_ATTN_CUDNN,
	     "cudnn (auto: bf16, sm_90, hs 128, cuDNN 91900)"},
	    {"auto", RT_CUDA_BF16, 80, 64, 90000, HEXI_OK, RT_CUDA_ATTN_CUDNN,
	     "cudnn (auto"},
	    {"", RT_CUDA_BF16, 89, 16, 90100, HEXI_OK, RT_CUDA_ATTN_CUDNN,
	     "cudnn (auto"},
	    {"cudnn", RT_CUDA_BF16, 90, 128, 91900, HEXI_OK, RT_CUDA_ATTN_CUDNN,
	     "cudnn (HEXI_ATTENTION=cudnn"},
	    {NULL, RT_CUDA_F32, 90, 128, 91900, HEXI_OK, RT_CUDA_ATTN_OWN,
	     "own (auto: fp32"},
	    {NULL, RT_CUDA_BF16, 75, 128, 91900, HEXI_OK, RT_CUDA_ATTN_OWN,
	     "own (auto: compute capability below 8.0)"},
	    {NULL, RT_CUDA_BF16, 90, 20, 91900, HEXI_OK, RT_CUDA_ATTN_OWN,
	     "own (auto: head size"},
	    {NULL, RT_CUDA_BF16, 90, 136, 91900, HEXI_OK, RT_CUDA_ATTN_OWN,
	     "own (auto: head size"},
	    {NULL, RT_CUDA_BF16, 90, 128, 0, HEXI_OK, RT_CUDA_ATTN_OWN,
	     "own (auto: cuDNN not loaded"},
	    {NULL, RT_CUDA_BF16, 90, 128, 8907, HEXI_OK, RT_CUDA_ATTN_OWN,
	     "own (auto: cuDNN older than 9.0)"},
	    {"own", RT_CUDA_BF16, 90, 128, 91900, HEXI_OK, RT_CUDA_ATTN_OWN,
	     "own (HEXI_ATTENTION=own)"},
	    {"cudnn", RT_CUDA_F32, 90, 128, 91900, HEXI_ERR_UNSUPPORTED,
	     RT_CUDA_ATTN_OWN, "HEXI_ATTENTION=cudnn: fp32"},
	    {"cudnn", RT_CUDA_BF16, 90, 128, 0, HEXI_ERR_UNSUPPORTED,
	     RT_CUDA_ATTN_OWN, "HEXI_ATTENTION=cudnn: cuDNN not loaded"},
	    {"CUDNN", RT_CUDA_BF16, 90, 128, 91900, HEXI_ERR_INVAL,
	     RT_CUDA_ATTN_OWN, "HEXI_ATTENTION='CUDNN': auto, own or cudnn"},
	    {"flash", RT_CUDA_BF16, 90, 128, 91900, HEXI_ERR_INVAL,
	     RT_CUDA_ATTN_OWN, "HEXI_ATTENTION='flash'"},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		rt_cuda_attn_kind k = RT_CUDA_ATTN_CUDNN;
		char why[256] = "";
		hexi_rc rc = rt_cuda_attn_pick(t[i].mode, t[i].dt, t[i].cc,
					       t[i].hs, t[i].ver, &k, why,
					       sizeof(why));
		const char *text = rc == HEXI_OK ? why : hexi_errmsg(rc);

		ok(rc == t[i].rc && k == t[i].kind &&
		       strncmp(text, t[i].why, strlen(t[i].why)) == 0,
		   "attention pick %s %s sm_%d hs %d cuDNN %ld: %s",
		   t[i].mode ? t[i].mode : "(unset)",
		   rt_cuda_dtype_name(t[i].dt), t[i].cc, t[i].hs, t[i].ver,
		   text);
		hexi_error_clear();
	}
}

int main(void)
{
	rt_cuda *c = NULL;

	t_attn_pick();
	t_context();
	t_memory();
	t_cast();
	must(rt_cuda_create(0, 1, &c), "create");
	for (int d = 0; d < 2; d++) {
		rt_cuda_dtype dt = d ? RT_CUDA_BF16 : RT_CUDA_F32;
		t_matmul(c, dt);
		t_embed_add_norm(dt);
		t_rope_swiglu(dt);
		t_attention(dt);
		t_xent(dt);
		t_optim(dt);
	}
	t_range_optim();
	t_races(c);
	t_comm();
	tap_diag("largest deviation: fp32 %.3g (tol %g), bf16 %.3g (tol %g)",
		 worst[0], TOL_F32, worst[1], TOL_BF16);
	rt_cuda_destroy(c); /* reports device memory never freed */
	return tap_done();
}
