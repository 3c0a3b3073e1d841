/*
 * boot.c - bootstrap: who am I (PMIx, mpirun or alone), which plan, which
 * role; checks that plan, world size and environment agree; watchdog.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif
#ifdef HAVE_PMIX
#include <pmix.h>
#endif

#include "rt_dist.h"
#ifdef RT_GPU
#include "rt_cuda.h"
#define BUILT_CUDA 1
#else
#define BUILT_CUDA 0
#endif

#define RT_MAX_PLAN_BYTES (64u << 20)

void hexi_rt_opts_defaults(hexi_rt_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->model = "tiny-4l";
	o->global_batch = 8;
	o->micro_batches = 1;
	o->backend = NULL; /* $HEXISCALE_BACKEND, else mpi */
}

const char *hexi_rt_launcher_name(hexi_rt_launcher l)
{
	switch (l) {
	case HEXI_LAUNCH_PMIX:
		return "pmix";
	case HEXI_LAUNCH_MPIRUN:
		return "mpirun";
	default:
		return "single";
	}
}

/* ---- environment -------------------------------------------------------- */

/* Optional integer variable: *out = -1 when unset; error when malformed. */
static hexi_rc env_int(const char *name, long max, long *out)
{
	const char *s = getenv(name);
	hexi_rc rc;

	*out = -1;
	if (s == NULL || *s == '\0')
		return HEXI_OK;
	rc = hexi_parse_long(s, 0, max, out);
	if (rc != HEXI_OK)
		return hexi_error(rc,
				  "environment %s='%.40s': not an integer "
				  "in 0..%ld",
				  name, s, max);
	return HEXI_OK;
}

#ifdef HAVE_PMIX
static hexi_rc pmix_u32(const pmix_proc_t *p, const char *key, long *out)
{
	pmix_value_t *v = NULL;
	pmix_status_t st = PMIx_Get(p, key, NULL, 0, &v);

	if (st != PMIX_SUCCESS || v == NULL)
		return hexi_error(HEXI_ERR_PMIX, "PMIx_Get(%s): %s", key,
				  PMIx_Error_string(st));
	switch (v->type) {
	case PMIX_UINT32:
		*out = v->data.uint32;
		break;
	case PMIX_UINT16:
		*out = v->data.uint16;
		break;
	case PMIX_INT:
		*out = v->data.integer;
		break;
	case PMIX_PROC_RANK:
		*out = v->data.rank;
		break;
	default: {
		int type = (int)v->type; /* read before the release frees v */

		PMIX_VALUE_RELEASE(v);
		return hexi_error(HEXI_ERR_PMIX, "PMIx_Get(%s): value type %d",
				  key, type);
	}
	}
	PMIX_VALUE_RELEASE(v);
	return HEXI_OK;
}

/* Rank is in the proc returned by PMIx_Init (PMIx_Get(PMIX_RANK) is not
 * served by Slurm 22.05): see SLURM-FACTS.md. */
static hexi_rc boot_pmix(hexi_rt *rt)
{
	pmix_proc_t me, wild;
	pmix_status_t st;
	long v;
	hexi_rc rc;

	st = PMIx_Init(&me, NULL, 0);
	if (st != PMIX_SUCCESS)
		return hexi_error(HEXI_ERR_PMIX, "PMIx_Init: %s",
				  PMIx_Error_string(st));
	rt->pmix_started = 1;
	rt->launch_rank = (int)me.rank;
	PMIX_PROC_CONSTRUCT(&wild);
	PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
	rc = pmix_u32(&wild, PMIX_JOB_SIZE, &v);
	if (rc != HEXI_OK)
		return rc;
	rt->ntasks = (int)v;
	if (pmix_u32(&me, PMIX_LOCAL_RANK, &v) == HEXI_OK)
		rt->local_rank = (int)v;
	if (pmix_u32(&wild, PMIX_LOCAL_SIZE, &v) == HEXI_OK)
		rt->local_size = (int)v;
	if (pmix_u32(&me, PMIX_NODEID, &v) == HEXI_OK)
		rt->node = (int)v;
	hexi_error_clear();
	return HEXI_OK;
}
#endif

/* Learn rank, size and launcher; start PMIx when it is there. */
static hexi_rc boot_identity(hexi_rt *rt)
{
	long r, s, lr, ls;
	hexi_rc rc;

	rt->ntasks = 1;
	rt->world_size = 1;
	rt->local_size = 1;
	rt->launcher = HEXI_LAUNCH_SINGLE;
	if ((rc = env_int("OMPI_COMM_WORLD_RANK", HEXI_MAX_GPUS, &r)) ||
	    (rc = env_int("OMPI_COMM_WORLD_SIZE", HEXI_MAX_GPUS, &s)) ||
	    (rc = env_int("OMPI_COMM_WORLD_LOCAL_RANK", HEXI_MAX_GPUS, &lr)) ||
	    (rc = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", HEXI_MAX_GPUS, &ls)))
		return rc;
	if (r >= 0 && s > 0) {
		rt->launcher = HEXI_LAUNCH_MPIRUN;
		rt->launch_rank = (int)r;
		rt->ntasks = (int)s;
		rt->local_rank = lr >= 0 ? (int)lr : 0;
		rt->local_size = ls > 0 ? (int)ls : 1;
		return HEXI_OK;
	}
	if (getenv("PMIX_NAMESPACE") != NULL && getenv("PMIX_RANK") != NULL) {
#ifdef HAVE_PMIX
		rt->launcher = HEXI_LAUNCH_PMIX;
		return boot_pmix(rt);
#else
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "started by a PMIx launcher but built "
				  "without PMIx (configure --with-pmix)");
#endif
	}
	return HEXI_OK;
}

/* The plan rank is HEXISCALE_RANK when set (hexiscale-env(7): it may
 * differ from the launcher's task id), else the launcher's rank; RANK must
 * agree.  WORLD_SIZE is checked against the plan (check_env_world): it
 * counts the training ranks, which may be fewer than the tasks. */
static hexi_rc env_identity(hexi_rt *rt)
{
	long hr, r;
	hexi_rc rc;

	if ((rc = env_int("HEXISCALE_RANK", HEXI_MAX_GPUS, &hr)) ||
	    (rc = env_int("RANK", HEXI_MAX_GPUS, &r)))
		return rc;
	rt->rank = hr >= 0 ? (int)hr : rt->launch_rank;
	if (rt->rank >= rt->ntasks)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "task %d (%s): HEXISCALE_RANK=%d but the job "
				  "has %d ranks",
				  rt->launch_rank,
				  hexi_rt_launcher_name(rt->launcher), rt->rank,
				  rt->ntasks);
	if (r >= 0 && r != rt->rank)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "rank %d (%s task %d): environment RANK=%ld "
				  "differs",
				  rt->rank, hexi_rt_launcher_name(rt->launcher),
				  rt->launch_rank, r);
	return HEXI_OK;
}

/* Collective over every task, after env_identity succeeded everywhere: no
 * two tasks claim one plan rank (HEXISCALE_RANK), found before the plan is
 * read so that the message names the cause. */
static hexi_rc unique_ranks(hexi_rt *rt)
{
	hexi_rc rc = HEXI_OK;
#ifdef HAVE_MPI
	int *n;

	if (!rt->mpi_started || rt->ntasks == 1)
		return HEXI_OK;
	n = calloc((size_t)rt->ntasks, sizeof(*n));
	/* (n == NULL makes all_ok false everywhere; said twice for the
	 * analyzer, which cannot see through the collective) */
	if (!hexi_rt_all_ok(rt, n != NULL) || n == NULL) {
		free(n);
		return hexi_error(HEXI_ERR_NOMEM, "rank %d: rank table",
				  rt->rank);
	}
	n[rt->rank] = 1;
	if (MPI_Allreduce(MPI_IN_PLACE, n, rt->ntasks, MPI_INT, MPI_SUM,
			  MPI_COMM_WORLD) != MPI_SUCCESS)
		rc = hexi_error(HEXI_ERR_MPI, "rank %d: rank table", rt->rank);
	else if (n[rt->rank] > 1)
		rc = hexi_error(HEXI_ERR_MISMATCH,
				"plan rank %d is not unique: %d tasks have "
				"it (HEXISCALE_RANK of the tasks)",
				rt->rank, n[rt->rank]);
	free(n);
#else
	(void)rt;
#endif
	return rc;
}

/* WORLD_SIZE and HEXISCALE_WORLD_SIZE, when set, are the plan's training
 * ranks W (hexiscale-env(7)), for idle tasks too. */
static hexi_rc check_env_world(const hexi_rt *rt)
{
	static const char *const names[] = {"WORLD_SIZE",
					    "HEXISCALE_WORLD_SIZE"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		long v;
		hexi_rc rc = env_int(names[i], HEXI_MAX_GPUS, &v);

		if (rc != HEXI_OK)
			return rc;
		if (v >= 0 && v != rt->world_size)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "rank %d: %s%s=%ld but the %s has %d "
					  "ranks",
					  rt->rank, i ? "" : "environment ",
					  names[i], v,
					  rt->plan->nidle > 0 ? "plan" : "job",
					  rt->world_size);
	}
	return HEXI_OK;
}

/* HEXISCALE_ROLE, when set, is "train" or "idle" and the plan's. */
static hexi_rc check_env_kind(const hexi_rt *rt)
{
	const char *v = getenv("HEXISCALE_ROLE");
	const char *want = rt->role.idle ? "idle" : "train";

	if (v == NULL || *v == '\0')
		return HEXI_OK;
	if (strcmp(v, "idle") != 0 && strcmp(v, "train") != 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "rank %d: HEXISCALE_ROLE='%.20s' is neither "
				  "train nor idle",
				  rt->rank, v);
	if (strcmp(v, want) != 0)
		return hexi_error(
		    HEXI_ERR_MISMATCH,
		    "rank %d: HEXISCALE_ROLE=%s but plan %s gives "
		    "it the %s role",
		    rt->rank, v, rt->plan->hash, want);
	return HEXI_OK;
}

/* Optional HEXISCALE_* role variables must agree with the plan's role. */
static hexi_rc check_env_role(const hexi_rt *rt)
{
	static const struct {
		const char *name;
		size_t off;
	} vars[] = {
	    {"HEXISCALE_PIPELINE", offsetof(hexi_role, pipeline)},
	    {"HEXISCALE_STAGE", offsetof(hexi_role, stage)},
	    {"HEXISCALE_TP_RANK", offsetof(hexi_role, tp_rank)},
	    {"HEXISCALE_TP_SIZE", offsetof(hexi_role, tp_size)},
	};
	const char *h = getenv("HEXISCALE_PLAN_HASH");

	long np;
	hexi_rc rc0 = env_int("HEXISCALE_NPIPELINES", HEXI_MAX_GPUS, &np);

	if (rc0 == HEXI_OK)
		rc0 = check_env_kind(rt);
	if (rc0 == HEXI_OK)
		rc0 = check_env_world(rt);
	if (rc0 != HEXI_OK)
		return rc0;
	if (np >= 0 && np != rt->plan->npipelines)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "rank %d: HEXISCALE_NPIPELINES=%ld but the "
				  "plan has %d pipelines",
				  rt->rank, np, rt->plan->npipelines);
	if (h != NULL && *h != '\0' && strcmp(h, rt->plan->hash) != 0)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "rank %d: HEXISCALE_PLAN_HASH=%.32s but the "
				  "plan file has hash %s (stale plan file?)",
				  rt->rank, h, rt->plan->hash);
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		long v;
		hexi_rc rc = env_int(vars[i].name, HEXI_MAX_GPUS, &v);
		int want =
		    *(const int *)((const char *)&rt->role + vars[i].off);
		if (rc != HEXI_OK)
			return rc;
		if (v >= 0 && v != want)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "rank %d: %s=%ld but the plan gives "
					  "%d",
					  rt->rank, vars[i].name, v, want);
	}
	return HEXI_OK;
}

/* ---- plan -------------------------------------------------------------- */

/* The plan text: read by every rank that can; in a job of several ranks
 * the lowest rank that could read it broadcasts it (the plan file may be
 * visible on the submit node only, hexiscale-env(7)) and every other rank
 * takes that text, even one that read a copy of its own: node-local
 * copies may differ (or the file be rewritten between two ranks' reads),
 * and all ranks must run one plan. */
static hexi_rc plan_text(hexi_rt *rt, const char *path, char **text,
			 size_t *len)
{
	hexi_rc rc = hexi_read_file(path, RT_MAX_PLAN_BYTES, text, len);

	if (rt->ntasks == 1 || !rt->mpi_started)
		return rc;
#ifdef HAVE_MPI
	{
		int mine = rc == HEXI_OK ? rt->launch_rank : rt->ntasks;
		int root = rt->ntasks, ok, all_ok = 0;
		long n = rc == HEXI_OK ? (long)*len : 0;
		MPI_Allreduce(&mine, &root, 1, MPI_INT, MPI_MIN,
			      MPI_COMM_WORLD);
		if (root == rt->ntasks)
			return rc; /* nobody can read it */
		MPI_Bcast(&n, 1, MPI_LONG, root, MPI_COMM_WORLD);
		if (rt->launch_rank != root) {
			if (rc == HEXI_OK)
				free(*text);
			*text = malloc((size_t)n + 1);
			if (*text != NULL)
				(*text)[n] = '\0';
			*len = (size_t)n;
			hexi_error_clear();
		}
		/* every rank has its buffer, or none goes on (no rank is
		 * left waiting in the broadcast) */
		ok = *text != NULL;
		MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN,
			      MPI_COMM_WORLD);
		if (!all_ok) {
			free(*text);
			*text = NULL;
			return hexi_error(HEXI_ERR_NOMEM,
					  "plan of %ld bytes: a rank could "
					  "not allocate it",
					  n);
		}
		MPI_Bcast(*text, (int)n, MPI_CHAR, root, MPI_COMM_WORLD);
	}
#endif
	return HEXI_OK;
}

static hexi_rc load_plan(hexi_rt *rt, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	hexi_rc rc = plan_text(rt, path, &text, &len);

	if (rc == HEXI_OK)
		rc = hexi_plan_parse(text, len, NULL, &rt->plan);
	if (rc == HEXI_OK)
		rc = hexi_plan_validate(rt->plan);
	free(text);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "rank %d: plan %s", rt->rank,
					 path);
	return HEXI_OK;
}

/* --recompute / --no-recompute (o->recompute): a plan-less run's plan
 * takes it; a plan was priced with its own setting (memory per GPU), so a
 * request that contradicts it is refused rather than silently changed. */
static hexi_rc apply_recompute(hexi_rt *rt, int mode, int planless)
{
	hexi_plan *p = rt->plan;
	int want = mode == HEXI_RECOMPUTE_ON;

	if (mode == HEXI_RECOMPUTE_INHERIT)
		return HEXI_OK;
	if (mode != HEXI_RECOMPUTE_ON && mode != HEXI_RECOMPUTE_OFF)
		return hexi_error(HEXI_ERR_INVAL, "recompute mode %d", mode);
	if (planless) {
		p->train.recompute = want;
		return hexi_plan_hash(p);
	}
	for (int pi = 0; pi < p->npipelines; pi++)
		if (hexi_plan_recompute(p, pi) != want)
			return hexi_error(
			    HEXI_ERR_USAGE,
			    "rank %d: --%s contradicts the plan (hash %s): "
			    "pipeline %d %s recompute; the plan decides (make "
			    "it with hexiplan --%s)",
			    rt->rank, want ? "recompute" : "no-recompute",
			    p->hash, pi, want ? "does not" : "does",
			    want ? "recompute" : "no-recompute");
	return HEXI_OK;
}

/* The job runs the plan's training ranks W, or one task per GPU of the
 * plan: W and its idle GPUs (as the plugin starts them); from here
 * world_size is W. */
static hexi_rc check_plan_tasks(hexi_rt *rt)
{
	const hexi_plan *p = rt->plan;

	if (rt->ntasks != p->world_size && rt->ntasks != hexi_plan_tasks(p)) {
		if (p->nidle == 0)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "rank %d: the plan (hash %s) is for "
					  "%d ranks but the job has %d",
					  rt->rank, p->hash, p->world_size,
					  rt->ntasks);
		return hexi_error(HEXI_ERR_MISMATCH,
				  "rank %d: the plan (hash %s) is for %d ranks "
				  "and %d idle GPUs but the job has %d tasks "
				  "(run %d, or %d with a task per idle GPU)",
				  rt->rank, p->hash, p->world_size, p->nidle,
				  rt->ntasks, p->world_size,
				  hexi_plan_tasks(p));
	}
	rt->world_size = p->world_size;
	return HEXI_OK;
}

/* Collective in a job of several ranks (the plan text travels). */
static hexi_rc boot_plan(hexi_rt *rt, const hexi_rt_opts *o)
{
	const char *path = o->plan_path;
	hexi_model m;
	hexi_rc rc;

	if (path == NULL || *path == '\0')
		path = getenv("HEXISCALE_PLAN");
	/* loading a plan is collective (its text is agreed): every rank has
	 * one, or none has, before any rank starts it */
	{
		int have = path != NULL && *path != '\0';
		int all = hexi_rt_all_ok(rt, have),
		    none = hexi_rt_all_ok(rt, !have);
		if (!all && !none)
			return hexi_error(
			    HEXI_ERR_MISMATCH,
			    "rank %d: %s, but %s (every task needs "
			    "the same --plan FILE or HEXISCALE_PLAN)",
			    rt->rank,
			    have ? "this rank has a plan"
				 : "this rank has no plan",
			    have ? "another rank has none"
				 : "another rank has one");
	}
	if (path != NULL && *path != '\0') {
		if ((rc = load_plan(rt, path)) != HEXI_OK)
			return rc;
	} else {
		if (rt->ntasks != 1)
			return hexi_error(HEXI_ERR_USAGE,
					  "rank %d: a job of %d ranks needs a "
					  "plan (--plan FILE or "
					  "HEXISCALE_PLAN)",
					  rt->rank, rt->ntasks);
		rc = hexi_model_load(o->model ? o->model : "tiny-4l", &m);
		if (rc != HEXI_OK)
			return rc;
		rc = rt_plan_single(&m, o->global_batch, o->micro_batches,
				    &rt->plan);
		if (rc != HEXI_OK)
			return rc;
	}
	rc = apply_recompute(rt, o->recompute, path == NULL || *path == '\0');
	if (rc != HEXI_OK)
		return rc;
	if ((rc = check_plan_tasks(rt)) != HEXI_OK)
		return rc;
	rc = hexi_plan_role(rt->plan, rt->rank, &rt->role);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "rank %d: role", rt->rank);
	if (!rt->role.idle && rt->rank >= rt->world_size)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "rank %d: trains in plan %s, but the "
				  "training ranks must be 0..%d and the idle "
				  "GPUs' ranks after them (hexiscale-plan(5))",
				  rt->rank, rt->plan->hash, rt->world_size - 1);
	rt->idle = rt->role.idle;
	return check_env_role(rt);
}

/* ---- watchdog ---------------------------------------------------------- */

static long long now_ms(void)
{
	return (long long)(hexi_now_s() * 1e3);
}

/* Polls the deadline every 200 ms: the main thread only stores it. */
static void *watchdog_main(void *arg)
{
	hexi_rt *rt = arg;

	pthread_mutex_lock(&rt->wd_lock);
	while (!rt->wd_stop) {
		struct timespec ts;
		long long dl = atomic_load_explicit(&rt->wd_deadline_ms,
						    memory_order_relaxed);
		if (dl > 0 && now_ms() > dl) {
			fprintf(stderr,
				"hexiscale: rank %d: no progress for %.0f s "
				"(a peer failed or hangs); bringing the job "
				"down\n",
				rt->rank,
				1e-3 * (double)atomic_load_explicit(
					   &rt->wd_budget_ms,
					   memory_order_relaxed));
			fflush(stderr);
			_exit(HEXI_ERR_TIMEOUT);
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&rt->wd_cond, &rt->wd_lock, &ts);
	}
	pthread_mutex_unlock(&rt->wd_lock);
	return NULL;
}

/* A deadline budget_s from now (at least 1 ms: 0 means disarmed). */
static void wd_set(hexi_rt *rt, double budget_s)
{
	long long dl = now_ms() + (long long)(budget_s * 1e3);

	atomic_store_explicit(&rt->wd_budget_ms, (long long)(budget_s * 1e3),
			      memory_order_relaxed);
	atomic_store_explicit(&rt->wd_deadline_ms, dl > 0 ? dl : 1,
			      memory_order_relaxed);
}

void rt_watchdog_arm(hexi_rt *rt, int on)
{
	if (!rt->wd_running)
		return;
	if (on)
		wd_set(rt, rt->timeout_s);
	else
		atomic_store_explicit(&rt->wd_deadline_ms, 0,
				      memory_order_relaxed);
}

int rt_watchdog_armed(const hexi_rt *rt)
{
	return rt->wd_running &&
	       atomic_load_explicit(&rt->wd_deadline_ms,
				    memory_order_relaxed) != 0;
}

void rt_watchdog_feed(hexi_rt *rt)
{
	if (rt_watchdog_armed(rt))
		wd_set(rt, rt->timeout_s);
}

double rt_watchdog_save_budget_s(const hexi_rt *rt)
{
	double bytes =
	    rt->mem.bytes[HEXI_MEM_PARAMS] + rt->mem.bytes[HEXI_MEM_OPTIM];

	return rt->timeout_s + (bytes > 0 ? bytes / RT_WD_SAVE_BPS : 0);
}

void rt_watchdog_save(hexi_rt *rt)
{
	if (rt_watchdog_armed(rt))
		wd_set(rt, rt_watchdog_save_budget_s(rt));
}

void hexi_rt_watchdog(hexi_rt *rt, hexi_rt_wd mode)
{
	if (mode == HEXI_RT_WD_SAVE)
		rt_watchdog_save(rt);
	else
		rt_watchdog_arm(rt, mode == HEXI_RT_WD_ON);
}

static hexi_rc watchdog_start(hexi_rt *rt)
{
	if (rt->timeout_s <= 0)
		return HEXI_OK;
	if (pthread_create(&rt->wd_thread, NULL, watchdog_main, rt) != 0)
		return hexi_error(HEXI_ERR_INTERNAL,
				  "rank %d: watchdog thread: %s", rt->rank,
				  strerror(errno));
	rt->wd_running = 1;
	return HEXI_OK;
}

/* ---- init / destroy ------------------------------------------------------ */

#ifdef HAVE_MPI
/* A crash inside MPI_Init_thread is not ours: Open MPI 4.1 with PMIx 4.2
 * (Debian 12) under srun --mpi=pmix now and then releases a rank from the
 * start-up fence before a peer on its node has joined, and the peer dies
 * on the first message (DECISIONS 155).  Nothing was trained, so saying
 * exactly that lets a batch script run the step once more
 * (examples/train.sbatch does).  The handlers are ours only while
 * MPI_Init_thread runs; the line is built before, since a handler may
 * only write(2). */
static char init_crash_msg[256];
static size_t init_crash_len;

static void on_init_crash(int sig)
{
	ssize_t w = write(STDERR_FILENO, init_crash_msg, init_crash_len);

	(void)w;
	signal(sig, SIG_DFL);
	raise(sig);
}

static int mpi_init_guarded(hexi_rt *rt, int *argc, char ***argv, int *provided)
{
	struct sigaction sa, old_segv, old_bus;
	int n, rc;

	n = snprintf(init_crash_msg, sizeof(init_crash_msg),
		     "hexitrain: task %d: " HEXI_RT_INIT_CRASH
		     " (Open MPI's start-up race, hexitrain(1) BUGS): nothing "
		     "was trained; the step can be run again\n",
		     rt->launch_rank);
	init_crash_len =
	    n > 0 && (size_t)n < sizeof(init_crash_msg) ? (size_t)n : 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_init_crash;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
	rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, provided);
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	return rc;
}
#endif

/* Start MPI when a launcher started us; check it agrees with the
 * launcher. */
static hexi_rc boot_mpi(hexi_rt *rt, int *argc, char ***argv)
{
	if (rt->launcher == HEXI_LAUNCH_SINGLE)
		return HEXI_OK;
#ifdef HAVE_MPI
	int provided = 0, r = -1, s = -1;

	if (mpi_init_guarded(rt, argc, argv, &provided) != MPI_SUCCESS)
		return hexi_error(HEXI_ERR_MPI, "task %d: MPI_Init",
				  rt->launch_rank);
	rt->mpi_started = 1;
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &s);
	if (r != rt->launch_rank || s != rt->ntasks)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "%s says task %d of %d, MPI says %d of %d",
				  hexi_rt_launcher_name(rt->launcher),
				  rt->launch_rank, rt->ntasks, r, s);
	return HEXI_OK;
#else
	(void)argc;
	(void)argv;
	return hexi_error(HEXI_ERR_UNSUPPORTED,
			  "task %d of %d: started by %s but built without MPI",
			  rt->launch_rank, rt->ntasks,
			  hexi_rt_launcher_name(rt->launcher));
#endif
}

/* Collective: every rank chose the same backend (rows are compared in
 * registry order, the same on every rank), then that backend's setup. */
static hexi_rc boot_backend(hexi_rt *rt)
{
	int same = 0;

	for (int i = 0; !same && i < rt_backend_count(); i++)
		same = hexi_rt_all_ok(rt, rt->backend == rt_backend_at(i));
	if (!same)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "rank %d chose backend %s but other ranks "
				  "chose another (--backend auto on nodes "
				  "with and without a GPU?)",
				  rt->rank, rt_backend_name(rt->backend));
	if (rt->backend->setup == NULL)
		return HEXI_OK;
	return rt->backend->setup(rt);
}

static hexi_rc boot_comm(hexi_rt *rt)
{
	if (!rt->mpi_started)
		return rt_comm_self_create(&rt->comm);
	return rt_comm_mpi_create(rt->rank, !rt->idle, &rt->comm);
}

hexi_rc hexi_rt_init(int *argc, char ***argv, const hexi_rt_opts *o,
		     hexi_rt **out)
{
	hexi_rt_opts defaults;
	hexi_rt *rt = calloc(1, sizeof(*rt));
	hexi_rc rc = HEXI_ERR_NOMEM;

	*out = NULL;
	if (o == NULL) {
		hexi_rt_opts_defaults(&defaults);
		o = &defaults;
	}
	if (rt == NULL)
		return hexi_error(rc, "hexi_rt_init");
	pthread_mutex_init(&rt->wd_lock, NULL);
	pthread_cond_init(&rt->wd_cond, NULL);
	atomic_init(&rt->wd_deadline_ms, 0);
	atomic_init(&rt->wd_budget_ms, 0);
	rt->timeout_s = o->timeout_s;
	rt->backend = rt_backend_default();
	rc = rt_backend_choose(o->backend, getenv("HEXISCALE_BACKEND"),
			       BUILT_CUDA, NULL, NULL, &rt->backend);
	if (rc != HEXI_OK)
		goto fail;
	if ((rc = boot_identity(rt)) != HEXI_OK ||
	    (rc = boot_mpi(rt, argc, argv)) != HEXI_OK)
		goto fail;
	/* From here every task can talk: fail together, never alone.  Every
	 * task of the job takes part up to the communicator split; then an
	 * idle task leaves (hexi_rt_is_idle) and the training ranks go on
	 * among themselves. */
	rc = rt_together(rt, env_identity(rt), "bootstrap");
	if (rc == HEXI_OK)
		rc = rt_together(rt, unique_ranks(rt), "bootstrap");
	if (rc == HEXI_OK)
		rc = rt_together(rt, boot_plan(rt, o), "plan loading");
	if (rc == HEXI_OK)
		rc = rt_together(rt, boot_comm(rt), "communicator setup");
	if (rc == HEXI_OK && rt->idle) {
		*out = rt;
		return HEXI_OK;
	}
	if (rc == HEXI_OK) {
		rt->trainers_only = 1;
		rc = rt_together(rt, boot_backend(rt), "backend setup");
	}
	if (rc == HEXI_OK) {
		rc = hexi_layout_create(rt->plan, &rt->layout);
		if (rc != HEXI_OK)
			hexi_error_prefix(rc, "rank %d: layout", rt->rank);
		rc = rt_together(rt, rc, "layout");
	}
	if (rc != HEXI_OK || (rc = rt_groups_build(rt)) != HEXI_OK ||
	    (rc = watchdog_start(rt)) != HEXI_OK)
		goto fail;
	*out = rt;
	return HEXI_OK;
fail:
	hexi_rt_destroy(rt);
	return rc;
}

void hexi_rt_abort(hexi_rt *rt, hexi_rc rc)
{
	fflush(NULL);
	/* The rank with the cause ends the job; a PEER rank waits for it
	 * (the abort kills us while we sleep) and aborts itself only if
	 * nothing came, e.g. when the cause was a lost agreement. */
	if (rc == HEXI_ERR_PEER && rt != NULL && rt->mpi_started) {
		struct timespec ts = {.tv_sec = HEXI_RT_PEER_GRACE_S};

		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	/* NCCL first: aborting its communicators releases kernels stuck on a
	 * dead peer; it then ends the job through the host communicator. */
	if (rt != NULL && rt->gcomm != NULL)
		rt->gcomm->ops->abort_all(rt->gcomm, (int)rc);
	if (rt != NULL && rt->comm != NULL)
		rt->comm->ops->abort_all(rt->comm, (int)rc);
	_exit((int)rc);
}

void hexi_rt_destroy(hexi_rt *rt)
{
	if (rt == NULL)
		return;
	if (rt->wd_running) {
		pthread_mutex_lock(&rt->wd_lock);
		rt->wd_stop = 1;
		pthread_cond_signal(&rt->wd_cond);
		pthread_mutex_unlock(&rt->wd_lock);
		pthread_join(rt->wd_thread, NULL);
	}
	rt_comm_destroy(rt->gcomm);
#ifdef RT_GPU
	rt_cuda_destroy(rt->cuda);
#endif
	rt_comm_destroy(rt->comm);
	hexi_layout_destroy(rt->layout);
	hexi_plan_destroy(rt->plan);
#ifdef HAVE_MPI
	if (rt->mpi_started) {
		int fin = 0;
		MPI_Finalized(&fin);
		if (!fin)
			MPI_Finalize();
	}
#endif
#ifdef HAVE_PMIX
	if (rt->pmix_started)
		PMIx_Finalize(NULL, 0);
#endif
	pthread_cond_destroy(&rt->wd_cond);
	pthread_mutex_destroy(&rt->wd_lock);
	free(rt);
}

int hexi_rt_rank(const hexi_rt *rt)
{
	return rt->rank;
}

int hexi_rt_world_size(const hexi_rt *rt)
{
	return rt->world_size;
}

int hexi_rt_is_idle(const hexi_rt *rt)
{
	return rt->idle;
}

hexi_rt_launcher hexi_rt_launcher_kind(const hexi_rt *rt)
{
	return rt->launcher;
}

const hexi_plan *hexi_rt_plan(const hexi_rt *rt)
{
	return rt->plan;
}

const hexi_role *hexi_rt_role(const hexi_rt *rt)
{
	return &rt->role;
}

const char *hexi_rt_backend(const hexi_rt *rt)
{
	return rt_backend_name(rt->backend);
}

const hexi_layout *hexi_rt_layout(const hexi_rt *rt)
{
	return rt->layout;
}
