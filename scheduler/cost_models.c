/*
 * cost_models.c - the table of cost models.  A cost model is one file
 * (cost_*.c) that defines a sched_cost_model, plus one row here (and the
 * hexi_cost_kind constant of that row for C callers, hexi_sched.h).  The
 * simulator and the planner reach a model only through this table.
 */
#include "config.h"

#include <string.h>

#include "sched_int.h"

/* Indexed by hexi_cost_kind. */
static const sched_cost_model *const cost_models[] = {
    [HEXI_COST_HEXISCALE] = &sched_cost_hexiscale,
    [HEXI_COST_REFERENCE] = &sched_cost_reference,
};

#define NMODELS ((int)(sizeof(cost_models) / sizeof(cost_models[0])))

const sched_cost_model *sched_cost_get(hexi_cost_kind k)
{
	return (unsigned)k < (unsigned)NMODELS && cost_models[k] != NULL
		   ? cost_models[k]
		   : cost_models[HEXI_COST_HEXISCALE];
}

void sched_stage_cost(const sched_ctx *x, const sched_sdesc *d,
		      sched_scost *out)
{
	memset(out, 0, sizeof(*out));
	sched_cost_get(x->kind)->stage(x, d, out);
}

double sched_stage_mem_b(const sched_scost *k, double n)
{
	double st = n * k->stage_layer_b + k->stage_fixed_b;

	return n * k->mem_layer_b + k->mem_fixed_b +
	       (st < k->stage_cap_b ? st : k->stage_cap_b);
}

/* mem(n) <= cap holds exactly when one of the two linear pieces of the
 * min does: n <= (cap - fixed - stage_fixed) / (layer + stage_layer) or
 * n <= (cap - fixed - stage_cap) / layer; the larger bound is the room. */
double sched_stage_room(const sched_scost *k)
{
	double left = k->cap_b - k->mem_fixed_b;
	double below =
	    (left - k->stage_fixed_b) / (k->mem_layer_b + k->stage_layer_b);
	double above = (left - k->stage_cap_b) / k->mem_layer_b;

	return below > above ? below : above;
}

double sched_pipe_s(const sched_ctx *x, const double *c, int S, int m)
{
	return sched_cost_get(x->kind)->pipe_s(c, S, m);
}

const char *sched_cost_name(hexi_cost_kind k)
{
	return sched_cost_get(k)->name;
}

int sched_cost_parse(const char *s, hexi_cost_kind *k)
{
	for (int i = 0; i < NMODELS; i++)
		if (cost_models[i] != NULL &&
		    strcmp(s, cost_models[i]->name) == 0) {
			*k = (hexi_cost_kind)i;
			return 0;
		}
	return -1;
}

int sched_cost_count(void)
{
	return NMODELS;
}
