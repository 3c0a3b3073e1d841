/*
 * planner_search.c - the two-phase search (strategy hexiscale) and the
 * random-partition baseline: iterate over the number of pipelines P and the
 * cut direction; for each phase-1 partition search the TP degree per GPU
 * type (coordinate descent), then re-partition with the chosen TP groups
 * as atomic vertices and redo phase 2 while it improves.
 */
#include "config.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner_int.h"

#define PL_MAX_TP_CAND 12

static void trace(const pl_state *st, const char *what, int P, int dir,
		  const int *tp, const pl_cand *c)
{
	char buf[256];
	int k = 0;

	if (!st->o->verbose)
		return;
	for (int t = 0; t < st->x.ntypes && k < 200; t++)
		k += snprintf(buf + k, sizeof(buf) - (size_t)k, "%s%d",
			      t ? "," : "", tp ? tp[t] : 0);
	if (c->score >= PL_INFEASIBLE)
		hexi_log(HEXI_LOG_INFO,
			 "search: %-8s P=%-4d dir=%d tp=[%s] does not fit",
			 what, P, dir, buf);
	else
		hexi_log(HEXI_LOG_INFO,
			 "search: %-8s P=%-4d dir=%d tp=[%s] iter %.4f s "
			 "MFU %.2f%%",
			 what, P, dir, buf, c->score, 100.0 * c->ev.mfu);
}

/* TP degrees worth trying for GPU type ty: powers of two and the node
 * size, all <= KV heads. */
static int tp_list(const pl_state *st, int ty, int *list)
{
	int lim = st->type_max[ty] < st->kv ? st->type_max[ty] : st->kv, n = 0;

	for (int t = 1; t <= lim && n < PL_MAX_TP_CAND - 1; t *= 2)
		list[n++] = t;
	if (lim > 0 && list[n - 1] != lim)
		list[n++] = lim;
	return n;
}

#define PL_MEMO 96

/* TP vectors already evaluated on the current partition. */
typedef struct tp_memo {
	int n, nt;
	int v[PL_MEMO][16];
} tp_memo;

static int memo_seen(tp_memo *mm, const int *tp)
{
	if (mm->nt > 16)
		return 0;
	for (int i = 0; i < mm->n; i++)
		if (!memcmp(mm->v[i], tp, sizeof(int) * (size_t)mm->nt))
			return 1;
	if (mm->n < PL_MEMO)
		memcpy(mm->v[mm->n++], tp, sizeof(int) * (size_t)mm->nt);
	return 0;
}

static void eval_tp(pl_state *st, const int *part, int P, const int *tp,
		    pl_cand *best, int *best_tp, int dir, tp_memo *mm)
{
	pl_cand c = {0};

	if (memo_seen(mm, tp))
		return;
	c.score = DBL_MAX;
	if (pl_phase2(st, part, P, tp, &c) != 0) {
		pl_cand_free(&c);
		return;
	}
	trace(st, "phase2", P, dir, tp, &c);
	if (pl_cand_take(best, &c))
		memcpy(best_tp, tp, sizeof(int) * (size_t)st->x.ntypes);
}

/* Best TP degrees per type for one partition: the previous P's best
 * (warm[], if any) or every uniform degree (the only choice under
 * --no-asymmetric-tp), then coordinate descent over the types. */
static void search_tp(pl_state *st, const int *part, int P, int dir,
		      pl_cand *best, int *warm)
{
	int nt = st->x.ntypes, *tp = calloc((size_t)nt * 2, sizeof(int));
	int *btp = tp + nt, list[PL_MAX_TP_CAND], all = 1;
	tp_memo *mm = calloc(1, sizeof(*mm));

	if (!tp || !mm)
		goto out;
	mm->nt = nt;
	for (int t = 0; t < nt; t++)
		all = st->type_max[t] > all ? st->type_max[t] : all;
	if (warm && warm[0] > 0 && !st->o->no_asymmetric_tp)
		eval_tp(st, part, P, warm, best, btp, dir, mm);
	if (!best->pp || best->score >= PL_INFEASIBLE)
		for (int u = 1; u <= all && u <= st->kv; u *= 2) {
			for (int t = 0; t < nt; t++)
				tp[t] = u;
			eval_tp(st, part, P, tp, best, btp, dir, mm);
		}
	if (!best->pp)
		for (int t = 0; t < nt; t++)
			btp[t] = 1;
	for (int round = 0; round < 2 && !st->o->no_asymmetric_tp; round++) {
		double before = best->score;
		for (int ty = 0; ty < nt && !pl_out_of_time(st); ty++) {
			int n = tp_list(st, ty, list);
			for (int i = 0; i < n; i++) {
				memcpy(tp, btp, sizeof(int) * (size_t)nt);
				if (tp[ty] == list[i])
					continue;
				tp[ty] = list[i];
				eval_tp(st, part, P, tp, best, btp, dir, mm);
			}
		}
		if (!(best->score < before))
			break;
	}
	if (warm && best->pp && best->score < PL_INFEASIBLE)
		memcpy(warm, btp, sizeof(int) * (size_t)nt);
out:
	free(tp);
	free(mm);
}

/* Phase 1 again with the TP groups of the best plan as vertices. */
static void refine(pl_state *st, int dir, pl_cand *best)
{
	int n = st->x.ndev, *part = calloc((size_t)n * 2, sizeof(int));
	int *grp = part + n;

	if (!part)
		return;
	for (int it = 0; it < 3 && best->pp && best->np > 1 &&
			 best->score < PL_INFEASIBLE && !pl_out_of_time(st);
	     it++) {
		pl_cand c = {0};
		if (pl_phase1_groups(st, best, dir, part, grp) != HEXI_OK)
			break;
		if (pl_phase2_groups(st, part, best->np, grp, &c) != 0) {
			pl_cand_free(&c);
			break;
		}
		trace(st, "refine", best->np, dir, NULL, &c);
		if (!pl_cand_take(best, &c))
			break;
	}
	free(part);
}

/* part[]/grp[] of a candidate: pipeline and stage (TP group) per GPU. */
static void cand_groups(const pl_state *st, const pl_cand *c, int *part,
			int *grp)
{
	int g = 0;

	for (int i = 0; i < st->x.ndev; i++)
		part[i] = grp[i] = -1;
	for (int p = 0; p < c->np; p++)
		for (int s = 0; s < c->pp[p].nstages; s++, g++)
			for (int i = 0; i < c->pp[p].stages[s].tp; i++) {
				const hexi_device *d =
				    &c->pp[p].stages[s].devices[i];
				int k =
				    sched_dev_index(&st->x, d->node, d->gpu);
				part[k] = p;
				grp[k] = g;
			}
}

/* Larger micro-batches (2b, 4b, ...) for the best plan's groups: fewer,
 * longer micro-batches trade bubble and memory for less per-message
 * latency.  Keeps the best; st->mb/st->M end up matching it. */
void pl_search_mb(pl_state *st, pl_cand *best)
{
	int n = st->x.ndev, *part = calloc((size_t)n * 2, sizeof(int));
	int G = st->M * st->mb, mb_best = st->mb;

	if (!part || !best->pp || best->score >= PL_INFEASIBLE)
		goto out;
	cand_groups(st, best, part, part + n);
	for (int mb = st->mb * 2; mb <= G && G % mb == 0; mb *= 2) {
		pl_cand c = {0};
		st->mb = mb;
		st->M = G / mb;
		if (st->M < best->np)
			break;
		if (pl_phase2_groups(st, part, best->np, part + n, &c) != 0) {
			pl_cand_free(&c);
			break;
		}
		trace(st, "ubatch", best->np, mb, NULL, &c);
		if (!pl_cand_take(best, &c))
			break;
		mb_best = mb;
		cand_groups(st, best, part, part + n);
	}
out:
	st->mb = mb_best;
	st->M = G / mb_best;
	free(part);
}

/* Local search on the best plan: move one TP group to another pipeline
 * (phase 2 redone) while that helps; finds uneven pipeline sizes that a
 * balanced phase-1 partition cannot.  Only for plans of <= 64 groups. */
static void local_moves(pl_state *st, pl_cand *best)
{
	int n = st->x.ndev, *part = calloc((size_t)n * 2, sizeof(int));
	int *grp = part + n, G = 0, moved = 1;

	if (!part || !best->pp || best->np < 2 || best->score >= PL_INFEASIBLE)
		goto out;
	for (int p = 0; p < best->np; p++)
		G += best->pp[p].nstages;
	if (G > 64)
		goto out;
	for (int round = 0; moved && round < 8 && !pl_out_of_time(st);
	     round++) {
		moved = 0;
		cand_groups(st, best, part, grp);
		for (int g = 0; g < G && !moved; g++) {
			int from = -1, left = 0;
			for (int i = 0; i < n; i++)
				if (grp[i] == g)
					from = part[i];
			for (int i = 0; i < n; i++)
				left += part[i] == from && grp[i] != g;
			for (int to = 0; to < best->np && !moved && left;
			     to++) {
				pl_cand c = {0};
				if (to == from)
					continue;
				for (int i = 0; i < n; i++)
					if (grp[i] == g)
						part[i] = to;
				if (pl_phase2_groups(st, part, best->np, grp,
						     &c) == 0) {
					trace(st, "move", best->np, 0, NULL,
					      &c);
					moved = pl_cand_take(best, &c);
				} else {
					pl_cand_free(&c);
				}
				for (int i = 0; i < n && !moved; i++)
					if (grp[i] == g)
						part[i] = from;
			}
		}
	}
out:
	free(part);
}

/* Fewest pipelines that can use every GPU: a pipeline has at most L
 * stages of at most min(KV, GPUs of a node) GPUs each. */
static int min_pipelines(const pl_state *st)
{
	long g = 1, cap;

	for (int t = 0; t < st->x.ntypes; t++) {
		long k = st->type_max[t] < st->kv ? st->type_max[t] : st->kv;
		g = k > g ? k : g;
	}
	cap = g * st->x.m.layers;
	return (int)((st->x.ndev + cap - 1) / cap);
}

static int next_p(int P)
{
	return P < 8 ? P + 1 : P + P / 4;
}

hexi_rc pl_search_hexiscale(pl_state *st, pl_cand *best)
{
	int n = st->x.ndev, *part = calloc((size_t)n, sizeof(int));
	int stale = 0, *warm = calloc((size_t)st->x.ntypes, sizeof(int));
	hexi_rc rc = HEXI_OK;

	if (!part || !warm) {
		free(part);
		free(warm);
		return hexi_error(HEXI_ERR_NOMEM, "planner: partition");
	}
	for (int P = min_pipelines(st); P <= st->max_p; P = next_p(P)) {
		double before = best->score;
		for (int dir = 0; dir < (P > 1 ? 2 : 1); dir++) {
			pl_cand b = {0};
			b.score = DBL_MAX;
			rc = pl_phase1_metis(st, P, dir, part);
			if (rc != HEXI_OK)
				goto out;
			search_tp(st, part, P, dir, &b, warm);
			refine(st, dir, &b);
			pl_cand_take(best, &b);
			if (P == 1 || P == n)
				break;
		}
		stale = best->score < before ? 0 : stale + 1;
		if ((stale >= 4 && best->score < PL_INFEASIBLE) ||
		    pl_out_of_time(st))
			break;
	}
	local_moves(st, best);
	pl_search_mb(st, best);
out:
	free(part);
	free(warm);
	return rc;
}

hexi_rc pl_search_random(pl_state *st, pl_cand *best)
{
	int n = st->x.ndev, *part = calloc((size_t)n, sizeof(int));

	if (!part)
		return hexi_error(HEXI_ERR_NOMEM, "planner: partition");
	for (int P = min_pipelines(st); P <= st->max_p && !pl_out_of_time(st);
	     P = next_p(P))
		for (int draw = 0; draw < (P > 1 ? 3 : 1); draw++) {
			pl_cand b = {0};
			b.score = DBL_MAX;
			pl_phase1_random(st, P, part);
			search_tp(st, part, P, 0, &b, NULL);
			pl_cand_take(best, &b);
		}
	free(part);
	return HEXI_OK;
}
