/*
 * mkplan - write a hand-made asymmetric plan (test helper).
 *
 *   mkplan MODEL SPEC OUT.json [recompute=0|1] [zero=N] [reserve=GIB]
 * [gpu=TYPE]
 *
 * SPEC lists pipelines separated by ';', each BATCH/MICROBATCHES:STAGES with
 * STAGES a comma list of TPxLAYERS, e.g. "8/4:2x3,1x5;4/1:4x8" (pipeline 0:
 * 8 samples in 4 micro-batches over a TP-2 stage of 3 layers and a TP-1
 * stage of 5; pipeline 1: 4 samples in one micro-batch, one TP-4 stage).
 * Ranks are numbered in order; every stage gets its own node of a800 GPUs.
 * A stage written TPxLAYERS@N instead goes to node N of the 8-GPU Slurm test
 * cluster (tests/slurm/cluster.sh: n1 3 x a800, n2 3 x rtx4090, n3 2 x
 * rtx3090), its GPUs taken in order; then every stage must name a node.
 * BATCH/MICROBATCHES+ or - sets that pipeline's own recompute (on, off);
 * recompute= sets train.recompute (default 1), zero= train.zero, reserve=
 * train.reserve_gib (default 2), gpu= the
 * GPU type of the generated nodes (default a800; "cpu" for host runs);
 * idle=1 lists every GPU no stage uses in the plan's "idle" array, ranks
 * after the training ranks (hexiscale-plan(5)).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_sched.h"

#define MAXP 16
#define MAXS 64

typedef struct spec {
	int np;
	int batch[MAXP], mb[MAXP], ns[MAXP];
	int tp[MAXP][MAXS], layers[MAXP][MAXS], node[MAXP][MAXS];
	int rc[MAXP];	  /* hexi_recompute_mode of each pipeline */
	int test_cluster; /* 1: stages placed with @N */
	const char *gpu;  /* type of generated nodes */
	int idle;	  /* 1: unused GPUs go to the plan's idle list */
} spec;

static int parse_spec(const char *s, spec *sp)
{
	memset(sp, 0, sizeof(*sp));
	while (*s) {
		int p = sp->np, n = 0;
		if (p == MAXP ||
		    sscanf(s, "%d/%d%n", &sp->batch[p], &sp->mb[p], &n) != 2)
			return -1;
		s += n;
		if (*s == '+' || *s == '-')
			sp->rc[p] = *s++ == '+' ? HEXI_RECOMPUTE_ON
						: HEXI_RECOMPUTE_OFF;
		if (*s++ != ':')
			return -1;
		for (;;) {
			int k = sp->ns[p];
			if (k == MAXS || sscanf(s, "%dx%d%n", &sp->tp[p][k],
						&sp->layers[p][k], &n) != 2)
				return -1;
			sp->ns[p]++;
			s += n;
			sp->node[p][k] = -1;
			if (*s == '@') {
				if (sscanf(s, "@%d%n", &sp->node[p][k], &n) !=
					1 ||
				    sp->node[p][k] < 0 || sp->node[p][k] > 2)
					return -1;
				sp->test_cluster = 1;
				s += n;
			}
			if (*s != ',')
				break;
			s++;
		}
		sp->np++;
		if (*s == ';')
			s++;
		else if (*s)
			return -1;
	}
	return sp->np > 0 ? 0 : -1;
}

static hexi_rc test_cluster(hexi_cluster **out)
{
	static const char *const type[3] = {"a800", "rtx4090", "rtx3090"};
	static const int count[3] = {3, 3, 2};
	hexi_rc rc = hexi_cluster_create(3, NULL, out);

	for (int i = 0; rc == HEXI_OK && i < 3; i++) {
		char name[8];
		snprintf(name, sizeof(name), "n%d", i + 1);
		rc = hexi_cluster_set_node(*out, i, name, type[i], count[i],
					   NULL, 0);
	}
	if (rc == HEXI_OK) {
		(*out)->inter_bw_gbps = 0.7;
		rc = hexi_cluster_validate(*out);
	}
	return rc;
}

static hexi_rc make_cluster(const spec *sp, hexi_cluster **out)
{
	int nn = 0, k = 0;
	hexi_rc rc;

	if (sp->test_cluster)
		return test_cluster(out);
	for (int p = 0; p < sp->np; p++)
		nn += sp->ns[p];
	rc = hexi_cluster_create(nn, NULL, out);
	for (int p = 0; rc == HEXI_OK && p < sp->np; p++)
		for (int s = 0; rc == HEXI_OK && s < sp->ns[p]; s++, k++) {
			char name[32];
			snprintf(name, sizeof(name), "n%d", k + 1);
			rc = hexi_cluster_set_node(*out, k, name, sp->gpu,
						   sp->tp[p][s], NULL, 0);
		}
	if (rc == HEXI_OK) {
		(*out)->inter_bw_gbps = 10;
		rc = hexi_cluster_validate(*out);
	}
	return rc;
}

static hexi_rc fill(hexi_plan *pl, const spec *sp)
{
	int rank = 0, node = 0, used[3] = {0, 0, 0};

	for (int p = 0; p < sp->np; p++) {
		hexi_pipeline *pp = &pl->pipelines[p];
		int l = 0;
		pp->nstages = sp->ns[p];
		pp->batch = sp->batch[p];
		pp->micro_batches = sp->mb[p];
		pp->recompute = sp->rc[p];
		pp->stages = calloc((size_t)pp->nstages, sizeof(hexi_stage));
		if (pp->stages == NULL)
			return HEXI_ERR_NOMEM;
		for (int s = 0; s < pp->nstages; s++, node++) {
			hexi_stage *st = &pp->stages[s];
			st->layer_begin = l;
			l += sp->layers[p][s];
			st->layer_end = l;
			st->tp = sp->tp[p][s];
			st->devices =
			    calloc((size_t)st->tp, sizeof(hexi_device));
			if (st->devices == NULL)
				return HEXI_ERR_NOMEM;
			for (int d = 0; d < st->tp; d++) {
				int nd =
				    sp->test_cluster ? sp->node[p][s] : node;
				st->devices[d].node = nd;
				st->devices[d].gpu =
				    sp->test_cluster ? used[nd]++ : d;
				st->devices[d].rank = rank++;
			}
		}
	}
	pl->world_size = rank;
	return HEXI_OK;
}

/* Every GPU of the cluster in no stage, in cluster order, as an idle GPU
 * with the next rank. */
static hexi_rc add_idle(hexi_plan *pl)
{
	const hexi_cluster *c = pl->cluster;
	int total = hexi_cluster_total_gpus(c);

	pl->idle = calloc((size_t)total, sizeof(hexi_device));
	if (pl->idle == NULL)
		return HEXI_ERR_NOMEM;
	for (int n = 0; n < c->nnodes; n++)
		for (int g = 0; g < c->nodes[n].ngpus; g++) {
			int gpu = c->nodes[n].gpu_index[g], used = 0;

			for (int p = 0; p < pl->npipelines; p++)
				for (int s = 0; s < pl->pipelines[p].nstages;
				     s++) {
					const hexi_stage *st =
					    &pl->pipelines[p].stages[s];
					for (int d = 0; d < st->tp; d++)
						used |=
						    st->devices[d].node == n &&
						    st->devices[d].gpu == gpu;
				}
			if (!used) {
				pl->idle[pl->nidle] = (hexi_device){
				    n, gpu, pl->world_size + pl->nidle};
				pl->nidle++;
			}
		}
	return HEXI_OK;
}

/* KEY=VALUE arguments after OUT.json. */
static int parse_keys(int n, char **kv, hexi_train *tr, spec *sp)
{
	sp->gpu = "a800";
	for (int i = 0; i < n; i++) {
		int v;
		if (sscanf(kv[i], "recompute=%d", &v) == 1 && v >= 0 && v <= 1)
			tr->recompute = v;
		else if (sscanf(kv[i], "zero=%d", &v) == 1 && v >= 0)
			tr->zero = v;
		else if (sscanf(kv[i], "reserve=%lf", &tr->reserve_gib) == 1 &&
			 tr->reserve_gib >= 0)
			continue;
		else if (strncmp(kv[i], "gpu=", 4) == 0 && kv[i][4])
			sp->gpu = kv[i] + 4;
		else if (sscanf(kv[i], "idle=%d", &v) == 1 && v >= 0 && v <= 1)
			sp->idle = v;
		else
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	hexi_cluster *c = NULL;
	hexi_plan *pl = NULL;
	hexi_model m;
	hexi_train tr;
	spec sp;
	char *json = NULL;
	hexi_rc rc;

	hexi_train_defaults(&tr);
	if (argc < 4 || parse_spec(argv[2], &sp) != 0 ||
	    parse_keys(argc - 4, argv + 4, &tr, &sp) != 0) {
		fprintf(stderr,
			"usage: mkplan MODEL SPEC OUT.json "
			"[recompute=0|1] [zero=N] [reserve=GIB] [gpu=TYPE] "
			"[idle=0|1]\n");
		return 2;
	}
	rc = hexi_model_load(argv[1], &m);
	if (rc == HEXI_OK)
		rc = make_cluster(&sp, &c);
	tr.global_batch = 0;
	tr.micro_batch = 1 << 30;
	for (int p = 0; p < sp.np; p++) {
		tr.global_batch += sp.batch[p];
		if (sp.batch[p] / sp.mb[p] < tr.micro_batch)
			tr.micro_batch = sp.batch[p] / sp.mb[p];
	}
	if (rc == HEXI_OK)
		rc = hexi_plan_new(c, &m, &tr, sp.np, &pl);
	if (rc == HEXI_OK)
		rc = fill(pl, &sp);
	if (rc == HEXI_OK && sp.idle)
		rc = add_idle(pl);
	if (rc == HEXI_OK)
		rc = hexi_plan_hash(pl);
	if (rc == HEXI_OK)
		rc = hexi_plan_validate(pl);
	if (rc == HEXI_OK)
		rc = hexi_plan_to_json(pl, &json);
	if (rc == HEXI_OK)
		rc = hexi_write_file_atomic(argv[3], json, strlen(json), 0644);
	if (rc != HEXI_OK)
		fprintf(stderr, "mkplan: %s\n", hexi_errmsg(rc));
	free(json);
	hexi_plan_destroy(pl);
	hexi_cluster_destroy(c);
	return (int)rc;
}
