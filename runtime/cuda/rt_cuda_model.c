/*
 * rt_cuda_model.c - the reference model trained on one GPU: the same layers,
 * tensor names, stored shapes and initialisation as rt_model.c (CPU), run
 * through the CUDA kernels and cuBLAS.  Everything runs on the context's
 * compute stream; host and device meet only at the token upload, the loss
 * download and rt_cuda_model_read().
 *
 * Per layer (x (B,T,C) in dt):
 *   ln1 = rmsnorm(x); q,k,v = ln1 . w^T; rope(q,k); y = attention(q,k,v);
 *   xmid = x + y . wo; ln2 = rmsnorm(xmid); h = swiglu(ln2.wg^T, ln2.wu^T);
 *   xnext = xmid + h . wd
 * Backward follows rt_model_backward: dres carries d(x) down the residual
 * stream; every rmsnorm backward accumulates into it.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "hexi_sched.h"
#include "rt_cuda.h"
#include "rt_model.h"
#include "rt_ops.h"

enum { W_ATTN_NORM, W_Q, W_K, W_V, W_O, W_MLP_NORM, W_GATE, W_UP, W_DOWN, W_N };

typedef struct gparam {
	char name[RT_PARAM_NAME_MAX];
	int64_t rows, cols;
	size_t n;
	int decay;     /* 2-D: weight decay applies */
	float *master; /* fp32 weights */
	void *w;       /* dt copy the kernels read (== master for fp32) */
	float *g, *m, *v;
} gparam;

typedef struct gact { /* one layer's saved activations */
	void *x, *ln1, *q, *k, *v, *y, *xmid, *ln2, *gate, *up, *h;
	float *rstd1, *rstd2, *lse;
} gact;

struct rt_cuda_model {
	rt_cuda *cu;
	rt_cuda_stream s;
	rt_cuda_dtype dt;
	hexi_model md;
	int B, T, C, NH, NKV, hs, F, V, L, qd, kvd;
	int np;
	gparam *p; /* embed, L * W_N, final_norm, lm_head */
	gact *a;   /* [L] */
	void *xout, *lnf, *logits, *dlogits, *dres, *dln, *tmp, *dy, *dq, *dk,
	    *dv, *dh, *dgate, *dup;
	float *rstdf, *losses, *lsev, *delta;
	int *tokens, *targets;
	float *hlosses;
	size_t numel;
	void **allocs; /* every device allocation, for destroy */
	int nallocs, cap_allocs;
};

#define CK(call)                                                               \
	do {                                                                   \
		hexi_rc rc_ = (call);                                          \
		if (rc_ != HEXI_OK)                                            \
			return rc_;                                            \
	} while (0)

static hexi_rc dalloc(rt_cuda_model *m, void **p, size_t bytes)
{
	if (m->nallocs == m->cap_allocs) {
		int cap = m->cap_allocs ? 2 * m->cap_allocs : 256;
		void *q = realloc(m->allocs, sizeof(void *) * (size_t)cap);

		if (q == NULL)
			return hexi_error(HEXI_ERR_NOMEM, "GPU model: tables");
		m->allocs = q;
		m->cap_allocs = cap;
	}
	CK(rt_cuda_alloc(p, bytes ? bytes : 1));
	m->allocs[m->nallocs++] = *p;
	return HEXI_OK;
}

static size_t esz(const rt_cuda_model *m)
{
	return rt_cuda_dtype_size(m->dt);
}

/* Allocate and initialise one parameter like rt_model (rt_init_tensor). */
static hexi_rc param_init(rt_cuda_model *m, gparam *p, const char *name,
			  int64_t rows, int64_t cols, int ndim, uint64_t seed)
{
	float *host = NULL;
	hexi_rc rc;

	if (hexi_strlcpy(p->name, name, sizeof(p->name)) != HEXI_OK)
		return hexi_error(HEXI_ERR_RANGE, "GPU model: name %s", name);
	p->rows = rows;
	p->cols = cols;
	p->n = (size_t)(rows * cols);
	p->decay = ndim == 2;
	if ((rc = dalloc(m, (void **)&p->master, p->n * 4)) ||
	    (rc = dalloc(m, (void **)&p->g, p->n * 4)) ||
	    (rc = dalloc(m, (void **)&p->m, p->n * 4)) ||
	    (rc = dalloc(m, (void **)&p->v, p->n * 4)))
		return rc;
	if (m->dt == RT_CUDA_F32)
		p->w = p->master;
	else if ((rc = dalloc(m, &p->w, p->n * esz(m))) != HEXI_OK)
		return rc;
	host = malloc(p->n * sizeof(float));
	if (host == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU model: init of %s",
				  name);
	rt_init_tensor(host, name, 0, rows, cols, rt_init_std(&m->md, name),
		       seed);
	rc = rt_cuda_upload(p->master, host, p->n * sizeof(float));
	free(host);
	if (rc == HEXI_OK && m->dt != RT_CUDA_F32)
		rc = rt_cuda_cast(m->s, p->w, m->dt, p->master, RT_CUDA_F32,
				  p->n);
	m->numel += p->n;
	return rc;
}

static hexi_rc params_init(rt_cuda_model *m, uint64_t seed)
{
	static const char *const lname[W_N] = {
	    "attn_norm.weight", "attn.wq",  "attn.wk",
	    "attn.wv",		"attn.wo",  "mlp_norm.weight",
	    "mlp.w_gate",	"mlp.w_up", "mlp.w_down"};
	const int64_t C = m->C;
	const int64_t rows[W_N] = {C, m->qd, m->kvd, m->kvd, m->qd,
				   C, m->F,  m->F,   m->F};
	const int64_t cols[W_N] = {1, C, C, C, C, 1, C, C, C};
	char name[RT_PARAM_NAME_MAX];
	gparam *p;

	m->np = 1 + m->L * W_N + 2;
	m->p = calloc((size_t)m->np, sizeof(*m->p));
	if (m->p == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU model: parameters");
	p = m->p;
	CK(param_init(m, p++, "embed.weight", m->V, C, 2, seed));
	for (int l = 0; l < m->L; l++)
		for (int i = 0; i < W_N; i++) {
			snprintf(name, sizeof(name), "layers.%d.%s", l,
				 lname[i]);
			CK(param_init(m, p++, name, rows[i], cols[i],
				      cols[i] == 1 ? 1 : 2, seed));
		}
	CK(param_init(m, p++, "final_norm.weight", C, 1, 1, seed));
	return param_init(m, p, "lm_head.weight", m->V, C, 2, seed);
}

static hexi_rc acts_init(rt_cuda_model *m)
{
	const size_t BT = (size_t)m->B * m->T, e = esz(m);
	const size_t nC = BT * m->C * e, nQ = BT * m->qd * e,
		     nK = BT * m->kvd * e, nF = BT * m->F * e;

	m->a = calloc((size_t)m->L, sizeof(*m->a));
	if (m->a == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU model: activations");
	for (int l = 0; l < m->L; l++) {
		gact *a = &m->a[l];

		CK(dalloc(m, &a->x, nC));
		CK(dalloc(m, &a->ln1, nC));
		CK(dalloc(m, &a->q, nQ));
		CK(dalloc(m, &a->k, nK));
		CK(dalloc(m, &a->v, nK));
		CK(dalloc(m, &a->y, nQ));
		CK(dalloc(m, &a->xmid, nC));
		CK(dalloc(m, &a->ln2, nC));
		CK(dalloc(m, &a->gate, nF));
		CK(dalloc(m, &a->up, nF));
		CK(dalloc(m, &a->h, nF));
		CK(dalloc(m, (void **)&a->rstd1, BT * 4));
		CK(dalloc(m, (void **)&a->rstd2, BT * 4));
		CK(dalloc(m, (void **)&a->lse, BT * m->NH * 4));
	}
	CK(dalloc(m, &m->xout, nC));
	CK(dalloc(m, &m->lnf, nC));
	CK(dalloc(m, &m->logits, BT * m->V * e));
	CK(dalloc(m, &m->dlogits, BT * m->V * e));
	CK(dalloc(m, &m->dres, nC));
	CK(dalloc(m, &m->dln, nC));
	CK(dalloc(m, &m->tmp, nC));
	CK(dalloc(m, &m->dy, nQ));
	CK(dalloc(m, &m->dq, nQ));
	CK(dalloc(m, &m->dk, nK));
	CK(dalloc(m, &m->dv, nK));
	CK(dalloc(m, &m->dh, nF));
	CK(dalloc(m, &m->dgate, nF));
	CK(dalloc(m, &m->dup, nF));
	CK(dalloc(m, (void **)&m->rstdf, BT * 4));
	CK(dalloc(m, (void **)&m->losses, BT * 4));
	CK(dalloc(m, (void **)&m->lsev, BT * 4));
	CK(dalloc(m, (void **)&m->delta, BT * m->NH * 4));
	CK(dalloc(m, (void **)&m->tokens, BT * sizeof(int)));
	CK(dalloc(m, (void **)&m->targets, BT * sizeof(int)));
	m->hlosses = malloc(BT * sizeof(float));
	return m->hlosses ? HEXI_OK
			  : hexi_error(HEXI_ERR_NOMEM, "GPU model: losses");
}

hexi_rc rt_cuda_model_create(rt_cuda *c, const struct hexi_model *md,
			     rt_cuda_dtype dt, int B, uint64_t seed,
			     rt_cuda_model **out)
{
	rt_cuda_model *m;
	hexi_rc rc;

	if (c == NULL || md == NULL || out == NULL || B < 1 || B > 4096)
		return hexi_error(HEXI_ERR_INVAL, "GPU model: batch %d", B);
	if ((rc = hexi_model_validate(md)) != HEXI_OK)
		return rc;
	if (md->hidden % md->heads || (md->hidden / md->heads) % 2 ||
	    md->hidden / md->heads > 128 || md->heads % md->kv_heads)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "GPU model %s: head size %d must be even "
				  "and <= 128, heads a multiple of KV heads",
				  md->name, md->hidden / md->heads);
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU model");
	m->cu = c;
	m->s = rt_cuda_compute_stream(c);
	m->dt = dt;
	m->md = *md;
	m->B = B;
	m->T = md->seq_len;
	m->C = md->hidden;
	m->NH = md->heads;
	m->NKV = md->kv_heads;
	m->hs = md->hidden / md->heads;
	m->F = md->ffn;
	m->V = md->vocab;
	m->L = md->layers;
	m->qd = m->NH * m->hs;
	m->kvd = m->NKV * m->hs;
	if ((rc = params_init(m, seed)) != HEXI_OK ||
	    (rc = acts_init(m)) != HEXI_OK ||
	    (rc = rt_cuda_sync(m->s)) != HEXI_OK) {
		rt_cuda_model_destroy(m);
		return hexi_error_prefix(rc, "GPU model %s, batch %d", md->name,
					 B);
	}
	*out = m;
	return HEXI_OK;
}

void rt_cuda_model_destroy(rt_cuda_model *m)
{
	if (m == NULL)
		return;
	for (int i = m->nallocs - 1; i >= 0; i--)
		rt_cuda_free(m->allocs[i]);
	free(m->allocs);
	free(m->p);
	free(m->a);
	free(m->hlosses);
	free(m);
}

size_t rt_cuda_model_numel(const rt_cuda_model *m)
{
	return m->numel;
}

double rt_cuda_model_flops(const rt_cuda_model *m)
{
	const double BT = (double)m->B * m->T, C = m->C, T = m->T;
	double gemm = C * (2.0 * m->qd + 2.0 * m->kvd) + 3.0 * C * m->F;
	double attn = 2.0 * m->qd * (T + 1) / 2.0;

	return 6.0 * BT * (gemm + attn) * m->L + 6.0 * BT * C * m->V;
}

/* ---- forward and backward --------------------------------------------------
 */

static gparam *lw(rt_cuda_model *m, int l)
{
	return m->p + 1 + (size_t)l * W_N;
}

static hexi_rc zero(rt_cuda_model *m, void *p, size_t bytes)
{
	cudaError_t e = cudaMemsetAsync(p, 0, bytes, m->s);

	if (e != cudaSuccess)
		return hexi_error(HEXI_ERR_CUDA, "GPU model: memset: %s",
				  cudaGetErrorString(e));
	return HEXI_OK;
}

static hexi_rc block_forward(rt_cuda_model *m, int l, void *xnext)
{
	gparam *w = lw(m, l);
	gact *a = &m->a[l];
	const int B = m->B, T = m->T, C = m->C, BT = B * T;
	rt_cuda_dtype dt = m->dt;

	CK(rt_cuda_rmsnorm_forward(m->s, dt, a->ln1, a->rstd1, a->x,
				   w[W_ATTN_NORM].w, BT, C, RT_NORM_EPS));
	CK(rt_cuda_matmul_forward(m->cu, dt, a->q, a->ln1, w[W_Q].w, BT, C,
				  m->qd));
	CK(rt_cuda_matmul_forward(m->cu, dt, a->k, a->ln1, w[W_K].w, BT, C,
				  m->kvd));
	CK(rt_cuda_matmul_forward(m->cu, dt, a->v, a->ln1, w[W_V].w, BT, C,
				  m->kvd));
	CK(rt_cuda_rope_forward(m->s, dt, a->q, B, T, m->NH, m->hs,
				RT_ROPE_THETA));
	CK(rt_cuda_rope_forward(m->s, dt, a->k, B, T, m->NKV, m->hs,
				RT_ROPE_THETA));
	CK(rt_cuda_attention_forward(m->s, dt, a->y, a->lse, a->q, a->k, a->v,
				     B, T, m->NH, m->NKV, m->hs));
	CK(rt_cuda_matmul_tw_forward(m->cu, dt, m->tmp, a->y, w[W_O].w, BT,
				     m->qd, C));
	CK(rt_cuda_add(m->s, dt, a->xmid, a->x, m->tmp, (size_t)BT * C));
	CK(rt_cuda_rmsnorm_forward(m->s, dt, a->ln2, a->rstd2, a->xmid,
				   w[W_MLP_NORM].w, BT, C, RT_NORM_EPS));
	CK(rt_cuda_matmul_forward(m->cu, dt, a->gate, a->ln2, w[W_GATE].w, BT,
				  C, m->F));
	CK(rt_cuda_matmul_forward(m->cu, dt, a->up, a->ln2, w[W_UP].w, BT, C,
				  m->F));
	CK(rt_cuda_swiglu_forward(m->s, dt, a->h, a->gate, a->up,
				  (size_t)BT * m->F));
	CK(rt_cuda_matmul_tw_forward(m->cu, dt, m->tmp, a->h, w[W_DOWN].w, BT,
				     m->F, C));
	return rt_cuda_add(m->s, dt, xnext, a->xmid, m->tmp, (size_t)BT * C);
}

/* dres holds d(block output); becomes d(block input). */
static hexi_rc block_backward(rt_cuda_model *m, int l)
{
	gparam *w = lw(m, l);
	gact *a = &m->a[l];
	const int B = m->B, T = m->T, C = m->C, BT = B * T;
	const size_t e = esz(m), nC = (size_t)BT * C * e;
	const size_t nF = (size_t)BT * m->F * e;
	rt_cuda_dtype dt = m->dt;

	/* MLP half: d(xmid) = dres + rmsnorm_backward(...) */
	CK(zero(m, m->dh, nF));
	CK(rt_cuda_matmul_tw_backward(m->cu, dt, m->dh, w[W_DOWN].g, m->dres,
				      a->h, w[W_DOWN].w, BT, m->F, C));
	CK(zero(m, m->dgate, nF));
	CK(zero(m, m->dup, nF));
	CK(rt_cuda_swiglu_backward(m->s, dt, m->dgate, m->dup, m->dh, a->gate,
				   a->up, (size_t)BT * m->F));
	CK(zero(m, m->dln, nC));
	CK(rt_cuda_matmul_backward(m->cu, dt, m->dln, w[W_GATE].g, m->dgate,
				   a->ln2, w[W_GATE].w, BT, C, m->F));
	CK(rt_cuda_matmul_backward(m->cu, dt, m->dln, w[W_UP].g, m->dup, a->ln2,
				   w[W_UP].w, BT, C, m->F));
	CK(rt_cuda_rmsnorm_backward(m->s, dt, m->dres, w[W_MLP_NORM].g, m->dln,
				    a->xmid, w[W_MLP_NORM].w, a->rstd2, BT, C));
	/* attention half: d(x) = d(xmid) + rmsnorm_backward(...) */
	CK(zero(m, m->dy, (size_t)BT * m->qd * e));
	CK(rt_cuda_matmul_tw_backward(m->cu, dt, m->dy, w[W_O].g, m->dres, a->y,
				      w[W_O].w, BT, m->qd, C));
	CK(zero(m, m->dq, (size_t)BT * m->qd * e));
	CK(zero(m, m->dk, (size_t)BT * m->kvd * e));
	CK(zero(m, m->dv, (size_t)BT * m->kvd * e));
	CK(rt_cuda_attention_backward(m->s, dt, m->dq, m->dk, m->dv, m->dy,
				      a->y, a->q, a->k, a->v, a->lse, m->delta,
				      B, T, m->NH, m->NKV, m->hs));
	CK(rt_cuda_rope_backward(m->s, dt, m->dq, B, T, m->NH, m->hs,
				 RT_ROPE_THETA));
	CK(rt_cuda_rope_backward(m->s, dt, m->dk, B, T, m->NKV, m->hs,
				 RT_ROPE_THETA));
	CK(zero(m, m->dln, nC));
	CK(rt_cuda_matmul_backward(m->cu, dt, m->dln, w[W_Q].g, m->dq, a->ln1,
				   w[W_Q].w, BT, C, m->qd));
	CK(rt_cuda_matmul_backward(m->cu, dt, m->dln, w[W_K].g, m->dk, a->ln1,
				   w[W_K].w, BT, C, m->kvd));
	CK(rt_cuda_matmul_backward(m->cu, dt, m->dln, w[W_V].g, m->dv, a->ln1,
				   w[W_V].w, BT, C, m->kvd));
	return rt_cuda_rmsnorm_backward(m->s, dt, m->dres, w[W_ATTN_NORM].g,
					m->dln, a->x, w[W_ATTN_NORM].w,
					a->rstd1, BT, C);
}

static hexi_rc check_tokens(const rt_cuda_model *m, const int *t,
			    const char *what)
{
	for (int i = 0; i < m->B * m->T; i++)
		if (t[i] < 0 || t[i] >= m->V)
			return hexi_error(HEXI_ERR_RANGE,
					  "GPU model: %s[%d] = %d outside "
					  "[0,%d)",
					  what, i, t[i], m->V);
	return HEXI_OK;
}

/* Final norm, LM head, loss (downloaded), and their backward: leaves
 * d(last block output) in dres. */
static hexi_rc head(rt_cuda_model *m, double *loss)
{
	const int BT = m->B * m->T, C = m->C, V = m->V;
	const size_t e = esz(m);
	gparam *fn = m->p + m->np - 2, *lm = m->p + m->np - 1;
	double sum = 0;

	CK(rt_cuda_rmsnorm_forward(m->s, m->dt, m->lnf, m->rstdf, m->xout,
				   fn->w, BT, C, RT_NORM_EPS));
	CK(rt_cuda_matmul_forward(m->cu, m->dt, m->logits, m->lnf, lm->w, BT, C,
				  V));
	CK(rt_cuda_crossentropy_forward(m->s, m->dt, m->losses, m->lsev,
					m->logits, m->targets, BT, V));
	CK(rt_cuda_sync(m->s));
	CK(rt_cuda_download(m->hlosses, m->losses, (size_t)BT * 4));
	for (int i = 0; i < BT; i++)
		sum += m->hlosses[i];
	*loss = sum / BT;
	/* the objective is the mean over the BT tokens */
	CK(zero(m, m->dlogits, (size_t)BT * V * e));
	CK(rt_cuda_crossentropy_backward(m->s, m->dt, m->dlogits, m->logits,
					 m->lsev, m->targets, 1.0f / BT, BT,
					 V));
	CK(zero(m, m->dln, (size_t)BT * C * e));
	CK(rt_cuda_matmul_backward(m->cu, m->dt, m->dln, lm->g, m->dlogits,
				   m->lnf, lm->w, BT, C, V));
	CK(zero(m, m->dres, (size_t)BT * C * e));
	return rt_cuda_rmsnorm_backward(m->s, m->dt, m->dres, fn->g, m->dln,
					m->xout, fn->w, m->rstdf, BT, C);
}

hexi_rc rt_cuda_model_fwd_bwd(rt_cuda_model *m, const int *tokens,
			      const int *targets, double *loss)
{
	const int BT = m->B * m->T, C = m->C, V = m->V;

	CK(check_tokens(m, tokens, "tokens"));
	CK(check_tokens(m, targets, "targets"));
	CK(rt_cuda_upload(m->tokens, tokens, (size_t)BT * sizeof(int)));
	CK(rt_cuda_upload(m->targets, targets, (size_t)BT * sizeof(int)));
	for (int i = 0; i < m->np; i++)
		CK(zero(m, m->p[i].g, m->p[i].n * 4));
	/* layer l reads a[l].x and writes the next layer's input (xout
	 * after the last layer) */
	CK(rt_cuda_embed_forward(m->s, m->dt, m->L ? m->a[0].x : m->xout,
				 m->tokens, m->p[0].w, BT, C, V));
	for (int l = 0; l < m->L; l++)
		CK(block_forward(m, l, l + 1 < m->L ? m->a[l + 1].x : m->xout));
	CK(head(m, loss));
	for (int l = m->L - 1; l >= 0; l--)
		CK(block_backward(m, l));
	CK(rt_cuda_embed_backward(m->s, m->dt, m->p[0].g, m->dres, m->tokens,
				  BT, C, V));
	return rt_cuda_sync(m->s);
}

hexi_rc rt_cuda_model_adamw(rt_cuda_model *m, float lr, float beta1,
			    float beta2, float eps, float weight_decay,
			    int step)
{
	for (int i = 0; i < m->np; i++) {
		gparam *p = &m->p[i];

		CK(rt_cuda_adamw(m->s, m->dt, p->master,
				 m->dt == RT_CUDA_F32 ? NULL : p->w, p->g, p->m,
				 p->v, p->n, lr, beta1, beta2, eps,
				 p->decay ? weight_decay : 0.0f, step));
	}
	return rt_cuda_sync(m->s);
}

hexi_rc rt_cuda_model_read(rt_cuda_model *m, const char *name, int what,
			   float *out, size_t n)
{
	for (int i = 0; i < m->np; i++) {
		gparam *p = &m->p[i];

		if (strcmp(p->name, name) != 0)
			continue;
		if (n != p->n)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "GPU model: %s has %zu elements, "
					  "not %zu",
					  name, p->n, n);
		CK(rt_cuda_sync(m->s));
		return rt_cuda_download(out, what ? p->g : p->master,
					n * sizeof(float));
	}
	return hexi_error(HEXI_ERR_NOTFOUND, "GPU model: no tensor %s", name);
}

/* ---- trainer access (hexitrain's GPU path) -------------------------------
 */

int rt_cuda_model_nparams(const rt_cuda_model *m)
{
	return m->np;
}

hexi_rc rt_cuda_model_param(rt_cuda_model *m, int i, const char **name,
			    int64_t *rows, int64_t *cols, size_t *n,
			    float **grad)
{
	if (i < 0 || i >= m->np)
		return hexi_error(HEXI_ERR_RANGE,
				  "GPU model: parameter %d of %d", i, m->np);
	*name = m->p[i].name;
	*rows = m->p[i].rows;
	*cols = m->p[i].cols;
	*n = m->p[i].n;
	*grad = m->p[i].g;
	return HEXI_OK;
}
