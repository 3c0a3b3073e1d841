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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The longest entry of CUDA_VISIBLE_DEVICES we take, NUL included: an
 * index, "GPU-<uuid>" (40 bytes), "MIG-<uuid>" (40) or the older
 * "MIG-GPU-<uuid>/<gi>/<ci>" (at most 50) all fit.  A longer entry fails
 * the task (bind_gpu); it is never replaced by the device index. */
#define HX_DEV_NAME_MAX 64
/* CUDA_VISIBLE_DEVICES of a node: HX_GPUS_MAX such entries and commas. */
#define HX_CVD_MAX (HX_GPUS_MAX * HX_DEV_NAME_MAX)

/* Entry pos of a comma list into tok (NUL-terminated, at most cap-1
 * bytes).  HEXI_OK; HEXI_ERR_NOTFOUND if the list has no entry pos;
 * HEXI_ERR_RANGE if that entry is empty or does not fit cap (the entries
 * before it may have any length).  Sets no message: the caller names the
 * list. */
static hexi_rc list_entry(const char *list, int pos, char *tok, size_t cap)
{
	const char *p = list;

	for (int i = 0; *p != '\0'; i++) {
		size_t n = strcspn(p, ",");

		if (i == pos) {
			if (n == 0 || n >= cap)
				return HEXI_ERR_RANGE;
			memcpy(tok, p, n);
			tok[n] = '\0';
			return HEXI_OK;
		}
		p += n;
		if (*p == ',')
			p++;
	}
	return HEXI_ERR_NOTFOUND;
}

/* Position of device index gpu in a comma list of indices, or -1 (an
 * entry that is not an index is not gpu). */
static int list_index(const char *list, int gpu)
{
	char tok[16];
	hexi_rc rc;
	long v;

	for (int pos = 0; (rc = list_entry(list, pos, tok, sizeof(tok))) !=
			  HEXI_ERR_NOTFOUND;
	     pos++)
		if (rc == HEXI_OK &&
		    hexi_parse_long(tok, 0, 1 << 20, &v) == HEXI_OK && v == gpu)
			return pos;
	return -1;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* The step's GPUs of this node (SLURM_STEP_GPUS as task_init_privileged
 * sees it: per-task binding narrows it to the task's own GPU before
 * task_init).  Both hooks run in the task's own process, after fork. */
static char g_node_gpus[512];

void hx_remote_task_privileged(spank_t sp)
{
	if (spank_getenv(sp, "SLURM_STEP_GPUS", g_node_gpus,
			 sizeof(g_node_gpus)) != ESPANK_SUCCESS)
		g_node_gpus[0] = '\0';
}

/* Sorted device indices of a comma list into g (at most HX_GPUS_MAX);
 * returns their count, or -1 if one is not an index. */
static int sorted_list(const char *list, int *g)
{
	char tok[16];
	hexi_rc rc;
	long v;
	int n = 0;

	for (int pos = 0; (rc = list_entry(list, pos, tok, sizeof(tok))) !=
			  HEXI_ERR_NOTFOUND;
	     pos++) {
		if (rc != HEXI_OK || n == HX_GPUS_MAX ||
		    hexi_parse_long(tok, 0, 1 << 20, &v) != HEXI_OK)
			return -1;
		g[n++] = (int)v;
	}
	qsort(g, (size_t)n, sizeof(g[0]), cmp_int);
	return n;
}

/* Slurm's device index of plan GPU GPU of node NODE_I, given the step's
 * GPUs of the node (ALL).  srun plans on the job's first GPUs of each
 * node, because it cannot see which of them the controller gives the step
 * (doc/DECISIONS.md 174).  When the step holds all the plan's GPUs there,
 * they are used as planned.  A step that got others (another step of the
 * job holds the first ones) has at least as many there: the plan's j-th
 * smallest GPU of the node is then Slurm's j-th smallest, the order in
 * which both the plan and Slurm's --gpus-per-task give GPUs to tasks.  A
 * node has one GPU type, so the plan holds for them.  -1 if neither
 * applies. */
static int real_gpu(const hx_handoff *h, int node_i, const char *all, int gpu)
{
	int sg[HX_GPUS_MAX] = {0}, pg[HX_GPUS_MAX] = {0};
	int ns, np = 0, subset = 1, j = -1;

	if ((ns = sorted_list(all, sg)) < 0)
		return -1;
	for (int t = 0; t < h->ntasks; t++) {
		int g = h->roles[t].gpu, seen = 0;

		if (h->roles[t].node != node_i)
			continue;
		for (int k = 0; k < np; k++)
			seen |= pg[k] == g;
		if (seen)
			continue;
		if (np == HX_GPUS_MAX)
			return -1;
		pg[np++] = g;
		subset &= list_index(all, g) >= 0;
	}
	qsort(pg, (size_t)np, sizeof(pg[0]), cmp_int);
	for (int k = 0; k < np; k++)
		if (pg[k] == gpu)
			j = k;
	if (j < 0)
		return -1;
	if (subset)
		return gpu;
	return ns >= np ? sg[j] : -1;
}

/* The entry of this task's CUDA_VISIBLE_DEVICES at position pos (that of
 * Slurm's index real in SLURM_STEP_GPUS) into cvd: Slurm's name for the
 * GPU, an index (renumbered by cgroups or not) or a UUID.  Without
 * CUDA_VISIBLE_DEVICES nothing is renumbered: real itself.  An entry
 * that is missing, empty or too long is an error, never the index. */
static hexi_rc vis_entry(spank_t sp, const char *node, int pos, int real,
			 char *cvd, size_t cap)
{
	char vis[HX_CVD_MAX], tok[HX_DEV_NAME_MAX];
	spank_err_t e;
	hexi_rc rc;

	e = spank_getenv(sp, "CUDA_VISIBLE_DEVICES", vis, sizeof(vis));
	if (e == ESPANK_ENV_NOEXIST) {
		snprintf(cvd, cap, "%d", real);
		return HEXI_OK;
	}
	if (e != ESPANK_SUCCESS)
		return hexi_error(HEXI_ERR_RANGE,
				  "node %s: cannot read this task's "
				  "CUDA_VISIBLE_DEVICES (at most %zu bytes): "
				  "%s",
				  node, sizeof(vis) - 1, spank_strerror(e));
	rc = list_entry(vis, pos, tok, sizeof(tok));
	if (rc == HEXI_ERR_NOTFOUND)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "node %s: Slurm's CUDA_VISIBLE_DEVICES "
				  "%.64s%s has no entry %d for GPU %d",
				  node, vis, strlen(vis) > 64 ? "..." : "", pos,
				  real);
	if (rc != HEXI_OK || hexi_strlcpy(cvd, tok, cap) != HEXI_OK)
		return hexi_error(HEXI_ERR_RANGE,
				  "node %s: entry %d of Slurm's "
				  "CUDA_VISIBLE_DEVICES (GPU %d) is empty or "
				  "longer than %zu bytes",
				  node, pos, real,
				  (cap < sizeof(tok) ? cap : sizeof(tok)) - 1);
	return HEXI_OK;
}

/* CUDA_VISIBLE_DEVICES value and Slurm's index (*real) of plan GPU GPU of
 * node NODE_I: the real index's position in this task's SLURM_STEP_GPUS
 * picks the entry of the current CUDA_VISIBLE_DEVICES (vis_entry).
 * HEXI_ERR_NODEV if the task does not have it; other errors: Slurm's
 * CUDA_VISIBLE_DEVICES does not name it. */
static hexi_rc bind_gpu(spank_t sp, const hx_handoff *h, int node_i,
			const char *node, int gpu, int *real, char *cvd,
			size_t cap)
{
	char step[512];
	int pos;

	*real = -1;
	if (spank_getenv(sp, "SLURM_STEP_GPUS", step, sizeof(step)) !=
	    ESPANK_SUCCESS)
		return hexi_error(HEXI_ERR_NODEV,
				  "node %s: this task sees no GPUs "
				  "(SLURM_STEP_GPUS unset)",
				  node);
	*real = real_gpu(h, node_i, g_node_gpus[0] ? g_node_gpus : step, gpu);
	pos = *real < 0 ? -1 : list_index(step, *real);
	if (pos < 0)
		return hexi_error(HEXI_ERR_NODEV,
				  "node %s: the plan gives this task GPU %d "
				  "but Slurm gave it GPUs %.64s%s%.64s%s",
				  node, gpu, step,
				  g_node_gpus[0] ? " (the step: " : "",
				  g_node_gpus, g_node_gpus[0] ? ")" : "");
	return vis_entry(sp, node, pos, *real, cvd, cap);
}

/* CUDA_VISIBLE_DEVICES of a task.  gpu_bind=local_rank (default, as
 * torchrun): every GPU of this step on the node, in local-rank order, so
 * that device LOCAL_RANK is the task's own; gpu_bind=single: the task's GPU
 * alone (device 0).  Each entry is Slurm's name for the GPU (bind_gpu). */
static hexi_rc visible_devices(spank_t sp, const hx_handoff *h,
			       const hx_task_role *me, const char *node,
			       int *own, char *cvd, size_t cap)
{
	char one[HX_DEV_NAME_MAX];
	size_t len = 0;
	int real = -1;
	hexi_rc rc;

	if (hx_g_conf.gpu_bind_single)
		return bind_gpu(sp, h, me->node, node, me->gpu, own, cvd, cap);
	cvd[0] = '\0';
	for (int lr = 0; lr < me->local_world_size; lr++) {
		int gpu = -1;

		for (int t = 0; t < h->ntasks && gpu < 0; t++)
			if (h->roles[t].node == me->node &&
			    h->roles[t].local_rank == lr)
				gpu = h->roles[t].gpu;
		if (gpu < 0)
			return hexi_error(HEXI_ERR_INVAL,
					  "node %s: no task has local rank %d",
					  node, lr);
		/* another task's GPU may be missing from this task's
		 * SLURM_STEP_GPUS (per-task binding): its device index;
		 * any other error fails the task */
		rc = bind_gpu(sp, h, me->node, node, gpu, &real, one,
			      sizeof(one));
		if (rc != HEXI_OK &&
		    (lr == me->local_rank || rc != HEXI_ERR_NODEV))
			return rc;
		if (rc != HEXI_OK)
			snprintf(one, sizeof(one), "%d",
				 real >= 0 ? real : gpu);
		if (lr == me->local_rank)
			*own = real;
		len += (size_t)snprintf(cvd + len, cap - len, "%s%s",
					lr ? "," : "", one);
		if (len >= cap)
			return hexi_error(HEXI_ERR_RANGE,
					  "node %s: CUDA_VISIBLE_DEVICES too "
					  "long",
					  node);
	}
	return HEXI_OK;
}

/* Values of a task's environment that are neither a role field nor a
 * hand-off field. */
typedef struct task_vals {
	int micro_batch_size;
	const char *role; /* "train" or "idle" */
	const char *gpu_type;
	const char *cvd;
	const char *device_order;
} task_vals;

typedef enum env_src { FROM_ROLE, FROM_HANDOFF, FROM_TASK } env_src;
typedef enum env_kind { AS_INT, AS_CHARS, AS_STRING } env_kind;

/* One exported variable: where its value is (struct and offset), how it
 * is printed (int, char array, or const char pointer) and whether only a
 * training task has it (an idle task has no stage: unset there). */
typedef struct env_row {
	const char *name;
	env_src src;
	env_kind kind;
	size_t off;
	int train_only;
	int utf8; /* 1: well-formed UTF-8 text (hx_is_utf8_text), as the
		     hand-off's pf= carries it; 0: printable ASCII */
} env_row;

#define ROLE(n, f)                                                             \
	{                                                                      \
		n, FROM_ROLE, AS_INT, offsetof(hx_task_role, f), 0, 0          \
	}
#define STAGE(n, f)                                                            \
	{                                                                      \
		n, FROM_ROLE, AS_INT, offsetof(hx_task_role, f), 1, 0          \
	}
#define HO_INT(n, f)                                                           \
	{                                                                      \
		n, FROM_HANDOFF, AS_INT, offsetof(hx_handoff, f), 0, 0         \
	}
#define HO_STR(n, f)                                                           \
	{                                                                      \
		n, FROM_HANDOFF, AS_CHARS, offsetof(hx_handoff, f), 0, 0       \
	}
#define TASK(n, k, f)                                                          \
	{                                                                      \
		n, FROM_TASK, k, offsetof(task_vals, f), 0, 0                  \
	}
static const env_row env_rows[] = {
    /* the plan directory may have UTF-8 letters (/home/josé/run) */
    {"HEXISCALE_PLAN", FROM_HANDOFF, AS_CHARS, offsetof(hx_handoff, plan_path),
     0, 1},
    HO_STR("HEXISCALE_PLAN_HASH", plan_hash),
    ROLE("HEXISCALE_RANK", rank),
    HO_INT("HEXISCALE_WORLD_SIZE", world_size),
    HO_INT("HEXISCALE_NPIPELINES", npipelines),
    TASK("HEXISCALE_ROLE", AS_STRING, role),
    STAGE("HEXISCALE_PIPELINE", pipeline),
    STAGE("HEXISCALE_STAGE", stage),
    STAGE("HEXISCALE_NSTAGES", nstages),
    STAGE("HEXISCALE_TP_RANK", tp_rank),
    STAGE("HEXISCALE_TP_SIZE", tp_size),
    STAGE("HEXISCALE_LAYER_BEGIN", layer_begin),
    STAGE("HEXISCALE_LAYER_END", layer_end),
    STAGE("HEXISCALE_PIPELINE_BATCH", batch),
    STAGE("HEXISCALE_MICRO_BATCHES", micro_batches),
    {"HEXISCALE_MICRO_BATCH_SIZE", FROM_TASK, AS_INT,
     offsetof(task_vals, micro_batch_size), 1, 0},
    ROLE("HEXISCALE_GPU", gpu),
    TASK("HEXISCALE_GPU_TYPE", AS_STRING, gpu_type),
    ROLE("RANK", rank),
    HO_INT("WORLD_SIZE", world_size),
    ROLE("LOCAL_RANK", local_rank),
    ROLE("LOCAL_WORLD_SIZE", local_world_size),
    HO_STR("MASTER_ADDR", master_addr),
    HO_INT("MASTER_PORT", master_port),
    TASK("CUDA_VISIBLE_DEVICES", AS_STRING, cvd),
    TASK("CUDA_DEVICE_ORDER", AS_STRING, device_order),
};
#undef ROLE
#undef STAGE
#undef HO_INT
#undef HO_STR
#undef TASK

/* The value of row e into buf; 0, or -1 if it does not fit cap. */
static int env_value(const env_row *e, const void *const base[3], char *buf,
		     size_t cap)
{
	const char *p = (const char *)base[e->src] + e->off;
	int n;

	if (e->kind == AS_INT)
		n = snprintf(buf, cap, "%d", *(const int *)(const void *)p);
	else if (e->kind == AS_CHARS)
		n = snprintf(buf, cap, "%s", p);
	else
		n = snprintf(buf, cap, "%s",
			     *(const char *const *)(const void *)p);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* Every value is checked before it is set: printable ASCII, except
 * HEXISCALE_PLAN, which is checked with the hand-off's own rule for pf=
 * (well-formed UTF-8 of printable code points): srun accepts such a plan
 * directory on purpose, so the task must not refuse it. */
static int export_all(spank_t sp, const hx_handoff *h, const hx_task_role *r,
		      const char *cvd)
{
	const task_vals tv = {
	    .micro_batch_size =
		r->micro_batches > 0 ? r->batch / r->micro_batches : 0,
	    .role = r->idle ? "idle" : "train",
	    .gpu_type = h->gpu_type[r->node],
	    .cvd = cvd,
	    .device_order = "PCI_BUS_ID"};
	const void *const base[3] = {
	    [FROM_ROLE] = r, [FROM_HANDOFF] = h, [FROM_TASK] = &tv};
	/* the longest value: CUDA_VISIBLE_DEVICES or the plan path */
	char value[HX_CVD_MAX > HX_PATH_MAX ? HX_CVD_MAX : HX_PATH_MAX];

	for (size_t i = 0; i < sizeof(env_rows) / sizeof(env_rows[0]); i++) {
		const env_row *e = &env_rows[i];

		if (e->train_only && r->idle) {
			/* never a stale stage from srun's environment */
			spank_unsetenv(sp, e->name);
			continue;
		}
		if (env_value(e, base, value, sizeof(value)) != 0 ||
		    value[0] == '\0' ||
		    !(e->utf8 ? hx_is_utf8_text(value)
			      : hexi_is_printable(value))) {
			hx_err("refusing to export %s: empty, longer than %zu "
			       "bytes or not %s",
			       e->name, sizeof(value) - 1,
			       e->utf8 ? "UTF-8 text" : "printable ASCII");
			return -1;
		}
		if (spank_setenv(sp, e->name, value, 1) != ESPANK_SUCCESS) {
			hx_err("cannot set %s in the task environment",
			       e->name);
			return -1;
		}
	}
	return 0;
}

/* A heterogeneous step's hand-off (version 3): this task's component is
 * the one with its job id, and there S_TASK_GLOBAL_ID and S_JOB_NODEID
 * count within the component (measured, doc/DECISIONS.md 135), so the
 * step's global task id and node index are the component's offsets plus
 * those; the component must have the planned number of tasks and nodes,
 * and SLURM_PROCID (Slurm's global id) must agree.  The step id is not
 * checked: srun makes this hand-off before Slurm numbers the step (the
 * hand-off never outlives srun's environment: srun replaces or removes
 * it, and every task removes it from its own). */
static int check_het_ids(spank_t sp, const hx_handoff *h, uint32_t job,
			 uint32_t *gtid, uint32_t *node)
{
	const hx_handoff_comp *c = NULL;
	uint32_t ntasks = 0, nnodes = 0;
	char procid[32];
	long pid;

	for (int k = 0; k < h->ncomps; k++)
		if (h->comps[k].job_id == job)
			c = &h->comps[k];
	if (c == NULL) {
		hx_err("the plan hand-off is for heterogeneous job %u, not "
		       "job %u",
		       h->job_id, job);
		return -1;
	}
	if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks) !=
		ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_NNODES, &nnodes) != ESPANK_SUCCESS ||
	    (int)ntasks != c->ntasks || (int)nnodes != c->nnodes ||
	    *gtid >= ntasks || *node >= nnodes) {
		hx_err("job %u: %u tasks on %u nodes here, but plan %s has %d "
		       "tasks on %d nodes in this component",
		       job, ntasks, nnodes, h->plan_hash, c->ntasks, c->nnodes);
		return -1;
	}
	*gtid += (uint32_t)c->task_off;
	*node += (uint32_t)c->node_off;
	if (spank_getenv(sp, "SLURM_PROCID", procid, sizeof(procid)) ==
		ESPANK_SUCCESS &&
	    (hexi_parse_long(procid, 0, HX_TASKS_MAX, &pid) != HEXI_OK ||
	     pid != (long)*gtid)) {
		hx_err("task %u of job %u: SLURM_PROCID is %.16s, plan %s "
		       "expected %u",
		       *gtid - (uint32_t)c->task_off, job, procid, h->plan_hash,
		       *gtid);
		return -1;
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
	if (h->ncomps > 0) {
		if (check_het_ids(sp, h, job, gtid, &node) != 0)
			return -1;
	} else if (h->job_id != job || h->step_id != step) {
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
 * environment is the batch host's, so use SLURM_STEP_NODELIST).  In a
 * heterogeneous step that list is the whole step's, sorted by name, and
 * SLURM_NODEID indexes it, not the plan's node order. */
static void node_name(spank_t sp, const hx_handoff *ho, int index, char *out,
		      size_t cap)
{
	char list[1024], nid[32];
	hostlist_t hl;
	char *h;
	long v;

	snprintf(out, cap, "index %d", index); /* messages say "node %s" */
	if (ho->ncomps > 0) {
		if (spank_getenv(sp, "SLURM_NODEID", nid, sizeof(nid)) !=
			ESPANK_SUCCESS ||
		    hexi_parse_long(nid, 0, HX_NODES_MAX, &v) != HEXI_OK)
			return;
		index = (int)v;
	}
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
	hx_task_role me, *r = &me;
	char node[HX_NAME_MAX] = "?", cvd[HX_CVD_MAX], found[96];
	hexi_rc rc;
	int real = -1;

	if (check_ids(sp, h, &gtid) != 0)
		return -1;
	me = h->roles[gtid];
	node_name(sp, h, r->node, node, sizeof(node));
	rc = visible_devices(sp, h, r, node, &real, cvd, sizeof(cvd));
	if (rc == HEXI_OK && real < 0)
		rc = hexi_error(HEXI_ERR_NODEV, "node %s: no GPU for this task",
				node);
	if (rc != HEXI_OK) {
		hx_err("task %u (rank %d): %s", gtid, r->rank, hexi_errmsg(rc));
		return -1;
	}
	if (real != me.gpu)
		slurm_info("hexiscale: task %u (rank %d): plan %s GPU %d of "
			   "node %s is Slurm's GPU %d in this step",
			   gtid, me.rank, h->plan_hash, me.gpu, node, real);
	me.gpu = real; /* HEXISCALE_GPU and the NVML check: Slurm's */
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
