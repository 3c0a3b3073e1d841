/*
 * mkplan.c - writes hand-made plans for the 8-GPU test cluster (n1 3xa800,
 * n2 3xrtx4090, n3 2xrtx3090), built with the scheduler library's plan
 * API, so the plugin's user-plan path and hand-off can be tested without
 * the planner.   mkplan good|types|count|stale|truncated OUT.json
 *   good:    2 pipelines, TP 3/2/2/1, tiny-8l, global batch 16
 *   types:   like good but n2 is declared rtx3090 (wrong types)
 *   count:   n1 has 2 GPUs (wrong count)
 *   stale:   good with a changed layer split but the old hash
 *   truncated: the first half of good
 */
#include "config.h"

#include "hexi_sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct st_desc {
	int pipe, node, ngpu, gpu0, l0, l1;
} st_desc;

static int fill(hexi_plan *p, const st_desc *d, int nd)
{
	int rank = 0;

	for (int i = 0; i < nd; i++) {
		hexi_pipeline *pp = &p->pipelines[d[i].pipe];
		hexi_stage *st;

		pp->stages = realloc(pp->stages,
				     (size_t)(pp->nstages + 1) * sizeof(*st));
		if (pp->stages == NULL)
			return -1;
		st = &pp->stages[pp->nstages++];
		memset(st, 0, sizeof(*st));
		st->layer_begin = d[i].l0;
		st->layer_end = d[i].l1;
		st->tp = d[i].ngpu;
		st->devices = calloc((size_t)st->tp, sizeof(*st->devices));
		if (st->devices == NULL)
			return -1;
		for (int g = 0; g < st->tp; g++)
			st->devices[g] =
			    (hexi_device){d[i].node, d[i].gpu0 + g, rank++};
	}
	p->world_size = rank;
	return 0;
}

int main(int argc, char **argv)
{
	const char *types[3] = {"a800", "rtx4090", "rtx3090"};
	int counts[3] = {3, 3, 2};
	st_desc good[] = {{0, 0, 3, 0, 0, 5},
			  {0, 2, 2, 0, 5, 8},
			  {1, 1, 2, 0, 0, 4},
			  {1, 1, 1, 2, 4, 8}};
	hexi_cluster *c = NULL;
	hexi_model m;
	hexi_train t;
	hexi_plan *p = NULL;
	char *json = NULL;
	hexi_rc rc;
	const char *v;

	if (argc != 3) {
		fprintf(stderr,
			"usage: mkplan good|types|count|stale|truncated OUT\n");
		return 2;
	}
	v = argv[1];
	if (!strcmp(v, "types"))
		types[1] = "rtx3090";
	if (!strcmp(v, "count")) {
		counts[0] = 2;
		good[0].ngpu = 2;
	}
	rc = hexi_cluster_create(3, NULL, &c);
	for (int i = 0; rc == HEXI_OK && i < 3; i++) {
		char name[8];

		snprintf(name, sizeof(name), "n%d", i + 1);
		rc = hexi_cluster_set_node(c, i, name, types[i], counts[i],
					   NULL, 0);
	}
	if (rc == HEXI_OK) {
		c->inter_bw_gbps = 0.7;
		rc = hexi_model_builtin("tiny-8l", &m);
	}
	hexi_train_defaults(&t);
	t.global_batch = 16;
	t.micro_batch = 2;
	if (rc == HEXI_OK)
		rc = hexi_plan_new(c, &m, &t, 2, &p);
	if (rc == HEXI_OK && fill(p, good, 4) != 0)
		rc = HEXI_ERR_NOMEM;
	if (rc == HEXI_OK) {
		p->pipelines[0].batch = 10;
		p->pipelines[0].micro_batches = 5;
		p->pipelines[1].batch = 6;
		p->pipelines[1].micro_batches = 3;
		snprintf(p->strategy, sizeof(p->strategy), "hand-made");
		rc = hexi_plan_hash(p);
	}
	if (rc == HEXI_OK)
		rc = hexi_plan_validate(p);
	if (rc == HEXI_OK)
		rc = hexi_plan_to_json(p, &json);
	if (rc == HEXI_OK && !strcmp(v, "stale")) {
		/* pipeline 1 splits at layer 4: move it to 3, keep the hash */
		char *a = strstr(json, "\"layer_end\": 4,");
		char *b = strstr(json, "\"layer_begin\": 4,");

		if (a == NULL || b == NULL)
			rc = HEXI_ERR_INTERNAL;
		else
			a[13] = b[15] = '3';
	}
	if (rc == HEXI_OK && !strcmp(v, "truncated"))
		json[strlen(json) / 2] = '\0';
	if (rc == HEXI_OK)
		rc = hexi_write_file_atomic(argv[2], json, strlen(json), 0644);
	if (rc != HEXI_OK)
		fprintf(stderr, "mkplan: %s\n", hexi_errmsg(rc));
	free(json);
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
	return rc == HEXI_OK ? 0 : 1;
}
