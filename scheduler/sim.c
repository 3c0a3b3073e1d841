/*
 * sim.c - the simulator: evaluates a set of pipelines (stage times,
 * pipeline times, gradient sync, iteration time, tokens/s, MFU, memory per
 * GPU) with the cost model of the context (cost_models.c).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

/* ---- device map ---------------------------------------------------------- */

hexi_rc sched_pipes_map(const sched_ctx *x, const hexi_pipeline *pp, int np,
			sched_map *map)
{
	int ns = 0, nd = 0, k = 0, q = 0;

	memset(map, 0, sizeof(*map));
	for (int p = 0; p < np; p++)
		for (int s = 0; s < pp[p].nstages; s++) {
			ns++;
			nd += pp[p].stages[s].tp;
		}
	map->dev = calloc((size_t)(ns > 0 ? ns : 1), sizeof(int *));
	map->buf = calloc((size_t)(nd > 0 ? nd : 1), sizeof(int));
	if (!map->dev || !map->buf) {
		sched_map_fini(map);
		return hexi_error(HEXI_ERR_NOMEM, "simulator: device map");
	}
	map->nstages_total = ns;
	for (int p = 0; p < np; p++)
		for (int s = 0; s < pp[p].nstages; s++, k++) {
			const hexi_stage *st = &pp[p].stages[s];
			map->dev[k] = map->buf + q;
			for (int i = 0; i < st->tp; i++) {
				int d = sched_dev_index(x, st->devices[i].node,
							st->devices[i].gpu);
				if (d < 0) {
					sched_map_fini(map);
					return hexi_error(
					    HEXI_ERR_INVAL,
					    "plan: pipelines[%d].stages[%d]"
					    ".devices[%d]: no GPU %d on "
					    "node %d",
					    p, s, i, st->devices[i].gpu,
					    st->devices[i].node);
				}
				map->buf[q++] = d;
			}
		}
	return HEXI_OK;
}

void sched_map_fini(sched_map *map)
{
	free(map->dev);
	free(map->buf);
	memset(map, 0, sizeof(*map));
}

/* ---- evaluation ------------------------------------------------------------
 */

static hexi_rc check_pipes(const sched_ctx *x, const hexi_pipeline *pp, int np)
{
	for (int p = 0; p < np; p++) {
		int l = 0;
		if (pp[p].nstages < 1 || pp[p].micro_batches < 1 ||
		    pp[p].batch < 1 || pp[p].batch % pp[p].micro_batches)
			return hexi_error(HEXI_ERR_INVAL,
					  "plan: pipelines[%d]: batch %d not "
					  "divisible into %d micro-batches",
					  p, pp[p].batch, pp[p].micro_batches);
		for (int s = 0; s < pp[p].nstages; s++) {
			const hexi_stage *st = &pp[p].stages[s];
			if (st->layer_begin != l || st->layer_end <= l ||
			    st->tp < 1)
				return hexi_error(HEXI_ERR_INVAL,
						  "plan: pipelines[%d].stages"
						  "[%d]: layers [%d,%d) do not "
						  "continue at %d",
						  p, s, st->layer_begin,
						  st->layer_end, l);
			l = st->layer_end;
		}
		if (l != x->m.layers)
			return hexi_error(HEXI_ERR_INVAL,
					  "plan: pipelines[%d]: holds %d of %d "
					  "layers",
					  p, l, x->m.layers);
	}
	return HEXI_OK;
}

/* 1 if stage st and every stage of pp[] holding one of its layers have
 * TP 1 (sched_sdesc.dp_tp1). */
static int tp1_holders(const hexi_pipeline *pp, int np, const hexi_stage *st)
{
	for (int p = 0; st->tp == 1 && p < np; p++)
		for (int s = 0; s < pp[p].nstages; s++) {
			const hexi_stage *t = &pp[p].stages[s];
			if (t->layer_begin < st->layer_end &&
			    st->layer_begin < t->layer_end && t->tp != 1)
				return 0;
		}
	return st->tp == 1;
}

/* Who holds what across the pipelines of a plan: what a stage's
 * memory depends on beyond its own pipeline (the sync's chunk groups). */
typedef struct sim_holders {
	unsigned char *cut; /* [L + 1] 1 where a stage begins (0 < l < L) */
	int *tp;	/* [L] the largest TP degree of the layer's holders */
	sched_run *run; /* [L] a stage's runs (stage_runs) */
	int emb, head;	/* ranks holding the embedding / head table */
} sim_holders;

static void holders_fini(sim_holders *h)
{
	free(h->cut);
	free(h->tp);
	free(h->run);
	memset(h, 0, sizeof(*h));
}

/* The holders of pp[np] (checked, L layers). */
static hexi_rc holders_init(const hexi_pipeline *pp, int np, int L,
			    sim_holders *h)
{
	memset(h, 0, sizeof(*h));
	h->cut = calloc((size_t)L + 1, 1);
	h->tp = calloc((size_t)L + 1, sizeof(int));
	h->run = calloc((size_t)L + 1, sizeof(sched_run));
	if (!h->cut || !h->tp || !h->run) {
		holders_fini(h);
		return hexi_error(HEXI_ERR_NOMEM, "simulator: %d layers", L);
	}
	for (int p = 0; p < np; p++) {
		h->emb += pp[p].stages[0].tp;
		h->head += pp[p].stages[pp[p].nstages - 1].tp;
		for (int s = 0; s < pp[p].nstages; s++) {
			const hexi_stage *st = &pp[p].stages[s];
			if (st->layer_begin > 0)
				h->cut[st->layer_begin] = 1;
			for (int l = st->layer_begin; l < st->layer_end; l++)
				if (st->tp > h->tp[l])
					h->tp[l] = st->tp;
		}
	}
	return HEXI_OK;
}

/* Stage st's layers cut into runs with the same holders, the gradient
 * sync's chunk groups, and the tables' holders (sched_sdesc). */
static void stage_holders(const hexi_stage *st, const sim_holders *h,
			  sched_sdesc *d)
{
	int at = st->layer_begin;

	d->runs = 0;
	d->run = h->run;
	for (int l = st->layer_begin + 1; l <= st->layer_end; l++) {
		if (l < st->layer_end && !h->cut[l])
			continue;
		h->run[d->runs++] =
		    (sched_run){.layers = l - at, .tp = h->tp[at]};
		at = l;
	}
	d->emb_holders = h->emb;
	d->head_holders = h->head;
}

/* Stage times and memory of pipeline pl of pp[np]; c[] gets time per
 * micro-batch. */
static void eval_pipe(const sched_ctx *x, const hexi_pipeline *pp,
		      hexi_pipeline *pl, int np, int *const *dev,
		      const sim_holders *h, double *c, hexi_stage_report *rep,
		      double *worst, double *opt)
{
	int S = pl->nstages, m = pl->micro_batches;

	for (int s = 0; s < S; s++) {
		hexi_stage *st = &pl->stages[s];
		sched_sdesc d = {.dev = dev[s],
				 .tp = st->tp,
				 .next = s + 1 < S ? dev[s + 1] : NULL,
				 .next_tp =
				     s + 1 < S ? pl->stages[s + 1].tp : 0,
				 .first = s == 0,
				 .last = s == S - 1,
				 .inflight = S - s < m ? S - s : m,
				 .mb = pl->batch / m,
				 .recompute = sched_pipe_recompute(x, pl),
				 .dp = np,
				 .dp_tp1 = tp1_holders(pp, np, st)};
		sched_scost k;
		int n = st->layer_end - st->layer_begin;
		double mem;

		stage_holders(st, h, &d);
		sched_stage_cost(x, &d, &k);
		c[s] = n * (k.comp_layer_s + k.tp_layer_s) + k.fixed_s + k.pp_s;
		mem = sched_stage_mem_b(&k, n);
		if (n * k.opt_layer_s + k.opt_fixed_s > *opt)
			*opt = n * k.opt_layer_s + k.opt_fixed_s;
		st->time_s = c[s];
		st->mem_gib = mem / SCHED_GIB;
		if (mem / k.cap_b > *worst)
			*worst = mem / k.cap_b;
		if (rep) {
			rep[s].compute_s = m * (n * k.comp_layer_s + k.fixed_s);
			rep[s].tp_comm_s = m * n * k.tp_layer_s;
			rep[s].pp_comm_s = m * k.pp_s;
			rep[s].mem_gib = st->mem_gib;
			rep[s].mem_cap_gib = k.cap_b / SCHED_GIB;
		}
	}
	pl->time_s = sched_pipe_s(x, c, S, m);
	if (rep)
		for (int s = 0; s < S; s++)
			rep[s].bubble_s = pl->time_s - m * c[s];
}

hexi_rc sched_evaluate(const sched_ctx *x, hexi_pipeline *pp, int np,
		       sched_eval *ev, hexi_stage_report *rep)
{
	const sched_cost_model *cm = sched_cost_get(x->kind);
	sched_map map = {0};
	sim_holders h = {0};
	double *c = NULL, dp_total = 0, dp_end = 0;
	int ns = 0, k = 0;
	hexi_rc rc;

	memset(ev, 0, sizeof(*ev));
	rc = check_pipes(x, pp, np);
	if (rc != HEXI_OK)
		return rc;
	rc = sched_pipes_map(x, pp, np, &map);
	if (rc != HEXI_OK)
		return rc;
	ns = map.nstages_total;
	c = calloc((size_t)(ns > 0 ? ns : 1), sizeof(double));
	if (!c) {
		rc = hexi_error(HEXI_ERR_NOMEM, "simulator: stage times");
		goto out;
	}
	if ((rc = holders_init(pp, np, x->m.layers, &h)) != HEXI_OK)
		goto out;
	for (int p = 0; p < np; p++) {
		eval_pipe(x, pp, &pp[p], np, map.dev + k, &h, c + k,
			  rep ? rep + k : NULL, &ev->worst_mem_ratio,
			  &ev->opt_s);
		if (pp[p].time_s > ev->max_pipe_s)
			ev->max_pipe_s = pp[p].time_s;
		k += pp[p].nstages;
	}
	dp_end = cm->dp(x, pp, np, &map, c, &dp_total);
	if (dp_end < 0) {
		rc = hexi_error(HEXI_ERR_NOMEM, "simulator: DP sync");
		goto out;
	}
	cm->finish(x, pp, np, dp_end, dp_total, ev);
	ev->fits = ev->worst_mem_ratio <= 1.0;
out:
	free(c);
	holders_fini(&h);
	sched_map_fini(&map);
	return rc;
}

hexi_rc sched_simulate_ex(hexi_plan *p, hexi_cost_kind kind, int overlap_dp,
			  sched_attn_mode attn, hexi_stage_report *rep)
{
	sched_ctx x;
	sched_eval ev;
	hexi_rc rc;

	if (!p)
		return hexi_error(HEXI_ERR_INVAL, "simulate: no plan");
	rc = hexi_plan_validate(p);
	if (rc != HEXI_OK)
		return rc;
	rc = sched_ctx_init(&x, p->cluster, &p->model, &p->train, kind);
	if (rc != HEXI_OK)
		return rc;
	x.overlap_dp = overlap_dp;
	x.attn = attn;
	rc = sched_evaluate(&x, p->pipelines, p->npipelines, &ev, rep);
	if (rc == HEXI_OK) {
		p->pred.iter_s = ev.iter_s;
		p->pred.dp_sync_s = ev.dp_sync_s;
		p->pred.tokens_per_s = ev.tokens_per_s;
		p->pred.mfu = ev.mfu;
		hexi_strlcpy(p->cost_model, sched_cost_name(kind),
			     sizeof(p->cost_model));
	}
	sched_ctx_fini(&x);
	return rc;
}

hexi_rc hexi_simulate(hexi_plan *p, hexi_cost_kind kind,
		      hexi_stage_report *report)
{
	return sched_simulate_ex(p, kind, 1, SCHED_ATTN_AUTO, report);
}

/* ---- strategy names --------------------------------------------------------
 */

static const char *const strategy_names[] = {"hexiscale", "megatron", "random",
					     "exhaustive"};

const char *sched_strategy_name(hexi_strategy s)
{
	return (unsigned)s < 4 ? strategy_names[s] : "unknown";
}

int sched_strategy_parse(const char *s, hexi_strategy *k)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(s, strategy_names[i]) == 0) {
			*k = (hexi_strategy)i;
			return 0;
		}
	return -1;
}
