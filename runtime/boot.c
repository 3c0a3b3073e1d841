/*
 * boot.c - bootstrap: who am I (PMIx, mpirun or alone), which plan, which
 * role; checks that plan, world size and environment agree; watchdog.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
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

#define RT_MAX_PLAN_BYTES (64u << 20)

void hexi_rt_opts_defaults(hexi_rt_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->model = "tiny-4l";
	o->global_batch = 8;
	o->micro_batches = 1;
	o->backend = "mpi";
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
	default:
		PMIX_VALUE_RELEASE(v);
		return hexi_error(HEXI_ERR_PMIX, "PMIx_Get(%s): value type %d",
				  key, (int)v->type);
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
	rt->rank = (int)me.rank;
	PMIX_PROC_CONSTRUCT(&wild);
	PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
	rc = pmix_u32(&wild, PMIX_JOB_SIZE, &v);
	if (rc != HEXI_OK)
		return rc;
	rt->world_size = (int)v;
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
		rt->rank = (int)r;
		rt->world_size = (int)s;
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

/* Compare RANK / WORLD_SIZE (hexiscale-env(7)) with what the launcher
 * said. */
static hexi_rc check_env_identity(const hexi_rt *rt)
{
	long r, s;
	hexi_rc rc;

	if ((rc = env_int("RANK", HEXI_MAX_GPUS, &r)) ||
	    (rc = env_int("WORLD_SIZE", HEXI_MAX_GPUS, &s)))
		return rc;
	if (r >= 0 && r != rt->rank)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "rank %d (%s): environment RANK=%ld differs",
				  rt->rank, hexi_rt_launcher_name(rt->launcher),
				  r);
	if (s >= 0 && s != rt->world_size)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "rank %d: environment WORLD_SIZE=%ld but the "
				  "job has %d ranks",
				  rt->rank, s, rt->world_size);
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

static hexi_rc boot_plan(hexi_rt *rt, const hexi_rt_opts *o)
{
	const char *path = o->plan_path;
	hexi_model m;
	hexi_rc rc;

	if (path == NULL || *path == '\0')
		path = getenv("HEXISCALE_PLAN");
	if (path != NULL && *path != '\0') {
		rc = hexi_plan_load(path, NULL, &rt->plan);
		if (rc != HEXI_OK)
			return hexi_error_prefix(rc, "rank %d: plan", rt->rank);
		rc = hexi_plan_validate(rt->plan);
		if (rc != HEXI_OK)
			return hexi_error_prefix(rc, "rank %d: plan %s",
						 rt->rank, path);
	} else {
		if (rt->world_size != 1)
			return hexi_error(HEXI_ERR_USAGE,
					  "rank %d: a job of %d ranks needs a "
					  "plan (--plan FILE or "
					  "HEXISCALE_PLAN)",
					  rt->rank, rt->world_size);
		rc = hexi_model_load(o->model ? o->model : "tiny-4l", &m);
		if (rc != HEXI_OK)
			return rc;
		rc = rt_plan_single(&m, o->global_batch, o->micro_batches,
				    &rt->plan);
		if (rc != HEXI_OK)
			return rc;
	}
	if (rt->plan->world_size != rt->world_size)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "rank %d: the plan (hash %s) is for %d ranks "
				  "but the job has %d",
				  rt->rank, rt->plan->hash,
				  rt->plan->world_size, rt->world_size);
	rc = hexi_plan_role(rt->plan, rt->rank, &rt->role);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "rank %d: role", rt->rank);
	return check_env_role(rt);
}

/* ---- watchdog ---------------------------------------------------------- */

static void *watchdog_main(void *arg)
{
	hexi_rt *rt = arg;

	pthread_mutex_lock(&rt->wd_lock);
	while (!rt->wd_stop) {
		struct timespec ts;
		double now = hexi_now_s();
		if (rt->wd_deadline > 0 && now > rt->wd_deadline) {
			fprintf(stderr,
				"hexiscale: rank %d: no progress for %.0f s "
				"(a peer failed or hangs); bringing the job "
				"down\n",
				rt->rank, rt->timeout_s);
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

void rt_watchdog_arm(hexi_rt *rt, int on)
{
	if (!rt->wd_running)
		return;
	pthread_mutex_lock(&rt->wd_lock);
	rt->wd_deadline = on ? hexi_now_s() + rt->timeout_s : 0;
	pthread_mutex_unlock(&rt->wd_lock);
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

static hexi_rc boot_comm(hexi_rt *rt, int *argc, char ***argv)
{
	hexi_rc rc;

	if (rt->launcher == HEXI_LAUNCH_SINGLE)
		return rt_comm_self_create(&rt->comm);
#ifdef HAVE_MPI
	{
		int provided = 0, r = -1, s = -1;
		if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED,
				    &provided) != MPI_SUCCESS)
			return hexi_error(HEXI_ERR_MPI, "rank %d: MPI_Init",
					  rt->rank);
		rt->mpi_started = 1;
		MPI_Comm_rank(MPI_COMM_WORLD, &r);
		MPI_Comm_size(MPI_COMM_WORLD, &s);
		if (r != rt->rank || s != rt->world_size)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "%s says rank %d of %d, MPI says %d "
					  "of %d",
					  hexi_rt_launcher_name(rt->launcher),
					  rt->rank, rt->world_size, r, s);
	}
	rc = rt_comm_mpi_create(&rt->comm);
	return rc;
#else
	(void)argc;
	(void)argv;
	(void)rc;
	return hexi_error(HEXI_ERR_UNSUPPORTED,
			  "rank %d of %d: built without MPI", rt->rank,
			  rt->world_size);
#endif
}

hexi_rc hexi_rt_init(int *argc, char ***argv, const hexi_rt_opts *o,
		     hexi_rt **out)
{
	hexi_rt_opts defaults;
	hexi_rt *rt = calloc(1, sizeof(*rt));
	hexi_rc rc = HEXI_ERR_NOMEM;
	int ok;

	*out = NULL;
	if (o == NULL) {
		hexi_rt_opts_defaults(&defaults);
		o = &defaults;
	}
	if (rt == NULL)
		return hexi_error(rc, "hexi_rt_init");
	pthread_mutex_init(&rt->wd_lock, NULL);
	pthread_cond_init(&rt->wd_cond, NULL);
	rt->timeout_s = o->timeout_s;
	if (o->backend != NULL && strcmp(o->backend, "mpi") != 0) {
		rc = hexi_error(HEXI_ERR_UNSUPPORTED,
				"backend '%.32s': this build has 'mpi' only",
				o->backend);
		goto fail;
	}
	if ((rc = boot_identity(rt)) != HEXI_OK ||
	    (rc = check_env_identity(rt)) != HEXI_OK ||
	    (rc = boot_comm(rt, argc, argv)) != HEXI_OK)
		goto fail;
	/* From here every rank can talk: fail together, never alone. */
	rc = boot_plan(rt, o);
	if (rc == HEXI_OK) {
		rc = hexi_layout_create(rt->plan, &rt->layout);
		if (rc != HEXI_OK)
			hexi_error_prefix(rc, "rank %d: layout", rt->rank);
	}
	ok = hexi_rt_all_ok(rt, rc == HEXI_OK);
	if (rc != HEXI_OK)
		goto fail;
	if (!ok) {
		rc = hexi_error(HEXI_ERR_PEER,
				"rank %d: another rank failed to start (see "
				"its message)",
				rt->rank);
		goto fail;
	}
	if ((rc = rt_groups_build(rt)) != HEXI_OK ||
	    (rc = watchdog_start(rt)) != HEXI_OK)
		goto fail;
	*out = rt;
	return HEXI_OK;
fail:
	hexi_rt_destroy(rt);
	return rc;
}

int hexi_rt_all_ok(hexi_rt *rt, int ok)
{
	double v = ok ? 0.0 : 1.0;

	if (rt->comm == NULL || rt->world_size == 1)
		return ok;
#ifdef HAVE_MPI
	if (MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM,
			  MPI_COMM_WORLD) != MPI_SUCCESS)
		return 0;
#endif
	return v == 0.0;
}

void hexi_rt_abort(hexi_rt *rt, hexi_rc rc)
{
	fflush(NULL);
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

const hexi_layout *hexi_rt_layout(const hexi_rt *rt)
{
	return rt->layout;
}
