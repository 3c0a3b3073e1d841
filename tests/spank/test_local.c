/*
 * test_local.c - srun's side of the plugin (spank/local.c, included whole
 * with state.c) on hand-made plans, without Slurm: the summary names the
 * step's nodes when a plan for other node names is applied by position,
 * a plan directory with UTF-8 letters (/tmp/.../josé) works end to end,
 * and a step whose hand-off cannot be made leaves no plan file behind.
 * Rank 0's NodeAddr reaches the hand-off whole up to 255 bytes, and one
 * that does not fit stops the step (it became the node name).  Slurm's
 * functions and sched_dl.c are stubbed below (discover.c is linked over
 * the stubs); the planner library is linked, not loaded with dlopen.
 */
#include "config.h"

#include "discover.c"
#include "local.c"
#include "state.c"
#include "tap.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>

/* ---- stubs: Slurm, discover.c, sched_dl.c ------------------------------- */

#include "slurm_stub_log.h"

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	(void)sp;
	(void)item;
	return ESPANK_ERROR;
}

spank_err_t spank_option_getopt(spank_t sp, struct spank_option *opt,
				char **arg)
{
	(void)sp;
	(void)opt;
	(void)arg;
	return ESPANK_ERROR;
}

/* discover.c is linked whole; Slurm's controller knows no job, and node
 * stepA's NodeAddr is g_node_addr (NULL: none). */
static const char *g_node_addr;

int slurm_load_job(job_info_msg_t **resp, uint32_t job_id, uint16_t show_flags)
{
	(void)job_id;
	(void)show_flags;
	*resp = NULL;
	return -1;
}

void slurm_free_job_info_msg(job_info_msg_t *msg)
{
	(void)msg;
}

slurm_step_layout_t *slurm_job_step_layout_get(slurm_step_id_t *step_id)
{
	(void)step_id;
	return NULL;
}

void slurm_job_step_layout_free(slurm_step_layout_t *layout)
{
	(void)layout;
}

int slurm_get_errno(void)
{
	return 0;
}

char *slurm_strerror(int errnum)
{
	(void)errnum;
	return (char *)"no controller in this test";
}

hostlist_t slurm_hostlist_create(const char *s)
{
	(void)s;
	return NULL;
}

char *slurm_hostlist_shift(hostlist_t hl)
{
	(void)hl;
	return NULL;
}

void slurm_hostlist_destroy(hostlist_t hl)
{
	(void)hl;
}

int slurm_load_node_single(node_info_msg_t **resp, char *node_name,
			   uint16_t show_flags)
{
	static node_info_t node;
	static node_info_msg_t msg = {.record_count = 1, .node_array = &node};

	(void)show_flags;
	*resp = NULL;
	if (strcmp(node_name, "stepA") != 0)
		return -1;
	node.name = node_name;
	node.node_addr = (char *)g_node_addr;
	*resp = &msg;
	return 0;
}

void slurm_free_node_info_msg(node_info_msg_t *msg)
{
	(void)msg;
}

hexi_rc hx_sched_open(const char *path, hx_sched *s)
{
	(void)path;
	(void)s;
	return HEXI_ERR_UNSUPPORTED;
}

void hx_sched_close(hx_sched *s)
{
	(void)s;
}

hexi_rc hx_sched_err(const hx_sched *s, hexi_rc rc, const char *what)
{
	if (rc == HEXI_OK)
		return HEXI_OK;
	return hexi_error(rc, "%s: %s", what, s->hexi_errmsg(rc));
}

hexi_rc hx_sched_catalog(const hx_sched *s, hexi_catalog **out)
{
	return hx_sched_err(s, s->hexi_catalog_builtin(out), "catalog");
}

/* ---- fixtures ----------------------------------------------------------- */

/* The planner library linked in, as hx_sched_open would load it. */
static void lib_direct(hx_sched *s)
{
	memset(s, 0, sizeof(*s));
#define HX_SCHED_DIRECT(name) s->name = name;
	HX_SCHED_SYMBOLS(HX_SCHED_DIRECT)
	HX_SCHED_OPTIONAL(HX_SCHED_DIRECT)
#undef HX_SCHED_DIRECT
}

/* Step nodes names[i] with gpus[i] a800 GPUs, one task per GPU, task ids
 * in node order. */
static int alloc_nodes(hx_alloc *a, int nnodes, const char *const *names,
		       const int *gpus)
{
	int t = 0;

	a->nodes = calloc((size_t)nnodes, sizeof(*a->nodes));
	if (a->nodes == NULL)
		return -1;
	a->nnodes = nnodes;
	for (int i = 0; i < nnodes; i++) {
		hx_alloc_node *n = &a->nodes[i];

		hexi_strlcpy(n->name, names[i], sizeof(n->name));
		hexi_strlcpy(n->gres.type, "a800", sizeof(n->gres.type));
		n->gres.ngpus = n->ntasks = gpus[i];
		n->tids = calloc((size_t)gpus[i], sizeof(*n->tids));
		if (n->tids == NULL)
			return -1;
		for (int g = 0; g < gpus[i]; g++) {
			n->gres.idx[g] = g;
			n->tids[g] = (uint32_t)t++;
		}
	}
	a->ntasks = t;
	return 0;
}

/* A plan of tiny-8l over nodes names[i] with gpus[i] a800 GPUs and
 * npipelines zeroed pipelines (the caller fills them and hashes). */
static hexi_plan *plan_new(int nnodes, const char *const *names,
			   const int *gpus, int global_batch, int npipelines)
{
	hexi_cluster *cl = NULL;
	hexi_plan *p = NULL;
	hexi_model m;
	hexi_train t;
	hexi_rc rc = hexi_cluster_create(nnodes, NULL, &cl);

	for (int i = 0; rc == HEXI_OK && i < nnodes; i++)
		rc = hexi_cluster_set_node(cl, i, names[i], "a800", gpus[i],
					   NULL, 0);
	if (rc == HEXI_OK) {
		cl->inter_bw_gbps = 0.7;
		rc = hexi_model_builtin("tiny-8l", &m);
	}
	hexi_train_defaults(&t);
	t.global_batch = global_batch;
	t.micro_batch = 1;
	if (rc == HEXI_OK)
		rc = hexi_plan_new(cl, &m, &t, npipelines, &p);
	hexi_cluster_destroy(cl);
	if (rc != HEXI_OK)
		tap_diag("plan_new: %s", hexi_errmsg(rc));
	return rc == HEXI_OK ? p : NULL;
}

/* One stage of pipeline pp: layers [l0, l1) on GPU gpu of plan node
 * node as rank. */
static int add_stage(hexi_pipeline *pp, int l0, int l1, int node, int gpu,
		     int rank)
{
	hexi_stage *st;

	st = realloc(pp->stages, (size_t)(pp->nstages + 1) * sizeof(*st));
	if (st == NULL)
		return -1;
	pp->stages = st;
	st = &pp->stages[pp->nstages++];
	memset(st, 0, sizeof(*st));
	st->layer_begin = l0;
	st->layer_end = l1;
	st->tp = 1;
	st->devices = calloc(1, sizeof(*st->devices));
	if (st->devices == NULL)
		return -1;
	st->devices[0] = (hexi_device){node, gpu, rank};
	return 0;
}

static void ctx_init(local_ctx *c, const char *plan_dir)
{
	memset(c, 0, sizeof(*c));
	hx_handoff_init(&c->ho);
	lib_direct(&c->lib);
	c->set.mode = HX_MODE_FILE;
	hexi_strlcpy(c->set.plan_dir, plan_dir, sizeof(c->set.plan_dir));
	hexi_strlcpy(c->set.plan_file, "user.json", sizeof(c->set.plan_file));
	c->alloc.job_id = 7;
}

/* Plan nodes in the plan's order -> step nodes 0.. (DECISIONS 31). */
static int map_by_position(local_ctx *c)
{
	c->nodemap = calloc((size_t)c->alloc.nnodes, sizeof(int));
	if (c->nodemap == NULL)
		return -1;
	for (int i = 0; i < c->alloc.nnodes; i++)
		c->nodemap[i] = i;
	return 0;
}

/* What fn(c) writes on stderr, in buf. */
static hexi_rc capture(hexi_rc (*fn)(local_ctx *), local_ctx *c,
		       const char *file, char *buf, size_t cap)
{
	int saved, fd;
	ssize_t n;
	hexi_rc rv;

	fflush(stderr);
	saved = dup(2);
	fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (saved < 0 || fd < 0)
		return HEXI_ERR_IO;
	dup2(fd, 2);
	rv = fn(c);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, cap - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	return rv;
}

/* Files in dir whose names start with prefix. */
static int count_files(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

/* ---- tests -------------------------------------------------------------- */

/* A user plan for nodes plan-a (2 GPUs) and plan-b (1) on a step of stepA
 * and stepB, by position: stage 0 on plan-a GPU 0, stage 1 on plan-b, GPU
 * 1 of plan-a idle.  The summary must name stepA and stepB (it named
 * plan-a and plan-b, nodes the step does not have).  Run in a plan
 * directory tmp/sub: "plans", and "josé" (refused before: "has control
 * characters"), whose plan path must reach the tasks. */
static void test_publish(const char *tmp, const char *sub)
{
	static const char *const plan_names[] = {"plan-a", "plan-b"};
	static const char *const step_names[] = {"stepA", "stepB"};
	static const int gpus[] = {2, 1};
	char dir[256], err[256], out[8192];
	hx_handoff d;
	local_ctx c;
	hexi_rc rv;
	const char *hv;

	snprintf(dir, sizeof(dir), "%s/%s", tmp, sub);
	snprintf(err, sizeof(err), "%s/stderr", tmp);
	ok(mkdir(dir, 0700) == 0, "plan directory %s", dir);
	ctx_init(&c, dir);
	c.alloc.step_id = 3;
	c.plan = plan_new(2, plan_names, gpus, 2, 1);
	if (c.plan == NULL || alloc_nodes(&c.alloc, 2, step_names, gpus) ||
	    map_by_position(&c) ||
	    add_stage(&c.plan->pipelines[0], 0, 4, 0, 0, 0) ||
	    add_stage(&c.plan->pipelines[0], 4, 8, 1, 0, 1) ||
	    (c.plan->idle = calloc(1, sizeof(hexi_device))) == NULL) {
		ok(0, "fixture");
		local_fini(&c);
		return;
	}
	c.plan->world_size = 2;
	c.plan->pipelines[0].batch = 2;
	c.plan->pipelines[0].micro_batches = 2;
	c.plan->nidle = 1;
	c.plan->idle[0] = (hexi_device){0, 1, 2};
	rv = hexi_plan_hash(c.plan);
	if (rv == HEXI_OK)
		rv = hexi_plan_validate(c.plan);
	is_int(rv, HEXI_OK, "hand-made plan is valid: %s",
	       rv ? hexi_errmsg(rv) : "");
	unsetenv(HX_HANDOFF_VAR);
	rv = capture(publish, &c, err, out, sizeof(out));
	is_int(rv, HEXI_OK, "published: %s", rv ? hexi_errmsg(rv) : "");
	tap_diag("summary:\n%s", out);
	ok(strstr(out, "layers 0-3 on stepA 1xa800-80g") != NULL &&
	       strstr(out, "layers 4-7 on stepB 1xa800-80g") != NULL,
	   "summary: the stages on the step's nodes stepA, stepB");
	ok(strstr(out, " stepA (a800-80g) 1") != NULL,
	   "summary: the idle GPU on the step's node stepA");
	ok(strstr(out, "plan-a") == NULL && strstr(out, "plan-b") == NULL,
	   "summary names no node of the plan's own");
	ok(strncmp(c.plan_path, dir, strlen(dir)) == 0 &&
	       access(c.plan_path, R_OK) == 0,
	   "plan file in the plan directory: %s", c.plan_path);
	hv = getenv(HX_HANDOFF_VAR);
	ok(hv != NULL && hx_handoff_decode(hv, &d) == HEXI_OK &&
	       strcmp(d.plan_path, c.plan_path) == 0,
	   "the tasks' hand-off decodes, naming the plan path");
	if (hv != NULL)
		hx_handoff_fini(&d);
	unsetenv(HX_HANDOFF_VAR);
	unlink(c.plan_path);
	unlink(err);
	rmdir(dir);
	local_fini(&c);
}

/* The plan directory check: UTF-8 letters pass; bytes that are not UTF-8
 * and control bytes are refused, and the message says so. */
static void test_plan_dir_text(void)
{
	static const struct {
		const char *dir;
		hexi_rc rc;
	} rows[] = {
	    {"/home/jos\xc3\xa9/run", HEXI_OK},
	    {"/data/\xe5\xae\x9f\xe9\xa8\x93", HEXI_OK},
	    {"/home/jos\xe9/run", HEXI_ERR_INVAL}, /* Latin-1 */
	    {"/tmp/\x1b[31m", HEXI_ERR_INVAL},
	    {"/tmp/\xc2\x9b"
	     "31m",
	     HEXI_ERR_INVAL}, /* C1 CSI */
	    {"/tmp/a;b", HEXI_ERR_INVAL},
	};
	local_ctx c;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		hexi_rc rc;

		ctx_init(&c, rows[i].dir);
		c.alloc.step_id = 0;
		rc = plan_path(&c);
		ok(rc == rows[i].rc &&
		       (rc == HEXI_OK ||
			(strstr(hexi_errmsg(rc), "not UTF-8") != NULL &&
			 hexi_is_printable(hexi_errmsg(rc)))),
		   "plan directory #%zu: %s", i,
		   rc == HEXI_OK ? "accepted" : hexi_errmsg(rc));
		local_fini(&c);
	}
}

/* 64 nodes x 64 GPUs, a pipeline per GPU: the plan file can be written
 * but the hand-off of 4096 rows is over its size limit.  The step gets no
 * plan, so no plan file may stay behind (it did). */
static void test_no_file_without_handoff(const char *tmp)
{
	enum { NN = 64, NG = 64 };
	const char *names[NN];
	char name[NN][16];
	int gpus[NN], r = 0;
	local_ctx c;
	hexi_rc rv;

	for (int i = 0; i < NN; i++) {
		snprintf(name[i], sizeof(name[i]), "s%d", i);
		names[i] = name[i];
		gpus[i] = NG;
	}
	ctx_init(&c, tmp);
	c.alloc.step_id = 4;
	c.plan = plan_new(NN, names, gpus, NN * NG, NN * NG);
	if (c.plan == NULL || alloc_nodes(&c.alloc, NN, names, gpus) ||
	    map_by_position(&c)) {
		ok(0, "fixture");
		local_fini(&c);
		return;
	}
	for (int n = 0; n < NN; n++)
		for (int g = 0; g < NG; g++, r++) {
			hexi_pipeline *pp = &c.plan->pipelines[r];

			pp->batch = pp->micro_batches = 1;
			if (add_stage(pp, 0, 8, n, g, r) != 0)
				break;
		}
	c.plan->world_size = r;
	rv = hexi_plan_hash(c.plan);
	is_int(rv, HEXI_OK, "plan of %d ranks hashed", r);
	rv = publish(&c);
	ok(rv == HEXI_ERR_RANGE && strstr(hexi_errmsg(rv), "hand-off") != NULL,
	   "hand-off of %d tasks refused: %s", r,
	   rv ? hexi_errmsg(rv) : "(published)");
	is_int(count_files(tmp, "hexiscale-plan.7.4."), 0,
	       "no plan file left for the step without a hand-off");
	ok(getenv(HX_HANDOFF_VAR) == NULL, "no hand-off set");
	local_fini(&c);
}

/* A step of one task on node stepA; *ma gets its hand-off's MASTER_ADDR
 * ("" if none), msg the error. */
static hexi_rc publish_single(const char *dir, uint32_t step, char *ma,
			      size_t ma_cap, char *msg, size_t msg_cap)
{
	static const char *const names[] = {"stepA"};
	static const int gpus[] = {1};
	const char *hv;
	hx_handoff d;
	local_ctx c;
	hexi_rc rv = HEXI_ERR_INTERNAL;

	ma[0] = msg[0] = '\0';
	ctx_init(&c, dir);
	c.alloc.step_id = step;
	c.plan = plan_new(1, names, gpus, 1, 1);
	if (c.plan != NULL && alloc_nodes(&c.alloc, 1, names, gpus) == 0 &&
	    map_by_position(&c) == 0 &&
	    add_stage(&c.plan->pipelines[0], 0, 8, 0, 0, 0) == 0) {
		c.plan->world_size = 1;
		c.plan->pipelines[0].batch = 1;
		c.plan->pipelines[0].micro_batches = 1;
		rv = hexi_plan_hash(c.plan);
	}
	unsetenv(HX_HANDOFF_VAR);
	if (rv == HEXI_OK)
		rv = publish(&c);
	if (rv != HEXI_OK)
		snprintf(msg, msg_cap, "%s", hexi_errmsg(rv));
	hv = getenv(HX_HANDOFF_VAR);
	if (rv == HEXI_OK && hv != NULL &&
	    hx_handoff_decode(hv, &d) == HEXI_OK) {
		hexi_strlcpy(ma, d.master_addr, ma_cap);
		hx_handoff_fini(&d);
	}
	if (rv == HEXI_OK)
		unlink(c.plan_path);
	unsetenv(HX_HANDOFF_VAR);
	local_fini(&c);
	return rv;
}

/* MASTER_ADDR is rank 0's NodeAddr whole: the name without one, 255 bytes
 * (a full DNS name) as they are; 256 bytes, or a ';' the hand-off cannot
 * carry, stop the step naming the node, and leave no plan file. */
static void test_master_addr(const char *tmp)
{
	char addr[HX_HOST_MAX + 1], ma[HX_HOST_MAX + 8], msg[512];
	hexi_rc rv;

	memset(addr, 'a', sizeof(addr) - 1);
	for (size_t i = 63; i < sizeof(addr) - 1; i += 64)
		addr[i] = '.';
	addr[HX_HOST_MAX] = '\0';     /* the 256-byte case below */
	addr[HX_HOST_MAX - 1] = '\0'; /* 255 bytes */

	g_node_addr = NULL;
	rv = publish_single(tmp, 5, ma, sizeof(ma), msg, sizeof(msg));
	is_int(rv, HEXI_OK, "no NodeAddr: published %s", msg);
	is_str(ma, "stepA", "no NodeAddr: MASTER_ADDR is the node name");

	g_node_addr = "10.1.2.3";
	rv = publish_single(tmp, 5, ma, sizeof(ma), msg, sizeof(msg));
	is_int(rv, HEXI_OK, "NodeAddr 10.1.2.3: published %s", msg);
	is_str(ma, "10.1.2.3", "NodeAddr 10.1.2.3: MASTER_ADDR");

	addr[64] = '\0';
	g_node_addr = addr;
	rv = publish_single(tmp, 5, ma, sizeof(ma), msg, sizeof(msg));
	is_int(rv, HEXI_OK, "NodeAddr of 64 bytes: published %s", msg);
	is_str(ma, addr, "NodeAddr of 64 bytes: MASTER_ADDR whole");
	addr[64] = 'a';

	rv = publish_single(tmp, 5, ma, sizeof(ma), msg, sizeof(msg));
	is_int(rv, HEXI_OK, "NodeAddr of 255 bytes: published %s", msg);
	is_str(ma, addr, "NodeAddr of 255 bytes: MASTER_ADDR whole");

	addr[HX_HOST_MAX - 1] = 'a'; /* 256 bytes */
	rv = publish_single(tmp, 6, ma, sizeof(ma), msg, sizeof(msg));
	ok(rv == HEXI_ERR_RANGE && strstr(msg, "node stepA") != NULL &&
	       strstr(msg, "NodeAddr of 256 bytes") != NULL,
	   "NodeAddr of 256 bytes: step refused naming node and cause: %s",
	   msg);
	is_int(count_files(tmp, "hexiscale-plan.7.6."), 0,
	       "... and no plan file left");

	g_node_addr = "10.1.2.3;x";
	rv = publish_single(tmp, 6, ma, sizeof(ma), msg, sizeof(msg));
	ok(rv == HEXI_ERR_INVAL && strstr(msg, "node stepA") != NULL,
	   "NodeAddr with ';': step refused naming the node: %s", msg);
	g_node_addr = NULL;
}

int main(void)
{
	char tmp[] = "/tmp/hx_localXXXXXX";

	hx_conf_defaults(&hx_g_conf);
	if (mkdtemp(tmp) == NULL) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 99;
	}
	test_publish(tmp, "plans");
	test_publish(tmp, "jos\xc3\xa9"); /* UTF-8 */
	test_plan_dir_text();
	test_no_file_without_handoff(tmp);
	test_master_addr(tmp);
	if (rmdir(tmp) != 0)
		tap_diag("%s left behind: %s", tmp, strerror(errno));
	return tap_done();
}
