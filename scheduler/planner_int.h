/*
 * planner_int.h - internals of the planner (planner*.c): search state,
 * candidates, phase 1 (GPU graph partitioning), phase 2 (groups, stage
 * order, layer split, batch split).
 */
#ifndef HEXI_PLANNER_INT_H
#define HEXI_PLANNER_INT_H

#include "sched_int.h"

#define PL_INFEASIBLE 1e12 /* score base of a plan that does not fit */

/* Why a candidate (or the whole search) has no plan: the reason class is
 * the hexi_rc the planner fails with (HEXI_ERR_NOFIT memory,
 * HEXI_ERR_BATCH batch, HEXI_ERR_SHAPE TP degree / KV heads / layers), the
 * text names the constraint and the object. */
typedef struct pl_why {
	hexi_rc rc; /* HEXI_OK: none recorded */
	char msg[224];
} pl_why;

void pl_why_set(pl_why *w, hexi_rc rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

typedef struct pl_state {
	sched_ctx x;
	const hexi_plan_opts *o;
	int M;		 /* micro-batches in the global batch */
	int mb;		 /* micro-batch size, samples */
	int mb_max;	 /* largest micro-batch allowed; 0 none */
	int np_cur;	 /* pipelines of the candidate phase 2 builds */
	int kv;		 /* largest TP degree allowed (KV heads) */
	int max_p;	 /* most pipelines tried */
	double t0;	 /* hexi_now_s() when hexi_plan_create began */
	double budget_s; /* safety stop: t0 + budget_s is the deadline of
			    the whole planning, every search on any subset
			    and memory setting and the uniform baseline */
	long max_evals;	 /* the work bound: candidates evaluated */
	int stop;	 /* HEXI_SEARCH_* why the search stopped */
	pl_why why;	 /* a constraint met outside any candidate */
	uint64_t rng;	 /* splitmix64 state (from --seed) */
	long evals;	 /* candidates evaluated */
	int *type_max;	 /* [ntypes] most GPUs of that type on one node */
	int all_orders;	 /* phase 2 tries every node order (exhaustive) */
} pl_state;

/* A complete candidate plan: pipelines (owned) and its evaluation. */
typedef struct pl_cand {
	int np;
	hexi_pipeline *pp; /* [np], stages and devices heap-allocated */
	sched_eval ev;
	double score; /* iteration time, or PL_INFEASIBLE + penalty */
	pl_why why;   /* when score >= PL_INFEASIBLE: the constraint */
} pl_cand;

void pl_cand_free(pl_cand *c);
/* Keep the better of *best and *c (ownership moves; *c is emptied). */
int pl_cand_take(pl_cand *best, pl_cand *c);

uint64_t pl_rand(pl_state *st);
/* 1 once the search must stop: the work bound (deterministic) or, as a
 * safety stop only, the wall-clock budget; records which in st->stop. */
int pl_out_of_time(pl_state *st);
/* 1 once the planning's deadline (t0 + budget_s) has passed; records
 * HEXI_SEARCH_TIME.  Time only: for loops that the work bound does not
 * cut (the uniform baseline, micro-batch sizes, starting another search),
 * so that a work-bound search plans the same as before on every machine. */
int pl_past_deadline(pl_state *st);

/* Phase 1: part[ndev] <- pipeline id of every GPU, P parts, all used.
 * dir 0 keeps fast links inside pipelines, dir 1 puts them between. */
hexi_rc pl_phase1_metis(pl_state *st, int P, int dir, int *part);
void pl_phase1_random(pl_state *st, int P, int *part);
/* Phase-1 refinement: re-partition with the stage (TP) groups of cand as
 * atomic vertices; fills grp[ndev] (group id) and part[ndev]. */
hexi_rc pl_phase1_groups(pl_state *st, const pl_cand *cand, int dir, int *part,
			 int *grp);

/* Phase 2 from a partition and a TP degree per GPU type. */
int pl_phase2(pl_state *st, const int *part, int P, const int *tp_of_type,
	      pl_cand *out);
/* Phase 2 where the TP groups are given: grp[ndev] group id (GPUs of one
 * group share a node), part[ndev] pipeline id. */
int pl_phase2_groups(pl_state *st, const int *part, int P, const int *grp,
		     pl_cand *out);
/* c->why for an evaluated candidate that does not fit: its stage furthest
 * over its GPUs' memory. */
void pl_why_fit(pl_state *st, pl_cand *c);
/* Batch split over the pipelines of cand, evaluation and score. */
int pl_finish(pl_state *st, pl_cand *c);

/* Strategies: each leaves its best plan in *best (score < PL_INFEASIBLE
 * when one fits). */
hexi_rc pl_search_hexiscale(pl_state *st, pl_cand *best);
hexi_rc pl_search_random(pl_state *st, pl_cand *best);
hexi_rc pl_search_megatron(pl_state *st, pl_cand *best);
hexi_rc pl_search_exhaustive(pl_state *st, pl_cand *best);
/* Try micro-batch sizes 2b, 4b, ... on the best plan's groups. */
void pl_search_mb(pl_state *st, pl_cand *best);

#endif /* HEXI_PLANNER_INT_H */
