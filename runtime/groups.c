/*
 * groups.c - process groups from a plan: world, tensor-parallel group of
 * each stage, pipeline neighbours; and the plan of a single process.
 *
 * Creation order: every rank walks the plan in the same order (world, then
 * pipelines and their stages in plan order) and creates the groups it is a
 * member of, so backends may create groups collectively among members.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "rt_dist.h"

static hexi_rc stage_ranks(const hexi_stage *st, int **out)
{
	int *r = malloc(sizeof(*r) * (size_t)st->tp);

	if (r == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "stage of %d ranks", st->tp);
	for (int i = 0; i < st->tp; i++)
		r[i] = st->devices[i].rank;
	*out = r;
	return HEXI_OK;
}

hexi_rc rt_groups_build(hexi_rt *rt)
{
	const hexi_plan *p = rt->plan;
	const hexi_pipeline *mine = &p->pipelines[rt->role.pipeline];
	rt_groups *g = &rt->groups;
	int *all = NULL;
	hexi_rc rc = HEXI_ERR_NOMEM;

	all = malloc(sizeof(*all) * (size_t)rt->world_size);
	if (all == NULL)
		return hexi_error(rc, "rank %d: world group", rt->rank);
	for (int i = 0; i < rt->world_size; i++)
		all[i] = i;
	rc = rt_comm_group_get(rt->comm, all, rt->world_size, &g->world);
	if (rc != HEXI_OK)
		goto out;
	for (int pi = 0; pi < p->npipelines; pi++) {
		for (int si = 0; si < p->pipelines[pi].nstages; si++) {
			int *r = NULL;
			rt_group *tg = NULL;
			rc = stage_ranks(&p->pipelines[pi].stages[si], &r);
			if (rc != HEXI_OK)
				goto out;
			rc = rt_comm_group_get(
			    rt->comm, r, p->pipelines[pi].stages[si].tp, &tg);
			free(r);
			if (rc != HEXI_OK)
				goto out;
			if (pi == rt->role.pipeline && si == rt->role.stage)
				g->tp = tg;
		}
	}
	if (g->tp == NULL) {
		rc = hexi_error(HEXI_ERR_INTERNAL,
				"rank %d: not a member of its own stage group",
				rt->rank);
		goto out;
	}
	g->leader = mine->stages[rt->role.stage].devices[0].rank;
	g->prev_leader = rt->role.stage > 0
			     ? mine->stages[rt->role.stage - 1].devices[0].rank
			     : -1;
	g->next_leader = rt->role.stage + 1 < mine->nstages
			     ? mine->stages[rt->role.stage + 1].devices[0].rank
			     : -1;
	rc = HEXI_OK;
out:
	free(all);
	return rc;
}

/* One node with one "cpu" device (catalog type of the CPU path). */
static hexi_rc single_cluster(hexi_cluster **out)
{
	hexi_rc rc = hexi_cluster_create(1, NULL, out);

	if (rc == HEXI_OK)
		rc = hexi_cluster_set_node(*out, 0, "localhost", "cpu", 1, NULL,
					   0);
	if (rc == HEXI_OK)
		rc = hexi_cluster_validate(*out);
	return rc;
}

hexi_rc rt_plan_single(const hexi_model *m, int global_batch, int micro_batches,
		       hexi_plan **out)
{
	hexi_cluster *c = NULL;
	hexi_plan *p = NULL;
	hexi_pipeline *pp;
	hexi_train tr;
	hexi_rc rc;

	*out = NULL;
	if (global_batch < 1 || micro_batches < 1 ||
	    global_batch % micro_batches != 0)
		return hexi_error(HEXI_ERR_USAGE,
				  "--batch %d is not a multiple of "
				  "--micro-batches %d",
				  global_batch, micro_batches);
	hexi_train_defaults(&tr);
	tr.global_batch = global_batch;
	tr.micro_batch = global_batch / micro_batches;
	if ((rc = single_cluster(&c)) != HEXI_OK ||
	    (rc = hexi_plan_new(c, m, &tr, 1, &p)) != HEXI_OK)
		goto out;
	hexi_strlcpy(p->strategy, "single", HEXI_NAME_MAX);
	p->world_size = 1;
	pp = &p->pipelines[0];
	pp->nstages = 1;
	pp->batch = global_batch;
	pp->micro_batches = micro_batches;
	pp->stages = calloc(1, sizeof(hexi_stage));
	rc = HEXI_ERR_NOMEM;
	if (pp->stages == NULL)
		goto out;
	pp->stages[0].layer_end = m->layers;
	pp->stages[0].tp = 1;
	pp->stages[0].devices = calloc(1, sizeof(hexi_device));
	if (pp->stages[0].devices == NULL)
		goto out;
	if ((rc = hexi_plan_hash(p)) != HEXI_OK ||
	    (rc = hexi_plan_validate(p)) != HEXI_OK)
		goto out;
	*out = p;
	p = NULL;
out:
	if (rc == HEXI_ERR_NOMEM)
		hexi_error(rc, "single-process plan");
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
	return rc;
}
