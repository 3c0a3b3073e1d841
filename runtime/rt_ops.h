/*
 * rt_ops.h - CPU reference operators of the transformer (internal to
 * libhexirt).  Written in the style of karpathy/llm.c: every layer is a
 * *_forward / *_backward pair over plain fp32 arrays whose shapes are given
 * in the comments, e.g. (B,T,C) for B samples, T positions, C channels.
 * BT = B*T.  All arrays are row-major and densely packed.
 *
 * These are the reference the CUDA kernels are tested against, so their
 * contract is exact:
 *  - forward functions OVERWRITE their outputs;
 *  - backward functions ACCUMULATE (+=) into every d* output, both parameter
 *    gradients and input gradients (callers zero activation gradients);
 *    a d* pointer may be NULL where documented, which skips that gradient;
 *  - inputs and outputs never alias unless a comment says so;
 *  - no function allocates, fails or keeps state; argument checking is the
 *    caller's (rt_model validates shapes and token ids once).
 */
#ifndef HEXI_RT_OPS_H
#define HEXI_RT_OPS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Default RoPE base and RMSNorm epsilon of the reference model. */
#define RT_ROPE_THETA 10000.0f
#define RT_NORM_EPS   1e-5f

/* ---- GEMM --------------------------------------------------------------- */

/*
 * Row-major C (M,N) = alpha * op(A) op(B) + beta * C, with op(X) = X or X^T
 * (ta, tb nonzero = transposed), lda/ldb/ldc the row strides as in CBLAS
 * row-major.  Goes through OpenBLAS cblas_sgemm when the library was built
 * with it, else through rt_sgemm_ref.
 */
void rt_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A,
	      int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* Plain-C version of the same (always built; tests compare the two). */
void rt_sgemm_ref(int ta, int tb, int M, int N, int K, float alpha,
		  const float *A, int lda, const float *B, int ldb, float beta,
		  float *C, int ldc);
/* 1 if rt_sgemm uses OpenBLAS. */
int rt_sgemm_is_blas(void);

/* ---- matmul (no bias) -------------------------------------------------- */

/* Column-parallel layout, weight stored (out, in) = (OC,C):
 * out (BT,OC) = inp (BT,C) . w^T */
void rt_matmul_forward(float *out, const float *inp, const float *w, int BT,
		       int C, int OC);
/* dinp (BT,C) += dout . w; dw (OC,C) += dout^T . inp.  dinp may be NULL. */
void rt_matmul_backward(float *dinp, float *dw, const float *dout,
			const float *inp, const float *w, int BT, int C,
			int OC);

/* Row-parallel layout, weight stored transposed (in, out) = (C,OC):
 * out (BT,OC) = inp (BT,C) . w */
void rt_matmul_tw_forward(float *out, const float *inp, const float *w, int BT,
			  int C, int OC);
/* dinp (BT,C) += dout . w^T; dw (C,OC) += inp^T . dout.  dinp may be NULL. */
void rt_matmul_tw_backward(float *dinp, float *dw, const float *dout,
			   const float *inp, const float *w, int BT, int C,
			   int OC);

/* ---- embedding ---------------------------------------------------------- */

/* out (BT,C) = wte[tokens] with wte (V,C), tokens (BT) in [0,V). */
void rt_embed_forward(float *out, const int *tokens, const float *wte, int BT,
		      int C);
/* dwte (V,C) += scatter of dout (BT,C) by tokens (BT). */
void rt_embed_backward(float *dwte, const float *dout, const int *tokens,
		       int BT, int C);

/* ---- RMSNorm ------------------------------------------------------------ */

/* out (BT,C) = inp * rstd * w, rstd (BT) = 1/sqrt(mean(inp^2) + eps),
 * w (C).  rstd is saved for the backward pass. */
void rt_rmsnorm_forward(float *out, float *rstd, const float *inp,
			const float *w, int BT, int C, float eps);
/* dinp (BT,C) +=, dw (C) += from dout (BT,C), inp, w, rstd (BT). */
void rt_rmsnorm_backward(float *dinp, float *dw, const float *dout,
			 const float *inp, const float *w, const float *rstd,
			 int BT, int C);

/* ---- RoPE --------------------------------------------------------------- */

/*
 * Rotary position embedding on x (B,T,NH,hs), hs even, in place.  Pairs
 * (2i, 2i+1) of every head at position t rotate by the angle
 * t * theta^(-2i/hs), computed in double and rounded to float for cos/sin.
 */
void rt_rope_forward(float *x, int B, int T, int NH, int hs, float theta);
/* dx (B,T,NH,hs) in place: the inverse rotation (the transpose). */
void rt_rope_backward(float *dx, int B, int T, int NH, int hs, float theta);

/* ---- causal self-attention with grouped KV heads ----------------------- */

/*
 * q (B,T,NH,hs), k and v (B,T,NKV,hs), NH a multiple of NKV: query head h
 * uses KV head h / (NH/NKV).  out (B,T,NH,hs) = softmax(q k^T / sqrt(hs),
 * causal) v; att (B,NH,T,T) keeps the probabilities (entries t2 > t are 0).
 * Per head: scores by one GEMM, row softmax (max subtracted, sum in double),
 * then one GEMM with v.
 */
void rt_attention_forward(float *out, float *att, const float *q,
			  const float *k, const float *v, int B, int T, int NH,
			  int NKV, int hs);
/* dq (B,T,NH,hs) +=, dk, dv (B,T,NKV,hs) += from dout (B,T,NH,hs).
 * Plain loops, one query row at a time (the readable reference). */
void rt_attention_backward(float *dq, float *dk, float *dv, const float *dout,
			   const float *q, const float *k, const float *v,
			   const float *att, int B, int T, int NH, int NKV,
			   int hs);
/* The same through per-head GEMMs, with a caller's workspace work (T,T);
 * what the model uses.  Equal to rt_attention_backward up to rounding. */
void rt_attention_backward_ws(float *dq, float *dk, float *dv, float *work,
			      const float *dout, const float *q, const float *k,
			      const float *v, const float *att, int B, int T,
			      int NH, int NKV, int hs);

/* ---- SwiGLU ------------------------------------------------------------- */

/* out (N) = silu(gate) * up, silu(x) = x / (1 + exp(-x)); N = BT*F. */
void rt_swiglu_forward(float *out, const float *gate, const float *up,
		       size_t N);
/* dgate (N) +=, dup (N) += from dout (N). */
void rt_swiglu_backward(float *dgate, float *dup, const float *dout,
			const float *gate, const float *up, size_t N);

/* ---- residual ----------------------------------------------------------- */

/* out (N) = a + b (out may alias a or b). */
void rt_residual_forward(float *out, const float *a, const float *b, size_t N);
/* da (N) += dout, db (N) += dout. */
void rt_residual_backward(float *da, float *db, const float *dout, size_t N);

/* ---- softmax cross-entropy --------------------------------------------- */

/*
 * logits (BT,V), targets (BT) in [0,V): probs (BT,V) = softmax(logits),
 * losses (BT) = -log probs[target].  Computed with the max subtracted, the
 * normaliser in double.
 */
void rt_crossentropy_forward(float *losses, float *probs, const float *logits,
			     const int *targets, int BT, int V);
/* dlogits (BT,V) += dloss * (probs - onehot(targets)); dloss is the
 * gradient of the objective with respect to every position's loss. */
void rt_crossentropy_backward(float *dlogits, const float *probs,
			      const int *targets, float dloss, int BT, int V);

#ifdef __cplusplus
}
#endif
#endif /* HEXI_RT_OPS_H */
