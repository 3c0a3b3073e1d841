/*
 * plan_valid.c - the full structural check of a plan (hexiscale-plan(5),
 * "Validation").  Below plan.c (reading, writing, roles) and layout.c
 * (tensor layout), which both validate before they trust a plan; it calls
 * only the model and cluster checks.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_sched.h"

int hexi_plan_tasks(const hexi_plan *p)
{
	return p->world_size + (p->nidle > 0 ? p->nidle : 0);
}

char *hexi_plan_idle_types(const hexi_plan *p, char *buf, size_t cap)
{
	const char *seen[32] = {NULL};
	int cnt[32] = {0}, n = 0;
	size_t len = 0;

	if (cap > 0)
		buf[0] = '\0';
	for (int i = 0; i < p->nidle; i++) {
		const char *t = p->cluster->nodes[p->idle[i].node].gpu_type;
		int k = 0;

		while (k < n && strcmp(seen[k], t) != 0)
			k++;
		if (k == n && n < 32) {
			seen[n] = t;
			cnt[n++] = 0;
		}
		if (k < n)
			cnt[k]++;
	}
	for (int k = 0; k < n && len < cap; k++) {
		int w = snprintf(buf + len, cap - len, "%s %s x%d", k ? "," : "",
				 seen[k], cnt[k]);
		if (w < 0)
			break;
		len += (size_t)w;
	}
	return buf;
}

/* ---- validation ---------------------------------------------------------- */

/* Position of GPU index gpu in node n's list, or -1. */
static int gpu_slot(const hexi_node *n, int gpu)
{
	for (int k = 0; k < n->ngpus; k++)
		if (n->gpu_index[k] == gpu)
			return k;
	return -1;
}

typedef struct vstate {
	const hexi_plan *p;
	int *node_base;		  /* [nnodes] first slot of each node */
	unsigned char *dev_used;  /* [total GPUs] */
	unsigned char *rank_used; /* [world_size] */
} vstate;

/* One device (of a stage, or an idle one: node0 < 0) at path w. */
static hexi_rc check_dev(vstate *v, const hexi_device *d, const char *w,
			 int node0)
{
	const hexi_cluster *c = v->p->cluster;
	int ntasks = hexi_plan_tasks(v->p), slot;

	if (d->node < 0 || d->node >= c->nnodes)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s.node: index %d is not a node of the "
				  "cluster",
				  w, d->node);
	if (node0 >= 0 && d->node != node0)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s.node: '%s' differs from '%s'; a TP group "
				  "must be on one node",
				  w, c->nodes[d->node].name,
				  c->nodes[node0].name);
	slot = gpu_slot(&c->nodes[d->node], d->gpu);
	if (slot < 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s.gpu: node '%s' has no GPU %d", w,
				  c->nodes[d->node].name, d->gpu);
	if (v->dev_used[v->node_base[d->node] + slot]++)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: GPU %d of node '%s' is used twice", w,
				  d->gpu, c->nodes[d->node].name);
	if (d->rank < 0 || d->rank >= ntasks)
		return hexi_error(HEXI_ERR_INVAL, "%s.rank: %d is not in 0..%d",
				  w, d->rank, ntasks - 1);
	if (v->rank_used[d->rank]++)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s.rank: rank %d is used twice", w, d->rank);
	return HEXI_OK;
}

static hexi_rc check_device(vstate *v, int pi, int si, int di, int node0)
{
	char w[96];

	snprintf(w, sizeof(w), "pipelines[%d].stages[%d].devices[%d]", pi, si,
		 di);
	return check_dev(v, &v->p->pipelines[pi].stages[si].devices[di], w,
			 node0);
}

/* The idle GPUs: each an existing GPU in no stage, with its own rank.  A
 * GPU in neither is accepted: it has no task (plans from before "idle",
 * plans built in code for part of a cluster). */
static hexi_rc check_idle(vstate *v)
{
	hexi_rc rv = HEXI_OK;

	for (int i = 0; rv == HEXI_OK && i < v->p->nidle; i++) {
		char w[48];
		snprintf(w, sizeof(w), "idle[%d]", i);
		rv = check_dev(v, &v->p->idle[i], w, -1);
	}
	return rv;
}

static hexi_rc check_stage(vstate *v, int pi, int si, int *next_layer)
{
	const hexi_stage *s = &v->p->pipelines[pi].stages[si];
	int kv = v->p->model.kv_heads;
	hexi_rc rv = HEXI_OK;

	if (s->layer_begin != *next_layer || s->layer_end <= s->layer_begin ||
	    s->layer_end > v->p->model.layers)
		return hexi_error(HEXI_ERR_INVAL,
				  "pipelines[%d].stages[%d]: layers [%d,%d) "
				  "must start at %d and hold at least one of "
				  "the model's %d layers",
				  pi, si, s->layer_begin, s->layer_end,
				  *next_layer, v->p->model.layers);
	*next_layer = s->layer_end;
	if (s->tp < 1 || s->tp > kv || s->tp > HEXI_MAX_GPUS_PER_NODE ||
	    s->devices == NULL)
		return hexi_error(HEXI_ERR_INVAL,
				  "pipelines[%d].stages[%d].tp: %d must be in "
				  "1..%d (KV heads of %s)",
				  pi, si, s->tp, kv, v->p->model.name);
	for (int d = 0; rv == HEXI_OK && d < s->tp; d++)
		rv = check_device(v, pi, si, d, s->devices[0].node);
	return rv;
}

static hexi_rc check_pipeline(vstate *v, int pi, long *batch_sum)
{
	const hexi_pipeline *pl = &v->p->pipelines[pi];
	int next = 0;
	hexi_rc rv = HEXI_OK;

	if (pl->nstages < 1 || pl->nstages > v->p->model.layers ||
	    pl->stages == NULL)
		return hexi_error(HEXI_ERR_INVAL,
				  "pipelines[%d].stages: %d stages is out of "
				  "range 1..%d (layers)",
				  pi, pl->nstages, v->p->model.layers);
	for (int s = 0; rv == HEXI_OK && s < pl->nstages; s++)
		rv = check_stage(v, pi, s, &next);
	if (rv == HEXI_OK && next != v->p->model.layers)
		rv = hexi_error(HEXI_ERR_INVAL,
				"pipelines[%d]: stages end at layer %d, the "
				"model has %d",
				pi, next, v->p->model.layers);
	if (rv == HEXI_OK && (pl->batch < 1 || pl->micro_batches < 1 ||
			      pl->micro_batches > pl->batch))
		rv = hexi_error(HEXI_ERR_INVAL,
				"pipelines[%d]: batch %d and micro_batches %d "
				"must be >= 1 with micro_batches <= batch",
				pi, pl->batch, pl->micro_batches);
	if (rv == HEXI_OK && pl->batch % pl->micro_batches != 0)
		rv = hexi_error(HEXI_ERR_INVAL,
				"pipelines[%d].micro_batches: %d does not "
				"divide batch %d",
				pi, pl->micro_batches, pl->batch);
	if (rv == HEXI_OK && (pl->recompute < HEXI_RECOMPUTE_INHERIT ||
			      pl->recompute > HEXI_RECOMPUTE_OFF))
		rv = hexi_error(HEXI_ERR_INVAL,
				"pipelines[%d].recompute: mode %d is not "
				"inherit (0), on (1) or off (2)",
				pi, pl->recompute);
	*batch_sum += pl->batch;
	return rv;
}

static hexi_rc check_top(const hexi_plan *p, int *total)
{
	long devs = 0;
	hexi_rc rv;

	if (p == NULL || p->cluster == NULL || p->pipelines == NULL)
		return hexi_error(HEXI_ERR_INVAL, "plan: NULL or empty");
	if (p->version != HEXI_PLAN_VERSION)
		return hexi_error(HEXI_ERR_VERSION, "version: %d is not %d",
				  p->version, HEXI_PLAN_VERSION);
	rv = hexi_model_validate(&p->model);
	if (rv == HEXI_OK)
		rv = hexi_train_validate(&p->train);
	if (rv == HEXI_OK)
		rv = hexi_cluster_validate(p->cluster);
	if (rv != HEXI_OK)
		return rv;
	*total = hexi_cluster_total_gpus(p->cluster);
	if (p->npipelines < 1 || p->npipelines > *total)
		return hexi_error(HEXI_ERR_INVAL,
				  "pipelines: %d pipelines for %d GPUs",
				  p->npipelines, *total);
	for (int i = 0; i < p->npipelines; i++)
		for (int s = 0; s < p->pipelines[i].nstages &&
				p->pipelines[i].stages != NULL;
		     s++)
			devs += p->pipelines[i].stages[s].tp;
	if (p->world_size < 1 || p->world_size > *total ||
	    devs != p->world_size)
		return hexi_error(HEXI_ERR_INVAL,
				  "world_size: %d must equal the %ld devices "
				  "of the stages and be <= the cluster's %d "
				  "GPUs",
				  p->world_size, devs, *total);
	if (p->nidle < 0 || (p->nidle > 0 && p->idle == NULL) ||
	    p->world_size + p->nidle > *total)
		return hexi_error(HEXI_ERR_INVAL,
				  "idle: %d idle GPUs and %d ranks make %d, "
				  "the cluster has %d GPUs",
				  p->nidle, p->world_size,
				  p->world_size + p->nidle, *total);
	return HEXI_OK;
}

hexi_rc hexi_plan_validate(const hexi_plan *p)
{
	vstate v = {.p = p};
	long batch_sum = 0;
	int total = 0;
	hexi_rc rv;

	rv = check_top(p, &total);
	if (rv != HEXI_OK)
		return rv;
	v.node_base = calloc((size_t)p->cluster->nnodes, sizeof(int));
	v.dev_used = calloc((size_t)total, 1);
	v.rank_used = calloc((size_t)hexi_plan_tasks(p), 1);
	if (v.node_base == NULL || v.dev_used == NULL || v.rank_used == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "plan: out of memory");
		goto out;
	}
	for (int i = 1; i < p->cluster->nnodes; i++)
		v.node_base[i] =
		    v.node_base[i - 1] + p->cluster->nodes[i - 1].ngpus;
	for (int i = 0; rv == HEXI_OK && i < p->npipelines; i++)
		rv = check_pipeline(&v, i, &batch_sum);
	if (rv == HEXI_OK)
		rv = check_idle(&v);
	if (rv == HEXI_OK && batch_sum != p->train.global_batch)
		rv = hexi_error(HEXI_ERR_INVAL,
				"pipelines: batches sum to %ld, "
				"train.global_batch is %d",
				batch_sum, p->train.global_batch);
out:
	free(v.rank_used);
	free(v.dev_used);
	free(v.node_base);
	return rv;
}
