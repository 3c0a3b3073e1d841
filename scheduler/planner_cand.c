/*
 * planner_cand.c - what every search loop of the planner shares: the
 * seeded random numbers, the time check, and keeping the better of two
 * candidate plans.  Below the phase-2 code and the search loops, above
 * nothing but the simulator.
 */
#include "config.h"

#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner_int.h"

uint64_t pl_rand(pl_state *st)
{
	uint64_t z = (st->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int pl_out_of_time(pl_state *st)
{
	if (st->stop != HEXI_SEARCH_DONE)
		return 1;
	if (st->evals >= st->max_evals)
		st->stop = HEXI_SEARCH_WORK;
	else
		pl_past_deadline(st);
	return st->stop != HEXI_SEARCH_DONE;
}

int pl_past_deadline(pl_state *st)
{
	if (hexi_now_s() - st->t0 <= st->budget_s)
		return 0;
	st->stop = HEXI_SEARCH_TIME;
	return 1;
}

void pl_cand_free(pl_cand *c)
{
	if (c->pp)
		for (int p = 0; p < c->np; p++) {
			for (int s = 0; s < c->pp[p].nstages; s++)
				free(c->pp[p].stages[s].devices);
			free(c->pp[p].stages);
		}
	free(c->pp);
	memset(c, 0, sizeof(*c));
	c->score = DBL_MAX;
}

void pl_why_set(pl_why *w, hexi_rc rc, const char *fmt, ...)
{
	va_list ap;

	w->rc = rc;
	va_start(ap, fmt);
	vsnprintf(w->msg, sizeof(w->msg), fmt, ap);
	va_end(ap);
}

int pl_cand_take(pl_cand *best, pl_cand *c)
{
	if (c->pp && (!best->pp || c->score < best->score * (1 - 1e-12))) {
		pl_cand_free(best);
		*best = *c;
		memset(c, 0, sizeof(*c));
		c->score = DBL_MAX;
		return 1;
	}
	pl_cand_free(c);
	return 0;
}
