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

static void eval_tp(pl_state *st, const int *part, int P, const int *tp,
		    pl_cand *best, int *best_tp, int dir)
{
	pl_cand c = {0};

	c.score = DBL_MAX;
	if (pl_phase2(st, part, P, tp, &c) != 0) {
		pl_cand_free(&c);
		return;
	}
	trace(st, "phase2", P, dir, tp, &c);
	if (pl_cand_take(best, &c))
		memcpy(best_tp, tp, sizeof(int) * (size_t)st->x.ntypes);
}

/* Best TP degrees per type for one partition: uniform degrees first (the
 * only choice under --no-asymmetric-tp), then coordinate descent. */
static void search_tp(pl_state *st, const int *part, int P, int dir,
		      pl_cand *best)
{
	int nt = st->x.ntypes, *tp = calloc((size_t)nt * 2, sizeof(int));
	int *btp = tp + nt, list[PL_MAX_TP_CAND], all = 1;

	if (!tp)
		return;
	for (int t = 0; t < nt; t++)
		all = st->type_max[t] > all ? st->type_max[t] : all;
	for (int u = 1; u <= all && u <= st->kv; u *= 2) {
		for (int t = 0; t < nt; t++)
			tp[t] = u;
		eval_tp(st, part, P, tp, best, btp, dir);
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
				eval_tp(st, part, P, tp, best, btp, dir);
			}
		}
		if (!(best->score < before))
			break;
	}
	free(tp);
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

static int next_p(int P)
{
	return P < 16 ? P + 1 : P + P / 4;
}

hexi_rc pl_search_hexiscale(pl_state *st, pl_cand *best)
{
	int n = st->x.ndev, *part = calloc((size_t)n, sizeof(int));
	int stale = 0;
	hexi_rc rc = HEXI_OK;

	if (!part)
		return hexi_error(HEXI_ERR_NOMEM, "planner: partition");
	for (int P = 1; P <= st->max_p; P = next_p(P)) {
		double before = best->score;
		for (int dir = 0; dir < (P > 1 ? 2 : 1); dir++) {
			pl_cand b = {0};
			b.score = DBL_MAX;
			rc = pl_phase1_metis(st, P, dir, part);
			if (rc != HEXI_OK)
				goto out;
			search_tp(st, part, P, dir, &b);
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
out:
	free(part);
	return rc;
}

hexi_rc pl_search_random(pl_state *st, pl_cand *best)
{
	int n = st->x.ndev, *part = calloc((size_t)n, sizeof(int));

	if (!part)
		return hexi_error(HEXI_ERR_NOMEM, "planner: partition");
	for (int P = 1; P <= st->max_p && !pl_out_of_time(st); P = next_p(P))
		for (int draw = 0; draw < (P > 1 ? 3 : 1); draw++) {
			pl_cand b = {0};
			b.score = DBL_MAX;
			pl_phase1_random(st, P, part);
			search_tp(st, part, P, 0, &b);
			pl_cand_take(best, &b);
		}
	free(part);
	return HEXI_OK;
}
