/*
 * ckpt_plan.c - hexickpt: plan files and stored plans through the scheduler
 * library (reshard to a plan file, the plan summary of info).  Was
 * reshard_plan.h, a header of function bodies included by hexickpt.c.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ckpt_plan.h"

/* Reshard R into the layout of the plan in PLAN_PATH, written to OUT. */
hexi_rc ckpt_reshard_with_plan(hexi_ckpt_reader *r, const char *plan_path,
			       const char *out, hexi_ckpt_progress_fn bar_fn)
{
	hexi_plan *p = NULL;
	hexi_layout *l = NULL;
	char *json = NULL;
	hexi_ckpt_reshard_target t;
	const hexi_ckpt_meta *m = hexi_ckpt_reader_meta(r);
	hexi_rc rc;

	if ((rc = hexi_plan_load(plan_path, NULL, &p)) != HEXI_OK)
		goto out;
	if (strcmp(p->model.name, m->model) != 0) {
		rc = hexi_error(HEXI_ERR_MISMATCH,
				"%s: a plan for model '%s', the checkpoint is "
				"of model '%s'",
				plan_path, p->model.name, m->model);
		goto out;
	}
	if ((rc = hexi_layout_create(p, &l)) != HEXI_OK ||
	    (rc = hexi_plan_to_json(p, &json)) != HEXI_OK)
		goto out;
	memset(&t, 0, sizeof(t));
	t.layout = l;
	t.world_size = p->world_size;
	t.plan_hash = p->hash;
	t.plan_json = json;
	rc = hexi_ckpt_reshard(r, &t, out, bar_fn, NULL);
out:
	free(json);
	hexi_layout_destroy(l);
	hexi_plan_destroy(p);
	return rc;
}

/* The stored plan, or NULL if none or not a hexiscale plan. */
static hexi_plan *stored_plan(const hexi_ckpt_reader *r)
{
	const char *js = hexi_ckpt_reader_plan_json(r);
	hexi_plan *p = NULL;

	if (js[0] == '\0' ||
	    hexi_plan_parse(js, strlen(js), NULL, &p) != HEXI_OK)
		p = NULL;
	hexi_error_clear();
	return p;
}

json_t *ckpt_plan_summary_json(const hexi_ckpt_reader *r)
{
	hexi_plan *p = stored_plan(r);
	json_t *pl = json_array(), *o;
	int i, s, d;

	for (i = 0; p != NULL && i < p->npipelines; i++) {
		json_t *st = json_array();
		for (s = 0; s < p->pipelines[i].nstages; s++) {
			const hexi_stage *g = &p->pipelines[i].stages[s];
			json_t *ranks = json_array();
			for (d = 0; d < g->tp; d++)
				json_array_append_new(
				    ranks, json_integer(g->devices[d].rank));
			json_array_append_new(
			    st, json_pack("{s:[i,i],s:i,s:o}", "layers",
					  g->layer_begin, g->layer_end, "tp",
					  g->tp, "ranks", ranks));
		}
		json_array_append_new(
		    pl, json_pack("{s:i,s:i,s:o}", "batch",
				  p->pipelines[i].batch, "micro_batches",
				  p->pipelines[i].micro_batches, "stages", st));
	}
	o = json_pack("{s:b,s:s,s:i,s:o}", "parsed", p != NULL, "strategy",
		      p ? p->strategy : "", "world_size", p ? p->world_size : 0,
		      "pipelines", pl);
	hexi_plan_destroy(p);
	return o;
}

void ckpt_plan_summary_text(const hexi_ckpt_reader *r)
{
	hexi_plan *p = stored_plan(r);

	if (p == NULL) {
		printf("plan        %s (not a hexiscale plan: %zu bytes of "
		       "JSON)\n",
		       hexi_ckpt_reader_meta(r)->plan_hash[0]
			   ? hexi_ckpt_reader_meta(r)->plan_hash
			   : "(none)",
		       strlen(hexi_ckpt_reader_plan_json(r)));
		return;
	}
	printf("plan        %s: %d pipelines on %d ranks (%s)\n", p->hash,
	       p->npipelines, p->world_size, p->strategy);
	for (int i = 0; i < p->npipelines; i++) {
		printf("  pipeline %d: batch %d:", i, p->pipelines[i].batch);
		for (int s = 0; s < p->pipelines[i].nstages; s++) {
			const hexi_stage *g = &p->pipelines[i].stages[s];
			printf(" [L%d-%d tp%d rank%s %d", g->layer_begin,
			       g->layer_end - 1, g->tp, g->tp > 1 ? "s" : "",
			       g->devices[0].rank);
			for (int d = 1; d < g->tp; d++)
				printf(",%d", g->devices[d].rank);
			printf("]");
		}
		printf("\n");
	}
	hexi_plan_destroy(p);
}
