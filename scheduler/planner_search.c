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

/* GPU type of a stage (its devices share one node), or -1. */
static int stage_type(const pl_state *st, const hexi_stage *g)
{
	int d =
	    g->tp > 0 && g->devices
		? sched_dev_index(&st->x, g->devices[0].node, g->devices[0].gpu)
		: -1;

	return d >= 0 ? st->x.dev[d].type : -1;
}

/* The smallest TP degree above prev of candidate c's stages of type t;
 * 0: none. */
static int next_tp(const pl_state *st, const pl_cand *c, int t, int prev)
{
	int next = 0;

	for (int p = 0; c->pp && p < c->np; p++)
		for (int s = 0; s < c->pp[p].nstages; s++) {
			const hexi_stage *g = &c->pp[p].stages[s];
			if (g->tp > prev && (next == 0 || g->tp < next) &&
			    stage_type(st, g) == t)
				next = g->tp;
		}
	return next;
}

/* The TP degrees of candidate c per GPU type into buf, e.g. "2,1/4,-": a
 * type's distinct stage degrees in ascending order joined by '/', '-' for
 * a type no stage uses. */
static void cand_tp(const pl_state *st, const pl_cand *c, char *buf, size_t cap)
{
	size_t k = 0;

	buf[0] = '\0';
	for (int t = 0; t < st->x.ntypes && k + 16 < cap; t++) {
		int d = 0, any = 0;
		if (t)
			buf[k++] = ',';
		while (k + 16 < cap && (d = next_tp(st, c, t, d)) > 0) {
			k += (size_t)snprintf(buf + k, cap - k, "%s%d",
					      any ? "/" : "", d);
			any = 1;
		}
		if (!any)
			buf[k++] = '-';
		buf[k] = '\0';
	}
}

/* One line of the -v trace: step WHAT, P pipelines, the phase-1 cut
 * direction (dir < 0: a step without one), the micro-batch size (mb > 0:
 * the micro-batch search) and the TP degree per GPU type: tp[] where the
 * step chose it, else the candidate's own (cand_tp). */
static void trace(const pl_state *st, const char *what, int P, int dir, int mb,
		  const int *tp, const pl_cand *c)
{
	char buf[256] = "", head[64];
	int k = 0;

	if (!st->o->verbose)
		return;
	if (tp)
		for (int t = 0; t < st->x.ntypes && k < 200; t++)
			k += snprintf(buf + k, sizeof(buf) - (size_t)k, "%s%d",
				      t ? "," : "", tp[t]);
	else
		cand_tp(st, c, buf, sizeof(buf));
	if (mb > 0)
		snprintf(head, sizeof(head), "mb=%d", mb);
	else if (dir >= 0)
		snprintf(head, sizeof(head), "dir=%d", dir);
	else
		head[0] = '\0';
	if (c->score >= PL_INFEASIBLE)
		hexi_log(HEXI_LOG_INFO,
			 "search: %-8s P=%-4d %s%stp=[%s] no plan: %s", what, P,
			 head, *head ? " " : "", buf,
			 c->why.rc != HEXI_OK ? c->why.msg : "?");
	else
		hexi_log(HEXI_LOG_INFO,
			 "search: %-8s P=%-4d %s%stp=[%s] iter %.4f s "
			 "MFU %.2f%%",
			 what, P, head, *head ? " " : "", buf, c->score,
			 100.0 * c->ev.mfu);
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
	trace(st, "phase2", P, dir, 0, tp, &c);
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
			for (int i = 0; i < n && !pl_past_deadline(st); i++) {
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
		trace(st, "refine", best->np, dir, 0, NULL, &c);
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

/* Each pipeline's own micro-batch size on cand's stages and batches: the
 * divisor of its batch up to the bound that makes that pipeline fastest
 * (its time depends on its own size only), where its stages still fit. */
static void per_pipeline_mb(pl_state *st, pl_cand *c)
{
	/* past the deadline the remaining pipelines keep their sizes: each
	 * size is a whole evaluation (0.1-1 s on 16k GPUs) */
	for (int p = 0; p < c->np && !pl_past_deadline(st); p++) {
		hexi_pipeline *pl = &c->pp[p];
		int B = pl->batch, best_m = pl->micro_batches;
		double best_t = -1;
		for (int b = 1; b <= B && (st->mb_max == 0 || b <= st->mb_max);
		     b++) {
			sched_eval ev;
			if (B % b)
				continue;
			pl->micro_batches = B / b;
			st->evals++;
			if (sched_evaluate(&st->x, c->pp, c->np, &ev, NULL) !=
				HEXI_OK ||
			    !ev.fits)
				continue;
			if (best_t < 0 || pl->time_s < best_t * (1 - 1e-12)) {
				best_t = pl->time_s;
				best_m = pl->micro_batches;
			}
		}
		pl->micro_batches = best_m;
	}
	st->evals++;
	if (sched_evaluate(&st->x, c->pp, c->np, &c->ev, NULL) == HEXI_OK)
		c->score = c->ev.fits ? c->ev.iter_s : c->score;
}

/* Copy of cand's pipelines (stages and devices too), or -1. */
static int cand_copy(const pl_cand *c, pl_cand *out)
{
	memset(out, 0, sizeof(*out));
	out->score = c->score;
	out->ev = c->ev;
	out->pp = calloc((size_t)c->np, sizeof(hexi_pipeline));
	if (!out->pp)
		return -1;
	out->np = c->np;
	for (int p = 0; p < c->np; p++) {
		out->pp[p] = c->pp[p];
		out->pp[p].stages =
		    calloc((size_t)c->pp[p].nstages, sizeof(hexi_stage));
		if (!out->pp[p].stages) {
			out->pp[p].nstages = 0;
			return -1;
		}
		for (int s = 0; s < c->pp[p].nstages; s++) {
			hexi_stage *d = &out->pp[p].stages[s];
			*d = c->pp[p].stages[s];
			d->devices = calloc((size_t)d->tp, sizeof(hexi_device));
			if (!d->devices)
				return -1;
			memcpy(d->devices, c->pp[p].stages[s].devices,
			       sizeof(hexi_device) * (size_t)d->tp);
		}
	}
	return 0;
}

/*
 * Micro-batch sizes up to the bound st->mb_max (0: any), from the best
 * plan found at micro-batch 1: (a) every uniform size b dividing the
 * global batch, phase 2 redone on the plan's groups; (b) on the plan
 * itself, each pipeline's own best size.  The better of the two wins.
 * Both search a superset when the bound grows and start from the same
 * micro-batch-1 plan, so a larger bound is never worse.
 */
static void search_mb_bounded(pl_state *st, pl_cand *best)
{
	int n = st->x.ndev, *part = calloc((size_t)n * 2, sizeof(int));
	int G = st->M * st->mb, mb_best = st->mb, uni_mb = st->mb;
	pl_cand own = {0}, uni = {0};

	own.score = uni.score = DBL_MAX;
	if (!part || !best->pp || best->score >= PL_INFEASIBLE)
		goto out;
	cand_groups(st, best, part, part + n);
	if (cand_copy(best, &own) == 0)
		per_pipeline_mb(st, &own);
	for (int mb = st->mb + 1;
	     mb <= G && (st->mb_max == 0 || mb <= st->mb_max); mb++) {
		pl_cand c = {0};
		if (G % mb || G / mb < best->np)
			continue;
		if (pl_past_deadline(st))
			break;
		st->mb = mb;
		st->M = G / mb;
		if (pl_phase2_groups(st, part, best->np, part + n, &c) != 0) {
			pl_cand_free(&c);
			continue;
		}
		trace(st, "ubatch", best->np, -1, mb, NULL, &c);
		if (pl_cand_take(&uni, &c))
			uni_mb = mb;
	}
	if (uni.pp && pl_cand_take(best, &uni))
		mb_best = uni_mb;
	if (own.pp && own.score < best->score * (1 - 1e-12)) {
		pl_cand_free(best);
		*best = own;
		memset(&own, 0, sizeof(own));
		mb_best = 1; /* the micro-batch-1 plan, sizes per pipeline */
	}
out:
	pl_cand_free(&own);
	pl_cand_free(&uni);
	st->mb = mb_best;
	st->M = G / mb_best;
	free(part);
}

/* Larger micro-batches (2b, 4b, ...) for the best plan's groups: fewer,
 * longer micro-batches trade bubble and memory for less per-message
 * latency.  Keeps the best; st->mb/st->M end up matching it.  Without
 * --micro-batch-exact, the bounded search above instead. */
void pl_search_mb(pl_state *st, pl_cand *best)
{
	if (!st->o->micro_batch_exact) {
		search_mb_bounded(st, best);
		return;
	}
	int n = st->x.ndev, *part = calloc((size_t)n * 2, sizeof(int));
	int G = st->M * st->mb, mb_best = st->mb;

	if (!part || !best->pp || best->score >= PL_INFEASIBLE)
		goto out;
	cand_groups(st, best, part, part + n);
	for (int mb = st->mb * 2;
	     mb <= G && G % mb == 0 && !pl_past_deadline(st); mb *= 2) {
		pl_cand c = {0};
		st->mb = mb;
		st->M = G / mb;
		if (st->M < best->np)
			break;
		if (pl_phase2_groups(st, part, best->np, part + n, &c) != 0) {
			pl_cand_free(&c);
			break;
		}
		trace(st, "ubatch", best->np, -1, mb, NULL, &c);
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
					trace(st, "move", best->np, -1, 0, NULL,
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

/* The pipeline counts tried: every one up to 8, then steps of a quarter,
 * and always max_p itself (a step past it lands on it). */
static int next_p(int P, int max_p)
{
	int q = P < 8 ? P + 1 : P + P / 4;

	return P < max_p && q > max_p ? max_p : q;
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
	for (int P = min_pipelines(st); P <= st->max_p;
	     P = next_p(P, st->max_p)) {
		double before = best->score;
		for (int dir = 0; dir < (P > 1 ? 2 : 1); dir++) {
			pl_cand b = {0};
			b.score = DBL_MAX;
			if (dir > 0 && pl_past_deadline(st))
				break; /* each direction: METIS and phase 2 */
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
	if (min_pipelines(st) > st->max_p)
		pl_why_set(
		    &st->why, HEXI_ERR_BATCH,
		    "global batch %d (%d micro-batches of %d) cannot "
		    "feed the %d pipelines that %d GPUs need (a pipeline "
		    "holds at most %d stages of one node's GPUs)",
		    st->M * st->mb, st->M, st->mb, min_pipelines(st),
		    st->x.ndev, st->x.m.layers);
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
	     P = next_p(P, st->max_p))
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
