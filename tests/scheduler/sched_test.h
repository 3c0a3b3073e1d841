/*
 * sched_test.h - helpers for the scheduler's unit tests (header only):
 * build small clusters and plans in code.
 */
#ifndef HEXI_SCHED_TEST_H
#define HEXI_SCHED_TEST_H

#include <stdlib.h>
#include <string.h>

#include "hexi_sched.h"
#include "tap.h"

/* One stage: node index, TP degree, first GPU slot on the node, layers. */
typedef struct tstage {
	int node, tp, slot0, lb, le;
} tstage;

/* One pipeline: batch, micro-batches, stages (terminated by tp == 0). */
typedef struct tpipe {
	int batch, mb;
	tstage st[16];
} tpipe;

/* Cluster from JSON text; bails out on error (a broken fixture). */
static __attribute__((unused)) hexi_cluster *tcluster(const char *json)
{
	hexi_cluster *c = NULL;

	if (hexi_cluster_parse(json, strlen(json), NULL, &c) != HEXI_OK) {
		printf("# %s\n", hexi_errmsg(HEXI_ERR_INTERNAL));
		tap_bail("test cluster does not parse");
	}
	return c;
}

/* Plan with ranks numbered in order of appearance.  Not validated. */
static __attribute__((unused)) hexi_plan *
tplan(const hexi_cluster *c, const char *model, int np, const tpipe *pp)
{
	hexi_model m;
	hexi_train t;
	hexi_plan *p = NULL;
	int rank = 0, gb = 0;

	if (hexi_model_builtin(model, &m) != HEXI_OK)
		tap_bail("unknown test model");
	hexi_train_defaults(&t);
	for (int i = 0; i < np; i++)
		gb += pp[i].batch;
	t.global_batch = gb;
	if (hexi_plan_new(c, &m, &t, np, &p) != HEXI_OK)
		tap_bail("hexi_plan_new failed");
	for (int i = 0; i < np; i++) {
		hexi_pipeline *pl = &p->pipelines[i];
		int ns = 0;
		while (ns < 16 && pp[i].st[ns].tp > 0)
			ns++;
		pl->nstages = ns;
		pl->batch = pp[i].batch;
		pl->micro_batches = pp[i].mb;
		pl->stages = calloc((size_t)ns, sizeof(hexi_stage));
		for (int s = 0; s < ns; s++) {
			const tstage *ts = &pp[i].st[s];
			hexi_stage *st = &pl->stages[s];
			st->layer_begin = ts->lb;
			st->layer_end = ts->le;
			st->tp = ts->tp;
			st->devices =
			    calloc((size_t)ts->tp, sizeof(hexi_device));
			for (int d = 0; d < ts->tp; d++) {
				st->devices[d].node = ts->node;
				st->devices[d].gpu =
				    c->nodes[ts->node].gpu_index[ts->slot0 + d];
				st->devices[d].rank = rank++;
			}
		}
	}
	p->world_size = rank;
	snprintf(p->strategy, sizeof(p->strategy), "manual");
	return p;
}

/* Ranks of chunk c as "a,b,c". */
static __attribute__((unused)) const char *tranks(const hexi_chunk *c)
{
	static char buf[512];
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < c->nranks && n + 16 < sizeof(buf); i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%d",
				      i ? "," : "", c->ranks[i]);
	return buf;
}

#endif
