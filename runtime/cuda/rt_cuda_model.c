/*
 * rt_cuda_model.c - a stage shard of the reference model on one GPU: the
 * same layers, tensor names, stored shapes, tensor-parallel sharding and
 * initialisation as rt_model.c (CPU), run through the kernels and GEMMs of
 * rt_cuda.h.  Plain C: no CUDA header, so the host logic also runs against
 * the host emulation of rt_cuda.h in tests/gpuemu.
 *
 * Per layer (x (B,T,C) in dt; local heads and FFN rows of this TP rank):
 *   ln1 = rmsnorm(x); q,k,v = ln1 . w^T; rope(q,k); y = attention(q,k,v);
 *   xmid = x + TPsum(y . wo); ln2 = rmsnorm(xmid);
 *   h = swiglu(ln2.wg^T, ln2.wu^T); xnext = xmid + TPsum(h . wd)
 * Backward follows rt_model_backward: dres carries d(x) down the residual
 * stream; the partial input gradients of the column-parallel projections
 * are TP-summed before each rmsnorm backward.
 *
 * Streams: everything runs on the context's compute stream.  Before a
 * buffer leaves the model (TP sum, x_out, dx) the stream is synchronised,
 * because the communicator works on its own streams.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_sched.h"
#include "rt_cuda.h"
#include "rt_model.h" /* RT_PARAM_NAME_MAX, names and shapes only */
#include "rt_ops.h"

enum { W_ATTN_NORM, W_Q, W_K, W_V, W_O, W_MLP_NORM, W_GATE, W_UP, W_DOWN, W_N };

#define GPU_MAX_SLOTS  1024
#define GPU_MAX_TOKENS (1 << 20)

typedef struct gact { /* one layer's saved activations of one slot */
	void *ln1, *q, *k, *v, *y, *xmid, *ln2, *gate, *up, *h;
	float *rstd1, *rstd2, *lse;
} gact;

typedef struct gslot {
	int busy;
	float grad_scale;
	void **xs;	       /* [nl+1] residual stream; xs[0] the input */
	gact *a;	       /* [nl] */
	void *lnf, *logits;    /* last stage */
	float *rstdf, *lsev;   /* last stage */
	int *tokens, *targets; /* device (B,T) */
} gslot;

struct rt_cuda_model {
	rt_cuda *cu;
	rt_cuda_stream s;
	rt_cuda_dtype dt;
	hexi_model md;
	rt_cuda_shard_cfg cfg;
	rt_cuda_tp tp;
	int B, T, C, V, nl, hs, nh, nkv, f, qd, kvd; /* local sizes */
	int np;
	rt_cuda_param *p; /* [np] */
	rt_cuda_param *embed, *layer0, *fnorm, *head;
	float *master, *g, *mom, *vel; /* [padded] each */
	size_t numel, padded;
	size_t gpadded; /* elements of g: padded, or with grad_window the
			   largest backward unit */
	gslot *slots;	/* [max_slots] */
	void *dres, *dln, *tmp, *dy, *dq, *dk, *dv, *dh, *dgate, *dup;
	void *dlogits;
	float *losses, *delta, *tpbuf;
	float *rope; /* (T, hs/2, 2) cos/sin table */
	rt_cuda_attn_kind attn;
	rt_cuda_sdpa *sdpa; /* cuDNN plans when attn is RT_CUDA_ATTN_CUDNN */
	char attn_why[256];
	float *hlosses; /* host (B,T) */
	void **allocs;	/* every device allocation, for destroy */
	int nallocs, cap_allocs;
	/* recompute: the layer every slot's backward rebuilds, and the
	 * output buffer of a non-last stage */
	gact ra;
	void *xlast;
	size_t *cur_cat;  /* into mem: where dalloc counts */
	rt_model_mem mem; /* device bytes by what they hold */
	/* rt_cuda_model_set_grad_hook (overlap of the gradient sync) */
	hexi_rc (*hook)(void *ctx, int layer);
	void *hook_ctx;
};

#define CK(call)                                                               \
	do {                                                                   \
		hexi_rc rc_ = (call);                                          \
		if (rc_ != HEXI_OK)                                            \
			return rc_;                                            \
	} while (0)

/* Take ownership of device memory p (freed by destroy); on failure p is
 * freed here. */
static hexi_rc track(rt_cuda_model *m, void *p)
{
	if (m->nallocs == m->cap_allocs) {
		int cap = m->cap_allocs ? 2 * m->cap_allocs : 256;
		void *q = realloc(m->allocs, sizeof(void *) * (size_t)cap);

		if (q == NULL) {
			rt_cuda_free(p);
			return hexi_error(HEXI_ERR_NOMEM, "GPU model: tables");
		}
		m->allocs = q;
		m->cap_allocs = cap;
	}
	m->allocs[m->nallocs++] = p;
	return HEXI_OK;
}

static hexi_rc dalloc(rt_cuda_model *m, void **p, size_t bytes)
{
	CK(rt_cuda_alloc(p, bytes ? bytes : 1));
	if (m->cur_cat != NULL)
		*m->cur_cat += bytes ? bytes : 1;
	return track(m, *p);
}

static size_t esz(const rt_cuda_model *m)
{
	return rt_cuda_dtype_size(m->dt);
}

/* ---- configuration -------------------------------------------------------
 */

static hexi_rc check_cfg(const rt_cuda_shard_cfg *c, const rt_cuda_tp *tp)
{
	const hexi_model *md = c->model;
	hexi_rc rc;

	if (md == NULL)
		return hexi_error(HEXI_ERR_INVAL, "GPU model: no model shape");
	if (c->init.tensor == NULL || c->init.std == NULL)
		return hexi_error(HEXI_ERR_INVAL,
				  "GPU model: no initialiser (cfg.init)");
	if ((rc = hexi_model_validate(md)) != HEXI_OK)
		return rc;
	if (md->hidden % md->heads || (md->hidden / md->heads) % 2 ||
	    md->hidden / md->heads > 128 || md->heads % md->kv_heads)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "GPU model %s: head size %d must be even "
				  "and <= 128, heads a multiple of KV heads",
				  md->name, md->hidden / md->heads);
	if (c->layer_begin < 0 || c->layer_end < c->layer_begin ||
	    c->layer_end > md->layers)
		return hexi_error(HEXI_ERR_RANGE,
				  "GPU model %s: layer range [%d, %d) not "
				  "inside [0, %d)",
				  md->name, c->layer_begin, c->layer_end,
				  md->layers);
	if (c->tp_size < 1 || c->tp_size > md->kv_heads ||
	    c->tp_size > md->ffn || c->tp_rank < 0 || c->tp_rank >= c->tp_size)
		return hexi_error(HEXI_ERR_RANGE,
				  "GPU model %s: TP rank %d of %d invalid "
				  "(need 0 <= rank < TP <= kv_heads %d)",
				  md->name, c->tp_rank, c->tp_size,
				  md->kv_heads);
	if (c->tp_size > 1 && (tp == NULL || tp->allreduce_sum == NULL))
		return hexi_error(HEXI_ERR_INVAL,
				  "GPU model: TP %d needs an all-reduce "
				  "callback",
				  c->tp_size);
	if (c->max_slots < 1 || c->max_slots > GPU_MAX_SLOTS || c->B < 1 ||
	    (int64_t)c->B * md->seq_len > GPU_MAX_TOKENS)
		return hexi_error(HEXI_ERR_RANGE,
				  "GPU model %s: %d slots of %d x %d tokens "
				  "(at most %d slots, %d tokens per slot)",
				  md->name, c->max_slots, c->B, md->seq_len,
				  GPU_MAX_SLOTS, GPU_MAX_TOKENS);
	if (c->dt != RT_CUDA_F32 && c->dt != RT_CUDA_BF16)
		return hexi_error(HEXI_ERR_INVAL, "GPU model: dtype %d",
				  (int)c->dt);
	return HEXI_OK;
}

/* ---- parameters ----------------------------------------------------------
 */

static void pset(rt_cuda_param *p, const char *name, int ndim, int64_t rows,
		 int64_t cols, int rb, int re)
{
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->ndim = ndim;
	p->rows = rows;
	p->cols = cols;
	p->row_begin = rb;
	p->row_end = re;
	p->n = (size_t)(re - rb) * (size_t)cols;
	p->decay = ndim == 2;
}

/* This TP rank's KV heads [kb,ke) and FFN rows [fb,fe); local sizes. */
static void local_split(rt_cuda_model *m, int *kb, int *ke, int *fb, int *fe)
{
	const hexi_model *md = &m->md;

	hexi_layout_split(md->kv_heads, m->cfg.tp_size, m->cfg.tp_rank, kb, ke);
	hexi_layout_split(md->ffn, m->cfg.tp_size, m->cfg.tp_rank, fb, fe);
	m->nkv = *ke - *kb;
	m->nh = m->nkv * (md->heads / md->kv_heads);
	m->f = *fe - *fb;
}

/* Layer l's parameters, sharded as rt_model.c's layer_params. */
static void layer_params(rt_cuda_model *m, rt_cuda_param *p, int l)
{
	const hexi_model *md = &m->md;
	const int C = m->C, hs = m->hs, G = md->heads / md->kv_heads;
	const int64_t qrows = (int64_t)md->heads * hs,
		      kvrows = (int64_t)md->kv_heads * hs;
	int kb, ke, fb, fe;
	char nm[RT_PARAM_NAME_MAX];

	local_split(m, &kb, &ke, &fb, &fe);
#define LNAME(s) (snprintf(nm, sizeof(nm), "layers.%d.%s", l, s), nm)
	pset(&p[W_ATTN_NORM], LNAME("attn_norm.weight"), 1, C, 1, 0, C);
	pset(&p[W_Q], LNAME("attn.wq"), 2, qrows, C, kb * G * hs, ke * G * hs);
	pset(&p[W_K], LNAME("attn.wk"), 2, kvrows, C, kb * hs, ke * hs);
	pset(&p[W_V], LNAME("attn.wv"), 2, kvrows, C, kb * hs, ke * hs);
	pset(&p[W_O], LNAME("attn.wo"), 2, qrows, C, kb * G * hs, ke * G * hs);
	pset(&p[W_MLP_NORM], LNAME("mlp_norm.weight"), 1, C, 1, 0, C);
	pset(&p[W_GATE], LNAME("mlp.w_gate"), 2, md->ffn, C, fb, fe);
	pset(&p[W_UP], LNAME("mlp.w_up"), 2, md->ffn, C, fb, fe);
	pset(&p[W_DOWN], LNAME("mlp.w_down"), 2, md->ffn, C, fb, fe);
#undef LNAME
}

/* Elements are carved on 4-float (16-byte) boundaries; tensors whose size
 * is a multiple of 4 lie back to back. */
static size_t pad4(size_t n)
{
	return (n + 3) & ~(size_t)3;
}

/* Each parameter's gradient: its own place in g (padded), or with
 * grad_window its place in its backward unit (the embedding, one layer,
 * the final norm + head), every unit starting at g.  Returns the
 * elements g needs; with base NULL only counts. */
static size_t grad_place(rt_cuda_model *m, float *base)
{
	const int w = m->cfg.grad_window;
	const rt_cuda_param *l0 = m->layer0, *l1 = m->layer0 + m->nl * W_N;
	size_t off = 0, unit = 0;

	for (int i = 0; i < m->np; i++) {
		rt_cuda_param *q = &m->p[i];

		if (w && (q == m->embed || q == m->fnorm ||
			  (q >= l0 && q < l1 && (q - l0) % W_N == 0)))
			off = 0;
		if (base != NULL)
			q->g = base + off;
		off += pad4(q->n);
		unit = off > unit ? off : unit;
	}
	return w ? unit : m->padded;
}

static hexi_rc params_init(rt_cuda_model *m)
{
	const rt_cuda_shard_cfg *c = &m->cfg;
	int n = m->nl * W_N + (c->has_embed ? 1 : 0) + (c->has_head ? 2 : 0);
	rt_cuda_param *p;
	float *host = NULL;
	size_t off = 0, maxn = 1;
	hexi_rc rc = HEXI_OK;

	m->p = p = calloc((size_t)(n ? n : 1), sizeof(*p));
	if (p == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU model: parameters");
	m->np = n;
	if (c->has_embed) {
		m->embed = p;
		pset(p++, "embed.weight", 2, m->V, m->C, 0, m->V);
	}
	m->layer0 = p;
	for (int l = c->layer_begin; l < c->layer_end; l++, p += W_N)
		layer_params(m, p, l);
	if (c->has_head) {
		m->fnorm = p;
		pset(p++, "final_norm.weight", 1, m->C, 1, 0, m->C);
		m->head = p;
		pset(p++, "lm_head.weight", 2, m->V, m->C, 0, m->V);
	}
	for (int i = 0; i < n; i++) {
		m->numel += m->p[i].n;
		m->padded += pad4(m->p[i].n);
		if (m->p[i].n > maxn)
			maxn = m->p[i].n;
	}
	m->cur_cat = &m->mem.params;
	CK(dalloc(m, (void **)&m->master, m->padded * 4));
	m->gpadded = grad_place(m, NULL);
	m->cur_cat = &m->mem.grads;
	CK(dalloc(m, (void **)&m->g, m->gpadded * 4));
	grad_place(m, m->g);
	m->cur_cat = &m->mem.optim;
	if (!c->no_moments) {
		CK(dalloc(m, (void **)&m->mom, m->padded * 4));
		CK(dalloc(m, (void **)&m->vel, m->padded * 4));
	}
	m->cur_cat = &m->mem.params;
	host = malloc(maxn * sizeof(float));
	if (host == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU model: init buffer");
	for (int i = 0; rc == HEXI_OK && i < n; i++) {
		rt_cuda_param *q = &m->p[i];

		q->master = m->master + off;
		q->m = m->mom != NULL ? m->mom + off : NULL;
		q->v = m->vel != NULL ? m->vel + off : NULL;
		off += pad4(q->n);
		if (m->dt == RT_CUDA_F32)
			q->w = q->master;
		else if ((rc = dalloc(m, &q->w, q->n * esz(m))) != HEXI_OK)
			break;
		c->init.tensor(host, q->name, q->row_begin, q->row_end, q->cols,
			       c->init.std(&m->md, q->name), c->seed);
		rc = rt_cuda_upload(q->master, host, q->n * sizeof(float));
		if (rc == HEXI_OK && m->dt != RT_CUDA_F32)
			rc = rt_cuda_cast(m->s, q->w, m->dt, q->master,
					  RT_CUDA_F32, q->n);
	}
	free(host);
	return rc;
}

/* ---- activations ---------------------------------------------------------
 */

/* One layer's saved activations. */
static hexi_rc gact_init(rt_cuda_model *m, gact *a)
{
	const size_t BT = (size_t)m->B * m->T, e = esz(m);
	const size_t nC = BT * m->C * e, nQ = BT * m->qd * e,
		     nK = BT * m->kvd * e, nF = BT * m->f * e;

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
	return dalloc(m, (void **)&a->lse, BT * m->nh * 4);
}

/* A slot: the residual stream and each layer's activations; with
 * recompute only each layer's input (the output too on the last stage,
 * the final norm's input), every a[l] being the shared m->ra. */
static hexi_rc slot_init(rt_cuda_model *m, gslot *s)
{
	const size_t BT = (size_t)m->B * m->T, e = esz(m);
	const size_t nC = BT * m->C * e;
	const int rc = m->cfg.recompute;

	s->xs = calloc((size_t)m->nl + 1, sizeof(*s->xs));
	s->a = calloc((size_t)(m->nl ? m->nl : 1), sizeof(*s->a));
	if (s->xs == NULL || s->a == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU model: slot tables");
	for (int l = 0; l < m->nl; l++)
		CK(dalloc(m, &s->xs[l], nC));
	if (!rc || m->cfg.has_head || m->nl == 0)
		CK(dalloc(m, &s->xs[m->nl], nC));
	else
		s->xs[m->nl] = m->xlast;
	for (int l = 0; l < m->nl; l++) {
		if (rc)
			s->a[l] = m->ra;
		else
			CK(gact_init(m, &s->a[l]));
	}
	if (m->cfg.has_embed)
		CK(dalloc(m, (void **)&s->tokens, BT * sizeof(int)));
	if (m->cfg.has_head) {
		CK(dalloc(m, &s->lnf, nC));
		CK(dalloc(m, &s->logits, BT * m->V * e));
		CK(dalloc(m, (void **)&s->rstdf, BT * 4));
		CK(dalloc(m, (void **)&s->lsev, BT * 4));
		CK(dalloc(m, (void **)&s->targets, BT * sizeof(int)));
	}
	return HEXI_OK;
}

static hexi_rc acts_init(rt_cuda_model *m)
{
	const size_t BT = (size_t)m->B * m->T, e = esz(m);
	const size_t nC = BT * m->C * e, nQ = BT * m->qd * e,
		     nK = BT * m->kvd * e, nF = BT * m->f * e;

	m->slots = calloc((size_t)m->cfg.max_slots, sizeof(*m->slots));
	if (m->slots == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU model: slots");
	m->cur_cat = &m->mem.acts;
	if (m->cfg.recompute && m->nl > 0) {
		CK(gact_init(m, &m->ra));
		if (!m->cfg.has_head)
			CK(dalloc(m, &m->xlast, nC));
	}
	for (int i = 0; i < m->cfg.max_slots; i++)
		CK(slot_init(m, &m->slots[i]));
	m->cur_cat = &m->mem.work;
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
	CK(dalloc(m, (void **)&m->delta, BT * m->nh * 4));
	CK(rt_cuda_rope_table_create(m->T, m->hs, RT_ROPE_THETA, &m->rope));
	CK(track(m, m->rope));
	m->mem.work += (size_t)m->T * (m->hs / 2) * 2 * sizeof(float);
	if (m->cfg.tp_size > 1 && m->dt != RT_CUDA_F32)
		CK(dalloc(m, (void **)&m->tpbuf, BT * m->C * 4));
	if (m->cfg.has_head) {
		CK(dalloc(m, &m->dlogits, BT * m->V * e));
		CK(dalloc(m, (void **)&m->losses, BT * 4));
		m->hlosses = malloc(BT * sizeof(float));
		if (m->hlosses == NULL)
			return hexi_error(HEXI_ERR_NOMEM, "GPU model: losses");
	}
	return HEXI_OK;
}

/* Own kernel or cuDNN (rt_cuda_attn_pick with $HEXI_ATTENTION); auto
 * falls back to the own kernel when cuDNN refuses to build the plans,
 * saying why; HEXI_ATTENTION=cudnn fails instead. */
static hexi_rc attn_init(rt_cuda_model *m)
{
	const char *mode = getenv("HEXI_ATTENTION");
	hexi_rc rc;

	CK(rt_cuda_attn_pick(mode, m->dt, rt_cuda_cc(m->cu), m->hs,
			     rt_cuda_cudnn_version(), &m->attn, m->attn_why,
			     sizeof(m->attn_why)));
	if (m->attn != RT_CUDA_ATTN_CUDNN || m->nl == 0)
		return HEXI_OK;
	rc = rt_cuda_sdpa_create(m->cu, m->dt, m->B, m->T, m->nh, m->nkv, m->hs,
				 &m->sdpa);
	if (rc == HEXI_OK) {
		const char *bw = rt_cuda_sdpa_backward_why(m->sdpa);
		size_t n = strlen(m->attn_why);

		if (bw != NULL) /* the forward is cuDNN's, the backward not */
			snprintf(m->attn_why + n, sizeof(m->attn_why) - n,
				 "; backward: own kernel (cuDNN refused: "
				 "%.120s)",
				 bw);
		return HEXI_OK;
	}
	if (mode != NULL && strcmp(mode, "cudnn") == 0)
		return rc;
	m->attn = RT_CUDA_ATTN_OWN;
	snprintf(m->attn_why, sizeof(m->attn_why),
		 "own (auto: cuDNN refused the plans: %.200s)",
		 hexi_errmsg(rc));
	hexi_error_clear();
	return HEXI_OK;
}

static hexi_rc attn_forward(rt_cuda_model *m, gact *a)
{
	if (m->attn == RT_CUDA_ATTN_CUDNN)
		return rt_cuda_sdpa_forward(m->sdpa, a->y, a->lse, a->q, a->k,
					    a->v);
	return rt_cuda_attention_forward(m->s, m->dt, a->y, a->lse, a->q, a->k,
					 a->v, m->B, m->T, m->nh, m->nkv,
					 m->hs);
}

/* dq, dk, dv are zero here: cuDNN sets them, the own kernel adds. */
static hexi_rc attn_backward_op(rt_cuda_model *m, gact *a)
{
	if (m->attn == RT_CUDA_ATTN_CUDNN)
		return rt_cuda_sdpa_backward(m->sdpa, m->dq, m->dk, m->dv,
					     m->dy, a->y, a->q, a->k, a->v,
					     a->lse);
	return rt_cuda_attention_backward(
	    m->s, m->dt, m->dq, m->dk, m->dv, m->dy, a->y, a->q, a->k, a->v,
	    a->lse, m->delta, m->B, m->T, m->nh, m->nkv, m->hs);
}

const char *rt_cuda_model_attention(const rt_cuda_model *m)
{
	return m->attn_why;
}

rt_cuda_attn_kind rt_cuda_model_attn_kind(const rt_cuda_model *m)
{
	return m->attn;
}

hexi_rc rt_cuda_shard_create(rt_cuda *c, const rt_cuda_shard_cfg *cfg,
			     const rt_cuda_tp *tp, rt_cuda_model **out)
{
	rt_cuda_model *m;
	hexi_rc rc;

	if (c == NULL || cfg == NULL || out == NULL)
		return hexi_error(HEXI_ERR_INVAL, "GPU model: NULL argument");
	*out = NULL;
	if ((rc = check_cfg(cfg, tp)) != HEXI_OK)
		return rc;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU model");
	m->cu = c;
	m->s = rt_cuda_compute_stream(c);
	m->dt = cfg->dt;
	m->md = *cfg->model;
	m->cfg = *cfg;
	m->cfg.model = &m->md;
	if (tp != NULL)
		m->tp = *tp;
	m->B = cfg->B;
	m->T = m->md.seq_len;
	m->C = m->md.hidden;
	m->V = m->md.vocab;
	m->hs = m->md.hidden / m->md.heads;
	m->nl = cfg->layer_end - cfg->layer_begin;
	{
		int kb, ke, fb, fe;
		local_split(m, &kb, &ke, &fb, &fe);
	}
	m->qd = m->nh * m->hs;
	m->kvd = m->nkv * m->hs;
	if ((rc = params_init(m)) == HEXI_OK)
		rc = acts_init(m);
	if (rc == HEXI_OK)
		rc = attn_init(m);
	if (rc == HEXI_OK)
		rc = rt_cuda_sync(m->s);
	if (rc != HEXI_OK) {
		rt_cuda_model_destroy(m);
		return hexi_error_prefix(rc,
					 "GPU model %s layers [%d,%d) TP %d/%d "
					 "(%d x %d, %d slots)",
					 cfg->model->name, cfg->layer_begin,
					 cfg->layer_end, cfg->tp_rank,
					 cfg->tp_size, cfg->B,
					 cfg->model->seq_len, cfg->max_slots);
	}
	*out = m;
	return HEXI_OK;
}

hexi_rc rt_cuda_model_create(rt_cuda *c, const struct hexi_model *md,
			     rt_cuda_dtype dt, int B, uint64_t seed,
			     const rt_cuda_init *init, rt_cuda_model **out)
{
	rt_cuda_shard_cfg cfg;

	if (md == NULL || init == NULL)
		return hexi_error(HEXI_ERR_INVAL,
				  "GPU model: no model shape or initialiser");
	memset(&cfg, 0, sizeof(cfg));
	cfg.model = md;
	cfg.layer_end = md->layers;
	cfg.tp_size = 1;
	cfg.has_embed = cfg.has_head = 1;
	cfg.max_slots = 1;
	cfg.B = B;
	cfg.dt = dt;
	cfg.seed = seed;
	cfg.init = *init;
	return rt_cuda_shard_create(c, &cfg, NULL, out);
}

void rt_cuda_model_destroy(rt_cuda_model *m)
{
	if (m == NULL)
		return;
	rt_cuda_sdpa_destroy(m->sdpa);
	for (int i = m->nallocs - 1; i >= 0; i--)
		rt_cuda_free(m->allocs[i]);
	for (int i = 0; m->slots != NULL && i < m->cfg.max_slots; i++) {
		free(m->slots[i].xs);
		free(m->slots[i].a);
	}
	free(m->slots);
	free(m->allocs);
	free(m->p);
	free(m->hlosses);
	free(m);
}

int rt_cuda_model_nparams(const rt_cuda_model *m)
{
	return m->np;
}

const rt_cuda_param *rt_cuda_model_param(const rt_cuda_model *m, int i)
{
	return i >= 0 && i < m->np ? &m->p[i] : NULL;
}

size_t rt_cuda_model_numel(const rt_cuda_model *m)
{
	return m->numel;
}

size_t rt_cuda_model_act_bytes(const rt_cuda_model *m)
{
	return (size_t)m->B * m->T * m->C * esz(m);
}

void rt_cuda_model_mem_bytes(const rt_cuda_model *m, rt_model_mem *out)
{
	*out = m->mem;
}

double rt_cuda_model_flops(const rt_cuda_model *m)
{
	const double BT = (double)m->B * m->T, C = m->C, T = m->T;
	double gemm = C * (2.0 * m->qd + 2.0 * m->kvd) + 3.0 * C * m->f;
	double attn = 2.0 * m->qd * (T + 1) / 2.0;
	double fl = 6.0 * BT * (gemm + attn) * m->nl;

	if (m->cfg.has_head)
		fl += 6.0 * BT * C * m->V;
	return fl;
}

/* ---- forward -------------------------------------------------------------
 */

static rt_cuda_param *lw(rt_cuda_model *m, int l)
{
	return m->layer0 + (size_t)l * W_N;
}

/* Sum buf (n elements in dt) over the TP group, in fp32. */
static hexi_rc tp_sum(rt_cuda_model *m, void *buf, size_t n, const char *what,
		      int l)
{
	float *f = m->dt == RT_CUDA_F32 ? buf : m->tpbuf;
	hexi_rc rc;

	if (m->cfg.tp_size == 1 || m->tp.allreduce_sum == NULL)
		return HEXI_OK;
	if (m->dt != RT_CUDA_F32)
		CK(rt_cuda_cast(m->s, f, RT_CUDA_F32, buf, m->dt, n));
	CK(rt_cuda_sync(m->s));
	rc = m->tp.allreduce_sum(m->tp.ctx, f, n);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc,
					 "layer %d %s all-reduce (TP rank %d "
					 "of %d)",
					 m->cfg.layer_begin + l, what,
					 m->cfg.tp_rank, m->cfg.tp_size);
	if (m->dt != RT_CUDA_F32)
		CK(rt_cuda_cast(m->s, buf, m->dt, f, RT_CUDA_F32, n));
	return HEXI_OK;
}

/* Attention half: xs[l] -> a->xmid. */
static hexi_rc attn_half_forward(rt_cuda_model *m, int l, gslot *s)
{
	rt_cuda_param *w = lw(m, l);
	gact *a = &s->a[l];
	const int B = m->B, T = m->T, C = m->C, BT = B * T;
	const size_t nBTC = (size_t)BT * C;
	rt_cuda_dtype dt = m->dt;
	void *x = s->xs[l];

	CK(rt_cuda_rmsnorm_forward(m->s, dt, a->ln1, a->rstd1, x,
				   w[W_ATTN_NORM].w, BT, C, RT_NORM_EPS));
	CK(rt_cuda_matmul_forward(m->cu, dt, a->q, a->ln1, w[W_Q].w, BT, C,
				  m->qd));
	CK(rt_cuda_matmul_forward(m->cu, dt, a->k, a->ln1, w[W_K].w, BT, C,
				  m->kvd));
	CK(rt_cuda_matmul_forward(m->cu, dt, a->v, a->ln1, w[W_V].w, BT, C,
				  m->kvd));
	CK(rt_cuda_rope_forward(m->s, dt, a->q, m->rope, B, T, m->nh, m->hs));
	CK(rt_cuda_rope_forward(m->s, dt, a->k, m->rope, B, T, m->nkv, m->hs));
	CK(attn_forward(m, a));
	CK(rt_cuda_matmul_tw_forward(m->cu, dt, m->tmp, a->y, w[W_O].w, BT,
				     m->qd, C));
	CK(tp_sum(m, m->tmp, nBTC, "attention output", l));
	return rt_cuda_add(m->s, dt, a->xmid, x, m->tmp, nBTC);
}

/* MLP half: a->xmid -> a->h, then (out != NULL) w_down, its TP sum and
 * the residual into out; a recomputation stops at h (out NULL). */
static hexi_rc mlp_half_forward(rt_cuda_model *m, int l, gslot *s, void *out)
{
	rt_cuda_param *w = lw(m, l);
	gact *a = &s->a[l];
	const int BT = m->B * m->T, C = m->C;
	const size_t nBTC = (size_t)BT * C;
	rt_cuda_dtype dt = m->dt;

	CK(rt_cuda_rmsnorm_forward(m->s, dt, a->ln2, a->rstd2, a->xmid,
				   w[W_MLP_NORM].w, BT, C, RT_NORM_EPS));
	CK(rt_cuda_matmul_forward(m->cu, dt, a->gate, a->ln2, w[W_GATE].w, BT,
				  C, m->f));
	CK(rt_cuda_matmul_forward(m->cu, dt, a->up, a->ln2, w[W_UP].w, BT, C,
				  m->f));
	CK(rt_cuda_swiglu_forward(m->s, dt, a->h, a->gate, a->up,
				  (size_t)BT * m->f));
	if (out == NULL)
		return HEXI_OK;
	CK(rt_cuda_matmul_tw_forward(m->cu, dt, m->tmp, a->h, w[W_DOWN].w, BT,
				     m->f, C));
	CK(tp_sum(m, m->tmp, nBTC, "mlp output", l));
	return rt_cuda_add(m->s, dt, out, a->xmid, m->tmp, nBTC);
}

static hexi_rc block_forward(rt_cuda_model *m, int l, gslot *s)
{
	CK(attn_half_forward(m, l, s));
	return mlp_half_forward(m, l, s, s->xs[l + 1]);
}

/* Recompute: layer l's activations again from its input xs[l], by the
 * same kernels on the same data (so the same bits). */
static hexi_rc block_recompute(rt_cuda_model *m, int l, gslot *s)
{
	if (!m->cfg.recompute)
		return HEXI_OK;
	CK(attn_half_forward(m, l, s));
	return mlp_half_forward(m, l, s, NULL);
}

/* Final norm, LM head, token losses (downloaded): *loss_sum = sum over
 * the samples of each sample's mean token loss (rt_model's head_forward). */
static hexi_rc head_forward(rt_cuda_model *m, gslot *s, double *loss_sum)
{
	const int BT = m->B * m->T, C = m->C, V = m->V;
	double sum = 0;

	CK(rt_cuda_rmsnorm_forward(m->s, m->dt, s->lnf, s->rstdf, s->xs[m->nl],
				   m->fnorm->w, BT, C, RT_NORM_EPS));
	CK(rt_cuda_matmul_forward(m->cu, m->dt, s->logits, s->lnf, m->head->w,
				  BT, C, V));
	CK(rt_cuda_crossentropy_forward(m->s, m->dt, m->losses, s->lsev,
					s->logits, s->targets, BT, V));
	CK(rt_cuda_sync(m->s));
	CK(rt_cuda_download(m->hlosses, m->losses, (size_t)BT * 4));
	for (int i = 0; i < BT; i++)
		sum += m->hlosses[i];
	*loss_sum = sum / m->T;
	return HEXI_OK;
}

static hexi_rc check_ids(const rt_cuda_model *m, const int *t, const char *what,
			 int slot)
{
	for (int i = 0; i < m->B * m->T; i++)
		if (t[i] < 0 || t[i] >= m->V)
			return hexi_error(HEXI_ERR_RANGE,
					  "GPU model: slot %d %s[%d] = %d "
					  "outside [0,%d)",
					  slot, what, i, t[i], m->V);
	return HEXI_OK;
}

hexi_rc rt_cuda_model_forward(rt_cuda_model *m, int slot, const int *tokens,
			      const void *x_in, void *x_out, const int *targets,
			      float grad_scale, double *loss_sum)
{
	const rt_cuda_shard_cfg *c = &m->cfg;
	const size_t BT = (size_t)m->B * m->T, nC = BT * m->C * esz(m);
	gslot *s;

	if (slot < 0 || slot >= c->max_slots)
		return hexi_error(HEXI_ERR_RANGE,
				  "GPU model: slot %d not in [0, %d)", slot,
				  c->max_slots);
	s = &m->slots[slot];
	if (s->busy)
		return hexi_error(HEXI_ERR_INVAL,
				  "GPU model: slot %d still holds a "
				  "micro-batch (no backward yet)",
				  slot);
	if ((c->has_embed ? tokens == NULL : x_in == NULL) ||
	    (c->has_head ? targets == NULL || loss_sum == NULL : x_out == NULL))
		return hexi_error(
		    HEXI_ERR_INVAL, "GPU model: forward needs %s and %s",
		    c->has_embed ? "tokens" : "x_in",
		    c->has_head ? "targets and loss_sum" : "x_out");
	if (c->has_embed) {
		CK(check_ids(m, tokens, "tokens", slot));
		CK(rt_cuda_upload(s->tokens, tokens, BT * sizeof(int)));
		CK(rt_cuda_embed_forward(m->s, m->dt, s->xs[0], s->tokens,
					 m->embed->w, (int)BT, m->C, m->V));
	} else {
		CK(rt_cuda_copy(m->s, s->xs[0], x_in, nC));
	}
	if (c->has_head) {
		CK(check_ids(m, targets, "targets", slot));
		CK(rt_cuda_upload(s->targets, targets, BT * sizeof(int)));
	}
	for (int l = 0; l < m->nl; l++)
		CK(block_forward(m, l, s));
	if (c->has_head) {
		CK(head_forward(m, s, loss_sum));
		s->grad_scale = grad_scale;
	} else {
		CK(rt_cuda_copy(m->s, x_out, s->xs[m->nl], nC));
		CK(rt_cuda_sync(m->s));
	}
	s->busy = 1;
	return HEXI_OK;
}

/* ---- backward ------------------------------------------------------------
 */

static hexi_rc zero(rt_cuda_model *m, void *p, size_t bytes)
{
	return rt_cuda_memset0(m->s, p, bytes);
}

/* MLP half: dres holds d(block output); becomes d(xmid). */
static hexi_rc mlp_backward(rt_cuda_model *m, int l, gslot *s)
{
	rt_cuda_param *w = lw(m, l);
	gact *a = &s->a[l];
	const int BT = m->B * m->T, C = m->C;
	const size_t e = esz(m), nC = (size_t)BT * C;
	const size_t nF = (size_t)BT * m->f;
	rt_cuda_dtype dt = m->dt;

	CK(zero(m, m->dh, nF * e));
	CK(rt_cuda_matmul_tw_backward(m->cu, dt, m->dh, w[W_DOWN].g, m->dres,
				      a->h, w[W_DOWN].w, BT, m->f, C));
	CK(zero(m, m->dgate, nF * e));
	CK(zero(m, m->dup, nF * e));
	CK(rt_cuda_swiglu_backward(m->s, dt, m->dgate, m->dup, m->dh, a->gate,
				   a->up, nF));
	CK(zero(m, m->dln, nC * e));
	CK(rt_cuda_matmul_backward(m->cu, dt, m->dln, w[W_GATE].g, m->dgate,
				   a->ln2, w[W_GATE].w, BT, C, m->f));
	CK(rt_cuda_matmul_backward(m->cu, dt, m->dln, w[W_UP].g, m->dup, a->ln2,
				   w[W_UP].w, BT, C, m->f));
	CK(tp_sum(m, m->dln, nC, "mlp input grad", l));
	return rt_cuda_rmsnorm_backward(m->s, dt, m->dres, w[W_MLP_NORM].g,
					m->dln, a->xmid, w[W_MLP_NORM].w,
					a->rstd2, BT, C);
}

/* Attention half: dres holds d(xmid); becomes d(block input). */
static hexi_rc attn_backward(rt_cuda_model *m, int l, gslot *s)
{
	rt_cuda_param *w = lw(m, l);
	gact *a = &s->a[l];
	const int B = m->B, T = m->T, C = m->C, BT = B * T;
	const size_t e = esz(m), nC = (size_t)BT * C;
	rt_cuda_dtype dt = m->dt;

	CK(zero(m, m->dy, (size_t)BT * m->qd * e));
	CK(rt_cuda_matmul_tw_backward(m->cu, dt, m->dy, w[W_O].g, m->dres, a->y,
				      w[W_O].w, BT, m->qd, C));
	CK(zero(m, m->dq, (size_t)BT * m->qd * e));
	CK(zero(m, m->dk, (size_t)BT * m->kvd * e));
	CK(zero(m, m->dv, (size_t)BT * m->kvd * e));
	CK(attn_backward_op(m, a));
	CK(rt_cuda_rope_backward(m->s, dt, m->dq, m->rope, B, T, m->nh, m->hs));
	CK(rt_cuda_rope_backward(m->s, dt, m->dk, m->rope, B, T, m->nkv,
				 m->hs));
	CK(zero(m, m->dln, nC * e));
	CK(rt_cuda_matmul_backward(m->cu, dt, m->dln, w[W_Q].g, m->dq, a->ln1,
				   w[W_Q].w, BT, C, m->qd));
	CK(rt_cuda_matmul_backward(m->cu, dt, m->dln, w[W_K].g, m->dk, a->ln1,
				   w[W_K].w, BT, C, m->kvd));
	CK(rt_cuda_matmul_backward(m->cu, dt, m->dln, w[W_V].g, m->dv, a->ln1,
				   w[W_V].w, BT, C, m->kvd));
	CK(tp_sum(m, m->dln, nC, "attention input grad", l));
	return rt_cuda_rmsnorm_backward(m->s, dt, m->dres, w[W_ATTN_NORM].g,
					m->dln, s->xs[l], w[W_ATTN_NORM].w,
					a->rstd1, BT, C);
}

/* Loss -> dres = d(stage output). */
static hexi_rc head_backward(rt_cuda_model *m, gslot *s)
{
	const int BT = m->B * m->T, C = m->C, V = m->V;
	const size_t e = esz(m);

	CK(zero(m, m->dlogits, (size_t)BT * V * e));
	CK(rt_cuda_crossentropy_backward(m->s, m->dt, m->dlogits, s->logits,
					 s->lsev, s->targets,
					 s->grad_scale / (float)m->T, BT, V));
	CK(zero(m, m->dln, (size_t)BT * C * e));
	CK(rt_cuda_matmul_backward(m->cu, m->dt, m->dln, m->head->g, m->dlogits,
				   s->lnf, m->head->w, BT, C, V));
	CK(zero(m, m->dres, (size_t)BT * C * e));
	return rt_cuda_rmsnorm_backward(m->s, m->dt, m->dres, m->fnorm->g,
					m->dln, s->xs[m->nl], m->fnorm->w,
					s->rstdf, BT, C);
}

/* grad_window: the next backward unit's gradient starts from zero; the
 * window held the previous unit's, which the grad hook handed over. */
static hexi_rc unit_start(rt_cuda_model *m)
{
	return m->cfg.grad_window ? zero(m, m->g, m->gpadded * 4) : HEXI_OK;
}

static hexi_rc backward_body(rt_cuda_model *m, gslot *s, const void *dy,
			     void *dx)
{
	const size_t nC = (size_t)m->B * m->T * m->C * esz(m);

	if (m->cfg.has_head) {
		CK(unit_start(m));
		CK(head_backward(m, s));
		if (m->hook != NULL)
			CK(m->hook(m->hook_ctx, m->md.layers));
	} else
		CK(rt_cuda_copy(m->s, m->dres, dy, nC));
	for (int l = m->nl - 1; l >= 0; l--) {
		CK(block_recompute(m, l, s));
		CK(unit_start(m));
		CK(mlp_backward(m, l, s));
		CK(attn_backward(m, l, s));
		if (m->hook != NULL)
			CK(m->hook(m->hook_ctx, m->cfg.layer_begin + l));
	}
	if (m->cfg.has_embed) {
		CK(unit_start(m));
		CK(rt_cuda_embed_backward(m->s, m->dt, m->embed->g, m->dres,
					  s->tokens, m->B * m->T, m->C, m->V));
		if (m->hook != NULL)
			CK(m->hook(m->hook_ctx, -1));
	} else
		CK(rt_cuda_copy(m->s, dx, m->dres, nC));
	return rt_cuda_sync(m->s);
}

void rt_cuda_model_set_grad_hook(rt_cuda_model *m,
				 hexi_rc (*fn)(void *ctx, int layer), void *ctx)
{
	m->hook = fn;
	m->hook_ctx = ctx;
}

hexi_rc rt_cuda_model_backward(rt_cuda_model *m, int slot, const void *dy,
			       void *dx)
{
	const rt_cuda_shard_cfg *c = &m->cfg;
	hexi_rc rc;

	if (slot < 0 || slot >= c->max_slots || !m->slots[slot].busy)
		return hexi_error(HEXI_ERR_INVAL,
				  "GPU model: backward of slot %d without a "
				  "forward",
				  slot);
	if ((!c->has_head && dy == NULL) || (!c->has_embed && dx == NULL))
		return hexi_error(HEXI_ERR_INVAL,
				  "GPU model: backward needs %s",
				  dy == NULL ? "dy (not the last stage)"
					     : "dx (not the first stage)");
	rc = backward_body(m, &m->slots[slot], dy, dx);
	m->slots[slot].busy = 0;
	return rc;
}

hexi_rc rt_cuda_model_zero_grad(rt_cuda_model *m)
{
	return zero(m, m->g, m->gpadded * 4);
}

hexi_rc rt_cuda_model_fwd_bwd(rt_cuda_model *m, const int *tokens,
			      const int *targets, double *loss)
{
	double ls = 0;

	if (!m->cfg.has_embed || !m->cfg.has_head || m->cfg.tp_size != 1)
		return hexi_error(HEXI_ERR_INVAL,
				  "GPU model: fwd_bwd needs the whole model");
	CK(rt_cuda_model_zero_grad(m));
	CK(rt_cuda_model_forward(m, 0, tokens, NULL, NULL, targets,
				 1.0f / (float)m->B, &ls));
	CK(rt_cuda_model_backward(m, 0, NULL, NULL));
	*loss = ls / m->B;
	return HEXI_OK;
}

/* ---- optimizers ----------------------------------------------------------
 */

hexi_rc rt_cuda_model_grad_scale(rt_cuda_model *m, float f)
{
	CK(rt_cuda_scale_f32(m->s, m->g, f, m->gpadded));
	return rt_cuda_sync(m->s);
}

hexi_rc rt_cuda_model_adamw(rt_cuda_model *m, float lr, float beta1,
			    float beta2, float eps, float weight_decay,
			    int step)
{
	if (step < 1)
		return hexi_error(HEXI_ERR_INVAL, "GPU AdamW: step %d < 1",
				  step);
	if ((m->mom == NULL || m->cfg.grad_window) && m->np > 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "GPU AdamW: the shard has no moments or "
				  "only one unit's gradient (sharded "
				  "optimizer: the sync updates)");
	for (int i = 0; i < m->np; i++) {
		rt_cuda_param *p = &m->p[i];

		CK(rt_cuda_adamw(m->s, m->dt, p->master,
				 m->dt == RT_CUDA_F32 ? NULL : p->w, p->g, p->m,
				 p->v, p->n, lr, beta1, beta2, eps,
				 p->decay ? weight_decay : 0.0f, step));
	}
	return rt_cuda_sync(m->s);
}

/* master += (-lr) g: the same rounding as the CPU's w -= lr * g (the
 * product is exact up to sign).  The gradient is consumed. */
hexi_rc rt_cuda_model_sgd(rt_cuda_model *m, float lr)
{
	if (m->cfg.grad_window && m->np > 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "GPU SGD: the shard keeps only one unit's "
				  "gradient (sharded optimizer: the sync "
				  "updates)");
	CK(rt_cuda_scale_f32(m->s, m->g, -lr, m->padded));
	CK(rt_cuda_add(m->s, RT_CUDA_F32, m->master, m->master, m->g,
		       m->padded));
	for (int i = 0; m->dt != RT_CUDA_F32 && i < m->np; i++)
		CK(rt_cuda_cast(m->s, m->p[i].w, m->dt, m->p[i].master,
				RT_CUDA_F32, m->p[i].n));
	return rt_cuda_sync(m->s);
}

hexi_rc rt_cuda_model_refresh(rt_cuda_model *m)
{
	for (int i = 0; m->dt != RT_CUDA_F32 && i < m->np; i++)
		CK(rt_cuda_cast(m->s, m->p[i].w, m->dt, m->p[i].master,
				RT_CUDA_F32, m->p[i].n));
	return HEXI_OK;
}

/* ---- host access ---------------------------------------------------------
 */

static hexi_rc find(rt_cuda_model *m, const char *name, int what, size_t n,
		    rt_cuda_param **pp, float **buf)
{
	for (int i = 0; i < m->np; i++) {
		rt_cuda_param *p = &m->p[i];

		if (strcmp(p->name, name) != 0)
			continue;
		if (n != p->n)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "GPU model: %s has %zu elements "
					  "here, not %zu",
					  name, p->n, n);
		switch (what) {
		case 0:
			*buf = p->master;
			break;
		case 1:
			*buf = p->g;
			break;
		case 2:
			*buf = p->m;
			break;
		case 3:
			*buf = p->v;
			break;
		default:
			return hexi_error(HEXI_ERR_INVAL,
					  "GPU model: %s: state %d", name,
					  what);
		}
		if (*buf == NULL)
			return hexi_error(HEXI_ERR_INVAL,
					  "GPU model: %s has no AdamW moments "
					  "here (sharded optimizer)",
					  name);
		*pp = p;
		return HEXI_OK;
	}
	return hexi_error(HEXI_ERR_NOTFOUND, "GPU model: no tensor %s here",
			  name);
}

hexi_rc rt_cuda_model_read(rt_cuda_model *m, const char *name, int what,
			   float *out, size_t n)
{
	rt_cuda_param *p;
	float *buf;

	CK(find(m, name, what, n, &p, &buf));
	CK(rt_cuda_sync(m->s));
	return rt_cuda_download(out, buf, n * sizeof(float));
}

hexi_rc rt_cuda_model_write(rt_cuda_model *m, const char *name, int what,
			    const float *in, size_t n)
{
	rt_cuda_param *p;
	float *buf;

	CK(find(m, name, what, n, &p, &buf));
	CK(rt_cuda_sync(m->s));
	CK(rt_cuda_upload(buf, in, n * sizeof(float)));
	if (what == 0 && m->dt != RT_CUDA_F32)
		CK(rt_cuda_cast(m->s, p->w, m->dt, p->master, RT_CUDA_F32, n));
	return rt_cuda_sync(m->s);
}
