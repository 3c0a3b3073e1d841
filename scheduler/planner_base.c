/*
 * planner_base.c - baselines evaluated by the same simulator:
 *   megatron   best uniform DP x TP x PP grid (TP inside nodes, even layer
 *              split, Megatron's rank order TP fastest, then DP, then PP),
 *              micro-batch size searched;
 *   exhaustive every partition of <= 8 GPUs into pipelines, every TP
 *              degree for each pipeline's GPUs on each node, both node
 *              orders, optimal layer and batch split, micro-batch sizes
 *              (the yardstick for the heuristic's gap).
 */
#include "config.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "planner_int.h"

/* Megatron plan for (d, t, p) and micro-batch size b. */
static int megatron_plan(pl_state *st, int d, int t, int P, int b, pl_cand *c)
{
	const sched_ctx *x = &st->x;
	int L = x->m.layers, G = st->M * st->mb, m = G / d / b;

	memset(c, 0, sizeof(*c));
	c->score = DBL_MAX;
	c->np = d;
	c->pp = calloc((size_t)d, sizeof(hexi_pipeline));
	if (!c->pp)
		return -1;
	for (int j = 0; j < d; j++) {
		hexi_pipeline *pl = &c->pp[j];
		pl->nstages = P;
		pl->micro_batches = m;
		pl->batch = m * b;
		pl->stages = calloc((size_t)P, sizeof(hexi_stage));
		if (!pl->stages)
			return -1;
		for (int s = 0, l = 0; s < P; s++) {
			hexi_stage *sg = &pl->stages[s];
			int n = L / P + (s < L % P);
			sg->layer_begin = l;
			sg->layer_end = l += n;
			sg->tp = t;
			sg->devices = calloc((size_t)t, sizeof(hexi_device));
			if (!sg->devices)
				return -1;
			for (int i = 0; i < t; i++) {
				int r = (s * d + j) * t + i;
				sg->devices[i].node = x->dev[r].node;
				sg->devices[i].gpu = x->dev[r].gpu;
			}
		}
	}
	st->evals++;
	if (sched_evaluate(x, c->pp, c->np, &c->ev, NULL) != HEXI_OK)
		return -1;
	c->score = c->ev.fits ? c->ev.iter_s
			      : PL_INFEASIBLE * (1.0 + c->ev.worst_mem_ratio);
	if (!c->ev.fits)
		pl_why_fit(st, c);
	return 0;
}

/* t must divide every node's GPU count so TP groups stay inside nodes. */
static int tp_fits_nodes(const sched_ctx *x, int t)
{
	for (int i = 0; i < x->c->nnodes; i++)
		if (x->c->nodes[i].ngpus % t)
			return 0;
	return 1;
}

hexi_rc pl_search_megatron(pl_state *st, pl_cand *best)
{
	const sched_ctx *x = &st->x;
	int N = x->ndev, G = st->M * st->mb;

	for (int t = 1; t <= N && t <= st->kv; t++) {
		if (N % t || !tp_fits_nodes(x, t))
			continue;
		for (int P = 1; P <= N / t && P <= x->m.layers; P++) {
			int d = N / t / P;
			if ((N / t) % P || G % d)
				continue;
			for (int b = 1;
			     b <= G / d && (st->mb_max == 0 || b <= st->mb_max);
			     b *= 2) {
				pl_cand c;
				if ((G / d) % b)
					continue;
				/* the grid is not cut by the work bound (its
				 * plans stay the same), only by the deadline */
				if (pl_past_deadline(st))
					goto out;
				if (megatron_plan(st, d, t, P, b, &c) == 0 &&
				    st->o->verbose)
					hexi_log(
					    HEXI_LOG_INFO,
					    "megatron: dp=%d tp=%d pp=%d "
					    "mb=%d: %s %.4f s",
					    d, t, P, b,
					    c.score < PL_INFEASIBLE ? "iter"
								    : "no fit",
					    c.score < PL_INFEASIBLE ? c.score
								    : 0.0);
				pl_cand_take(best, &c);
			}
		}
	}
out:
	if (best->pp)
		st->mb = best->pp[0].batch / best->pp[0].micro_batches;
	else if (st->why.rc == HEXI_OK)
		pl_why_set(&st->why, HEXI_ERR_SHAPE,
			   "megatron: no uniform DP x TP x PP grid: TP must "
			   "divide every node's GPUs and be at most the %d KV "
			   "heads of %s, PP at most its %d layers, DP must "
			   "divide the global batch %d",
			   st->kv, x->m.name, x->m.layers, G);
	return HEXI_OK;
}

/* ---- exhaustive ------------------------------------------------------------
 */

/* One pipeline's GPUs on one node: idx[first .. first + k). */
typedef struct exh_chunk {
	int first, k;
} exh_chunk;

/* Every TP degree for every (pipeline, node) chunk: groups of t, then
 * the rest; then phase 2 with those groups. */
static void exh_groups(pl_state *st, const int *part, int P, const int *idx,
		       const exh_chunk *ch, int nch, int c, int *grp, int gid,
		       pl_cand *best)
{
	int k, lim;

	if (c == nch) {
		pl_cand cand = {0};
		cand.score = DBL_MAX;
		if (pl_phase2_groups(st, part, P, grp, &cand) == 0)
			pl_cand_take(best, &cand);
		else
			pl_cand_free(&cand);
		return;
	}
	k = ch[c].k;
	lim = k < st->kv ? k : st->kv;
	for (int t = 1; t <= lim; t++) {
		if (st->o->no_asymmetric_tp && k % t)
			continue;
		for (int q = 0; q < k; q++)
			grp[idx[ch[c].first + q]] = gid + q / t;
		exh_groups(st, part, P, idx, ch, nch, c + 1, grp,
			   gid + (k + t - 1) / t, best);
	}
}

static void exh_partition(pl_state *st, const int *part, int P, pl_cand *best)
{
	const sched_ctx *x = &st->x;
	int idx[8], grp[8], nch = 0, q = 0;
	exh_chunk ch[8];

	for (int p = 0; p < P; p++)
		for (int nd = 0; nd < x->c->nnodes; nd++) {
			int first = q;
			for (int i = x->node_first[nd];
			     i < x->node_first[nd + 1]; i++)
				if (part[i] == p)
					idx[q++] = i;
			if (q > first) {
				ch[nch].first = first;
				ch[nch++].k = q - first;
			}
		}
	exh_groups(st, part, P, idx, ch, nch, 0, grp, 0, best);
}

/* Restricted growth strings: every set partition of the GPUs. */
hexi_rc pl_search_exhaustive(pl_state *st, pl_cand *best)
{
	int n = st->x.ndev, part[8], mx[9];

	if (n < 1 || n > 8)
		return hexi_error(HEXI_ERR_RANGE,
				  "strategy exhaustive: %d GPUs (1 to 8)", n);
	memset(part, 0, sizeof(part));
	st->all_orders = 1;
	for (;;) {
		int P = 0, i;
		for (i = 0; i < n; i++)
			P = part[i] + 1 > P ? part[i] + 1 : P;
		if (P <= st->max_p)
			exh_partition(st, part, P, best);
		/* next restricted growth string */
		mx[0] = -1;
		for (i = 0; i < n; i++)
			mx[i + 1] = part[i] > mx[i] ? part[i] : mx[i];
		for (i = n - 1; i > 0; i--)
			if (part[i] <= mx[i]) {
				part[i]++;
				break;
			}
		if (i == 0)
			break;
		for (int j = i + 1; j < n; j++)
			part[j] = 0;
	}
	pl_search_mb(st, best);
	return HEXI_OK;
}
