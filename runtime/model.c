/* model.c - a stage shard of the Llama-style model (see rt_model.h). */
#include "config.h"

#include "rt_model.h"
#include "rt_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Caps that keep every size product far inside size_t and int. */
#define RT_MAX_DIM   (1 << 20)
#define RT_MAX_SLOTS 1024

/* The parameters of one block, in rt_model_param order. */
enum {
	P_ATTN_NORM,
	P_WQ,
	P_WK,
	P_WV,
	P_WO,
	P_MLP_NORM,
	P_W_GATE,
	P_W_UP,
	P_W_DOWN,
	P_PER_LAYER
};

/* Saved activations of one block for one micro-batch (shapes for B max). */
typedef struct layer_act {
	float *ln1, *rstd1;   /* (B,T,C), (B,T) */
	float *q;	      /* (B,T,nh,hs) after RoPE */
	float *k, *v;	      /* (B,T,nkv,hs), k after RoPE */
	float *att;	      /* (B,nh,T,T) */
	float *atty;	      /* (B,T,nh*hs) */
	float *xmid;	      /* (B,T,C) after the attention residual */
	float *ln2, *rstd2;   /* (B,T,C), (B,T) */
	float *gate, *up, *h; /* (B,T,f) */
} layer_act;

typedef struct slot {
	int busy, B;
	float grad_scale;
	float *mem;	       /* one allocation carved below */
	float **xs;	       /* [nl+1] residual stream (B,T,C); xs[0] input */
	layer_act *act;	       /* [nl] */
	float *lnf, *rstdf;    /* (B,T,C), (B,T) last stage */
	float *probs;	       /* (B,T,V) last stage */
	int *tokens, *targets; /* (B,T) */
} slot;

/* Backward and forward scratch, shared by all slots (one at a time). */
typedef struct scratch {
	float *mem;
	float *tmp, *dres, *dln; /* (B,T,C) */
	float *dq, *datty;	 /* (B,T,nh*hs) */
	float *dk, *dv;		 /* (B,T,nkv*hs) */
	float *dgate, *dup, *dh; /* (B,T,f) */
	float *logits;		 /* (B,T,V): logits, then dlogits */
	float *losses;		 /* (B,T) */
	float *attwork;		 /* (T,T) attention backward workspace */
} scratch;

struct rt_model {
	rt_model_config cfg;
	rt_tp_comm tp;
	int T, C, V, nl;    /* seq, hidden, vocab, layers held */
	int hs, nh, nkv, f; /* head size; local q heads, kv heads, ffn rows */
	int nparams;
	rt_param *params;				 /* [nparams] */
	rt_param *embed, *final_norm, *lm_head, *layer0; /* into params */
	float *wmem, *gmem, *mmem, *vmem;
	size_t numel;
	size_t gnum;	/* elements of gmem: numel, or with grad_window the
			   largest backward unit's */
	size_t layer_n; /* elements of one layer's parameters */
	slot *slots; /* [max_slots] */
	scratch s;
	/* recompute: the one layer's activations every slot's backward
	 * rebuilds, and the output of a non-last stage (sent, not kept) */
	layer_act ract;
	float *ract_mem, *xlast;
	rt_model_mem mem; /* bytes allocated, for rt_model_mem_bytes */
	rt_grad_hook hook; /* rt_model_set_grad_hook (overlap), or NULL */
	void *hook_ctx;
	rt_poll_hook poll; /* rt_model_set_poll_hook (overlap), or NULL */
	void *poll_ctx;
};

/* Between the GEMMs of a backward unit: the trainer's poll hook lets the
 * gradient all-reduces in flight progress (MPI moves them only inside
 * MPI calls). */
#define POLL(m)                                                                \
	do {                                                                   \
		hexi_rc prc_;                                                  \
		if ((m)->poll != NULL &&                                       \
		    (prc_ = (m)->poll((m)->poll_ctx)) != HEXI_OK)              \
			return prc_;                                           \
	} while (0)

/* ---- configuration ------------------------------------------------------ */

static hexi_rc check_dim(const char *what, long v, long lo)
{
	if (v < lo || v > RT_MAX_DIM)
		return hexi_error(
		    HEXI_ERR_RANGE,
		    "model shard: %s = %ld out of range [%ld, %d]", what, v, lo,
		    RT_MAX_DIM);
	return HEXI_OK;
}

static hexi_rc check_model(const hexi_model *md, int T)
{
	hexi_rc rc;
	if ((rc = check_dim("layers", md->layers, 1)) ||
	    (rc = check_dim("hidden", md->hidden, 2)) ||
	    (rc = check_dim("heads", md->heads, 1)) ||
	    (rc = check_dim("kv_heads", md->kv_heads, 1)) ||
	    (rc = check_dim("ffn", md->ffn, 1)) ||
	    (rc = check_dim("vocab", md->vocab, 2)) ||
	    (rc = check_dim("seq", T, 1)))
		return rc;
	if (md->hidden % md->heads != 0 || (md->hidden / md->heads) % 2 != 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "model shard: hidden %d must be heads %d "
				  "times an even head size (RoPE)",
				  md->hidden, md->heads);
	if (md->heads % md->kv_heads != 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "model shard: heads %d not a multiple of "
				  "kv_heads %d",
				  md->heads, md->kv_heads);
	return HEXI_OK;
}

/* Upper bound (unsharded) of parameters and activations in bytes, in
 * double, so no size_t product below can overflow. */
static hexi_rc check_size(const rt_model_config *c, int T)
{
	const hexi_model *md = &c->model;
	const double C = md->hidden, F = md->ffn, V = md->vocab, H = md->heads;
	const double BT = (double)c->max_batch * T,
		     nl = c->layer_end - c->layer_begin;
	double params = nl * (4 * C * C + 3 * F * C + 2 * C) + 2 * V * C + C;
	double act =
	    nl * (BT * (8 * C + 3 * F + 2) + c->max_batch * H * T * (double)T) +
	    BT * (C + V + 1);
	double bytes = 4.0 * (4 * params + c->max_slots * act);
	if (bytes > 0x1p46)
		return hexi_error(HEXI_ERR_NOFIT,
				  "model shard: %.3g bytes of parameters and "
				  "activations exceed the 64 TiB cap",
				  bytes);
	return HEXI_OK;
}

static hexi_rc check_config(const rt_model_config *c, const rt_tp_comm *tp)
{
	const hexi_model *md = &c->model;
	int T = c->seq ? c->seq : md->seq_len;
	hexi_rc rc = check_model(md, T);
	if (rc)
		return rc;
	if (c->layer_begin < 0 || c->layer_end < c->layer_begin ||
	    c->layer_end > md->layers)
		return hexi_error(
		    HEXI_ERR_RANGE,
		    "model shard: layer range [%d, %d) not inside "
		    "[0, %d)",
		    c->layer_begin, c->layer_end, md->layers);
	if (c->tp_size < 1 || c->tp_size > md->kv_heads || c->tp_rank < 0 ||
	    c->tp_rank >= c->tp_size)
		return hexi_error(HEXI_ERR_RANGE,
				  "model shard: tp rank %d of %d invalid (need "
				  "0 <= rank < tp <= kv_heads %d)",
				  c->tp_rank, c->tp_size, md->kv_heads);
	if (c->tp_size > 1 && (!tp || !tp->allreduce_sum))
		return hexi_error(HEXI_ERR_INVAL,
				  "model shard: tp %d needs an allreduce_sum "
				  "callback",
				  c->tp_size);
	if (c->max_slots < 1 || c->max_slots > RT_MAX_SLOTS ||
	    c->max_batch < 1 || c->max_batch > RT_MAX_DIM)
		return hexi_error(
		    HEXI_ERR_RANGE,
		    "model shard: max_slots %d / max_batch %d out "
		    "of range",
		    c->max_slots, c->max_batch);
	if ((int64_t)c->max_batch * T > RT_MAX_DIM)
		return hexi_error(HEXI_ERR_RANGE,
				  "model shard: max_batch %d x seq %d tokens "
				  "exceeds %d",
				  c->max_batch, T, RT_MAX_DIM);
	return check_size(c, T);
}

/* ---- parameters --------------------------------------------------------- */

/* Describe one parameter; rows [rb, re) of a (rows, cols) tensor. */
static void param_set(rt_param *p, const char *name, int ndim, int64_t rows,
		      int64_t cols, int rb, int re, int replicated)
{
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->ndim = ndim;
	p->shape[0] = rows;
	p->shape[1] = cols;
	p->row_begin = rb;
	p->row_end = re;
	p->replicated_in_tp = replicated;
	p->n = (size_t)(re - rb) * (size_t)cols;
}

static void layer_params(rt_model *m, rt_param *p, int l)
{
	const hexi_model *md = &m->cfg.model;
	const int C = m->C, hs = m->hs, G = md->heads / md->kv_heads;
	int kb, ke, fb, fe;
	char nm[RT_PARAM_NAME_MAX];
	hexi_layout_split(md->kv_heads, m->cfg.tp_size, m->cfg.tp_rank, &kb,
			  &ke);
	hexi_layout_split(md->ffn, m->cfg.tp_size, m->cfg.tp_rank, &fb, &fe);
#define LNAME(s) (snprintf(nm, sizeof(nm), "layers.%d.%s", l, s), nm)
	param_set(&p[P_ATTN_NORM], LNAME("attn_norm.weight"), 1, C, 1, 0, C, 1);
	param_set(&p[P_WQ], LNAME("attn.wq"), 2, (int64_t)md->heads * hs, C,
		  kb * G * hs, ke * G * hs, 0);
	param_set(&p[P_WK], LNAME("attn.wk"), 2, (int64_t)md->kv_heads * hs, C,
		  kb * hs, ke * hs, 0);
	param_set(&p[P_WV], LNAME("attn.wv"), 2, (int64_t)md->kv_heads * hs, C,
		  kb * hs, ke * hs, 0);
	param_set(&p[P_WO], LNAME("attn.wo"), 2, (int64_t)md->heads * hs, C,
		  kb * G * hs, ke * G * hs, 0);
	param_set(&p[P_MLP_NORM], LNAME("mlp_norm.weight"), 1, C, 1, 0, C, 1);
	param_set(&p[P_W_GATE], LNAME("mlp.w_gate"), 2, md->ffn, C, fb, fe, 0);
	param_set(&p[P_W_UP], LNAME("mlp.w_up"), 2, md->ffn, C, fb, fe, 0);
	param_set(&p[P_W_DOWN], LNAME("mlp.w_down"), 2, md->ffn, C, fb, fe, 0);
#undef LNAME
	m->nh = (ke - kb) * G;
	m->nkv = ke - kb;
	m->f = fe - fb;
}

/* The gradient of every parameter: its own place in gmem (numel), or
 * with grad_window the place in its backward unit (the embedding, one
 * layer, the head), every unit starting at gmem: gnum is then the
 * largest unit. */
static void place_grads(rt_model *m, float *base)
{
	size_t off = 0, unit = 0;
	const int w = m->cfg.grad_window;
	const rt_param *l0 = m->layer0, *l1 = m->layer0 + m->nl * P_PER_LAYER;

	m->layer_n = 0;
	for (int i = 0; i < P_PER_LAYER && m->nl > 0; i++)
		m->layer_n += m->layer0[i].n;
	m->gnum = w ? 0 : m->numel;
	for (int i = 0; i < m->nparams; i++) {
		rt_param *q = &m->params[i];
		/* a new unit starts at the embedding, each layer, the head */
		if (w && (q == m->embed || q == m->final_norm ||
			  (q >= l0 && q < l1 && (q - l0) % P_PER_LAYER == 0)))
			off = 0;
		q->g = base != NULL ? base + off : NULL;
		off += q->n;
		unit = off > unit ? off : unit;
	}
	if (w)
		m->gnum = unit;
}

/* Describe every parameter, then carve w/g/m/v from four allocations. */
static hexi_rc build_params(rt_model *m)
{
	const rt_model_config *c = &m->cfg;
	int n = m->nl * P_PER_LAYER + (c->has_embed ? 1 : 0) +
		(c->has_head ? 2 : 0);
	rt_param *p = calloc((size_t)(n ? n : 1), sizeof(*p));
	if (!p)
		return hexi_error(HEXI_ERR_NOMEM,
				  "model shard: parameter table");
	m->params = p;
	m->nparams = n;
	m->f = m->nh = m->nkv = 0;
	if (c->has_embed) {
		m->embed = p;
		param_set(p++, "embed.weight", 2, m->V, m->C, 0, m->V, 1);
	}
	m->layer0 = p;
	for (int l = c->layer_begin; l < c->layer_end; l++, p += P_PER_LAYER)
		layer_params(m, p, l);
	if (c->has_head) {
		m->final_norm = p;
		param_set(p++, "final_norm.weight", 1, m->C, 1, 0, m->C, 1);
		m->lm_head = p;
		param_set(p++, "lm_head.weight", 2, m->V, m->C, 0, m->V, 1);
	}
	m->numel = 0;
	for (int i = 0; i < n; i++)
		m->numel += m->params[i].n;
	size_t bytes = (m->numel ? m->numel : 1) * sizeof(float);
	place_grads(m, NULL); /* sizes only */
	size_t gbytes = (m->gnum ? m->gnum : 1) * sizeof(float);
	m->wmem = calloc(1, bytes);
	m->gmem = calloc(1, gbytes);
	if (!c->no_moments) {
		m->mmem = calloc(1, bytes);
		m->vmem = calloc(1, bytes);
	}
	if (!m->wmem || !m->gmem || (!c->no_moments && (!m->mmem || !m->vmem)))
		return hexi_error(HEXI_ERR_NOMEM, "model shard: %zu parameters",
				  m->numel);
	m->mem.params = bytes;
	m->mem.grads = gbytes;
	m->mem.optim = c->no_moments ? 0 : 2 * bytes;
	place_grads(m, m->gmem);
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		rt_param *q = &m->params[i];
		q->w = m->wmem + off;
		q->m = m->mmem != NULL ? m->mmem + off : NULL;
		q->v = m->vmem != NULL ? m->vmem + off : NULL;
		off += q->n;
	}
	return HEXI_OK;
}

void rt_model_init_weights(rt_model *m, uint64_t seed)
{
	for (int i = 0; i < m->nparams; i++) {
		rt_param *p = &m->params[i];
		rt_init_tensor(p->w, p->name, p->row_begin, p->row_end,
			       p->shape[1], rt_init_std(&m->cfg.model, p->name),
			       seed);
	}
	memset(m->gmem, 0, m->gnum * sizeof(float));
	if (m->mmem != NULL) /* NULL after rt_model_drop_moments */
		memset(m->mmem, 0, m->numel * sizeof(float));
	if (m->vmem != NULL)
		memset(m->vmem, 0, m->numel * sizeof(float));
}

void rt_model_set_grad_hook(rt_model *m, rt_grad_hook fn, void *ctx)
{
	m->hook = fn;
	m->hook_ctx = ctx;
}

void rt_model_set_poll_hook(rt_model *m, rt_poll_hook fn, void *ctx)
{
	m->poll = fn;
	m->poll_ctx = ctx;
}

void rt_model_drop_moments(rt_model *m)
{
	m->mem.optim = 0;
	free(m->mmem);
	free(m->vmem);
	m->mmem = m->vmem = NULL;
	for (int i = 0; i < m->nparams; i++)
		m->params[i].m = m->params[i].v = NULL;
}

/* ---- activations -------------------------------------------------------- */

/* Bump allocator over one buffer: with base NULL it only counts. */
static float *carve(float *base, size_t *off, size_t n)
{
	float *p = base ? base + *off : NULL;
	*off += (n + 15) & ~(size_t)15; /* keep 64-byte alignment */
	return p;
}

/* Lay out one layer's saved activations at base + *off (or count them). */
static void layer_layout(rt_model *m, layer_act *a, float *base, size_t *off)
{
	const size_t BT = (size_t)m->cfg.max_batch * m->T;
	const size_t qd = (size_t)m->nh * m->hs, kvd = (size_t)m->nkv * m->hs;
	a->ln1 = carve(base, off, BT * m->C);
	a->rstd1 = carve(base, off, BT);
	a->q = carve(base, off, BT * qd);
	a->k = carve(base, off, BT * kvd);
	a->v = carve(base, off, BT * kvd);
	a->att =
	    carve(base, off, (size_t)m->cfg.max_batch * m->nh * m->T * m->T);
	a->atty = carve(base, off, BT * qd);
	a->xmid = carve(base, off, BT * m->C);
	a->ln2 = carve(base, off, BT * m->C);
	a->rstd2 = carve(base, off, BT);
	a->gate = carve(base, off, BT * m->f);
	a->up = carve(base, off, BT * m->f);
	a->h = carve(base, off, BT * m->f);
}

/* Lay out one slot's activations in base (or count them); returns floats.
 * With recompute a slot holds the residual stream only (each layer's
 * input; the output too on the last stage, the final norm's input) and
 * every layer_act entry points at the shared m->ract. */
static size_t slot_layout(rt_model *m, slot *s, float *base)
{
	const size_t BT = (size_t)m->cfg.max_batch * m->T;
	const int rc = m->cfg.recompute;
	const int keep_out = !rc || m->cfg.has_head || m->nl == 0;
	size_t off = 0;
	for (int i = 0; i < m->nl; i++)
		s->xs[i] = carve(base, &off, BT * m->C);
	s->xs[m->nl] = keep_out ? carve(base, &off, BT * m->C) : m->xlast;
	for (int l = 0; l < m->nl; l++) {
		if (rc)
			s->act[l] = m->ract;
		else
			layer_layout(m, &s->act[l], base, &off);
	}
	if (m->cfg.has_head) {
		s->lnf = carve(base, &off, BT * m->C);
		s->rstdf = carve(base, &off, BT);
		s->probs = carve(base, &off, BT * m->V);
	}
	return off;
}

/* Recompute: one layer's activations, shared by every slot's backward,
 * and the buffer a non-last stage computes its output into. */
static hexi_rc build_recompute(rt_model *m)
{
	const size_t BTC = (size_t)m->cfg.max_batch * m->T * m->C;
	size_t n = 0;
	if (!m->cfg.recompute || m->nl == 0)
		return HEXI_OK;
	layer_layout(m, &m->ract, NULL, &n);
	n += m->cfg.has_head ? 0 : BTC;
	m->ract_mem = malloc(n * sizeof(float));
	if (!m->ract_mem)
		return hexi_error(HEXI_ERR_NOMEM,
				  "model shard: recompute buffer (%zu floats)",
				  n);
	n = 0;
	layer_layout(m, &m->ract, m->ract_mem, &n);
	if (!m->cfg.has_head)
		m->xlast = m->ract_mem + n;
	m->mem.acts += (n + (m->cfg.has_head ? 0 : BTC)) * sizeof(float);
	return HEXI_OK;
}

static hexi_rc build_slots(rt_model *m)
{
	const int ns = m->cfg.max_slots;
	const size_t BT = (size_t)m->cfg.max_batch * m->T;
	m->slots = calloc((size_t)ns, sizeof(slot));
	if (!m->slots)
		return hexi_error(HEXI_ERR_NOMEM, "model shard: slot table");
	for (int i = 0; i < ns; i++) {
		slot *s = &m->slots[i];
		s->xs = calloc((size_t)m->nl + 1, sizeof(float *));
		s->act = calloc(m->nl ? (size_t)m->nl : 1, sizeof(layer_act));
		s->tokens = calloc(BT, sizeof(int));
		s->targets = calloc(BT, sizeof(int));
		if (!s->xs || !s->act || !s->tokens || !s->targets)
			return hexi_error(HEXI_ERR_NOMEM,
					  "model shard: slot %d tables", i);
		size_t n = slot_layout(m, s, NULL);
		s->mem = malloc(n * sizeof(float));
		if (!s->mem)
			return hexi_error(HEXI_ERR_NOMEM,
					  "model shard: slot %d activations "
					  "(%zu floats)",
					  i, n);
		slot_layout(m, s, s->mem);
		m->mem.acts += n * sizeof(float);
		m->mem.work += 2 * BT * sizeof(int);
	}
	return HEXI_OK;
}

static size_t scratch_layout(rt_model *m, scratch *s, float *base)
{
	const size_t BT = (size_t)m->cfg.max_batch * m->T;
	const size_t qd = (size_t)m->nh * m->hs, kvd = (size_t)m->nkv * m->hs;
	size_t off = 0;
	s->tmp = carve(base, &off, BT * m->C);
	s->dres = carve(base, &off, BT * m->C);
	s->dln = carve(base, &off, BT * m->C);
	s->dq = carve(base, &off, BT * qd);
	s->datty = carve(base, &off, BT * qd);
	s->dk = carve(base, &off, BT * kvd);
	s->dv = carve(base, &off, BT * kvd);
	s->dgate = carve(base, &off, BT * m->f);
	s->dup = carve(base, &off, BT * m->f);
	s->dh = carve(base, &off, BT * m->f);
	s->logits = carve(base, &off, m->cfg.has_head ? BT * m->V : 0);
	s->losses = carve(base, &off, BT);
	s->attwork = carve(base, &off, (size_t)m->T * m->T);
	return off;
}

static hexi_rc build_scratch(rt_model *m)
{
	size_t n = scratch_layout(m, &m->s, NULL);
	m->s.mem = malloc(n * sizeof(float));
	if (!m->s.mem)
		return hexi_error(HEXI_ERR_NOMEM,
				  "model shard: scratch (%zu floats)", n);
	scratch_layout(m, &m->s, m->s.mem);
	m->mem.work += n * sizeof(float);
	return HEXI_OK;
}

/* ---- create / destroy ---------------------------------------------------- */

hexi_rc rt_model_create(const rt_model_config *cfg, const rt_tp_comm *tp,
			rt_model **out)
{
	rt_model *m = NULL;
	hexi_rc rv = check_config(cfg, tp);
	*out = NULL;
	if (rv)
		return rv;
	rv = HEXI_ERR_NOMEM;
	m = calloc(1, sizeof(*m));
	if (!m) {
		hexi_error(rv, "model shard: out of memory");
		goto out;
	}
	m->cfg = *cfg;
	if (tp)
		m->tp = *tp;
	m->T = cfg->seq ? cfg->seq : cfg->model.seq_len;
	m->cfg.seq = m->T;
	m->C = cfg->model.hidden;
	m->V = cfg->model.vocab;
	m->hs = cfg->model.hidden / cfg->model.heads;
	m->nl = cfg->layer_end - cfg->layer_begin;
	if ((rv = build_params(m)) || (rv = build_recompute(m)) ||
	    (rv = build_slots(m)) || (rv = build_scratch(m)))
		goto out;
	rt_model_init_weights(m, cfg->seed);
	*out = m;
	m = NULL;
	rv = HEXI_OK;
out:
	rt_model_destroy(m);
	return rv;
}

void rt_model_destroy(rt_model *m)
{
	if (!m)
		return;
	for (int i = 0; m->slots && i < m->cfg.max_slots; i++) {
		free(m->slots[i].mem);
		free(m->slots[i].xs);
		free(m->slots[i].act);
		free(m->slots[i].tokens);
		free(m->slots[i].targets);
	}
	free(m->slots);
	free(m->ract_mem);
	free(m->s.mem);
	free(m->wmem);
	free(m->gmem);
	free(m->mmem);
	free(m->vmem);
	free(m->params);
	free(m);
}

const rt_model_config *rt_model_get_config(const rt_model *m)
{
	return &m->cfg;
}

int rt_model_nparams(const rt_model *m)
{
	return m->nparams;
}

rt_param *rt_model_param(rt_model *m, int i)
{
	return i >= 0 && i < m->nparams ? &m->params[i] : NULL;
}

rt_param *rt_model_find_param(rt_model *m, const char *name)
{
	for (int i = 0; i < m->nparams; i++)
		if (strcmp(m->params[i].name, name) == 0)
			return &m->params[i];
	return NULL;
}

size_t rt_model_numel(const rt_model *m)
{
	return m->numel;
}

void rt_model_mem_bytes(const rt_model *m, rt_model_mem *out)
{
	*out = m->mem;
}

double rt_model_flops(const rt_model *m, int B)
{
	const double BT = (double)B * m->T, C = m->C, T = m->T;
	const double qd = (double)m->nh * m->hs, kvd = (double)m->nkv * m->hs;
	/* per layer: q,k,v,o projections, gate/up/down, then attention:
	 * q.k^T and att.v over the causal half (T+1)/2 positions per row */
	double gemm = C * (2 * qd + 2 * kvd) + 3 * C * m->f;
	double attn = 2.0 * qd * (T + 1) / 2.0;
	double fl = 6.0 * BT * (gemm + attn) * m->nl;
	if (m->cfg.has_head)
		fl += 6.0 * BT * C * m->V;
	return fl;
}

void rt_model_zero_grad(rt_model *m)
{
	memset(m->gmem, 0, m->gnum * sizeof(float));
}

/* ---- forward ------------------------------------------------------------ */

static hexi_rc tp_allreduce(rt_model *m, float *buf, size_t n, const char *what,
			    int layer)
{
	if (!m->tp.allreduce_sum)
		return HEXI_OK;
	hexi_rc rc = m->tp.allreduce_sum(m->tp.ctx, buf, n);
	if (rc)
		return hexi_error_prefix(rc,
					 "layer %d %s all-reduce (tp rank %d "
					 "of %d)",
					 layer, what, m->cfg.tp_rank,
					 m->cfg.tp_size);
	return HEXI_OK;
}

/* Attention half of a block: x = xs[l] (B,T,C) -> a->xmid (B,T,C). */
static hexi_rc attn_forward(rt_model *m, int l, slot *s)
{
	const rt_param *w = m->layer0 + (size_t)l * P_PER_LAYER;
	layer_act *a = &s->act[l];
	const int B = s->B, T = m->T, C = m->C, BT = B * T;
	const int qd = m->nh * m->hs, kvd = m->nkv * m->hs;
	const float *x = s->xs[l];
	float *tmp = m->s.tmp;
	hexi_rc rc;

	rt_rmsnorm_forward(a->ln1, a->rstd1, x, w[P_ATTN_NORM].w, BT, C,
			   RT_NORM_EPS);
	rt_matmul_forward(a->q, a->ln1, w[P_WQ].w, BT, C, qd);
	rt_matmul_forward(a->k, a->ln1, w[P_WK].w, BT, C, kvd);
	rt_matmul_forward(a->v, a->ln1, w[P_WV].w, BT, C, kvd);
	rt_rope_forward(a->q, B, T, m->nh, m->hs, RT_ROPE_THETA);
	rt_rope_forward(a->k, B, T, m->nkv, m->hs, RT_ROPE_THETA);
	rt_attention_forward(a->atty, a->att, a->q, a->k, a->v, B, T, m->nh,
			     m->nkv, m->hs);
	rt_matmul_tw_forward(tmp, a->atty, w[P_WO].w, BT, qd, C);
	if ((rc = tp_allreduce(m, tmp, (size_t)BT * C, "attention output",
			       m->cfg.layer_begin + l)))
		return rc;
	rt_residual_forward(a->xmid, x, tmp, (size_t)BT * C);
	return HEXI_OK;
}

/* MLP half: a->xmid -> a->h (B,T,f); with out != NULL also the w_down
 * projection, its TP sum and the residual into out (B,T,C).  The
 * backward needs everything but that last part, so a recomputation
 * passes out = NULL. */
static hexi_rc mlp_forward(rt_model *m, int l, slot *s, float *out)
{
	const rt_param *w = m->layer0 + (size_t)l * P_PER_LAYER;
	layer_act *a = &s->act[l];
	const int BT = s->B * m->T, C = m->C;
	float *tmp = m->s.tmp;
	hexi_rc rc;

	rt_rmsnorm_forward(a->ln2, a->rstd2, a->xmid, w[P_MLP_NORM].w, BT, C,
			   RT_NORM_EPS);
	rt_matmul_forward(a->gate, a->ln2, w[P_W_GATE].w, BT, C, m->f);
	rt_matmul_forward(a->up, a->ln2, w[P_W_UP].w, BT, C, m->f);
	rt_swiglu_forward(a->h, a->gate, a->up, (size_t)BT * m->f);
	if (!out)
		return HEXI_OK;
	rt_matmul_tw_forward(tmp, a->h, w[P_W_DOWN].w, BT, m->f, C);
	if ((rc = tp_allreduce(m, tmp, (size_t)BT * C, "mlp output",
			       m->cfg.layer_begin + l)))
		return rc;
	rt_residual_forward(out, a->xmid, tmp, (size_t)BT * C);
	return HEXI_OK;
}

/* One block: x (B,T,C) -> xnext (B,T,C); l is the local layer index. */
static hexi_rc block_forward(rt_model *m, int l, slot *s)
{
	hexi_rc rc = attn_forward(m, l, s);
	return rc ? rc : mlp_forward(m, l, s, s->xs[l + 1]);
}

/* Recompute: rebuild layer l's activations of slot s from its input
 * xs[l], with the same calls (and so the same bits) as the forward. */
static hexi_rc block_recompute(rt_model *m, int l, slot *s)
{
	hexi_rc rc;
	if (!m->cfg.recompute)
		return HEXI_OK;
	rc = attn_forward(m, l, s);
	return rc ? rc : mlp_forward(m, l, s, NULL);
}

/* Final norm, LM head and loss: sets *loss_sum (sum of sample means). */
static void head_forward(rt_model *m, slot *s, double *loss_sum)
{
	const int BT = s->B * m->T, C = m->C, V = m->V;
	rt_rmsnorm_forward(s->lnf, s->rstdf, s->xs[m->nl], m->final_norm->w, BT,
			   C, RT_NORM_EPS);
	rt_matmul_forward(m->s.logits, s->lnf, m->lm_head->w, BT, C, V);
	rt_crossentropy_forward(m->s.losses, s->probs, m->s.logits, s->targets,
				BT, V);
	double sum = 0.0;
	for (int i = 0; i < BT; i++)
		sum += m->s.losses[i];
	*loss_sum = sum / m->T;
}

static hexi_rc check_ids(const rt_model *m, const int *ids, int n,
			 const char *what, int slot_i)
{
	for (int i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= m->V)
			return hexi_error(
			    HEXI_ERR_RANGE,
			    "model shard: slot %d %s[%d] = %d not "
			    "in vocabulary [0, %d)",
			    slot_i, what, i, ids[i], m->V);
	return HEXI_OK;
}

static hexi_rc check_forward_args(rt_model *m, int slot_i, int B,
				  const int *tokens, const float *x_in,
				  float *x_out, const int *targets,
				  double *loss_sum)
{
	const rt_model_config *c = &m->cfg;
	if (slot_i < 0 || slot_i >= c->max_slots)
		return hexi_error(HEXI_ERR_RANGE,
				  "model shard: slot %d not in [0, %d)", slot_i,
				  c->max_slots);
	if (m->slots[slot_i].busy)
		return hexi_error(HEXI_ERR_INVAL,
				  "model shard: slot %d still holds a "
				  "micro-batch (no backward yet)",
				  slot_i);
	if (B < 1 || B > c->max_batch)
		return hexi_error(HEXI_ERR_RANGE,
				  "model shard: micro-batch %d not in [1, %d]",
				  B, c->max_batch);
	if ((c->has_embed ? !tokens : !x_in) ||
	    (c->has_head ? !targets || !loss_sum : !x_out))
		return hexi_error(
		    HEXI_ERR_INVAL, "model shard: forward needs %s and %s",
		    c->has_embed ? "tokens" : "x_in",
		    c->has_head ? "targets and loss_sum" : "x_out");
	return HEXI_OK;
}

hexi_rc rt_model_forward(rt_model *m, int slot_i, int B, const int *tokens,
			 const float *x_in, float *x_out, const int *targets,
			 float grad_scale, double *loss_sum)
{
	const int BT = B * m->T;
	hexi_rc rc = check_forward_args(m, slot_i, B, tokens, x_in, x_out,
					targets, loss_sum);
	if (rc)
		return rc;
	slot *s = &m->slots[slot_i];
	if (m->cfg.has_embed) {
		if ((rc = check_ids(m, tokens, BT, "tokens", slot_i)))
			return rc;
		memcpy(s->tokens, tokens, (size_t)BT * sizeof(int));
		rt_embed_forward(s->xs[0], tokens, m->embed->w, BT, m->C);
	} else {
		memcpy(s->xs[0], x_in, (size_t)BT * m->C * sizeof(float));
	}
	if (m->cfg.has_head) {
		if ((rc = check_ids(m, targets, BT, "targets", slot_i)))
			return rc;
		memcpy(s->targets, targets, (size_t)BT * sizeof(int));
	}
	s->B = B;
	for (int l = 0; l < m->nl; l++)
		if ((rc = block_forward(m, l, s)))
			return rc;
	if (m->cfg.has_head) {
		head_forward(m, s, loss_sum);
		s->grad_scale = grad_scale;
	} else {
		memcpy(x_out, s->xs[m->nl], (size_t)BT * m->C * sizeof(float));
	}
	s->busy = 1;
	return HEXI_OK;
}

/* ---- backward ----------------------------------------------------------- */

static void zero(float *p, size_t n)
{
	memset(p, 0, n * sizeof(float));
}

/* grad_window: the unit starting at parameter first (n elements) gets
 * this backward's gradient only; the window holds the previous unit's. */
static void unit_start(rt_model *m, const rt_param *first, size_t n)
{
	if (m->cfg.grad_window)
		zero(first->g, n);
}

/* MLP half of a block: dres (B,T,C) holds d(out); becomes d(xmid). */
static hexi_rc mlp_backward(rt_model *m, int l, slot *s)
{
	rt_param *w = m->layer0 + (size_t)l * P_PER_LAYER;
	const layer_act *a = &s->act[l];
	const int BT = s->B * m->T, C = m->C, F = m->f;
	scratch *k = &m->s;
	hexi_rc rc;

	zero(k->dh, (size_t)BT * F);
	rt_matmul_tw_backward(k->dh, w[P_W_DOWN].g, k->dres, a->h,
			      w[P_W_DOWN].w, BT, F, C);
	POLL(m);
	zero(k->dgate, (size_t)BT * F);
	zero(k->dup, (size_t)BT * F);
	rt_swiglu_backward(k->dgate, k->dup, k->dh, a->gate, a->up,
			   (size_t)BT * F);
	zero(k->dln, (size_t)BT * C);
	rt_matmul_backward(k->dln, w[P_W_GATE].g, k->dgate, a->ln2,
			   w[P_W_GATE].w, BT, C, F);
	POLL(m);
	rt_matmul_backward(k->dln, w[P_W_UP].g, k->dup, a->ln2, w[P_W_UP].w, BT,
			   C, F);
	POLL(m);
	if ((rc = tp_allreduce(m, k->dln, (size_t)BT * C, "mlp input grad",
			       m->cfg.layer_begin + l)))
		return rc;
	rt_rmsnorm_backward(k->dres, w[P_MLP_NORM].g, k->dln, a->xmid,
			    w[P_MLP_NORM].w, a->rstd2, BT, C);
	return HEXI_OK;
}

/* Attention half: dres holds d(xmid); becomes d(x) of the block. */
static hexi_rc attn_backward(rt_model *m, int l, slot *s)
{
	rt_param *w = m->layer0 + (size_t)l * P_PER_LAYER;
	const layer_act *a = &s->act[l];
	const int B = s->B, T = m->T, BT = B * T, C = m->C;
	const int qd = m->nh * m->hs, kvd = m->nkv * m->hs;
	scratch *k = &m->s;
	hexi_rc rc;

	zero(k->datty, (size_t)BT * qd);
	rt_matmul_tw_backward(k->datty, w[P_WO].g, k->dres, a->atty, w[P_WO].w,
			      BT, qd, C);
	POLL(m);
	zero(k->dq, (size_t)BT * qd);
	zero(k->dk, (size_t)BT * kvd);
	zero(k->dv, (size_t)BT * kvd);
	rt_attention_backward_ws(k->dq, k->dk, k->dv, k->attwork, k->datty,
				 a->q, a->k, a->v, a->att, B, T, m->nh, m->nkv,
				 m->hs);
	rt_rope_backward(k->dq, B, T, m->nh, m->hs, RT_ROPE_THETA);
	rt_rope_backward(k->dk, B, T, m->nkv, m->hs, RT_ROPE_THETA);
	POLL(m);
	zero(k->dln, (size_t)BT * C);
	rt_matmul_backward(k->dln, w[P_WQ].g, k->dq, a->ln1, w[P_WQ].w, BT, C,
			   qd);
	POLL(m);
	rt_matmul_backward(k->dln, w[P_WK].g, k->dk, a->ln1, w[P_WK].w, BT, C,
			   kvd);
	POLL(m);
	rt_matmul_backward(k->dln, w[P_WV].g, k->dv, a->ln1, w[P_WV].w, BT, C,
			   kvd);
	if ((rc = tp_allreduce(m, k->dln, (size_t)BT * C,
			       "attention input grad", m->cfg.layer_begin + l)))
		return rc;
	rt_rmsnorm_backward(k->dres, w[P_ATTN_NORM].g, k->dln, s->xs[l],
			    w[P_ATTN_NORM].w, a->rstd1, BT, C);
	return HEXI_OK;
}

/* Loss -> dres = d(stage output). */
static void head_backward(rt_model *m, slot *s)
{
	const int BT = s->B * m->T, C = m->C, V = m->V;
	scratch *k = &m->s;
	float *dlogits = k->logits;

	zero(dlogits, (size_t)BT * V);
	rt_crossentropy_backward(dlogits, s->probs, s->targets,
				 s->grad_scale / (float)m->T, BT, V);
	zero(k->dln, (size_t)BT * C);
	rt_matmul_backward(k->dln, m->lm_head->g, dlogits, s->lnf,
			   m->lm_head->w, BT, C, V);
	zero(k->dres, (size_t)BT * C);
	rt_rmsnorm_backward(k->dres, m->final_norm->g, k->dln, s->xs[m->nl],
			    m->final_norm->w, s->rstdf, BT, C);
}

hexi_rc rt_model_backward(rt_model *m, int slot_i, const float *dy, float *dx)
{
	const rt_model_config *c = &m->cfg;
	if (slot_i < 0 || slot_i >= c->max_slots || !m->slots[slot_i].busy)
		return hexi_error(HEXI_ERR_INVAL,
				  "model shard: backward of slot %d without a "
				  "forward",
				  slot_i);
	if ((!c->has_head && !dy) || (!c->has_embed && !dx))
		return hexi_error(HEXI_ERR_INVAL,
				  "model shard: backward needs %s",
				  !dy ? "dy (not the last stage)"
				      : "dx (not the first stage)");
	slot *s = &m->slots[slot_i];
	const size_t BTC = (size_t)s->B * m->T * m->C;
	hexi_rc rc = HEXI_OK;
	if (c->has_head) {
		unit_start(m, m->final_norm, m->final_norm->n + m->lm_head->n);
		head_backward(m, s);
	} else
		memcpy(m->s.dres, dy, BTC * sizeof(float));
	if (c->has_head && m->hook != NULL &&
	    (rc = m->hook(m->hook_ctx, c->model.layers)) != HEXI_OK)
		goto out;
	for (int l = m->nl - 1; l >= 0; l--) {
		unit_start(m, m->layer0 + (size_t)l * P_PER_LAYER, m->layer_n);
		if ((rc = block_recompute(m, l, s)) ||
		    (rc = mlp_backward(m, l, s)) ||
		    (rc = attn_backward(m, l, s)) ||
		    (m->hook != NULL &&
		     (rc = m->hook(m->hook_ctx, c->layer_begin + l))))
			goto out;
	}
	if (c->has_embed) {
		unit_start(m, m->embed, m->embed->n);
		rt_embed_backward(m->embed->g, m->s.dres, s->tokens,
				  s->B * m->T, m->C);
	} else
		memcpy(dx, m->s.dres, BTC * sizeof(float));
	if (c->has_embed && m->hook != NULL)
		rc = m->hook(m->hook_ctx, -1);
out:
	s->busy = 0;
	return rc;
}

hexi_rc rt_model_release(rt_model *m, int slot_i)
{
	if (slot_i < 0 || slot_i >= m->cfg.max_slots)
		return hexi_error(HEXI_ERR_RANGE,
				  "model shard: slot %d not in [0, %d)", slot_i,
				  m->cfg.max_slots);
	m->slots[slot_i].busy = 0;
	return HEXI_OK;
}
