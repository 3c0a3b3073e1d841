/*
 * local.c - srun, once per step, after the allocation and the step exist:
 * learn the step's nodes/tasks/GPUs, make (or load and check) the plan,
 * write the plan file, print a summary and hand the roles to slurmstepd.
 * Any error here stops the step before a task is launched.  srun runs as
 * the user, so every file the user names is read, and the plan file
 * written, with the user's own privileges.
 */
#include "config.h"

#include "hx_spank.h"

#include <errno.h>
#include <fcntl.h>
#include <slurm/slurm.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HX_PLAN_FILE_MAX (16u << 20)

typedef struct local_ctx {
	hx_settings set;
	hx_alloc alloc;
	hx_sched lib;
	hexi_catalog *cat;
	hexi_plan *plan;
	int *nodemap; /* [plan nodes] -> step node index */
	hx_handoff ho;
	char plan_path[HX_PATH_MAX];
	char *json;
	char *handoff;
} local_ctx;

/* Copy a library error into our own message (see hx_sched_err). */
static hexi_rc from_lib(local_ctx *c, hexi_rc rc, const char *what)
{
	return hx_sched_err(&c->lib, rc, what);
}

static hexi_rc load_catalog(local_ctx *c)
{
	return hx_sched_catalog(&c->lib, &c->cat);
}

/* Canonical catalog name of a node's GRES type. */
static hexi_rc node_type(local_ctx *c, const hx_alloc_node *n,
			 const hexi_gpu_type **out)
{
	if (n->gres.type[0] == '\0')
		return hexi_error(HEXI_ERR_NOTFOUND,
				  "node %s: its GPUs have no type (gres.conf "
				  "Type=), so no catalog entry can be chosen",
				  n->name);
	*out = c->lib.hexi_catalog_find(c->cat, n->gres.type);
	if (*out == NULL)
		return hexi_error(HEXI_ERR_NOTFOUND,
				  "node %s: GPU type '%s' is not in the GPU "
				  "catalog (add it with catalog= in "
				  "plugstack.conf, see hexiscale(8))",
				  n->name, n->gres.type);
	return HEXI_OK;
}

/* Inter-node links: plugstack scalars, or a topology file (a cluster
 * description whose per-pair bandwidths are matched by node name). */
static hexi_rc apply_topology(local_ctx *c, hexi_cluster *cl)
{
	hexi_cluster *topo = NULL;
	hexi_rc rc;

	cl->inter_bw_gbps = hx_g_conf.inter_bw_gbps;
	cl->inter_lat_s = hx_g_conf.inter_lat_s;
	if (hx_g_conf.topology[0] == '\0')
		return HEXI_OK;
	rc = from_lib(
	    c, c->lib.hexi_cluster_load(hx_g_conf.topology, c->cat, &topo),
	    "topology");
	if (rc != HEXI_OK)
		return rc;
	cl->inter_bw_gbps = topo->inter_bw_gbps;
	cl->inter_lat_s = topo->inter_lat_s;
	if (topo->pair_bw_gbps != NULL) {
		cl->pair_bw_gbps =
		    calloc((size_t)cl->nnodes * cl->nnodes, sizeof(double));
		if (cl->pair_bw_gbps == NULL) {
			c->lib.hexi_cluster_destroy(topo);
			return hexi_error(HEXI_ERR_NOMEM, "no memory");
		}
		for (int a = 0; a < cl->nnodes; a++)
			for (int b = 0; b < cl->nnodes; b++) {
				int ta = -1, tb = -1;
				for (int k = 0; k < topo->nnodes; k++) {
					if (!strcmp(topo->nodes[k].name,
						    cl->nodes[a].name))
						ta = k;
					if (!strcmp(topo->nodes[k].name,
						    cl->nodes[b].name))
						tb = k;
				}
				cl->pair_bw_gbps[a * cl->nnodes + b] =
				    ta >= 0 && tb >= 0
					? topo->pair_bw_gbps[ta * topo->nnodes +
							     tb]
					: topo->inter_bw_gbps;
			}
	}
	c->lib.hexi_cluster_destroy(topo);
	return HEXI_OK;
}

/* The step as a cluster description: one node per step node, as many GPUs
 * as the step has tasks there (the job's first GPUs of that node). */
static hexi_rc build_cluster(local_ctx *c, hexi_cluster **out)
{
	hexi_cluster *cl = NULL;
	hexi_rc rv;

	rv = from_lib(c,
		      c->lib.hexi_cluster_create(c->alloc.nnodes, c->cat, &cl),
		      "cluster");
	for (int i = 0; rv == HEXI_OK && i < c->alloc.nnodes; i++) {
		const hx_alloc_node *n = &c->alloc.nodes[i];
		const hexi_gpu_type *gt = NULL;

		if ((rv = node_type(c, n, &gt)) != HEXI_OK)
			break;
		if (n->ntasks > n->gres.ngpus) {
			rv = hexi_error(HEXI_ERR_MISMATCH,
					"node %s: %d tasks but the job has %d "
					"GPUs there (one task per GPU)",
					n->name, n->ntasks, n->gres.ngpus);
			break;
		}
		rv = from_lib(c,
			      c->lib.hexi_cluster_set_node(cl, i, n->name,
							   gt->name, n->ntasks,
							   n->gres.idx, 0),
			      n->name);
	}
	if (rv == HEXI_OK)
		rv = apply_topology(c, cl);
	if (rv == HEXI_OK && hx_g_conf.profiles[0] != '\0')
		rv = from_lib(
		    c,
		    c->lib.hexi_cluster_apply_profiles(cl, hx_g_conf.profiles),
		    "profiles");
	if (rv == HEXI_OK)
		rv = from_lib(c, c->lib.hexi_cluster_validate(cl), "cluster");
	if (rv != HEXI_OK) {
		c->lib.hexi_cluster_destroy(cl);
		return rv;
	}
	*out = cl;
	return HEXI_OK;
}

static hexi_rc auto_plan(local_ctx *c)
{
	hexi_cluster *cl = NULL;
	hexi_model m;
	hexi_train t;
	hexi_plan_opts o;
	hexi_rc rv;

	if (c->lib.hexi_plan_create == NULL ||
	    c->lib.hexi_plan_opts_defaults == NULL)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "%s has no planner (hexi_plan_create); use "
				  "--hexiscale=PLAN.json",
				  hx_g_conf.libsched);
	if ((rv = build_cluster(c, &cl)) != HEXI_OK)
		return rv;
	rv = from_lib(c, c->lib.hexi_model_load(c->set.model, &m), "model");
	if (rv == HEXI_OK && c->set.seq_len > 0)
		m.seq_len = c->set.seq_len;
	if (rv == HEXI_OK)
		rv = from_lib(c, c->lib.hexi_model_validate(&m), "model");
	if (rv != HEXI_OK) {
		char origin[96];

		hx_setting_origin(&c->set, HX_OPT_MODEL, "model", origin,
				  sizeof(origin));
		hexi_error_prefix(rv, "%s=%s", origin, c->set.model);
	}
	if (rv == HEXI_OK) {
		c->lib.hexi_train_defaults(&t);
		t.global_batch = c->set.global_batch;
		t.micro_batch = c->set.micro_batch;
		c->lib.hexi_plan_opts_defaults(&o);
		o.time_budget_s = hx_g_conf.time_budget_s;
		/* --hexiscale-micro-batch keeps its documented meaning (the
		 * size, or a power-of-two multiple of it), hexiplan's
		 * --micro-batch-exact */
		o.micro_batch_exact = 1;
		/* the planner may leave GPUs idle when the plan is faster
		 * without them; their tasks get the idle role
		 * (hexiscale-env(7)) unless --hexiscale-use-all-gpus */
		o.use_all_gpus = c->set.use_all_gpus;
		rv = from_lib(c,
			      c->lib.hexi_plan_create(cl, &m, &t, &o, &c->plan),
			      "planner");
	}
	c->lib.hexi_cluster_destroy(cl);
	return rv;
}

/* Which step node each plan node is: by name when every plan node names
 * a step node, else by position. */
static hexi_rc map_nodes(local_ctx *c)
{
	const hexi_cluster *pc = c->plan->cluster;
	int by_name = 1;

	if (pc->nnodes != c->alloc.nnodes)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "plan %s has %d nodes but the step runs on "
				  "%d",
				  c->set.plan_file, pc->nnodes,
				  c->alloc.nnodes);
	c->nodemap = calloc((size_t)pc->nnodes, sizeof(int));
	if (c->nodemap == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "no memory");
	for (int i = 0; i < pc->nnodes; i++) {
		c->nodemap[i] = -1;
		for (int k = 0; k < c->alloc.nnodes; k++)
			if (!strcmp(pc->nodes[i].name, c->alloc.nodes[k].name))
				c->nodemap[i] = k;
		by_name &= c->nodemap[i] >= 0;
	}
	for (int i = 0; i < pc->nnodes && !by_name; i++)
		c->nodemap[i] = i;
	return HEXI_OK;
}

/* A user plan must fit the step: same GPU count and type on every node. */
static hexi_rc check_plan_fits(local_ctx *c)
{
	const hexi_cluster *pc = c->plan->cluster;

	for (int i = 0; i < pc->nnodes; i++) {
		const hexi_node *pn = &pc->nodes[i];
		const hx_alloc_node *n = &c->alloc.nodes[c->nodemap[i]];
		const hexi_gpu_type *gt = NULL, *pt;
		hexi_rc rc = node_type(c, n, &gt);

		if (rc != HEXI_OK)
			return rc;
		pt = c->lib.hexi_catalog_find(c->cat, pn->gpu_type);
		if (pt == NULL || strcmp(pt->name, gt->name) != 0)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "plan %s: node %s has %s GPUs but "
					  "the step got %s GPUs on %s",
					  c->set.plan_file, pn->name,
					  pn->gpu_type, n->gres.type, n->name);
		if (pn->ngpus != n->ntasks)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "plan %s: node %s has %d GPUs but "
					  "the step has %d tasks on %s",
					  c->set.plan_file, pn->name, pn->ngpus,
					  n->ntasks, n->name);
	}
	return HEXI_OK;
}

/* The plan file's bytes were read once by hx_check_settings (one
 * non-blocking open + fstat + read); the name is not opened again. */
static hexi_rc file_plan(local_ctx *c)
{
	hexi_rc rv;

	rv = from_lib(c,
		      c->lib.hexi_plan_parse(c->set.plan_text, c->set.plan_len,
					     c->cat, &c->plan),
		      c->set.plan_file);
	if (rv == HEXI_OK)
		rv = from_lib(c, c->lib.hexi_plan_validate(c->plan),
			      c->set.plan_file);
	if (rv == HEXI_OK)
		rv = map_nodes(c);
	if (rv == HEXI_OK)
		rv = check_plan_fits(c);
	if (rv != HEXI_OK) {
		char origin[96];

		hx_setting_origin(&c->set, HX_OPT_MODE, "default_mode", origin,
				  sizeof(origin));
		hexi_error_prefix(rv, "%s", origin);
	}
	return rv;
}

/* The step node of plan device d, after checking the job has its GPU. */
static hexi_rc device_node(local_ctx *c, const hexi_device *d, int r, int *sn)
{
	const hx_alloc_node *n;
	int ok = 0;

	*sn = c->nodemap[d->node];
	n = &c->alloc.nodes[*sn];
	for (int k = 0; k < n->gres.ngpus; k++)
		ok |= n->gres.idx[k] == d->gpu;
	if (!ok)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "plan puts rank %d on GPU %d of %s, which "
				  "the job does not have",
				  r, d->gpu, n->name);
	return HEXI_OK;
}

/* The idle GPUs' roles: a rank, a node and a GPU, nothing to train. */
static hexi_rc idle_roles(local_ctx *c, int T, hx_task_role *byrank, char *seen)
{
	const hexi_plan *p = c->plan;

	for (int i = 0; i < p->nidle; i++) {
		const hexi_device *d = &p->idle[i];
		int r = d->rank, sn;
		hexi_rc rc;

		if (r < 0 || r >= T || seen[r] || d->node < 0 ||
		    d->node >= p->cluster->nnodes)
			return hexi_error(HEXI_ERR_INVAL,
					  "plan: bad idle GPU (rank %d, node "
					  "%d)",
					  r, d->node);
		seen[r] = 1;
		if ((rc = device_node(c, d, r, &sn)) != HEXI_OK)
			return rc;
		byrank[r] = (hx_task_role){
		    .rank = r, .node = sn, .gpu = d->gpu, .idle = 1};
	}
	return HEXI_OK;
}

/* Rank -> role from the plan's pipelines and stages, and its idle GPUs;
 * ranks 0..T-1 over T tasks. */
static hexi_rc roles_by_rank(local_ctx *c, int T, hx_task_role *byrank,
			     char *seen)
{
	const hexi_plan *p = c->plan;
	const hexi_cluster *pc = p->cluster;
	hexi_rc rc;

	for (int pi = 0; pi < p->npipelines; pi++) {
		const hexi_pipeline *pp = &p->pipelines[pi];
		for (int si = 0; si < pp->nstages; si++) {
			const hexi_stage *st = &pp->stages[si];
			for (int d = 0; d < st->tp; d++) {
				const hexi_device *dev = &st->devices[d];
				int r = dev->rank, sn;

				if (r < 0 || r >= T || seen[r] ||
				    dev->node < 0 || dev->node >= pc->nnodes)
					return hexi_error(HEXI_ERR_INVAL,
							  "plan: bad device "
							  "(rank %d, node %d)",
							  r, dev->node);
				seen[r] = 1;
				rc = device_node(c, dev, r, &sn);
				if (rc != HEXI_OK)
					return rc;
				byrank[r] = (hx_task_role){
				    .rank = r,
				    .node = sn,
				    .gpu = dev->gpu,
				    .pipeline = pi,
				    .stage = si,
				    .nstages = pp->nstages,
				    .tp_rank = d,
				    .tp_size = st->tp,
				    .layer_begin = st->layer_begin,
				    .layer_end = st->layer_end,
				    .batch = pp->batch,
				    .micro_batches = pp->micro_batches};
			}
		}
	}
	if ((rc = idle_roles(c, T, byrank, seen)) != HEXI_OK)
		return rc;
	for (int r = 0; r < T; r++)
		if (!seen[r])
			return hexi_error(HEXI_ERR_INVAL,
					  "plan: rank %d unused", r);
	return HEXI_OK;
}

/* Per node: local ranks by rank order; tasks get the node's plan GPUs in
 * ascending device order (the k-th task of a node the k-th GPU, as Slurm's
 * --gpus-per-task binding does). */
static hexi_rc assign_tasks(local_ctx *c, hx_task_role *byrank)
{
	int T = c->ho.ntasks; /* ranks of the stages and of the idle GPUs */

	for (int sn = 0; sn < c->alloc.nnodes; sn++) {
		const hx_alloc_node *n = &c->alloc.nodes[sn];
		int list[HX_GPUS_MAX], cnt = 0;

		for (int r = 0; r < T; r++) {
			if (byrank[r].node != sn)
				continue;
			if (cnt >= HX_GPUS_MAX)
				return hexi_error(HEXI_ERR_RANGE,
						  "node %s: more than %d ranks",
						  n->name, HX_GPUS_MAX);
			byrank[r].local_rank = cnt;
			list[cnt++] = r;
		}
		if (cnt != n->ntasks)
			return hexi_error(
			    HEXI_ERR_MISMATCH,
			    "node %s: plan has %d GPUs, step has %d "
			    "tasks",
			    n->name, cnt, n->ntasks);
		/* insertion sort of the node's ranks by device index */
		for (int i = 1; i < cnt; i++)
			for (int k = i; k > 0 && byrank[list[k - 1]].gpu >
						     byrank[list[k]].gpu;
			     k--) {
				int tmp = list[k];
				list[k] = list[k - 1];
				list[k - 1] = tmp;
			}
		for (int j = 0; j < cnt; j++) {
			if (j > 0 &&
			    byrank[list[j]].gpu == byrank[list[j - 1]].gpu)
				return hexi_error(
				    HEXI_ERR_INVAL,
				    "node %s: two ranks on GPU %d", n->name,
				    byrank[list[j]].gpu);
			if (n->tids[j] >= (uint32_t)c->ho.ntasks)
				return hexi_error(HEXI_ERR_SLURM,
						  "task id %u out of range",
						  n->tids[j]);
			/* LOCAL_RANK as torchrun and SLURM_LOCALID: the
			 * task's place on its node (tids ascend) */
			byrank[list[j]].local_rank = j;
			byrank[list[j]].local_world_size = cnt;
			c->ho.roles[n->tids[j]] = byrank[list[j]];
		}
	}
	return HEXI_OK;
}

/* Plan rank = task id (SLURM_PROCID), as torchrun's RANK, when no GPU is
 * idle: the plan's ranks are renumbered to the step's task order once
 * every rank has its task, and the plan is hashed again, so the plan file,
 * its hash and every task's RANK agree (doc/DECISIONS.md 90).  With idle
 * GPUs the training tasks get 0..W-1 and the idle ones W.., each in task
 * order (hx_rank_tasks, DECISIONS 115). */
static hexi_rc renumber(local_ctx *c)
{
	hexi_plan *p = c->plan;
	int *new_of_old = calloc((size_t)c->ho.ntasks, sizeof(int));
	hexi_rc rv;

	if (new_of_old == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "no memory");
	rv =
	    hx_rank_tasks(c->ho.roles, c->ho.ntasks, p->world_size, new_of_old);
	for (int pi = 0; rv == HEXI_OK && pi < p->npipelines; pi++)
		for (int si = 0; si < p->pipelines[pi].nstages; si++) {
			hexi_stage *st = &p->pipelines[pi].stages[si];
			for (int d = 0; d < st->tp; d++)
				st->devices[d].rank =
				    new_of_old[st->devices[d].rank];
		}
	for (int i = 0; rv == HEXI_OK && i < p->nidle; i++)
		p->idle[i].rank = new_of_old[p->idle[i].rank];
	free(new_of_old);
	if (rv == HEXI_OK)
		rv = from_lib(c, c->lib.hexi_plan_hash(p), "plan");
	if (rv == HEXI_OK)
		rv = from_lib(c, c->lib.hexi_plan_validate(p),
			      "renumbered plan");
	return rv;
}

static hexi_rc build_roles(local_ctx *c)
{
	int W = c->plan->world_size, I = c->plan->nidle, T = W + I;
	hx_task_role *byrank = NULL;
	char *seen = NULL;
	hexi_rc rv;

	if (T != c->alloc.ntasks && I == 0)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "the plan has %d ranks but the step has %d "
				  "tasks",
				  W, c->alloc.ntasks);
	if (T != c->alloc.ntasks)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "the plan has %d ranks and %d idle GPUs but "
				  "the step has %d tasks (one per GPU)",
				  W, I, c->alloc.ntasks);
	rv = hx_handoff_alloc(&c->ho, c->alloc.nnodes, c->alloc.ntasks);
	if (rv != HEXI_OK)
		return rv;
	byrank = calloc((size_t)T, sizeof(*byrank));
	seen = calloc((size_t)T, 1);
	if (byrank == NULL || seen == NULL)
		rv = hexi_error(HEXI_ERR_NOMEM, "no memory");
	if (rv == HEXI_OK)
		rv = roles_by_rank(c, T, byrank, seen);
	if (rv == HEXI_OK)
		rv = assign_tasks(c, byrank);
	if (rv == HEXI_OK)
		rv = renumber(c);
	if (rv == HEXI_OK)
		for (int i = 0; i < c->alloc.nnodes; i++)
			hexi_strlcpy(c->ho.gpu_type[i],
				     c->alloc.nodes[i].gres.type, HX_NAME_MAX);
	free(byrank);
	free(seen);
	return rv;
}

static hexi_rc plan_path(local_ctx *c)
{
	const char *dir =
	    c->set.plan_dir[0] ? c->set.plan_dir : c->alloc.out_dir;
	char cwd[HX_PATH_MAX] = "";
	int n;

	if (dir[0] != '/' && getcwd(cwd, sizeof(cwd)) == NULL)
		return hexi_error(HEXI_ERR_IO,
				  "cannot get the current directory");
	if (c->alloc.ncomps > 0 && c->alloc.step_id == NO_VAL)
		/* a heterogeneous step before Slurm numbers it */
		n = snprintf(c->plan_path, sizeof(c->plan_path),
			     "%s%s%s/hexiscale-plan.%u.het.json", cwd,
			     cwd[0] ? "/" : "", dir, (unsigned)c->alloc.job_id);
	else
		n = snprintf(c->plan_path, sizeof(c->plan_path),
			     "%s%s%s/hexiscale-plan.%u.%u.json", cwd,
			     cwd[0] ? "/" : "", dir, (unsigned)c->alloc.job_id,
			     (unsigned)c->alloc.step_id);
	if (n < 0 || (size_t)n >= sizeof(c->plan_path))
		return hexi_error(HEXI_ERR_RANGE,
				  "plan directory %.64s...: path "
				  "too long",
				  dir);
	/* the hand-off carries the path (pf=): UTF-8 text, no ';' or '|' */
	if (!hx_is_utf8_text(c->plan_path) || strpbrk(c->plan_path, ";|")) {
		char shown[80];

		return hexi_error(HEXI_ERR_INVAL,
				  "plan directory '%s' has "
				  "control characters, bytes that are not "
				  "UTF-8, ';' or '|'",
				  hx_shown(dir, shown, sizeof(shown)));
	}
	return HEXI_OK;
}

/* Step nodes that hold a training rank (0 if out of memory: only a
 * message uses it). */
static int training_nodes(const local_ctx *c)
{
	unsigned char *used = calloc((size_t)c->alloc.nnodes, 1);
	int n = 0;

	for (int t = 0; used != NULL && t < c->ho.ntasks; t++)
		if (!c->ho.roles[t].idle && !used[c->ho.roles[t].node]++)
			n++;
	free(used);
	return n;
}

/* The name of the step node that plan node i runs on: a user plan made
 * for other node names is applied by position (DECISIONS 31), and the
 * user reads the nodes Slurm gave the step. */
static const char *step_node_name(const local_ctx *c, int i)
{
	int k = c->nodemap != NULL ? c->nodemap[i] : i;

	return k >= 0 && k < c->alloc.nnodes ? c->alloc.nodes[k].name : "?";
}

/* " a800 x64, rtx4090 x32": idle GPUs per type, in first-seen order. */
static void idle_types(const local_ctx *c, const hexi_plan *p)
{
	char buf[1024];

	fprintf(stderr, "%s (the plan file lists them)\n",
		c->lib.hexi_plan_idle_types(p, buf, sizeof(buf)));
}

/* GPUs per node when few nodes are idle, else per type (as hexiplan
 * show): " n2 (rtx4090) 0,1,2; n3 (rtx3090) 0,1". */
static void idle_gpus(const local_ctx *c, const hexi_plan *p, int nodes)
{
	int prev = -1;

	if (nodes > 8) {
		idle_types(c, p);
		return;
	}
	for (int i = 0; i < p->nidle; i++) {
		const hexi_node *n = &p->cluster->nodes[p->idle[i].node];

		if (p->idle[i].node != prev)
			fprintf(stderr, "%s %s (%s) %d", i ? ";" : "",
				step_node_name(c, p->idle[i].node), n->gpu_type,
				p->idle[i].gpu);
		else
			fprintf(stderr, ",%d", p->idle[i].gpu);
		prev = p->idle[i].node;
	}
	fprintf(stderr, "\n");
}

/* "idle: 5 GPUs on 2 nodes (ranks 3-7, tasks 3-7, HEXISCALE_ROLE=idle):
 * n2 (rtx4090) 0,1,2; n3 (rtx3090) 0,1" when the plan leaves any. */
static void summary_idle(const local_ctx *c)
{
	const hexi_plan *p = c->plan;
	int *tasks = calloc((size_t)c->ho.ntasks, sizeof(int));
	int nt = 0, nodes = 0;
	char list[160];

	if (p->nidle == 0 || tasks == NULL) {
		free(tasks);
		return;
	}
	for (int t = 0; t < c->ho.ntasks; t++)
		if (c->ho.roles[t].idle)
			tasks[nt++] = t;
	hx_format_ranges(tasks, nt, list, sizeof(list));
	for (int i = 0; i < p->nidle; i++)
		nodes += i == 0 || p->idle[i].node != p->idle[i - 1].node;
	fprintf(stderr,
		"hexiscale:   idle: %d GPU%s on %d node%s (ranks %d-%d, "
		"Slurm tasks %s, HEXISCALE_ROLE=idle, train nothing):",
		p->nidle, p->nidle == 1 ? "" : "s", nodes,
		nodes == 1 ? "" : "s", p->world_size,
		p->world_size + p->nidle - 1, list);
	idle_gpus(c, p, nodes);
	free(tasks);
}

/* "hexiscale:   heterogeneous step over components 0,1 (jobs 13,14, 3+3
 * tasks)" */
static void summary_comps(const local_ctx *c)
{
	const hx_alloc *a = &c->alloc;

	if (a->ncomps == 0)
		return;
	fprintf(stderr, "hexiscale:   heterogeneous step over components ");
	for (int k = 0; k < a->ncomps; k++)
		fprintf(stderr, "%s%d", k ? "," : "", a->comps[k].offset);
	fprintf(stderr, " (jobs ");
	for (int k = 0; k < a->ncomps; k++)
		fprintf(stderr, "%s%u", k ? "," : "",
			(unsigned)a->comps[k].job_id);
	fprintf(stderr, ", tasks ");
	for (int k = 0; k < a->ncomps; k++)
		fprintf(stderr, "%s%d-%d", k ? "," : "", a->comps[k].task_off,
			a->comps[k].task_off + a->comps[k].ntasks - 1);
	fprintf(stderr, ")\n");
}

/* The readable block on the step's stderr. */
static void summary(local_ctx *c)
{
	const hexi_plan *p = c->plan;
	int tn = training_nodes(c);

	if (p->nidle == 0)
		fprintf(stderr,
			"hexiscale: step %u.%u: plan %s for %d GPUs on %d "
			"nodes (%s, model %s, global batch %d)\n",
			(unsigned)c->alloc.job_id, (unsigned)c->alloc.step_id,
			p->hash, p->world_size, c->alloc.nnodes,
			c->set.mode == HX_MODE_AUTO ? "planned" : "user plan",
			p->model.name, p->train.global_batch);
	else
		fprintf(stderr,
			"hexiscale: step %u.%u: plan %s for %d of %d GPUs on "
			"%d node%s, %d idle (%s, model %s, global batch %d)\n",
			(unsigned)c->alloc.job_id, (unsigned)c->alloc.step_id,
			p->hash, p->world_size, c->ho.ntasks, tn,
			tn == 1 ? "" : "s", p->nidle,
			c->set.mode == HX_MODE_AUTO ? "planned" : "user plan",
			p->model.name, p->train.global_batch);
	summary_comps(c);
	for (int pi = 0; pi < p->npipelines; pi++) {
		const hexi_pipeline *pp = &p->pipelines[pi];

		fprintf(
		    stderr,
		    "hexiscale:   pipeline %d: batch %d in %d micro-batches:",
		    pi, pp->batch, pp->micro_batches);
		for (int si = 0; si < pp->nstages; si++) {
			const hexi_stage *st = &pp->stages[si];
			const hexi_node *nd =
			    &p->cluster->nodes[st->devices[0].node];

			fprintf(stderr, "%s layers %d-%d on %s %dx%s",
				si ? " ->" : "", st->layer_begin,
				st->layer_end - 1,
				step_node_name(c, st->devices[0].node), st->tp,
				nd->gpu_type);
		}
		fprintf(stderr, "\n");
	}
	summary_idle(c);
	if (p->pred.iter_s > 0)
		fprintf(
		    stderr,
		    "hexiscale:   predicted %.3g s/iteration, %.0f tokens/s, "
		    "MFU %.1f%%\n",
		    p->pred.iter_s, p->pred.tokens_per_s, 100.0 * p->pred.mfu);
	fprintf(stderr, "hexiscale:   plan file %s\n", c->plan_path);
}

/* Write the plan file as the user, never through a name someone else may
 * have planted (finding 6 of issue 18): the bytes go into a new file
 * DIR/hexiscale-plan.JOB.STEP.<16 random hex digits>.json created with
 * O_EXCL|O_NOFOLLOW (hexi_create_unique: no name for it can be planted
 * ahead), which is then renamed to the usual DIR/hexiscale-plan.JOB.STEP.json
 * so readers never see half a plan.  rename replaces a link or an old file
 * of the user's and never writes through it.  If the usual name is held by
 * something the user may not replace (another user's file in a sticky
 * directory, a directory), the plan keeps its unique name, which the
 * hand-off carries to the tasks, and stderr says so: the step runs.
 * No fsync: the file is for people and tools and is rewritten for every
 * step, and two fsyncs cost tens of milliseconds of step launch. */
static hexi_rc write_plan_file(char *path, size_t cap, const char *data,
			       size_t len, int mode, int keep_unique)
{
	char prefix[HX_PATH_MAX], tmp[HX_PATH_MAX + 32];
	size_t done = 0, plen = strlen(path);
	int fd = -1, err;

	/* room for ".<16 hex digits>" in path and in the hand-off */
	if (plen < 5 || plen + 17 >= cap || plen + 17 >= sizeof(prefix))
		return hexi_error(HEXI_ERR_RANGE, "%.64s...: path too long",
				  path);
	memcpy(prefix, path, plen - 5); /* without ".json" */
	strcpy(prefix + plen - 5, ".");
	if (hexi_create_unique(prefix, ".json", mode, tmp, sizeof(tmp), &fd) !=
	    HEXI_OK)
		return HEXI_ERR_IO;
	while (done < len) {
		ssize_t n = write(fd, data + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	if (close(fd) != 0 || done != len) {
		hexi_rc rv = hexi_error(HEXI_ERR_IO, "%s: cannot write: %s",
					tmp, strerror(errno));
		unlink(tmp);
		return rv;
	}
	if (keep_unique) /* a heterogeneous step's: the name is its own */
		return hexi_strlcpy(path, tmp, cap);
	if (rename(tmp, path) == 0)
		return HEXI_OK;
	err = errno;
	fprintf(
	    stderr,
	    "hexiscale: %s: cannot be replaced (%s); the plan stays at %s\n",
	    path, strerror(err), tmp);
	return hexi_strlcpy(path, tmp, cap);
}

/* The hand-off to the tasks (HEXISCALE_HANDOFF in srun's environment),
 * naming the plan file c->plan_path. */
static hexi_rc hand_off(local_ctx *c)
{
	hexi_rc rv;
	int r0 = 0;

	c->ho.job_id = c->alloc.job_id;
	c->ho.step_id = c->alloc.ncomps > 0 ? 0 : c->alloc.step_id;
	if (c->alloc.ncomps > 0 &&
	    (rv = hx_handoff_alloc_comps(&c->ho, c->alloc.ncomps)) != HEXI_OK)
		return rv;
	for (int k = 0; k < c->alloc.ncomps; k++) {
		const hx_alloc_comp *ac = &c->alloc.comps[k];

		c->ho.comps[k] =
		    (hx_handoff_comp){ac->job_id, ac->task_off, ac->ntasks,
				      ac->node_off, ac->nnodes};
	}
	c->ho.world_size = c->plan->world_size;
	c->ho.npipelines = c->plan->npipelines;
	hexi_strlcpy(c->ho.plan_hash, c->plan->hash, sizeof(c->ho.plan_hash));
	hexi_strlcpy(c->ho.plan_path, c->plan_path, sizeof(c->ho.plan_path));
	for (int t = 0; t < c->ho.ntasks; t++)
		if (c->ho.roles[t].rank == 0)
			r0 = c->ho.roles[t].node;
	if ((rv = hx_node_addr(c->alloc.nodes[r0].name, c->ho.master_addr,
			       sizeof(c->ho.master_addr))) != HEXI_OK)
		return hexi_error_prefix(rv, "rank 0's address");
	/* a heterogeneous step has no step id yet: srun's pid keeps two
	 * such steps of one job apart */
	c->ho.master_port = hx_g_conf.port_base +
			    (int)((c->alloc.job_id * 31u +
				   (c->alloc.ncomps > 0 ? (uint32_t)getpid()
							: c->alloc.step_id)) %
				  2000u);
	if ((rv = hx_handoff_encode(&c->ho, &c->handoff)) != HEXI_OK)
		return rv;
	if (setenv(HX_HANDOFF_VAR, c->handoff, 1) != 0)
		return hexi_error(HEXI_ERR_NOMEM, "cannot set %s",
				  HX_HANDOFF_VAR);
	return HEXI_OK;
}

/* The plan file, then the hand-off that names it.  A step whose hand-off
 * fails (over its size limit, no memory) gets no plan, so it leaves no
 * plan file behind either. */
static hexi_rc publish(local_ctx *c)
{
	hexi_rc rv;

	if ((rv = build_roles(c)) != HEXI_OK || (rv = plan_path(c)) != HEXI_OK)
		return rv;
	rv = from_lib(c, c->lib.hexi_plan_to_json(c->plan, &c->json), "plan");
	if (rv != HEXI_OK)
		return rv;
	rv = write_plan_file(c->plan_path, sizeof(c->plan_path), c->json,
			     strlen(c->json), 0644, c->alloc.ncomps > 0);
	if (rv != HEXI_OK)
		return hexi_error_prefix(rv, "plan file");
	if ((rv = hand_off(c)) != HEXI_OK) {
		unlink(c->plan_path);
		return rv;
	}
	if (c->alloc.ncomps == 0) /* a het step's once it has its id */
		summary(c);
	return HEXI_OK;
}

static hexi_rc make_plan(local_ctx *c)
{
	hexi_rc rv;

	rv = hx_sched_open(hx_g_conf.libsched, &c->lib);
	if (rv != HEXI_OK)
		return rv;
	if ((rv = load_catalog(c)) != HEXI_OK)
		return rv;
	if (c->set.mode == HX_MODE_AUTO) {
		if ((rv = auto_plan(c)) != HEXI_OK)
			return rv;
		c->nodemap = calloc((size_t)c->alloc.nnodes, sizeof(int));
		if (c->nodemap == NULL)
			return hexi_error(HEXI_ERR_NOMEM, "no memory");
		for (int i = 0; i < c->alloc.nnodes; i++)
			c->nodemap[i] = i;
		if (c->plan->cluster->nnodes != c->alloc.nnodes)
			return hexi_error(HEXI_ERR_INTERNAL,
					  "planner returned %d nodes for %d",
					  c->plan->cluster->nnodes,
					  c->alloc.nnodes);
		for (int i = 0; i < c->alloc.nnodes; i++)
			if (strcmp(c->plan->cluster->nodes[i].name,
				   c->alloc.nodes[i].name) != 0)
				return hexi_error(
				    HEXI_ERR_INTERNAL,
				    "planner reordered the nodes "
				    "(%s for %s)",
				    c->plan->cluster->nodes[i].name,
				    c->alloc.nodes[i].name);
		return HEXI_OK;
	}
	return file_plan(c);
}

static void local_fini(local_ctx *c)
{
	if (c->plan != NULL)
		c->lib.hexi_plan_destroy(c->plan);
	if (c->cat != NULL)
		c->lib.hexi_catalog_destroy(c->cat);
	free(c->json);
	free(c->handoff);
	free(c->nodemap);
	hx_handoff_fini(&c->ho);
	hx_settings_fini(&c->set);
	hx_alloc_fini(&c->alloc);
	hx_sched_close(&c->lib);
}

/* Every node of the step must have GPUs of the job. */
static hexi_rc check_gpus(local_ctx *c)
{
	for (int i = 0; i < c->alloc.nnodes; i++)
		if (c->alloc.nodes[i].gres.ngpus == 0)
			return hexi_error(HEXI_ERR_NODEV,
					  "node %s: the job has no GPUs there "
					  "(ask for GPUs, e.g. "
					  "--gpus-per-task=1)",
					  c->alloc.nodes[i].name);
	return HEXI_OK;
}

/* srun's command line (srun runs as the user: /proc/self/cmdline is its
 * argv) as the components it asks for; HEXI_ERR_NOTFOUND without /proc. */
static hexi_rc read_request(hx_het_request *r)
{
	static char buf[65536];
	size_t n;
	FILE *f = fopen("/proc/self/cmdline", "rb");

	memset(r, 0, sizeof(*r));
	if (f == NULL)
		return HEXI_ERR_NOTFOUND;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	if (n == 0 || buf[n - 1] != '\0')
		buf[n++] = '\0';
	return hx_het_request_parse(buf, n, r);
}

/*
 * Heterogeneous steps (srun --het-group=0,1, srun A : B inside a het
 * allocation).  Slurm 22.05's srun copies its environment into each
 * component's step environment before it creates the steps' tasks and
 * calls local_user_init once, for one component only (whichever launch
 * thread comes first, with that component's job id, nodes and tasks), and
 * merges what the plugin set there into that component's environment
 * alone (measured, doc/DECISIONS.md 135).  init_post_opt runs before that
 * copy, once per component of the step, inside the allocation
 * (SLURM_JOB_ID set) but before the step exists: so the plan is made at
 * srun's last init_post_opt call, over every GPU of the components srun's
 * command line names, with one task per GPU in block order (what Slurm
 * does by default), and handed to every component through srun's
 * environment; local_user_init then checks that Slurm laid the step out
 * exactly so (hx_het_verify), or stops the step.
 */
static struct {
	int calls;     /* init_post_opt calls so far */
	int planned;   /* 1: ctx holds a plan handed to the components */
	local_ctx ctx; /* the planned step */
	char why[512]; /* why a multi-component step was not planned */
} het;

static void het_why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void het_why(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(het.why, sizeof(het.why), fmt, ap);
	va_end(ap);
}

static hexi_rc make_plan(local_ctx *c);
static hexi_rc publish(local_ctx *c);
static void local_fini(local_ctx *c);

/* The het job's leader from SLURM_JOB_ID (srun's allocation). */
static int het_leader_env(uint32_t *leader)
{
	const char *v = getenv("SLURM_JOB_ID");
	long id;

	if (v == NULL || hexi_parse_long(v, 1, UINT32_MAX - 2, &id) != HEXI_OK)
		return -1;
	*leader = (uint32_t)id;
	return 0;
}

/* Plan the step over the components req names and hand it off. */
static hexi_rc het_plan(const hx_het_request *req)
{
	local_ctx *c = &het.ctx;
	uint32_t leader = 0;
	hexi_rc rv;

	if (req->jobid != 0) /* srun --jobid: that job's allocation */
		leader = req->jobid;
	else if (het_leader_env(&leader) != 0) {
		/* srun A : B making its own allocation */
		het_why("srun makes this heterogeneous allocation itself, and "
			"Slurm 22.05 then lets a plugin hand a plan to the "
			"tasks of one component only: allocate first (salloc "
			"or sbatch A : B) and run srun --het-group=0,1 "
			"inside");
		return HEXI_OK;
	}
	hx_handoff_init(&c->ho);
	rv = hx_discover_het(leader, req, &c->alloc);
	if (rv == HEXI_OK)
		rv = make_plan(c);
	if (rv == HEXI_OK)
		rv = publish(c);
	if (rv != HEXI_OK)
		return hexi_error_prefix(rv, "job %u, heterogeneous step",
					 (unsigned)leader);
	het.planned = 1;
	return HEXI_OK;
}

/* init_post_opt: at srun's last call for a step over several components,
 * plan it (see above). */
static int het_post_opt(void)
{
	hx_het_request req;
	local_ctx *c = &het.ctx;
	hexi_rc rv;

	if (read_request(&req) != HEXI_OK || req.ncomps < 2 ||
	    ++het.calls != req.ncalls || het.planned)
		return 0;
	if (hx_check_settings(&c->set) != 0)
		return -1;
	if (c->set.mode == HX_MODE_OFF) {
		hx_settings_fini(&c->set);
		return 0;
	}
	if (c->set.mode_from_default) {
		het_why("default_mode=on does not plan a step over several "
			"components on its own (its plan must reach them "
			"before Slurm lays the step out, so srun could not "
			"step aside afterwards)");
		hx_settings_fini(&c->set);
		return 0;
	}
	if ((rv = het_plan(&req)) == HEXI_OK) {
		if (!het.planned) /* local_user_init says why */
			hx_settings_fini(&c->set);
		return 0;
	}
	hx_err("%s", hexi_errmsg(rv));
	local_fini(c);
	memset(c, 0, sizeof(*c));
	return -1;
}

/* The heterogeneous step's plan file (DIR/hexiscale-plan.J.het.<16 hex>.json,
 * the name the tasks got) under its usual name DIR/hexiscale-plan.J.S.json
 * too, as every other step's: a hard link made at a new name
 * (usual.<the same 16 hex>; link() never follows a planted name) and
 * renamed over the usual one (which replaces a link or an old file, never
 * writes through it).  On failure stderr says so; the step runs. */
static void link_usual_name(const char *unique, const char *usual)
{
	char tmp[HX_PATH_MAX + 32];
	const char *rnd = strrchr(unique, '.');
	int n, err = ENAMETOOLONG;

	/* unique ends in ".<16 hex>.json": use those 16 digits */
	n = rnd != NULL && rnd - unique > 17
		? snprintf(tmp, sizeof(tmp), "%s.%.16s", usual, rnd - 16)
		: -1;
	if (n > 0 && (size_t)n < sizeof(tmp)) {
		if (link(unique, tmp) != 0) {
			err = errno;
		} else if (rename(tmp, usual) != 0) {
			err = errno;
			unlink(tmp);
		} else {
			return;
		}
	}
	fprintf(stderr,
		"hexiscale: %s: cannot be made (%s); the plan stays at %s\n",
		usual, strerror(err), unique);
}

/* local_user_init of a step planned in init_post_opt: Slurm's layout must
 * be the planned one; then the plan file gets its usual name too and the
 * summary is printed. */
static int het_user_init(uint32_t job, uint32_t step)
{
	local_ctx *c = &het.ctx;
	char usual[HX_PATH_MAX], unique[HX_PATH_MAX];
	hexi_rc rv;
	int ret = -1;

	rv = hx_het_verify(&c->alloc, step);
	c->alloc.step_id = step;
	hexi_strlcpy(unique, c->plan_path, sizeof(unique));
	if (rv == HEXI_OK && (rv = plan_path(c)) == HEXI_OK) {
		hexi_strlcpy(usual, c->plan_path, sizeof(usual));
		hexi_strlcpy(c->plan_path, unique, sizeof(c->plan_path));
		link_usual_name(unique, usual);
	}
	if (rv == HEXI_OK) {
		summary(c);
		ret = 0;
	} else {
		hx_err("%s", hexi_errmsg(rv)); /* names the step */
		unlink(unique);
	}
	slurm_verbose("hexiscale: step %u.%u is heterogeneous; srun called "
		      "the plugin for job %u",
		      (unsigned)c->alloc.job_id, step, job);
	local_fini(c);
	memset(c, 0, sizeof(*c));
	het.planned = 0;
	return ret;
}

/* A step that init_post_opt did not plan must not span several
 * components of a het job (nor be split by ':' in a job that is not
 * heterogeneous): a plan of the one component Slurm shows here would
 * leave the others' tasks without roles. */
static hexi_rc check_one_component(const local_ctx *c)
{
	hx_het_request req;
	uint32_t leader = 0;
	int n = 1;
	hexi_rc rc;

	if (c->alloc.het_leader != 0) {
		rc = hx_het_step_span(c->alloc.job_id, c->alloc.step_id, &n,
				      &leader);
		if (rc != HEXI_OK)
			return rc;
	} else if (read_request(&req) == HEXI_OK && req.ncomps >= 2) {
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "job %u is not heterogeneous, and a step "
				  "split into components (srun ... : ... or "
				  "--het-group) inside it is not planned",
				  (unsigned)c->alloc.job_id);
	}
	if (n < 2)
		return HEXI_OK;
	return hexi_error(HEXI_ERR_UNSUPPORTED,
			  "this step spans %d components of heterogeneous "
			  "job %u, but %s",
			  n, (unsigned)leader,
			  het.why[0] ? het.why
				     : "srun's command line did not say which "
				       "(--het-group=LIST, or ':' segments)");
}

/* default_mode=on plans only steps of one task per GPU of the job on
 * every node; others (e.g. one task using three GPUs) are left alone. */
static hexi_rc check_one_task_per_gpu(local_ctx *c)
{
	for (int i = 0; i < c->alloc.nnodes; i++) {
		const hx_alloc_node *n = &c->alloc.nodes[i];

		if (n->ntasks != n->gres.ngpus)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "node %s: %d tasks for %d GPUs, not "
					  "one task per GPU",
					  n->name, n->ntasks, n->gres.ngpus);
	}
	return HEXI_OK;
}

int hx_local_post_opt(spank_t sp)
{
	hx_settings s;
	int ret;

	(void)sp;
	/* srun copies its environment into the steps after this: never
	 * pass on a stale hand-off, not even to a heterogeneous step's
	 * other components */
	if (het.calls == 0 && !het.planned)
		unsetenv(HX_HANDOFF_VAR);
	ret = hx_check_settings(&s);
	hx_settings_fini(&s);
	if (ret == 0)
		ret = het_post_opt();
	return ret;
}

static void collect_cmdline(spank_t sp)
{
	for (int i = 0; i < HX_OPT_COUNT; i++) {
		char *arg = NULL;
		const char *v;

		if (spank_option_getopt(sp, &hx_g_opts[i], &arg) !=
		    ESPANK_SUCCESS)
			continue;
		/* a flag: given means on */
		v = hx_opt_table[i].arginfo == NULL ? HX_FLAG_ON : arg;
		if (v == NULL)
			continue;
		free(hx_g_cmdline[i]);
		hx_g_cmdline[i] = strdup(v);
	}
}

int hx_local_user_init(spank_t sp)
{
	local_ctx c;
	uint32_t job = 0, step = 0;
	double t[4];
	hexi_rc rv;
	int ret = -1;

	if (het.planned) {
		if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
		    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS) {
			hx_err("cannot get the job and step id from Slurm");
			return -1;
		}
		return het_user_init(job, step);
	}
	memset(&c, 0, sizeof(c));
	hx_handoff_init(&c.ho);
	unsetenv(HX_HANDOFF_VAR); /* never pass on a stale hand-off */
	collect_cmdline(sp);
	if (hx_check_settings(&c.set) != 0) {
		hx_settings_fini(&c.set);
		return -1;
	}
	if (c.set.mode == HX_MODE_OFF) {
		hx_settings_fini(&c.set);
		return 0;
	}
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS) {
		hx_err("cannot get the job and step id from Slurm");
		hx_settings_fini(&c.set);
		return -1;
	}
	t[0] = hexi_now_s();
	rv = hx_discover(job, step, &c.alloc);
	t[1] = hexi_now_s();
	if (rv == HEXI_OK)
		rv = check_one_component(&c);
	if (rv == HEXI_OK)
		rv = check_gpus(&c);
	if (rv == HEXI_OK && c.set.mode_from_default)
		rv = check_one_task_per_gpu(&c);
	if (rv == HEXI_OK)
		rv = make_plan(&c);
	t[2] = hexi_now_s();
	if (rv == HEXI_OK)
		rv = publish(&c);
	t[3] = hexi_now_s();
	if (rv != HEXI_OK && c.set.mode_from_default) {
		/* default_mode=on never refuses a step the user did not ask
		 * to plan: it says why and steps aside (no hand-off, the
		 * GPUs as Slurm bound them). */
		unsetenv(HX_HANDOFF_VAR);
		if (rv == HEXI_ERR_NODEV) /* no GPUs: nothing to say */
			slurm_verbose("hexiscale: step %u.%u not planned: %s",
				      job, step, hexi_errmsg(rv));
		else
			slurm_info("hexiscale: step %u.%u not planned "
				   "(default_mode=on; --hexiscale=auto to "
				   "insist): %s",
				   job, step, hexi_errmsg(rv));
		ret = 0;
	} else if (rv != HEXI_OK) {
		hx_err("step %u.%u: %s", job, step, hexi_errmsg(rv));
	} else {
		ret = 0;
	}
	slurm_verbose("hexiscale: step %u.%u: discovery %.1f ms, plan %.1f ms, "
		      "file and hand-off %.1f ms",
		      job, step, 1e3 * (t[1] - t[0]), 1e3 * (t[2] - t[1]),
		      1e3 * (t[3] - t[2]));
	local_fini(&c);
	return ret;
}
