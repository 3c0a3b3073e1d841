/*
 * test_remote.c - slurmstepd's side of the plugin (spank/remote.c, included
 * whole with state.c) on hand-offs made here, without Slurm: a plan path
 * with UTF-8 letters reaches the task as HEXISCALE_PLAN (every task of
 * such a step failed), Slurm's CUDA_VISIBLE_DEVICES entries of any UUID
 * form are kept whole (one of 16 bytes or more became the device index),
 * an entry that cannot be taken fails the task instead of being replaced,
 * and a MASTER_ADDR of 255 bytes arrives whole.  Slurm's SPANK calls are
 * stubbed below over a small environment table.
 */
#include "config.h"

#include "remote.c"
#include "state.c"
#include "tap.h"

#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>

/* ---- stubs: Slurm's SPANK API and hostlist, nvml.c ---------------------- */

#include "slurm_stub_log.h"

/* The task's environment: NENV names and heap values (NULL = unset). */
enum { NENV = 64 };
static char *env_k[NENV], *env_v[NENV];

static int env_slot(const char *k, int add)
{
	for (int i = 0; i < NENV; i++)
		if (env_k[i] != NULL && strcmp(env_k[i], k) == 0)
			return i;
	for (int i = 0; add && i < NENV; i++)
		if (env_k[i] == NULL && (env_k[i] = strdup(k)) != NULL)
			return i;
	return -1;
}

static void env_unset(const char *k)
{
	int i = env_slot(k, 0);

	if (i >= 0) {
		free(env_k[i]);
		free(env_v[i]);
		env_k[i] = env_v[i] = NULL;
	}
}

static int env_set(const char *k, const char *v)
{
	int i = env_slot(k, 1);

	if (i < 0)
		return -1;
	free(env_v[i]);
	env_v[i] = strdup(v);
	return env_v[i] == NULL ? -1 : 0;
}

static const char *env_get(const char *k)
{
	int i = env_slot(k, 0);

	return i < 0 ? NULL : env_v[i];
}

static void env_clear(void)
{
	for (int i = 0; i < NENV; i++)
		if (env_k[i] != NULL)
			env_unset(env_k[i]);
}

spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
	const char *v = env_get(var);

	(void)sp;
	if (v == NULL)
		return ESPANK_ENV_NOEXIST;
	if (strlen(v) >= (size_t)len)
		return ESPANK_NOSPACE;
	memcpy(buf, v, strlen(v) + 1);
	return ESPANK_SUCCESS;
}

spank_err_t spank_setenv(spank_t sp, const char *var, const char *val,
			 int overwrite)
{
	(void)sp;
	(void)overwrite;
	return env_set(var, val) == 0 ? ESPANK_SUCCESS : ESPANK_ERROR;
}

spank_err_t spank_unsetenv(spank_t sp, const char *var)
{
	(void)sp;
	env_unset(var);
	return ESPANK_SUCCESS;
}

const char *spank_strerror(spank_err_t e)
{
	return e == ESPANK_NOSPACE ? "buffer too small" : "spank error";
}

/* Job 7 step 0, one node; the task's global id is g_task. */
static uint32_t g_task;

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	va_list ap;
	uint32_t *p;

	(void)sp;
	va_start(ap, item);
	p = va_arg(ap, uint32_t *);
	va_end(ap);
	switch (item) {
	case S_JOB_ID:
		*p = 7;
		return ESPANK_SUCCESS;
	case S_JOB_STEPID:
	case S_JOB_NODEID:
		*p = 0;
		return ESPANK_SUCCESS;
	case S_TASK_GLOBAL_ID:
		*p = g_task;
		return ESPANK_SUCCESS;
	default:
		return ESPANK_ERROR;
	}
}

/* A hostlist of one plain name is all node_name() needs here. */
struct hostlist {
	char *name;
};

hostlist_t slurm_hostlist_create(const char *s)
{
	struct hostlist *h = calloc(1, sizeof(*h));

	if (h != NULL && (h->name = strdup(s)) == NULL) {
		free(h);
		h = NULL;
	}
	return h;
}

char *slurm_hostlist_shift(hostlist_t hl)
{
	char *n = hl->name;

	hl->name = NULL;
	return n;
}

void slurm_hostlist_destroy(hostlist_t hl)
{
	free(hl->name);
	free(hl);
}

hexi_rc hx_nvml_check(const char *lib, int gpu, const char *want_type,
		      char *found, size_t cap)
{
	(void)lib;
	(void)gpu;
	(void)want_type;
	(void)found;
	(void)cap;
	return HEXI_ERR_NOTFOUND;
}

/* ---- fixtures ----------------------------------------------------------- */

/* Step 7.0 on node n1: ntasks (1 or 2) tasks on GPUs 0.. of the plan, a
 * pipeline of ntasks stages; plan path pf, rank 0's address ma. */
static char *handoff_of(int ntasks, const char *pf, const char *ma)
{
	hx_handoff h;
	char *s = NULL;

	hx_handoff_init(&h);
	if (hx_handoff_alloc(&h, 1, ntasks) != HEXI_OK ||
	    hexi_strlcpy(h.plan_path, pf, sizeof(h.plan_path)) != HEXI_OK ||
	    hexi_strlcpy(h.master_addr, ma, sizeof(h.master_addr)) != HEXI_OK) {
		hx_handoff_fini(&h);
		return NULL;
	}
	h.job_id = 7;
	h.step_id = 0;
	strcpy(h.plan_hash, "0123456789abcdef");
	h.master_port = 29500;
	h.world_size = ntasks;
	h.npipelines = 1;
	strcpy(h.gpu_type[0], "a800");
	for (int t = 0; t < ntasks; t++)
		h.roles[t] = (hx_task_role){.rank = t,
					    .gpu = t,
					    .stage = t,
					    .nstages = ntasks,
					    .tp_size = 1,
					    .layer_begin = 8 * t,
					    .layer_end = 8 * t + 8,
					    .batch = 64,
					    .micro_batches = 4,
					    .local_rank = t,
					    .local_world_size = ntasks};
	if (hx_handoff_encode(&h, &s) != HEXI_OK)
		s = NULL;
	hx_handoff_fini(&h);
	return s;
}

/* task_init of task `task` in a fresh environment: the hand-off of
 * handoff_of(), the step's GPUs of the node (step_gpus, as
 * task_init_privileged sees them) and this task's CUDA_VISIBLE_DEVICES
 * (NULL: unset).  Its stderr (the plugin's messages) lands in err. */
static int task_init(int ntasks, uint32_t task, const char *pf, const char *ma,
		     const char *step_gpus, const char *cvd, char *err,
		     size_t cap)
{
	char *ho = handoff_of(ntasks, pf, ma), file[] = "/tmp/hx_rmtXXXXXX";
	int saved, fd, rc = -2;
	ssize_t n;

	err[0] = '\0';
	env_clear();
	g_task = task;
	if (ho == NULL || env_set(HX_HANDOFF_VAR, ho) != 0 ||
	    env_set("SLURM_STEP_GPUS", step_gpus) != 0 ||
	    env_set("SLURM_STEP_NODELIST", "n1") != 0 ||
	    (cvd != NULL && env_set("CUDA_VISIBLE_DEVICES", cvd) != 0)) {
		free(ho);
		return rc;
	}
	free(ho);
	fflush(stderr);
	saved = dup(2);
	fd = mkstemp(file);
	if (saved < 0 || fd < 0)
		return rc;
	unlink(file);
	dup2(fd, 2);
	hx_remote_task_privileged(NULL);
	rc = hx_remote_task_init(NULL, NULL);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, err, cap - 1, 0);
	err[n > 0 ? n : 0] = '\0';
	close(fd);
	return rc;
}

#define PF   "/tmp/hexiscale-plan.7.0.json"
#define UUID "6b5b7c1e-3a8e-4f1d-9c2b-5e2f4a1b9c3d"

/* ---- tests -------------------------------------------------------------- */

/* A plan directory with UTF-8 letters (the man pages' own examples) is
 * exported as HEXISCALE_PLAN; the task failed with "refusing to export
 * HEXISCALE_PLAN: empty or not printable". */
static void test_utf8_plan(void)
{
	static const char *const paths[] = {
	    "/home/jos\xc3\xa9/run/hexiscale-plan.7.0.json",
	    "/scratch/\xc3\xa9quipe/plans/hexiscale-plan.7.0.json",
	    "/data/\xe5\xae\x9f\xe9\xa8\x93/hexiscale-plan.7.0.json",
	};
	char err[2048];

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		int rc =
		    task_init(1, 0, paths[i], "n1", "0", "0", err, sizeof(err));

		is_int(rc, 0, "UTF-8 plan path #%zu: task_init succeeds", i);
		if (rc != 0)
			tap_diag("stderr: %s", err);
		is_str(env_get("HEXISCALE_PLAN"), paths[i],
		       "UTF-8 plan path #%zu: HEXISCALE_PLAN is the path", i);
		is_str(env_get("RANK"), "0", "UTF-8 plan path #%zu: RANK", i);
	}
}

/* export_all itself: HEXISCALE_PLAN takes the hand-off's UTF-8 rule,
 * not more (no Latin-1, no C1 control); every other value stays
 * printable ASCII. */
static void test_export_rules(void)
{
	static const struct {
		const char *pf, *type, *var;
	} rows[] = {
	    {"/home/jos\xe9/p.json", "a800", "HEXISCALE_PLAN"}, /* Latin-1 */
	    {"/tmp/\xc2\x9b"
	     "31m/p.json",
	     "a800", "HEXISCALE_PLAN"},			    /* C1 CSI */
	    {"/tmp/a\tb/p.json", "a800", "HEXISCALE_PLAN"}, /* control */
	    {PF, "a800-\xc3\xa9", "HEXISCALE_GPU_TYPE"},    /* ASCII only */
	};
	hx_task_role r = {.nstages = 1,
			  .tp_size = 1,
			  .layer_end = 8,
			  .batch = 4,
			  .micro_batches = 1,
			  .local_world_size = 1};
	char gpu_type[1][HX_NAME_MAX];
	hx_handoff h;
	char err[1024], file[] = "/tmp/hx_rmtXXXXXX";
	int saved = dup(2), fd = mkstemp(file);

	if (saved < 0 || fd < 0) {
		ok(0, "temporary file: %s", strerror(errno));
		return;
	}
	unlink(file);
	hx_handoff_init(&h);
	h.gpu_type = gpu_type;
	strcpy(h.plan_hash, "0123456789abcdef");
	strcpy(h.master_addr, "n1");
	h.world_size = h.npipelines = h.master_port = 1;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ssize_t n;
		int rc;

		strcpy(h.plan_path, rows[i].pf);
		strcpy(gpu_type[0], rows[i].type);
		env_clear();
		fflush(stderr);
		if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) {
			ok(0, "temporary file: %s", strerror(errno));
			break;
		}
		dup2(fd, 2);
		rc = export_all(NULL, &h, &r, "0");
		fflush(stderr);
		dup2(saved, 2);
		n = pread(fd, err, sizeof(err) - 1, 0);
		err[n > 0 ? n : 0] = '\0';
		ok(rc == -1 && strstr(err, rows[i].var) != NULL,
		   "export of bad %s #%zu refused, naming it", rows[i].var, i);
		if (strstr(err, rows[i].var) == NULL)
			tap_diag("stderr: %s", err);
	}
	close(fd);
	close(saved);
}

/* gpu_bind=single, the step holding GPU 3 of the node (plan GPU 0):
 * each form of Slurm's CUDA_VISIBLE_DEVICES entry is kept whole. */
static void test_cvd_forms(void)
{
	static const char *const cvd[] = {
	    "MIG-" UUID, "GPU-" UUID,
	    "MIG-GPU-" UUID "/13/7", /* the longest form, 50 bytes */
	    "0",		     /* cgroup-renumbered index */
	};
	char err[2048];

	hx_g_conf.gpu_bind_single = 1;
	for (size_t i = 0; i < sizeof(cvd) / sizeof(cvd[0]); i++) {
		int rc =
		    task_init(1, 0, PF, "n1", "3", cvd[i], err, sizeof(err));

		is_int(rc, 0, "CUDA_VISIBLE_DEVICES form #%zu: task_init", i);
		is_str(env_get("CUDA_VISIBLE_DEVICES"), cvd[i],
		       "CUDA_VISIBLE_DEVICES form #%zu kept whole", i);
		is_str(env_get("HEXISCALE_GPU"), "3",
		       "CUDA_VISIBLE_DEVICES form #%zu: HEXISCALE_GPU is "
		       "Slurm's index",
		       i);
	}
	/* no CUDA_VISIBLE_DEVICES: nothing renumbered, Slurm's index */
	is_int(task_init(1, 0, PF, "n1", "3", NULL, err, sizeof(err)), 0,
	       "no CUDA_VISIBLE_DEVICES: task_init");
	is_str(env_get("CUDA_VISIBLE_DEVICES"), "3",
	       "no CUDA_VISIBLE_DEVICES: Slurm's index");
	hx_g_conf.gpu_bind_single = 0;
}

/* The entry at the task's position is taken whatever the entries before
 * it are; one that cannot be taken fails the task with a message, never
 * the device index. */
static void test_cvd_entries(void)
{
	char longer[HX_DEV_NAME_MAX + 8], cvd[2 * sizeof(longer) + 64],
	    err[2048];
	int rc;

	memset(longer, 'x', sizeof(longer) - 1);
	memcpy(longer, "MIG-", 4);
	longer[sizeof(longer) - 1] = '\0';

	hx_g_conf.gpu_bind_single = 1;
	/* plan GPU 1 is Slurm's GPU 1, position 1: entry 0 is too long */
	snprintf(cvd, sizeof(cvd), "%s,GPU-%s", longer, UUID);
	rc = task_init(2, 1, PF, "n1", "0,1", cvd, err, sizeof(err));
	is_int(rc, 0, "a long entry before the task's is no error");
	is_str(env_get("CUDA_VISIBLE_DEVICES"), "GPU-" UUID,
	       "the task's own entry after a long one");

	snprintf(cvd, sizeof(cvd), "GPU-%s,%s", UUID, longer);
	rc = task_init(2, 1, PF, "n1", "0,1", cvd, err, sizeof(err));
	is_int(rc, -1, "the task's entry too long: task fails");
	ok(strstr(err, "longer than 63 bytes") != NULL &&
	       strstr(err, "node n1") != NULL,
	   "... with a message naming node and cause");
	ok(env_get("CUDA_VISIBLE_DEVICES") == NULL ||
	       strcmp(env_get("CUDA_VISIBLE_DEVICES"), "1") != 0,
	   "... and no device index in its place");
	if (strstr(err, "longer than") == NULL)
		tap_diag("stderr: %s", err);

	rc = task_init(2, 1, PF, "n1", "0,1", "GPU-" UUID, err, sizeof(err));
	is_int(rc, -1, "CUDA_VISIBLE_DEVICES without the task's entry: fails");
	ok(strstr(err, "has no entry 1") != NULL, "... saying so");

	rc =
	    task_init(2, 1, PF, "n1", "0,1", "GPU-" UUID ",", err, sizeof(err));
	is_int(rc, -1, "an empty entry for the task: fails");
	hx_g_conf.gpu_bind_single = 0;

	/* gpu_bind=local_rank: every GPU of the node, each entry whole */
	snprintf(cvd, sizeof(cvd), "MIG-%s,GPU-%s", UUID, UUID);
	rc = task_init(2, 1, PF, "n1", "0,1", cvd, err, sizeof(err));
	is_int(rc, 0, "local_rank binding with UUIDs: task_init");
	is_str(env_get("CUDA_VISIBLE_DEVICES"), cvd,
	       "local_rank binding: both UUIDs, in local-rank order");
	snprintf(cvd, sizeof(cvd), "%s,GPU-%s", longer, UUID);
	rc = task_init(2, 1, PF, "n1", "0,1", cvd, err, sizeof(err));
	is_int(rc, -1,
	       "local_rank binding, another task's entry too long: "
	       "task fails (not that GPU's index)");
}

/* A NodeAddr of 255 bytes reaches MASTER_ADDR whole (it was cut to the
 * node name at 64). */
static void test_master_addr(void)
{
	char ma[HX_HOST_MAX], err[2048];

	memset(ma, 'a', sizeof(ma) - 1);
	ma[sizeof(ma) - 1] = '\0';
	for (size_t i = 63; i < sizeof(ma) - 1; i += 64)
		ma[i] = '.';
	is_int(task_init(1, 0, PF, ma, "0", "0", err, sizeof(err)), 0,
	       "MASTER_ADDR of %zu bytes: task_init", strlen(ma));
	is_str(env_get("MASTER_ADDR"), ma, "MASTER_ADDR arrives whole");
}

int main(void)
{
	hx_conf_defaults(&hx_g_conf);
	test_utf8_plan();
	test_export_rules();
	test_cvd_forms();
	test_cvd_entries();
	test_master_addr();
	env_clear();
	return tap_done();
}
