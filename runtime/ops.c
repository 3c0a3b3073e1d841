/* ops.c - CPU reference operators (see rt_ops.h for the contract). */
#include "config.h"

#include "rt_ops.h"

#include <math.h>
#include <string.h>

#ifdef HAVE_OPENBLAS
#include <cblas.h>
#endif

/* ---- GEMM --------------------------------------------------------------- */

void rt_sgemm_ref(int ta, int tb, int M, int N, int K, float alpha,
		  const float *A, int lda, const float *B, int ldb, float beta,
		  float *C, int ldc)
{
	for (int i = 0; i < M; i++) {
		for (int j = 0; j < N; j++) {
			float acc = 0.0f;
			for (int p = 0; p < K; p++) {
				float a = ta ? A[(size_t)p * lda + i]
					     : A[(size_t)i * lda + p];
				float b = tb ? B[(size_t)j * ldb + p]
					     : B[(size_t)p * ldb + j];
				acc += a * b;
			}
			float *c = &C[(size_t)i * ldc + j];
			/* beta == 0 ignores C, as BLAS does (C may be junk) */
			*c = alpha * acc + (beta == 0.0f ? 0.0f : beta * *c);
		}
	}
}

void rt_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A,
	      int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	if (M == 0 || N == 0)
		return;
#ifdef HAVE_OPENBLAS
	cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
		    tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
		    ldb, beta, C, ldc);
#else
	rt_sgemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

int rt_sgemm_is_blas(void)
{
#ifdef HAVE_OPENBLAS
	return 1;
#else
	return 0;
#endif
}

/* ---- matmul ------------------------------------------------------------- */

void rt_matmul_forward(float *out, const float *inp, const float *w, int BT,
		       int C, int OC)
{
	/* out (BT,OC) = inp (BT,C) . w (OC,C)^T */
	rt_sgemm(0, 1, BT, OC, C, 1.0f, inp, C, w, C, 0.0f, out, OC);
}

void rt_matmul_backward(float *dinp, float *dw, const float *dout,
			const float *inp, const float *w, int BT, int C, int OC)
{
	/* dinp (BT,C) += dout (BT,OC) . w (OC,C) */
	if (dinp)
		rt_sgemm(0, 0, BT, C, OC, 1.0f, dout, OC, w, C, 1.0f, dinp, C);
	/* dw (OC,C) += dout^T (OC,BT) . inp (BT,C) */
	rt_sgemm(1, 0, OC, C, BT, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
}

void rt_matmul_tw_forward(float *out, const float *inp, const float *w, int BT,
			  int C, int OC)
{
	/* out (BT,OC) = inp (BT,C) . w (C,OC) */
	rt_sgemm(0, 0, BT, OC, C, 1.0f, inp, C, w, OC, 0.0f, out, OC);
}

void rt_matmul_tw_backward(float *dinp, float *dw, const float *dout,
			   const float *inp, const float *w, int BT, int C,
			   int OC)
{
	/* dinp (BT,C) += dout (BT,OC) . w^T (OC,C) */
	if (dinp)
		rt_sgemm(0, 1, BT, C, OC, 1.0f, dout, OC, w, OC, 1.0f, dinp, C);
	/* dw (C,OC) += inp^T (C,BT) . dout (BT,OC) */
	rt_sgemm(1, 0, C, OC, BT, 1.0f, inp, C, dout, OC, 1.0f, dw, OC);
}

/* ---- embedding ---------------------------------------------------------- */

void rt_embed_forward(float *out, const int *tokens, const float *wte, int BT,
		      int C)
{
	for (int i = 0; i < BT; i++)
		memcpy(out + (size_t)i * C, wte + (size_t)tokens[i] * C,
		       (size_t)C * sizeof(float));
}

void rt_embed_backward(float *dwte, const float *dout, const int *tokens,
		       int BT, int C)
{
	for (int i = 0; i < BT; i++) {
		float *d = dwte + (size_t)tokens[i] * C;
		const float *g = dout + (size_t)i * C;
		for (int c = 0; c < C; c++)
			d[c] += g[c];
	}
}

/* ---- RMSNorm ------------------------------------------------------------ */

void rt_rmsnorm_forward(float *out, float *rstd, const float *inp,
			const float *w, int BT, int C, float eps)
{
	for (int i = 0; i < BT; i++) {
		const float *x = inp + (size_t)i * C; /* (C) */
		float *o = out + (size_t)i * C;
		double ss = 0.0;
		for (int c = 0; c < C; c++)
			ss += (double)x[c] * x[c];
		float s = (float)(1.0 / sqrt(ss / C + eps));
		for (int c = 0; c < C; c++)
			o[c] = x[c] * s * w[c];
		rstd[i] = s;
	}
}

void rt_rmsnorm_backward(float *dinp, float *dw, const float *dout,
			 const float *inp, const float *w, const float *rstd,
			 int BT, int C)
{
	for (int i = 0; i < BT; i++) {
		const float *x = inp + (size_t)i * C;
		const float *dy = dout + (size_t)i * C;
		float *dx = dinp + (size_t)i * C;
		float s = rstd[i];
		/* y = x*s*w, s = (mean x^2 + eps)^-1/2:
		 * dx = s*w*dy - x * s^3/C * sum(dy*w*x) */
		double dot = 0.0;
		for (int c = 0; c < C; c++)
			dot += (double)dy[c] * w[c] * x[c];
		float k = (float)(dot * s * s * s / C);
		for (int c = 0; c < C; c++) {
			dx[c] += s * w[c] * dy[c] - x[c] * k;
			dw[c] += dy[c] * x[c] * s;
		}
	}
}

/* ---- RoPE --------------------------------------------------------------- */

/* Rotate every pair of x (B,T,NH,hs) by sign * angle(t, i). */
static void rope_rotate(float *x, int B, int T, int NH, int hs, float theta,
			float sign)
{
	for (int t = 0; t < T; t++) {
		for (int i = 0; i < hs / 2; i++) {
			double ang = (double)t *
				     pow(theta, -(double)(2 * i) / (double)hs);
			float cs = (float)cos(ang);
			float sn = sign * (float)sin(ang);
			for (int b = 0; b < B; b++) {
				for (int h = 0; h < NH; h++) {
					float *p =
					    x +
					    (((size_t)b * T + t) * NH + h) *
						hs +
					    2 * i;
					float x0 = p[0], x1 = p[1];
					p[0] = x0 * cs - x1 * sn;
					p[1] = x0 * sn + x1 * cs;
				}
			}
		}
	}
}

void rt_rope_forward(float *x, int B, int T, int NH, int hs, float theta)
{
	rope_rotate(x, B, T, NH, hs, theta, 1.0f);
}

void rt_rope_backward(float *dx, int B, int T, int NH, int hs, float theta)
{
	rope_rotate(dx, B, T, NH, hs, theta, -1.0f);
}

/* ---- attention ---------------------------------------------------------- */

/* Causal softmax of the scores of row t in place: a (T), entries > t = 0. */
static void causal_softmax_row(float *a, int t, int T)
{
	float mx = -INFINITY;
	for (int t2 = 0; t2 <= t; t2++)
		mx = a[t2] > mx ? a[t2] : mx;
	double sum = 0.0;
	for (int t2 = 0; t2 <= t; t2++) {
		a[t2] = expf(a[t2] - mx);
		sum += a[t2];
	}
	float inv = (float)(1.0 / sum);
	for (int t2 = 0; t2 <= t; t2++)
		a[t2] *= inv;
	for (int t2 = t + 1; t2 < T; t2++)
		a[t2] = 0.0f;
}

void rt_attention_forward(float *out, float *att, const float *q,
			  const float *k, const float *v, int B, int T, int NH,
			  int NKV, int hs)
{
	const int G = NH / NKV, qs = NH * hs, ks = NKV * hs;
	const float scale = 1.0f / sqrtf((float)hs);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++) {
			/* per head: q_h (T,hs) row stride qs, k_g v_g stride ks
			 */
			const float *qh = q + (size_t)b * T * qs + h * hs;
			size_t ko = (size_t)b * T * ks + (size_t)(h / G) * hs;
			float *a =
			    att + ((size_t)b * NH + h) * T * T; /* (T,T) */
			float *oh = out + (size_t)b * T * qs + h * hs;
			/* scores (T,T) = scale * q_h k_g^T, full square */
			rt_sgemm(0, 1, T, T, hs, scale, qh, qs, k + ko, ks,
				 0.0f, a, T);
			for (int t = 0; t < T; t++)
				causal_softmax_row(a + (size_t)t * T, t, T);
			/* out_h (T,hs) = att (T,T) v_g (T,hs); zeros above diag
			 */
			rt_sgemm(0, 0, T, hs, T, 1.0f, a, T, v + ko, ks, 0.0f,
				 oh, qs);
		}
}

/* Gradient of one query row (b, t, h): p = att row (t+1 used entries). */
static void attention_backward_row(float *dqt, float *dk, float *dv,
				   const float *dot, const float *qt,
				   const float *k, const float *v,
				   const float *p, int t, size_t kvstride,
				   int hs, float scale)
{
	/* dp[t2] = dout . v[t2]; dscore = p * (dp - sum(p * dp)) */
	double pdp = 0.0;
	for (int t2 = 0; t2 <= t; t2++) {
		const float *vt = v + t2 * kvstride;
		float *dvt = dv + t2 * kvstride;
		float dp = 0.0f;
		for (int i = 0; i < hs; i++) {
			dp += dot[i] * vt[i];
			dvt[i] += p[t2] * dot[i];
		}
		pdp += (double)p[t2] * dp;
	}
	for (int t2 = 0; t2 <= t; t2++) {
		const float *vt = v + t2 * kvstride;
		const float *kt = k + t2 * kvstride;
		float *dkt = dk + t2 * kvstride;
		float dp = 0.0f;
		for (int i = 0; i < hs; i++)
			dp += dot[i] * vt[i];
		float ds = p[t2] * (dp - (float)pdp) * scale;
		for (int i = 0; i < hs; i++) {
			dqt[i] += ds * kt[i];
			dkt[i] += ds * qt[i];
		}
	}
}

void rt_attention_backward(float *dq, float *dk, float *dv, const float *dout,
			   const float *q, const float *k, const float *v,
			   const float *att, int B, int T, int NH, int NKV,
			   int hs)
{
	const int G = NH / NKV;
	const float scale = 1.0f / sqrtf((float)hs);
	const size_t kvstride = (size_t)NKV * hs;
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int h = 0; h < NH; h++) {
				size_t qo = (((size_t)b * T + t) * NH + h) * hs;
				size_t ko = (size_t)b * T * kvstride +
					    (size_t)(h / G) * hs;
				const float *p =
				    att + (((size_t)b * NH + h) * T + t) * T;
				attention_backward_row(
				    dq + qo, dk + ko, dv + ko, dout + qo,
				    q + qo, k + ko, v + ko, p, t, kvstride, hs,
				    scale);
			}
}

/* ---- SwiGLU ------------------------------------------------------------- */

void rt_swiglu_forward(float *out, const float *gate, const float *up, size_t N)
{
	for (size_t i = 0; i < N; i++) {
		float g = gate[i];
		out[i] = g / (1.0f + expf(-g)) * up[i];
	}
}

void rt_swiglu_backward(float *dgate, float *dup, const float *dout,
			const float *gate, const float *up, size_t N)
{
	for (size_t i = 0; i < N; i++) {
		float g = gate[i];
		float sig = 1.0f / (1.0f + expf(-g));
		float silu = g * sig;
		/* d silu/dg = sig * (1 + g * (1 - sig)) */
		dgate[i] += dout[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
		dup[i] += dout[i] * silu;
	}
}

/* ---- residual ----------------------------------------------------------- */

void rt_residual_forward(float *out, const float *a, const float *b, size_t N)
{
	for (size_t i = 0; i < N; i++)
		out[i] = a[i] + b[i];
}

void rt_residual_backward(float *da, float *db, const float *dout, size_t N)
{
	for (size_t i = 0; i < N; i++) {
		da[i] += dout[i];
		db[i] += dout[i];
	}
}

/* ---- softmax cross-entropy --------------------------------------------- */

void rt_crossentropy_forward(float *losses, float *probs, const float *logits,
			     const int *targets, int BT, int V)
{
	for (int i = 0; i < BT; i++) {
		const float *l = logits + (size_t)i * V; /* (V) */
		float *p = probs + (size_t)i * V;
		float mx = l[0];
		for (int j = 1; j < V; j++)
			if (l[j] > mx)
				mx = l[j];
		double sum = 0.0;
		for (int j = 0; j < V; j++)
			sum += exp((double)l[j] - mx);
		for (int j = 0; j < V; j++)
			p[j] = (float)(exp((double)l[j] - mx) / sum);
		/* -log p[target] from the logits, not from the rounded p */
		losses[i] = (float)(log(sum) - ((double)l[targets[i]] - mx));
	}
}

void rt_crossentropy_backward(float *dlogits, const float *probs,
			      const int *targets, float dloss, int BT, int V)
{
	for (int i = 0; i < BT; i++) {
		const float *p = probs + (size_t)i * V;
		float *d = dlogits + (size_t)i * V;
		for (int j = 0; j < V; j++)
			d[j] +=
			    dloss * (p[j] - (j == targets[i] ? 1.0f : 0.0f));
	}
}

/* work (T,T) <- dscores of one head from datt in work and the probs a. */
static void attention_dscores(float *work, const float *a, int T, float scale)
{
	for (int t = 0; t < T; t++) {
		float *d = work + (size_t)t * T;
		const float *p = a + (size_t)t * T;
		double pdp = 0.0;
		for (int t2 = 0; t2 <= t; t2++)
			pdp += (double)p[t2] * d[t2];
		for (int t2 = 0; t2 <= t; t2++)
			d[t2] = p[t2] * (d[t2] - (float)pdp) * scale;
		for (int t2 = t + 1; t2 < T; t2++)
			d[t2] = 0.0f;
	}
}

void rt_attention_backward_ws(float *dq, float *dk, float *dv, float *work,
			      const float *dout, const float *q, const float *k,
			      const float *v, const float *att, int B, int T,
			      int NH, int NKV, int hs)
{
	const int G = NH / NKV, qs = NH * hs, ks = NKV * hs;
	const float scale = 1.0f / sqrtf((float)hs);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++) {
			size_t qo = (size_t)b * T * qs + (size_t)h * hs;
			size_t ko = (size_t)b * T * ks + (size_t)(h / G) * hs;
			const float *a = att + ((size_t)b * NH + h) * T * T;
			/* datt (T,T) = dout_h (T,hs) v_g^T */
			rt_sgemm(0, 1, T, T, hs, 1.0f, dout + qo, qs, v + ko,
				 ks, 0.0f, work, T);
			/* dv_g (T,hs) += att^T (T,T) dout_h (T,hs) */
			rt_sgemm(1, 0, T, hs, T, 1.0f, a, T, dout + qo, qs,
				 1.0f, dv + ko, ks);
			attention_dscores(work, a, T, scale);
			/* dq_h += dscores k_g; dk_g += dscores^T q_h */
			rt_sgemm(0, 0, T, hs, T, 1.0f, work, T, k + ko, ks,
				 1.0f, dq + qo, qs);
			rt_sgemm(1, 0, T, hs, T, 1.0f, work, T, q + qo, qs,
				 1.0f, dk + ko, ks);
		}
}
