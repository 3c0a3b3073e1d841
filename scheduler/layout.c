/*
 * layout.c - tensor names, shards and gradient-sync chunks of a plan,
 * exactly as doc/LAYOUT.md states them.
 */
#include "config.h"

#include "json_util.h"

#include <stdlib.h>
#include <string.h>

void hexi_layout_split(int n, int t, int r, int *begin, int *end)
{
	if (t < 1 || r < 0 || r >= t || n < 0) {
		*begin = *end = 0;
		return;
	}
	*begin = (int)((int64_t)r * n / t);
	*end = (int)((int64_t)(r + 1) * n / t);
}

void hexi_layout_destroy(hexi_layout *l)
{
	if (l == NULL)
		return;
	for (int i = 0; l->tensors != NULL && i < l->ntensors; i++)
		free(l->tensors[i].shards);
	for (int i = 0; l->chunks != NULL && i < l->nchunks; i++)
		free(l->chunks[i].ranks);
	free(l->tensors);
	free(l->chunks);
	free(l);
}

int hexi_layout_find(const hexi_layout *l, const char *name)
{
	for (int i = 0; l != NULL && name != NULL && i < l->ntensors; i++)
		if (strcmp(l->tensors[i].name, name) == 0)
			return i;
	return -1;
}

/* How a tensor's dim 0 is split across a TP group. */
enum split { REPL, QHEADS, KVHEADS, FFN };

/* Which stages hold a tensor. */
enum holder { FIRST, LAYER, LAST };

static const struct layer_tensor {
	const char *suffix;
	enum split split;
	int vector; /* 1-D (C) */
} layer_tensors[] = {
    {"attn_norm.weight", REPL, 1}, {"attn.wq", QHEADS, 0},
    {"attn.wk", KVHEADS, 0},	   {"attn.wv", KVHEADS, 0},
    {"attn.wo", QHEADS, 0},	   {"mlp_norm.weight", REPL, 1},
    {"mlp.w_gate", FFN, 0},	   {"mlp.w_up", FFN, 0},
    {"mlp.w_down", FFN, 0},
};
#define NLT ((int)(sizeof(layer_tensors) / sizeof(layer_tensors[0])))

/* Rows [b,e) of TP rank r of t for a split kind. */
static void shard_rows(const hexi_model *m, enum split k, int rows, int t,
		       int r, int *b, int *e)
{
	int d = m->hidden / m->heads, g = m->heads / m->kv_heads;

	switch (k) {
	case QHEADS:
		hexi_layout_split(m->kv_heads, t, r, b, e);
		*b *= g * d;
		*e *= g * d;
		break;
	case KVHEADS:
		hexi_layout_split(m->kv_heads, t, r, b, e);
		*b *= d;
		*e *= d;
		break;
	case FFN:
		hexi_layout_split(m->ffn, t, r, b, e);
		break;
	default:
		*b = 0;
		*e = rows;
	}
}

/* Stage of pipeline pl holding layer l (or first/last). */
static const hexi_stage *holder_stage(const hexi_pipeline *pl, enum holder h,
				      int l)
{
	if (h == FIRST)
		return &pl->stages[0];
	if (h == LAST)
		return &pl->stages[pl->nstages - 1];
	for (int s = 0; s < pl->nstages; s++)
		if (l >= pl->stages[s].layer_begin &&
		    l < pl->stages[s].layer_end)
			return &pl->stages[s];
	return NULL; /* not reached for a valid plan */
}

static hexi_rc fill_tensor(const hexi_plan *p, hexi_tensor_layout *t,
			   enum holder h, int layer, enum split k)
{
	int n = 0;

	for (int i = 0; i < p->npipelines; i++)
		n += holder_stage(&p->pipelines[i], h, layer)->tp;
	t->shards = calloc((size_t)n, sizeof(hexi_shard));
	if (t->shards == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "layout: out of memory");
	for (int i = 0; i < p->npipelines; i++) {
		const hexi_stage *s = holder_stage(&p->pipelines[i], h, layer);
		for (int r = 0; r < s->tp; r++) {
			hexi_shard *sh = &t->shards[t->nshards++];
			sh->rank = s->devices[r].rank;
			sh->pipeline = i;
			shard_rows(&p->model, k, (int)t->shape[0], s->tp, r,
				   &sh->row_begin, &sh->row_end);
		}
	}
	return HEXI_OK;
}

static void set_shape(hexi_tensor_layout *t, const hexi_model *m,
		      const struct layer_tensor *lt)
{
	int d = m->hidden / m->heads;

	t->ndim = lt->vector ? 1 : 2;
	t->shape[1] = lt->vector ? 0 : m->hidden;
	switch (lt->split) {
	case QHEADS:
		t->shape[0] = (int64_t)m->heads * d;
		break;
	case KVHEADS:
		t->shape[0] = (int64_t)m->kv_heads * d;
		break;
	case FFN:
		t->shape[0] = m->ffn;
		break;
	default:
		t->shape[0] = m->hidden;
	}
}

static hexi_rc make_tensors(const hexi_plan *p, hexi_layout *l)
{
	const hexi_model *m = &p->model;
	int n = 0;
	hexi_rc rv = HEXI_OK;

	l->tensors = calloc((size_t)(m->layers * NLT + 3), sizeof(*l->tensors));
	if (l->tensors == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "layout: out of memory");
	l->ntensors = m->layers * NLT + 3;
	snprintf(l->tensors[n].name, HEXI_NAME_MAX, "embed.weight");
	l->tensors[n].ndim = 2;
	l->tensors[n].shape[0] = m->vocab;
	l->tensors[n].shape[1] = m->hidden;
	rv = fill_tensor(p, &l->tensors[n++], FIRST, 0, REPL);
	for (int layer = 0; rv == HEXI_OK && layer < m->layers; layer++)
		for (int k = 0; rv == HEXI_OK && k < NLT; k++) {
			hexi_tensor_layout *t = &l->tensors[n++];
			snprintf(t->name, HEXI_NAME_MAX, "layers.%d.%s", layer,
				 layer_tensors[k].suffix);
			set_shape(t, m, &layer_tensors[k]);
			rv = fill_tensor(p, t, LAYER, layer,
					 layer_tensors[k].split);
		}
	if (rv != HEXI_OK)
		return rv;
	snprintf(l->tensors[n].name, HEXI_NAME_MAX, "final_norm.weight");
	l->tensors[n].ndim = 1;
	l->tensors[n].shape[0] = m->hidden;
	rv = fill_tensor(p, &l->tensors[n++], LAST, 0, REPL);
	if (rv != HEXI_OK)
		return rv;
	snprintf(l->tensors[n].name, HEXI_NAME_MAX, "lm_head.weight");
	l->tensors[n].ndim = 2;
	l->tensors[n].shape[0] = m->vocab;
	l->tensors[n].shape[1] = m->hidden;
	return fill_tensor(p, &l->tensors[n], LAST, 0, REPL);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Sorted unique shard boundaries of tensor t into cuts; returns the count. */
static int boundaries(const hexi_tensor_layout *t, int *cuts)
{
	int n = 0, u = 0;

	for (int i = 0; i < t->nshards; i++) {
		cuts[n++] = t->shards[i].row_begin;
		cuts[n++] = t->shards[i].row_end;
	}
	qsort(cuts, (size_t)n, sizeof(int), cmp_int);
	for (int i = 0; i < n; i++)
		if (u == 0 || cuts[i] != cuts[u - 1])
			cuts[u++] = cuts[i];
	return u;
}

static hexi_rc add_chunk(hexi_layout *l, int *cap, int ti, int b, int e)
{
	const hexi_tensor_layout *t = &l->tensors[ti];
	hexi_chunk *c;

	if (l->nchunks == *cap) {
		int ncap = *cap ? 2 * *cap : 256;
		hexi_chunk *nc = realloc(l->chunks, (size_t)ncap * sizeof(*nc));
		if (nc == NULL)
			return hexi_error(HEXI_ERR_NOMEM,
					  "layout: out of memory");
		l->chunks = nc;
		*cap = ncap;
	}
	c = &l->chunks[l->nchunks];
	memset(c, 0, sizeof(*c));
	c->ranks = malloc((size_t)t->nshards * sizeof(int));
	if (c->ranks == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "layout: out of memory");
	l->nchunks++;
	c->tensor = ti;
	c->row_begin = b;
	c->row_end = e;
	for (int i = 0; i < t->nshards; i++)
		if (t->shards[i].row_begin <= b && e <= t->shards[i].row_end)
			c->ranks[c->nranks++] = t->shards[i].rank;
	qsort(c->ranks, (size_t)c->nranks, sizeof(int), cmp_int);
	return HEXI_OK;
}

static hexi_rc make_chunks(hexi_layout *l)
{
	int cap = 0, maxs = 0, *cuts;
	hexi_rc rv = HEXI_OK;

	for (int i = 0; i < l->ntensors; i++)
		if (l->tensors[i].nshards > maxs)
			maxs = l->tensors[i].nshards;
	cuts = malloc((size_t)(2 * maxs + 2) * sizeof(int));
	if (cuts == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "layout: out of memory");
	for (int i = 0; rv == HEXI_OK && i < l->ntensors; i++) {
		int n = boundaries(&l->tensors[i], cuts);
		for (int k = 0; rv == HEXI_OK && k + 1 < n; k++)
			if (cuts[k + 1] > cuts[k])
				rv =
				    add_chunk(l, &cap, i, cuts[k], cuts[k + 1]);
	}
	free(cuts);
	return rv;
}

hexi_rc hexi_layout_create(const hexi_plan *p, hexi_layout **out)
{
	hexi_layout *l = NULL;
	hexi_rc rv;

	*out = NULL;
	rv = hexi_plan_validate(p);
	if (rv != HEXI_OK)
		return hexi_error_prefix(rv, "layout");
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "layout: out of memory");
	rv = make_tensors(p, l);
	if (rv == HEXI_OK)
		rv = make_chunks(l);
	if (rv != HEXI_OK) {
		hexi_layout_destroy(l);
		return rv;
	}
	*out = l;
	return HEXI_OK;
}
