/*
 * remote.c - slurmstepd side, in each task after privileges are dropped
 * (task_init).  It reads only the hand-off srun put in the step
 * environment, checks it belongs to this step and is intact, exports the
 * task's role and narrows CUDA_VISIBLE_DEVICES.  libc only; never blocks,
 * never exits; an error fails this task (Slurm reports it), not the node.
 */
#include "config.h"

#include "hx_spank.h"

#include <slurm/slurm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Position of gpu in the comma list, or -1. */
static int list_pos(const char *list, int gpu, char *item, size_t cap)
{
	const char *p = list;

	for (int pos = 0; *p != '\0'; pos++) {
		size_t n = strcspn(p, ",");
		char tok[16];
		long v;

		if (n == 0 || n >= sizeof(tok))
			return -1;
		memcpy(tok, p, n);
		tok[n] = '\0';
		if (item != NULL && gpu == -1 - pos) /* fetch mode */
			return hexi_strlcpy(item, tok, cap) == HEXI_OK ? pos
								       : -1;
		if (item == NULL &&
		    hexi_parse_long(tok, 0, 1 << 20, &v) == HEXI_OK && v == gpu)
			return pos;
		p += n;
		if (*p == ',')
			p++;
	}
	return -1;
}

/* CUDA_VISIBLE_DEVICES value for the plan's GPU: its position in the
 * step's GPUs (SLURM_STEP_GPUS, real indices) picks the entry of the
 * current CUDA_VISIBLE_DEVICES (which may be renumbered by cgroups). */
static hexi_rc bind_gpu(spank_t sp, const char *node, int gpu, char *cvd,
			size_t cap)
{
	char step[512], vis[512];
	int pos;

	if (spank_getenv(sp, "SLURM_STEP_GPUS", step, sizeof(step)) !=
	    ESPANK_SUCCESS)
		return hexi_error(HEXI_ERR_NODEV,
				  "node %s: this task sees no GPUs "
				  "(SLURM_STEP_GPUS unset)",
				  node);
	pos = list_pos(step, gpu, NULL, 0);
	if (pos < 0)
		return hexi_error(HEXI_ERR_NODEV,
				  "node %s: the plan gives this task GPU %d "
				  "but Slurm gave it GPUs %.64s",
				  node, gpu, step);
	if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", vis, sizeof(vis)) !=
		ESPANK_SUCCESS ||
	    list_pos(vis, -1 - pos, cvd, cap) != pos)
		snprintf(cvd, cap, "%d", gpu);
	return HEXI_OK;
}

typedef struct env_kv {
	const char *name;
	char value[HX_PATH_MAX];
} env_kv;

static int export_all(spank_t sp, const hx_handoff *h, const hx_task_role *r,
		      const char *cvd)
{
	env_kv kv[] = {
	    {"HEXISCALE_PLAN", ""},
	    {"HEXISCALE_PLAN_HASH", ""},
	    {"HEXISCALE_RANK", ""},
	    {"HEXISCALE_WORLD_SIZE", ""},
	    {"HEXISCALE_NPIPELINES", ""},
	    {"HEXISCALE_PIPELINE", ""},
	    {"HEXISCALE_STAGE", ""},
	    {"HEXISCALE_NSTAGES", ""},
	    {"HEXISCALE_TP_RANK", ""},
	    {"HEXISCALE_TP_SIZE", ""},
	    {"HEXISCALE_LAYER_BEGIN", ""},
	    {"HEXISCALE_LAYER_END", ""},
	    {"HEXISCALE_PIPELINE_BATCH", ""},
	    {"HEXISCALE_MICRO_BATCHES", ""},
	    {"HEXISCALE_MICRO_BATCH_SIZE", ""},
	    {"HEXISCALE_GPU", ""},
	    {"HEXISCALE_GPU_TYPE", ""},
	    {"RANK", ""},
	    {"WORLD_SIZE", ""},
	    {"LOCAL_RANK", ""},
	    {"LOCAL_WORLD_SIZE", ""},
	    {"MASTER_ADDR", ""},
	    {"MASTER_PORT", ""},
	    {"CUDA_VISIBLE_DEVICES", ""},
	    {"CUDA_DEVICE_ORDER", ""},
	};
	int n = 0;

#define V(...) snprintf(kv[n++].value, sizeof(kv[0].value), __VA_ARGS__)
	V("%s", h->plan_path);
	V("%s", h->plan_hash);
	V("%d", r->rank);
	V("%d", h->world_size);
	V("%d", h->npipelines);
	V("%d", r->pipeline);
	V("%d", r->stage);
	V("%d", r->nstages);
	V("%d", r->tp_rank);
	V("%d", r->tp_size);
	V("%d", r->layer_begin);
	V("%d", r->layer_end);
	V("%d", r->batch);
	V("%d", r->micro_batches);
	V("%d", r->batch / r->micro_batches);
	V("%d", r->gpu);
	V("%s", h->gpu_type[r->node]);
	V("%d", r->rank);
	V("%d", h->world_size);
	V("%d", r->local_rank);
	V("%d", r->local_world_size);
	V("%s", h->master_addr);
	V("%d", h->master_port);
	V("%s", cvd);
	V("%s", "PCI_BUS_ID");
#undef V
	for (int i = 0; i < n; i++) {
		if (kv[i].value[0] == '\0' || !hexi_is_printable(kv[i].value)) {
			hx_err("refusing to export %s: empty or not printable",
			       kv[i].name);
			return -1;
		}
		if (spank_setenv(sp, kv[i].name, kv[i].value, 1) !=
		    ESPANK_SUCCESS) {
			hx_err("cannot set %s in the task environment",
			       kv[i].name);
			return -1;
		}
	}
	return 0;
}

/* The hand-off must be for this very step and task. */
static int check_ids(spank_t sp, const hx_handoff *h, uint32_t *gtid)
{
	uint32_t job = 0, step = 0, node = 0;

	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_TASK_GLOBAL_ID, gtid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_NODEID, &node) != ESPANK_SUCCESS) {
		hx_err("cannot get job, step, task and node ids from Slurm");
		return -1;
	}
	if (h->job_id != job || h->step_id != step) {
		hx_err("the plan hand-off is for step %u.%u, not this step "
		       "%u.%u",
		       h->job_id, h->step_id, job, step);
		return -1;
	}
	if (*gtid >= (uint32_t)h->ntasks ||
	    (uint32_t)h->roles[*gtid].node != node) {
		hx_err("task %u on node index %u is not where plan %s put it",
		       *gtid, node, h->plan_hash);
		return -1;
	}
	return 0;
}

/* Name of the step's node with this index (SLURMD_NODENAME in the step
 * environment is the batch host's, so use SLURM_STEP_NODELIST). */
static void node_name(spank_t sp, int index, char *out, size_t cap)
{
	char list[1024];
	hostlist_t hl;
	char *h;

	snprintf(out, cap, "index %d", index); /* messages say "node %s" */
	if (spank_getenv(sp, "SLURM_STEP_NODELIST", list, sizeof(list)) !=
		ESPANK_SUCCESS ||
	    (hl = slurm_hostlist_create(list)) == NULL)
		return;
	for (int i = 0; (h = slurm_hostlist_shift(hl)) != NULL; i++) {
		if (i == index)
			hexi_strlcpy(out, h, cap);
		free(h);
	}
	slurm_hostlist_destroy(hl);
}

static int apply(spank_t sp, const hx_handoff *h)
{
	uint32_t gtid = 0;
	const hx_task_role *r;
	char node[HX_NAME_MAX] = "?", cvd[64], found[96];
	hexi_rc rc;

	if (check_ids(sp, h, &gtid) != 0)
		return -1;
	r = &h->roles[gtid];
	node_name(sp, r->node, node, sizeof(node));
	if (bind_gpu(sp, node, r->gpu, cvd, sizeof(cvd)) != HEXI_OK) {
		hx_err("task %u (rank %d): %s", gtid, r->rank,
		       hexi_errmsg(HEXI_ERR_NODEV));
		return -1;
	}
	rc = hx_nvml_check(hx_g_conf.nvml, r->gpu, h->gpu_type[r->node], found,
			   sizeof(found));
	if (rc == HEXI_ERR_NOTFOUND) {
		slurm_debug("hexiscale: NVML (%s) not available, GPU type of "
			    "task %u not checked",
			    hx_g_conf.nvml, gtid);
	} else if (rc != HEXI_OK) {
		hx_err("task %u (rank %d): GPU %d is a '%s' but plan %s "
		       "assumed '%s'",
		       gtid, r->rank, r->gpu, found, h->plan_hash,
		       h->gpu_type[r->node]);
		return -1;
	}
	return export_all(sp, h, r, cvd);
}

int hx_remote_task_init(spank_t sp, const char *conf_error)
{
	size_t cap = HX_HANDOFF_MAX + 64;
	char *buf = malloc(cap);
	hx_handoff h;
	spank_err_t e;
	int ret = -1;

	hx_handoff_init(&h);
	if (buf == NULL) {
		hx_err("no memory for the plan hand-off");
		return -1;
	}
	e = spank_getenv(sp, HX_HANDOFF_VAR, buf, (int)cap);
	if (e == ESPANK_ENV_NOEXIST) {
		ret = 0; /* no plan for this step */
		goto out;
	}
	spank_unsetenv(sp, HX_HANDOFF_VAR);
	if (e != ESPANK_SUCCESS) {
		hx_err("cannot read the plan hand-off: %s", spank_strerror(e));
	} else if (conf_error != NULL) {
		hx_err("plugstack.conf: %s", conf_error);
	} else if (hx_handoff_decode(buf, &h) != HEXI_OK) {
		hx_err("%s", hexi_errmsg(HEXI_ERR_PARSE));
	} else {
		ret = apply(sp, &h);
	}
out:
	hx_handoff_fini(&h);
	free(buf);
	return ret;
}
