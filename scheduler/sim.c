/*
 * sim.c - the simulator: resolves a cluster into a cost-model context and
 * evaluates a set of pipelines (stage times, pipeline times, gradient sync,
 * iteration time, tokens/s, MFU, memory per GPU) with either cost model.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

hexi_rc sched_ctx_init(sched_ctx *x, const hexi_cluster *c, const hexi_model *m,
		       const hexi_train *t, hexi_cost_kind kind)
{
	const hexi_gpu_type **seen = NULL;
	int n = 0, k = 0;
	hexi_rc rc = HEXI_ERR_NOMEM;

	memset(x, 0, sizeof(*x));
	x->c = c;
	x->m = *m;
	x->t = *t;
	x->kind = kind;
	x->overlap_dp = 1;
	if (!c || c->nnodes < 1)
		return hexi_error(HEXI_ERR_INVAL, "cluster: no nodes");
	for (int i = 0; i < c->nnodes; i++)
		n += c->nodes[i].ngpus;
	x->dev = calloc((size_t)(n > 0 ? n : 1), sizeof(*x->dev));
	x->node_first = calloc((size_t)c->nnodes + 1, sizeof(int));
	seen = calloc((size_t)c->nnodes, sizeof(*seen));
	if (!x->dev || !x->node_first || !seen)
		goto out;
	for (int i = 0; i < c->nnodes; i++) {
		const hexi_node *nd = &c->nodes[i];
		const hexi_gpu_type *g =
		    hexi_catalog_find(c->catalog, nd->gpu_type);
		int ty = 0;
		if (!g) {
			rc = hexi_error(HEXI_ERR_NOTFOUND,
					"cluster: nodes[%d].gpu_type: unknown "
					"GPU type '%s'",
					i, nd->gpu_type);
			goto out;
		}
		while (ty < x->ntypes && seen[ty] != g)
			ty++;
		if (ty == x->ntypes)
			seen[x->ntypes++] = g;
		x->node_first[i] = k;
		for (int j = 0; j < nd->ngpus; j++, k++) {
			x->dev[k].node = i;
			x->dev[k].gpu = nd->gpu_index ? nd->gpu_index[j] : j;
			x->dev[k].type = ty;
			x->dev[k].peak_tflops = g->peak_tflops;
			x->dev[k].eff = g->efficiency > 0 ? g->efficiency : 1.0;
			x->dev[k].mem_gib = g->mem_gib;
			x->dev[k].mem_bw_gbps = g->mem_bw_gbps;
			x->dev[k].cpu = strcmp(g->name, "cpu") == 0;
			x->peak_sum_tflops += g->peak_tflops;
		}
	}
	x->node_first[c->nnodes] = k;
	x->ndev = k;
	rc = HEXI_OK;
out:
	free(seen);
	if (rc != HEXI_OK)
		sched_ctx_fini(x);
	return rc;
}

void sched_ctx_fini(sched_ctx *x)
{
	free(x->dev);
	free(x->node_first);
	x->dev = NULL;
	x->node_first = NULL;
}

int sched_dev_index(const sched_ctx *x, int node, int gpu)
{
	if (node < 0 || node >= x->c->nnodes)
		return -1;
	for (int i = x->node_first[node]; i < x->node_first[node + 1]; i++)
		if (x->dev[i].gpu == gpu)
			return i;
	return -1;
}

double sched_bw_gbps(const sched_ctx *x, int a, int b)
{
	const hexi_cluster *c = x->c;

	if (a == b)
		return c->nodes[a].intra_bw_gbps;
	if (c->pair_bw_gbps)
		return c
		    ->pair_bw_gbps[(size_t)a * (size_t)c->nnodes + (size_t)b];
	return c->inter_bw_gbps;
}

double sched_lat_s(const sched_ctx *x, int a, int b)
{
	return a == b ? x->c->intra_lat_s : x->c->inter_lat_s;
}

void sched_stage_cost(const sched_ctx *x, const sched_sdesc *d,
		      sched_scost *out)
{
	memset(out, 0, sizeof(*out));
	if (x->kind == HEXI_COST_REFERENCE)
		sched_ref_stage(x, d, out);
	else
		sched_hexi_stage(x, d, out);
}

double sched_pipe_s(const sched_ctx *x, const double *c, int S, int m)
{
	return x->kind == HEXI_COST_REFERENCE ? sched_ref_pipe_s(c, S, m)
					      : sched_hexi_pipe_s(c, S, m);
}

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

/* Stage times and memory of pipeline p; c[] gets time per micro-batch. */
static void eval_pipe(const sched_ctx *x, hexi_pipeline *pl, int *const *dev,
		      double *c, hexi_stage_report *rep, double *worst,
		      double *opt)
{
	int S = pl->nstages, m = pl->micro_batches;

	for (int s = 0; s < S; s++) {
		hexi_stage *st = &pl->stages[s];
		sched_sdesc d = {dev[s],
				 st->tp,
				 s + 1 < S ? dev[s + 1] : NULL,
				 s + 1 < S ? pl->stages[s + 1].tp : 0,
				 s == 0,
				 s == S - 1,
				 S - s < m ? S - s : m,
				 pl->batch / m};
		sched_scost k;
		int n = st->layer_end - st->layer_begin;
		double mem;
		sched_stage_cost(x, &d, &k);
		c[s] = n * (k.comp_layer_s + k.tp_layer_s) + k.fixed_s + k.pp_s;
		mem = n * k.mem_layer_b + k.mem_fixed_b;
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

static void finish_eval(const sched_ctx *x, const hexi_pipeline *pp, int np,
			double dp_end, double dp_total, sched_eval *ev)
{
	double G = 0, h = x->m.hidden, s = SCHED_REF_SEQ, V = SCHED_REF_VOCAB;

	for (int p = 0; p < np; p++)
		G += pp[p].batch;
	if (x->kind == HEXI_COST_REFERENCE) {
		double ac = x->t.recompute ? 96.0 : 72.0;
		double flop =
		    ac * x->m.layers * G * s * h * h *
		    (1.0 + s / (6.0 * h) + V / (16.0 * x->m.layers * h));
		ev->dp_sync_s = dp_total;
		ev->iter_s = 1.8 * ev->max_pipe_s + 1.1 * dp_total;
		ev->tokens_per_s = G * s / ev->iter_s;
		ev->mfu =
		    flop / ev->iter_s / (x->peak_sum_tflops * SCHED_TWO40);
	} else {
		ev->dp_sync_s = dp_total;
		ev->iter_s = dp_end + ev->opt_s;
		ev->tokens_per_s = G * x->m.seq_len / ev->iter_s;
		ev->mfu = G * sched_model_flops(&x->m) / ev->iter_s /
			  (x->peak_sum_tflops * 1e12);
	}
}

hexi_rc sched_evaluate(const sched_ctx *x, hexi_pipeline *pp, int np,
		       sched_eval *ev, hexi_stage_report *rep)
{
	sched_map map = {0};
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
	for (int p = 0; p < np; p++) {
		eval_pipe(x, &pp[p], map.dev + k, c + k, rep ? rep + k : NULL,
			  &ev->worst_mem_ratio, &ev->opt_s);
		if (pp[p].time_s > ev->max_pipe_s)
			ev->max_pipe_s = pp[p].time_s;
		k += pp[p].nstages;
	}
	if (x->kind == HEXI_COST_REFERENCE) {
		dp_total = sched_ref_dp_s(x, pp, np, &map);
	} else {
		dp_end = sched_hexi_dp(x, pp, np, &map, c, &dp_total);
		if (dp_end < 0) {
			rc = hexi_error(HEXI_ERR_NOMEM, "simulator: DP sync");
			goto out;
		}
	}
	finish_eval(x, pp, np, dp_end, dp_total, ev);
	ev->fits = ev->worst_mem_ratio <= 1.0;
out:
	free(c);
	sched_map_fini(&map);
	return rc;
}

hexi_rc sched_simulate_ex(hexi_plan *p, hexi_cost_kind kind, int overlap_dp,
			  hexi_stage_report *rep)
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
	return sched_simulate_ex(p, kind, 1, report);
}

/* ---- names ------------------------------------------------------------------
 */

const char *sched_cost_name(hexi_cost_kind k)
{
	return k == HEXI_COST_REFERENCE ? "reference" : "hexiscale";
}

int sched_cost_parse(const char *s, hexi_cost_kind *k)
{
	if (strcmp(s, "hexiscale") == 0)
		*k = HEXI_COST_HEXISCALE;
	else if (strcmp(s, "reference") == 0)
		*k = HEXI_COST_REFERENCE;
	else
		return -1;
	return 0;
}

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
