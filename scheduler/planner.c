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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner_int.h"

void hexi_plan_opts_defaults(hexi_plan_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->strategy = HEXI_STRATEGY_HEXISCALE;
	o->cost_model = HEXI_COST_HEXISCALE;
	o->seed = 1;
	o->zero = -1;
	o->recompute = -1;
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
	if (o->micro_batch_exact && t->global_batch % t->micro_batch)
		return hexi_error(HEXI_ERR_INVAL,
				  "train.global_batch: %d is not divisible by "
				  "micro_batch %d",
				  t->global_batch, t->micro_batch);
	if (o->micro_batch_max < 0)
		return hexi_error(HEXI_ERR_RANGE,
				  "micro_batch_max: %d is negative",
				  o->micro_batch_max);
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
	p->search = (hexi_search){.evaluations = st->evals,
				  .max_evals = st->max_evals,
				  .time_budget_s = st->budget_s,
				  .stop = st->stop};
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

/* Weights, gradients and optimizer state must fit in the sum of every
 * GPU's memory (above the reserve) whatever the plan: sharding spreads
 * them, it cannot make them smaller. */
static hexi_rc check_total_memory(const pl_state *st)
{
	const sched_ctx *x = &st->x;
	double need = hexi_model_params(&x->m) * x->t.bytes_per_param, have = 0;

	for (int i = 0; i < x->ndev; i++)
		if (x->dev[i].mem_gib > x->t.reserve_gib)
			have +=
			    (x->dev[i].mem_gib - x->t.reserve_gib) * SCHED_GIB;
	if (need <= have)
		return HEXI_OK;
	return hexi_error(HEXI_ERR_NOFIT,
			  "model '%s': no plan: its %.2f G parameters need "
			  "%.0f GiB of weights, gradients and optimizer state "
			  "(%g B each), the cluster's %d GPUs have %.0f GiB "
			  "above the %g GiB reserve",
			  x->m.name, hexi_model_params(&x->m) / 1e9,
			  need / SCHED_GIB, x->t.bytes_per_param, x->ndev,
			  have / SCHED_GIB, x->t.reserve_gib);
}

/* The error of a search that found no plan: the constraint of its best
 * candidate (the one closest to fitting), else one met outside them. */
static hexi_rc no_plan(const pl_state *st, const pl_cand *best,
		       const hexi_model *m)
{
	const pl_why *w = best->pp && best->why.rc != HEXI_OK ? &best->why
			  : st->why.rc != HEXI_OK	      ? &st->why
							      : NULL;
	char cut[160] = "";

	/* same error class as a search that ran through, so the exit
	 * status keeps its meaning; the text says the budget cut it */
	if (st->stop == HEXI_SEARCH_TIME)
		snprintf(cut, sizeof(cut),
			 "; the planning stopped at its time budget of %g s "
			 "after %ld candidates, a larger budget may find one",
			 st->budget_s, st->evals);
	if (w == NULL)
		return hexi_error(HEXI_ERR_NOFIT,
				  "model '%s': no plan tried fits in the "
				  "memory of the cluster's GPUs (micro-batch "
				  "%d, recompute %d)%s",
				  m->name, st->mb, st->x.t.recompute, cut);
	return hexi_error(w->rc, "model '%s': no plan: %s%s", m->name, w->msg,
			  cut);
}

/* The time budget of a whole hexi_plan_create, seconds. */
static double plan_budget_s(const hexi_plan_opts *o)
{
	return o->time_budget_s > 0 ? o->time_budget_s : HEXI_PLAN_BUDGET_S;
}

static hexi_rc state_init(pl_state *st, const hexi_cluster *c,
			  const hexi_model *m, const hexi_train *t,
			  const hexi_plan_opts *o, double t0)
{
	hexi_rc rc;

	memset(st, 0, sizeof(*st));
	st->t0 = t0;
	st->o = o;
	st->mb = o->micro_batch_exact ? t->micro_batch : 1;
	st->M = t->global_batch / st->mb;
	st->mb_max = o->micro_batch_exact ? 0 : o->micro_batch_max;
	st->kv = m->kv_heads;
	st->rng = o->seed * 0x2545f4914f6cdd1dull + 1;
	st->budget_s = plan_budget_s(o);
	st->max_evals = o->max_evals > 0 ? o->max_evals : HEXI_PLAN_MAX_EVALS;
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

static void state_fini(pl_state *st)
{
	free(st->type_max);
	st->type_max = NULL;
	sched_ctx_fini(&st->x);
}

/* One search on cluster c (the job's or a subset of it), under the
 * deadline of the planning that began at t0.  st and *best are the
 * caller's to finish (state_fini, pl_cand_free) whatever the result. */
static hexi_rc search_on(const hexi_cluster *c, const hexi_model *m,
			 const hexi_train *t, const hexi_plan_opts *o,
			 double t0, pl_state *st, pl_cand *best)
{
	int mb0, M0;
	hexi_rc rc;

	best->score = DBL_MAX;
	rc = state_init(st, c, m, t, o, t0);
	if (rc == HEXI_OK)
		rc = check_total_memory(st);
	if (rc != HEXI_OK)
		return rc;
	mb0 = st->mb;
	M0 = st->M;
	switch (o->strategy) {
	case HEXI_STRATEGY_MEGATRON:
		return pl_search_megatron(st, best);
	case HEXI_STRATEGY_RANDOM:
		return pl_search_random(st, best);
	case HEXI_STRATEGY_EXHAUSTIVE:
		return pl_search_exhaustive(st, best);
	default:
		rc = pl_search_hexiscale(st, best);
		if (rc == HEXI_OK && !o->no_asymmetric_tp && !o->uniform_batch)
			rc = also_uniform(st, best, mb0, M0);
		return rc;
	}
}

/* The cluster of the nodes keep[k] (k < n, ascending) of c, node keep[k]
 * with its first ng[k] GPUs of gpu_index (ng NULL: all of them), so a
 * device keeps its local GPU index: same links, pair bandwidths cut to
 * those nodes. */
static hexi_rc sub_cluster(const hexi_cluster *c, const int *keep,
			   const int *ng, int n, hexi_cluster **out)
{
	hexi_cluster *s = NULL;
	hexi_rc rc = hexi_cluster_create(n, c->catalog, &s);

	for (int k = 0; rc == HEXI_OK && k < n; k++) {
		const hexi_node *nd = &c->nodes[keep[k]];
		int g = ng != NULL && ng[k] >= 1 && ng[k] < nd->ngpus
			    ? ng[k]
			    : nd->ngpus;
		rc = hexi_cluster_set_node(s, k, nd->name, nd->gpu_type, g,
					   nd->gpu_index, nd->intra_bw_gbps);
	}
	if (rc == HEXI_OK) {
		s->inter_bw_gbps = c->inter_bw_gbps;
		s->inter_lat_s = c->inter_lat_s;
		s->intra_lat_s = c->intra_lat_s;
	}
	if (rc == HEXI_OK && c->pair_bw_gbps != NULL) {
		s->pair_bw_gbps = calloc((size_t)n * (size_t)n, sizeof(double));
		if (s->pair_bw_gbps == NULL)
			rc = hexi_error(HEXI_ERR_NOMEM, "planner: subset");
		for (int a = 0; rc == HEXI_OK && a < n; a++)
			for (int b = 0; b < n; b++)
				s->pair_bw_gbps[(size_t)a * (size_t)n +
						(size_t)b] =
				    c->pair_bw_gbps[(size_t)keep[a] *
							(size_t)c->nnodes +
						    (size_t)keep[b]];
	}
	if (rc == HEXI_OK)
		rc = hexi_cluster_validate(s);
	if (rc != HEXI_OK)
		hexi_cluster_destroy(s);
	else
		*out = s;
	return rc;
}

/* Plan on the nodes keep[n] of the job's cluster (node keep[k] with its
 * first ng[k] GPUs; ng NULL: whole nodes); a better plan replaces *best
 * (its devices renumbered to the job's nodes; the local GPU indices are
 * the job's already) and st's micro-batch settings.  A subset on which the
 * model cannot fit is no error. */
static hexi_rc try_subset(pl_state *st, pl_cand *best, const hexi_cluster *c,
			  const hexi_model *m, const hexi_train *t,
			  const hexi_plan_opts *o, const int *keep,
			  const int *ng, int n)
{
	hexi_cluster *sub = NULL;
	pl_state s2;
	pl_cand cand = {0};
	hexi_rc rc;

	if (pl_past_deadline(st))
		return HEXI_OK; /* no search starts past the deadline */
	rc = sub_cluster(c, keep, ng, n, &sub);
	memset(&s2, 0, sizeof(s2));
	if (rc == HEXI_OK)
		rc = search_on(sub, m, t, o, st->t0, &s2, &cand);
	if (rc == HEXI_ERR_NOFIT)
		rc = HEXI_OK; /* too little memory on this subset */
	st->evals += s2.evals;
	st->stop = s2.stop > st->stop ? s2.stop : st->stop;
	if (rc == HEXI_OK && cand.pp && cand.score < PL_INFEASIBLE &&
	    cand.score < best->score * (1 - 1e-9)) {
		for (int p = 0; p < cand.np; p++)
			for (int q = 0; q < cand.pp[p].nstages; q++)
				for (int i = 0; i < cand.pp[p].stages[q].tp;
				     i++) {
					hexi_device *d =
					    &cand.pp[p].stages[q].devices[i];
					d->node = keep[d->node];
				}
		hexi_log(HEXI_LOG_VERBOSE,
			 "planner: %d of %d nodes, %d of %d GPUs: %.4f s/iter "
			 "(was %.4f)",
			 n, c->nnodes, s2.x.ndev, st->x.ndev, cand.score,
			 best->score < PL_INFEASIBLE ? best->score : 0.0);
		pl_cand_free(best);
		*best = cand;
		memset(&cand, 0, sizeof(cand));
		st->mb = s2.mb;
		st->M = s2.M;
	}
	pl_cand_free(&cand);
	state_fini(&s2);
	hexi_cluster_destroy(sub);
	return rc;
}

/* Per-GPU achievable TFLOPS of node i (its GPU type's). */
static double node_speed(const sched_ctx *x, int i)
{
	const sched_dev *d = &x->dev[x->node_first[i]];

	return x->node_first[i + 1] > x->node_first[i] ? d->peak_tflops * d->eff
						       : 0;
}

/* Most GPUs on the best plan's nodes for try_gpu_subsets to take GPUs
 * away one at a time (each step is a search: +0.1 s at 16 GPUs, +0.9 s at
 * 32, +3.3 s at 64 on bench_planner's clusters; DECISIONS 130). */
#define PL_GPU_DESCENT_GPUS 32

/* Node i's GPU type index in x (-1: no GPUs). */
static int node_type(const sched_ctx *x, int i)
{
	return x->node_first[i + 1] > x->node_first[i]
		   ? x->dev[x->node_first[i]].type
		   : -1;
}

/* The nodes of *best and their GPUs: keep[n] ascending, ng[n] the GPUs
 * of best on each; tmax = largest TP degree of best's stages on type ty.
 * Returns n. */
static int best_nodes(const pl_state *st, const pl_cand *best, int ty,
		      int *keep, int *ng, int *tmax)
{
	const sched_ctx *x = &st->x;
	int n = 0;

	*tmax = 0;
	for (int i = 0; i < x->c->nnodes; i++)
		ng[i] = 0;
	for (int p = 0; p < best->np; p++)
		for (int q = 0; q < best->pp[p].nstages; q++) {
			const hexi_stage *sg = &best->pp[p].stages[q];
			ng[sg->devices[0].node] += sg->tp;
			if (node_type(x, sg->devices[0].node) == ty &&
			    sg->tp > *tmax)
				*tmax = sg->tp;
		}
	for (int i = 0; i < x->c->nnodes; i++)
		if (ng[i] > 0) {
			keep[n] = i;
			ng[n++] = ng[i]; /* n <= i: compacts in place */
		}
	return n;
}

/* One GPU-subset step for type ty on best's nodes: its nodes keep one GPU
 * fewer (fewer 1) or a multiple of the largest TP degree its stages use
 * (fewer 0: without phase 2's remainder group).  *won: the search was
 * faster; nothing is searched when no node would change. */
static hexi_rc gpu_step(pl_state *st, pl_cand *best, const hexi_cluster *c,
			const hexi_model *m, const hexi_train *t,
			const hexi_plan_opts *o, int ty, int fewer, int *keep,
			int *ng, int *won)
{
	int tmax, n = best_nodes(st, best, ty, keep, ng, &tmax), changed = 0;
	double before = best->score;
	hexi_rc rc;

	*won = 0;
	for (int k = 0; k < n && tmax > 0; k++) {
		int g = ng[k], h = fewer ? g - 1 : g - g % tmax;
		if (node_type(&st->x, keep[k]) != ty || h < 1 || h >= g)
			continue;
		ng[k] = h;
		changed = 1;
	}
	if (!changed)
		return HEXI_OK;
	rc = try_subset(st, best, c, m, t, o, keep, ng, n);
	*won = best->score < before;
	return rc;
}

/*
 * Leave single GPUs idle when that is faster (DECISIONS 130): after the
 * node subsets, for each GPU type on the best plan's nodes in turn, its
 * nodes keep the first GPUs of their gpu_index only: a multiple of the
 * largest TP degree its stages use (free unless phase 2 formed a
 * remainder group), then one GPU fewer, again while that is faster.  Each
 * step starts from the best plan so far.  The descent only when the best
 * plan's nodes hold at most PL_GPU_DESCENT_GPUS GPUs (planning time: each
 * step is a search on them).  While nothing fits,
 * node first (the fastest) with 1, 2, 4 ... GPUs.
 */
static hexi_rc try_gpu_subsets(pl_state *st, pl_cand *best,
			       const hexi_cluster *c, const hexi_model *m,
			       const hexi_train *t, const hexi_plan_opts *o,
			       int first)
{
	int N = c->nnodes, *keep = calloc((size_t)N * 2 + 1, sizeof(int));
	int *ng = keep != NULL ? keep + N : NULL, won;
	hexi_rc rc = keep != NULL ? HEXI_OK : HEXI_ERR_NOMEM;

	/* nothing fits on whole nodes (a global batch too small for the
	 * pipelines that every GPU of a node needs): node first with 1, 2,
	 * 4 ... of its GPUs, until one fits and while doubling is faster */
	won = !best->pp || best->score >= PL_INFEASIBLE;
	for (int g = 1; rc == HEXI_OK && won && g < c->nodes[first].ngpus;
	     g *= 2) {
		double before = best->score;
		keep[0] = first;
		ng[0] = g;
		rc = try_subset(st, best, c, m, t, o, keep, ng, 1);
		won = best->score >= PL_INFEASIBLE || best->score < before;
	}
	if (!best->pp || best->score >= PL_INFEASIBLE)
		goto out;
	for (int ty = 0; rc == HEXI_OK && ty < st->x.ntypes; ty++) {
		int tmax, n, g = 0;
		rc = gpu_step(st, best, c, m, t, o, ty, 0, keep, ng, &won);
		n = best_nodes(st, best, ty, keep, ng, &tmax);
		for (int k = 0; k < n; k++)
			g += ng[k];
		for (won = g <= PL_GPU_DESCENT_GPUS; rc == HEXI_OK && won;)
			rc = gpu_step(st, best, c, m, t, o, ty, 1, keep, ng,
				      &won);
	}
out:
	free(keep);
	return rc == HEXI_ERR_NOMEM ? hexi_error(rc, "planner: GPU subsets")
				    : rc;
}

/*
 * Leave GPUs idle when that is faster: plan on the nodes of the fastest
 * GPU types only (the fastest k types for k = types-1 .. 1), and when no
 * plan fits yet, on the fastest 1, 2, 4 ... nodes, so a plan exists
 * whenever the model fits on some nodes.  Whole nodes only: a node's GPUs
 * are one type and share its links.
 */
static hexi_rc try_subsets(pl_state *st, pl_cand *best, const hexi_cluster *c,
			   const hexi_model *m, const hexi_train *t,
			   const hexi_plan_opts *o)
{
	int N = c->nnodes, *keep = calloc((size_t)N + 1, sizeof(int));
	int *ord = calloc((size_t)N + 1, sizeof(int));
	double *sp = calloc((size_t)N + 1, sizeof(double));
	hexi_rc rc = keep && ord && sp ? HEXI_OK : HEXI_ERR_NOMEM;
	int ndist = 0;

	for (int i = 0; rc == HEXI_OK && i < N; i++) {
		double v = node_speed(&st->x, i);
		int k = 0;
		while (k < ndist && sp[k] != v)
			k++;
		if (k == ndist)
			sp[ndist++] = v;
	}
	/* distinct speeds, fastest first (insertion sort: few of them) */
	for (int i = 1; i < ndist; i++)
		for (int k = i; k > 0 && sp[k - 1] < sp[k]; k--) {
			double tmp = sp[k];
			sp[k] = sp[k - 1];
			sp[k - 1] = tmp;
		}
	for (int kt = ndist - 1; rc == HEXI_OK && kt >= 1; kt--) {
		int n = 0;
		for (int i = 0; i < N; i++)
			if (node_speed(&st->x, i) >= sp[kt - 1])
				keep[n++] = i;
		rc = try_subset(st, best, c, m, t, o, keep, NULL, n);
	}
	/* nodes by speed times GPUs, fastest first, ties by index */
	for (int i = 0; rc == HEXI_OK && i < N; i++)
		ord[i] = i;
	for (int i = 1; rc == HEXI_OK && i < N; i++)
		for (int k = i; k > 0; k--) {
			double a = node_speed(&st->x, ord[k - 1]) *
				   c->nodes[ord[k - 1]].ngpus;
			double b =
			    node_speed(&st->x, ord[k]) * c->nodes[ord[k]].ngpus;
			int tmp;
			if (a >= b)
				break;
			tmp = ord[k];
			ord[k] = ord[k - 1];
			ord[k - 1] = tmp;
		}
	for (int n = 1; rc == HEXI_OK && n < N &&
			(!best->pp || best->score >= PL_INFEASIBLE);
	     n *= 2) {
		memcpy(keep, ord, sizeof(int) * (size_t)n);
		for (int i = 1; i < n; i++) /* ascending node index */
			for (int k = i; k > 0 && keep[k - 1] > keep[k]; k--) {
				int tmp = keep[k];
				keep[k] = keep[k - 1];
				keep[k - 1] = tmp;
			}
		rc = try_subset(st, best, c, m, t, o, keep, NULL, n);
	}
	if (rc == HEXI_ERR_NOMEM)
		rc = hexi_error(rc, "planner: subsets");
	if (rc == HEXI_OK)
		rc = try_gpu_subsets(st, best, c, m, t, o, ord[0]);
	free(keep);
	free(ord);
	free(sp);
	return rc;
}

/* The memory settings to search, zero-major: fixed ones as given, else
 * zero 0..2 and recompute on, then off (train's own values only on big
 * clusters).  Returns the count; z[], r[] get them. */
static int memory_options(const hexi_cluster *c, const hexi_train *t,
			  const hexi_plan_opts *o, int *z, int *r)
{
	int big = hexi_cluster_total_gpus(c) > HEXI_PLAN_MEMSEARCH_GPUS;
	int z0 = o->zero >= 0 ? o->zero : big ? t->zero : 0;
	/* Megatron-LM's distributed optimizer is zero 1; it has no zero 2 */
	int zmax = o->strategy == HEXI_STRATEGY_MEGATRON ? 1 : 2;
	int z1 = o->zero >= 0 ? o->zero : big ? t->zero : zmax;
	int r0 = o->recompute >= 0 ? o->recompute : big ? t->recompute : 1;
	int r1 = o->recompute >= 0 ? o->recompute : big ? t->recompute : 0;
	int n = 0;

	/* zero 2 holds less than zero 1 but reduce-scatters every
	 * micro-batch, zero 1 syncs once: either can win, all three are
	 * searched (DECISIONS 156) */
	for (int zz = z0; zz <= z1; zz++)
		for (int rr = r0;; rr = r1) {
			z[n] = zz;
			r[n++] = rr;
			if (rr == r1)
				break;
		}
	return n;
}

/* One memory setting's search: its state, best candidate and settings. */
typedef struct {
	pl_state st;
	pl_cand best;
	hexi_train t;
	int live;
} pl_setting;

static int setting_fits(const pl_setting *e)
{
	return e->live && e->best.pp && e->best.score < PL_INFEASIBLE;
}

/* Finish *e, its evaluations and stop reason added to *evals, *stop. */
static void setting_drop(pl_setting *e, long *evals, int *stop)
{
	if (e->live) {
		*evals += e->st.evals;
		*stop = e->st.stop > *stop ? e->st.stop : *stop;
		state_fini(&e->st);
		pl_cand_free(&e->best);
	}
	memset(e, 0, sizeof(*e));
	e->best.score = DBL_MAX;
}

hexi_rc hexi_plan_create(const hexi_cluster *c, const hexi_model *m,
			 const hexi_train *t, const hexi_plan_opts *o,
			 hexi_plan **out)
{
	/* the best setting on the whole cluster and the runner-up */
	pl_setting win, run, cur;
	int z[6], r[6], nopt, stop = 0;
	long evals = 0; /* of the settings dropped */
	hexi_rc rc, first = HEXI_OK;
	/* one deadline for every search below (t0 + the budget) */
	double t0 = hexi_now_s();

	memset(&win, 0, sizeof(win));
	memset(&run, 0, sizeof(run));
	win.best.score = run.best.score = DBL_MAX;
	rc = check_inputs(c, m, t, o);
	if (rc != HEXI_OK)
		return rc;
	nopt = memory_options(c, t, o, z, r);
	for (int k = 0; k < nopt; k++) {
		if (k > 0 && hexi_now_s() - t0 > plan_budget_s(o)) {
			stop = HEXI_SEARCH_TIME;
			break;
		}
		memset(&cur, 0, sizeof(cur));
		cur.t = *t;
		cur.t.zero = z[k];
		cur.t.recompute = r[k];
		cur.live = 1;
		rc = search_on(c, m, &cur.t, o, t0, &cur.st, &cur.best);
		int fits = rc == HEXI_OK && setting_fits(&cur);
		if (k == 0 ||
		    (fits && cur.best.score < win.best.score * (1 - 1e-12))) {
			if (k > 0 && setting_fits(&win)) {
				setting_drop(&run, &evals, &stop);
				run = win;
			} else {
				setting_drop(&win, &evals, &stop);
			}
			win = cur;
			first = k == 0 ? rc : first;
		} else if (fits &&
			   cur.best.score < run.best.score * (1 - 1e-12)) {
			setting_drop(&run, &evals, &stop);
			run = cur;
		} else {
			setting_drop(&cur, &evals, &stop);
		}
		if (rc != HEXI_OK && rc != HEXI_ERR_NOFIT)
			goto out;
	}
	rc = setting_fits(&win) ? HEXI_OK : first;
	/* subsets with the memory setting that won on the whole cluster (or
	 * the first when none fits there), and with the runner-up: the
	 * winner on the whole cluster need not win on a subset (DECISIONS
	 * 160) */
	if (rc == HEXI_OK && win.st.x.dev != NULL && !o->use_all_gpus &&
	    o->strategy == HEXI_STRATEGY_HEXISCALE) {
		rc = try_subsets(&win.st, &win.best, c, m, &win.t, o);
		if (rc == HEXI_OK && run.live) {
			rc = try_subsets(&run.st, &run.best, c, m, &run.t, o);
			if (rc == HEXI_OK &&
			    run.best.score < win.best.score * (1 - 1e-12)) {
				pl_setting tmp = win;
				win = run;
				run = tmp;
			}
		}
	}
	/* every setting's evaluations count, and any search's stop reason */
	setting_drop(&run, &evals, &stop);
	win.st.evals += evals;
	win.st.stop = stop > win.st.stop ? stop : win.st.stop;
	if (rc != HEXI_OK)
		goto out;
	if (!win.best.pp || win.best.score >= PL_INFEASIBLE) {
		rc = no_plan(&win.st, &win.best, m);
		goto out;
	}
	hexi_log(HEXI_LOG_VERBOSE,
		 "planner: %s: %ld candidates in %.3f s, best %.4f s/iter "
		 "(zero %d, recompute %d)",
		 sched_strategy_name(o->strategy), win.st.evals,
		 hexi_now_s() - win.st.t0, win.best.score, win.t.zero,
		 win.t.recompute);
	/* the prediction over the job's cluster (MFU counts idle GPUs) */
	rc = sched_evaluate(&win.st.x, win.best.pp, win.best.np, &win.best.ev,
			    NULL);
	if (rc == HEXI_OK)
		rc = cand_to_plan(&win.st, c, m, &win.t, &win.best, out);
out:
	setting_drop(&win, &evals, &stop);
	setting_drop(&run, &evals, &stop);
	return rc;
}
