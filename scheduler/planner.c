/*
 * planner.c - the planner's entry point (hexi_plan_create): inputs, search
 * state, the strategy chosen, and the plan made of the best candidate.
 * Phase 1 is in planner_metis.c, phase 2 in planner_phase2.c, the search
 * loops in planner_search.c, the baselines in planner_base.c, what they
 * share in planner_cand.c.
 */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner_int.h"

void hexi_plan_opts_defaults(hexi_plan_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->strategy = HEXI_STRATEGY_HEXISCALE;
	o->cost_model = HEXI_COST_HEXISCALE;
	o->seed = 1;
}

/* ---- entry point -----------------------------------------------------------
 */

static hexi_rc check_inputs(const hexi_cluster *c, const hexi_model *m,
			    const hexi_train *t, const hexi_plan_opts *o)
{
	int n = 0;

	if (!c || !m || !t || !o)
		return hexi_error(HEXI_ERR_INVAL, "plan: missing argument");
	for (int i = 0; i < c->nnodes; i++)
		n += c->nodes[i].ngpus;
	if (n < 1 || n > HEXI_MAX_GPUS)
		return hexi_error(HEXI_ERR_RANGE,
				  "cluster: %d GPUs (allowed 1..%d)", n,
				  HEXI_MAX_GPUS);
	if (m->layers < 1 || m->layers > HEXI_MAX_LAYERS || m->hidden < 1 ||
	    m->heads < 1 || m->kv_heads < 1 || m->ffn < 1 || m->vocab < 1 ||
	    m->seq_len < 1 || m->heads % m->kv_heads || m->hidden % m->heads)
		return hexi_error(HEXI_ERR_INVAL,
				  "model '%s': inconsistent shape", m->name);
	if (t->micro_batch < 1 || t->global_batch < 1)
		return hexi_error(HEXI_ERR_RANGE,
				  "train.global_batch/micro_batch: must be "
				  ">= 1 (got %d, %d)",
				  t->global_batch, t->micro_batch);
	if (t->global_batch % t->micro_batch)
		return hexi_error(HEXI_ERR_INVAL,
				  "train.global_batch: %d is not divisible by "
				  "micro_batch %d",
				  t->global_batch, t->micro_batch);
	if (o->max_pipelines > n)
		return hexi_error(
		    HEXI_ERR_RANGE,
		    "max_pipelines: %d pipelines but only %d GPUs",
		    o->max_pipelines, n);
	if (o->strategy == HEXI_STRATEGY_EXHAUSTIVE && n > 8)
		return hexi_error(HEXI_ERR_RANGE,
				  "strategy exhaustive: %d GPUs (at most 8)",
				  n);
	return HEXI_OK;
}

/* Every GPU of the cluster in no stage goes to p->idle, in cluster order,
 * with the ranks after the training ranks (hexiscale-plan(5), "idle"). */
static hexi_rc plan_idle(hexi_plan *p)
{
	const hexi_cluster *c = p->cluster;
	int total = hexi_cluster_total_gpus(c), k = 0;
	unsigned char *used = calloc((size_t)total, 1);
	int *base = calloc((size_t)c->nnodes + 1, sizeof(int));
	hexi_rc rc = HEXI_OK;

	if (used == NULL || base == NULL)
		rc = hexi_error(HEXI_ERR_NOMEM, "plan: out of memory");
	for (int n = 0; rc == HEXI_OK && n < c->nnodes; n++)
		base[n + 1] = base[n] + c->nodes[n].ngpus;
	for (int q = 0; rc == HEXI_OK && q < p->npipelines; q++)
		for (int s = 0; s < p->pipelines[q].nstages; s++)
			for (int i = 0; i < p->pipelines[q].stages[s].tp; i++) {
				const hexi_device *d =
				    &p->pipelines[q].stages[s].devices[i];
				for (int g = 0; g < c->nodes[d->node].ngpus;
				     g++)
					if (c->nodes[d->node].gpu_index[g] ==
					    d->gpu)
						used[base[d->node] + g] = 1;
			}
	if (rc == HEXI_OK && total > p->world_size) {
		p->idle = calloc((size_t)(total - p->world_size),
				 sizeof(hexi_device));
		if (p->idle == NULL)
			rc = hexi_error(HEXI_ERR_NOMEM, "plan: out of memory");
	}
	for (int n = 0; rc == HEXI_OK && n < c->nnodes; n++)
		for (int g = 0; g < c->nodes[n].ngpus; g++)
			if (!used[base[n] + g] && k < total - p->world_size) {
				p->idle[k] = (hexi_device){
				    .node = n,
				    .gpu = c->nodes[n].gpu_index[g],
				    .rank = p->world_size + k};
				k++;
			}
	p->nidle = k;
	free(base);
	free(used);
	return rc;
}

static hexi_rc cand_to_plan(pl_state *st, const hexi_cluster *c,
			    const hexi_model *m, const hexi_train *t,
			    pl_cand *cd, hexi_plan **out)
{
	hexi_plan *p = calloc(1, sizeof(*p));
	hexi_rc rc = HEXI_ERR_NOMEM;
	int rank = 0;

	if (!p)
		return hexi_error(rc, "plan: out of memory");
	p->version = HEXI_PLAN_VERSION;
	hexi_strlcpy(p->strategy, sched_strategy_name(st->o->strategy),
		     sizeof(p->strategy));
	hexi_strlcpy(p->cost_model, sched_cost_name(st->o->cost_model),
		     sizeof(p->cost_model));
	p->model = *m;
	p->train = *t;
	p->train.micro_batch = st->mb;
	rc = hexi_cluster_clone(c, &p->cluster);
	if (rc != HEXI_OK)
		goto out;
	p->npipelines = cd->np;
	p->pipelines = cd->pp;
	cd->pp = NULL;
	cd->np = 0;
	for (int q = 0; q < p->npipelines; q++)
		for (int s = 0; s < p->pipelines[q].nstages; s++)
			for (int i = 0; i < p->pipelines[q].stages[s].tp; i++)
				p->pipelines[q].stages[s].devices[i].rank =
				    rank++;
	p->world_size = rank;
	rc = plan_idle(p);
	if (rc != HEXI_OK)
		goto out;
	p->pred.iter_s = cd->ev.iter_s;
	p->pred.dp_sync_s = cd->ev.dp_sync_s;
	p->pred.tokens_per_s = cd->ev.tokens_per_s;
	p->pred.mfu = cd->ev.mfu;
	rc = hexi_plan_validate(p);
	if (rc != HEXI_OK) {
		rc = hexi_error_prefix(rc, "planner produced an invalid plan");
		goto out;
	}
	rc = hexi_plan_hash(p);
out:
	if (rc != HEXI_OK)
		hexi_plan_destroy(p);
	else
		*out = p;
	return rc;
}

static hexi_rc state_init(pl_state *st, const hexi_cluster *c,
			  const hexi_model *m, const hexi_train *t,
			  const hexi_plan_opts *o)
{
	hexi_rc rc;

	memset(st, 0, sizeof(*st));
	st->t0 = hexi_now_s();
	st->o = o;
	st->mb = t->micro_batch;
	st->M = t->global_batch / t->micro_batch;
	st->kv = m->kv_heads;
	st->rng = o->seed * 0x2545f4914f6cdd1dull + 1;
	st->budget_s = o->time_budget_s > 0 ? o->time_budget_s : 10.0;
	rc = sched_ctx_init(&st->x, c, m, t, o->cost_model);
	if (rc != HEXI_OK)
		return rc;
	st->max_p = st->x.ndev < st->M ? st->x.ndev : st->M;
	if (o->max_pipelines > 0 && o->max_pipelines < st->max_p)
		st->max_p = o->max_pipelines;
	st->type_max = calloc((size_t)st->x.ntypes, sizeof(int));
	if (!st->type_max)
		return hexi_error(HEXI_ERR_NOMEM, "planner state");
	for (int i = 0; i < c->nnodes; i++) {
		int ty = st->x.dev[st->x.node_first[i]].type;
		int k = c->nodes[i].ngpus;
		if (k > 0 && k > st->type_max[ty])
			st->type_max[ty] = k;
	}
	return HEXI_OK;
}

/*
 * Symmetric plans are asymmetric plans too: the uniform grid is part of the
 * search space, so the planner is never worse than the megatron baseline
 * under the same cost model.  The grid is searched from the caller's
 * micro-batch settings (mb0, M0); whichever candidate wins keeps its own.
 */
static hexi_rc also_uniform(pl_state *st, pl_cand *best, int mb0, int M0)
{
	pl_cand alt = {0};
	int mb_h = st->mb, M_h = st->M;
	hexi_rc rc;

	alt.score = DBL_MAX;
	st->mb = mb0;
	st->M = M0;
	rc = pl_search_megatron(st, &alt);
	if (rc == HEXI_OK && alt.pp && alt.score < best->score) {
		pl_cand_free(best);
		*best = alt;
		return HEXI_OK;
	}
	pl_cand_free(&alt);
	st->mb = mb_h;
	st->M = M_h;
	return rc;
}

hexi_rc hexi_plan_create(const hexi_cluster *c, const hexi_model *m,
			 const hexi_train *t, const hexi_plan_opts *o,
			 hexi_plan **out)
{
	pl_state st;
	pl_cand best = {0};
	int mb0, M0;
	hexi_rc rc;

	best.score = DBL_MAX;
	rc = check_inputs(c, m, t, o);
	if (rc != HEXI_OK)
		return rc;
	rc = state_init(&st, c, m, t, o);
	if (rc != HEXI_OK)
		goto out;
	mb0 = st.mb;
	M0 = st.M;
	switch (o->strategy) {
	case HEXI_STRATEGY_MEGATRON:
		rc = pl_search_megatron(&st, &best);
		break;
	case HEXI_STRATEGY_RANDOM:
		rc = pl_search_random(&st, &best);
		break;
	case HEXI_STRATEGY_EXHAUSTIVE:
		rc = pl_search_exhaustive(&st, &best);
		break;
	default:
		rc = pl_search_hexiscale(&st, &best);
		if (rc == HEXI_OK && !o->no_asymmetric_tp && !o->uniform_batch)
			rc = also_uniform(&st, &best, mb0, M0);
		break;
	}
	if (rc != HEXI_OK)
		goto out;
	if (!best.pp || best.score >= PL_INFEASIBLE) {
		rc = hexi_error(HEXI_ERR_NOFIT,
				"model '%s': does not fit in the memory of "
				"the cluster's GPUs with any plan tried "
				"(micro_batch %d, recompute %d)",
				m->name, t->micro_batch, t->recompute);
		goto out;
	}
	hexi_log(HEXI_LOG_VERBOSE,
		 "planner: %s: %ld candidates in %.3f s, best %.4f s/iter",
		 sched_strategy_name(o->strategy), st.evals,
		 hexi_now_s() - st.t0, best.score);
	rc = cand_to_plan(&st, c, m, t, &best, out);
out:
	pl_cand_free(&best);
	free(st.type_max);
	sched_ctx_fini(&st.x);
	return rc;
}
