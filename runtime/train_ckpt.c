/*
 * train_ckpt.c - checkpoint save and resume of the trainer through
 * libhexickpt (hexiscale-ckpt(5)).
 *
 * Save: every rank opens its rank file; a rank writes a parameter slice
 * (and its AdamW moments "opt.m.NAME", "opt.v.NAME", same rows) only when
 * hexi_ckpt_shard_is_writer() picks its shard, so one replica of each slice
 * is stored.  All ranks agree the files are complete, then rank 0 commits.
 * Resume: each rank reads exactly the rows of its own shards, whatever plan
 * wrote the checkpoint; the step and the AdamW step come from the metadata.
 * Sharded runs (train.zero > 0): the moments live only on their owners, so
 * each owner writes (and reads back) the rows it owns as slices of
 * "opt.m.NAME"/"opt.v.NAME" (rt_sync_seg_get), which cover every tensor
 * exactly once as well; nothing passes through another rank.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rt_train.h"

#if defined(HAVE_HDF5) && defined(HAVE_XXHASH)
#include "hexi_ckpt.h"

static int my_shard(const hexi_rt *rt, const char *name,
		    const hexi_tensor_layout **tl)
{
	const hexi_layout *l = rt->layout;

	for (int t = 0; t < l->ntensors; t++) {
		const hexi_tensor_layout *x = &l->tensors[t];
		if (strcmp(x->name, name) != 0)
			continue;
		*tl = x;
		for (int k = 0; k < x->nshards; k++)
			if (x->shards[k].rank == rt->rank)
				return k;
	}
	return -1;
}

static hexi_rc write_param(hexi_trainer *t, hexi_ckpt_writer *w,
			   const rt_param *p, int moments)
{
	const hexi_tensor_layout *tl = NULL;
	int k = my_shard(t->rt, p->name, &tl);
	char name[HEXI_CKPT_NAME_MAX];
	hexi_rc rc;

	if (k < 0)
		return hexi_error(HEXI_ERR_INTERNAL,
				  "rank %d: %s not in the layout", t->rt->rank,
				  p->name);
	if (!hexi_ckpt_shard_is_writer(tl, k))
		return HEXI_OK;
	/* a diverged model (an update overflowed) is not saved: resuming it
	 * would fail at once, and --keep would rotate good steps out */
	for (size_t i = 0; i < p->n; i++)
		if (!isfinite(p->w[i]))
			return hexi_error(HEXI_ERR_RANGE,
					  "%s[%zu] = %g: the parameters are "
					  "not finite (the run diverged: "
					  "lower --lr, or --clip); not saved",
					  p->name, i, (double)p->w[i]);
	rc = hexi_ckpt_write_slice(w, p->name, p->ndim, p->shape, p->row_begin,
				   p->row_end, p->w);
	if (rc != HEXI_OK || !moments)
		return rc;
	snprintf(name, sizeof(name), "opt.m.%s", p->name);
	rc = hexi_ckpt_write_slice(w, name, p->ndim, p->shape, p->row_begin,
				   p->row_end, p->m);
	if (rc != HEXI_OK)
		return rc;
	snprintf(name, sizeof(name), "opt.v.%s", p->name);
	return hexi_ckpt_write_slice(w, name, p->ndim, p->shape, p->row_begin,
				     p->row_end, p->v);
}

/* Sharded moments: owner slices of "opt.m.NAME" / "opt.v.NAME". */
static hexi_rc moment_slices(hexi_trainer *t, hexi_ckpt_writer *w,
			     hexi_ckpt_reader *r)
{
	char name[HEXI_CKPT_NAME_MAX];
	hexi_rc rc = HEXI_OK;

	const rt_sync *sync = rt_train_sync(t);

	for (int i = 0; rc == HEXI_OK && i < rt_sync_nsegs(sync); i++) {
		rt_sync_seg sg;
		rt_param *p = NULL;
		float *hm = NULL, *hv = NULL;
		rt_sync_seg_get(sync, i, &sg);
		if ((rc = rt_train_param_host(t, sg.param, 0, &p)) != HEXI_OK ||
		    (rc = rt_train_seg_host(t, &sg, w != NULL, &hm, &hv)) !=
			HEXI_OK)
			break;
		for (int k = 0; rc == HEXI_OK && k < 2; k++) {
			float *d = k == 0 ? hm : hv;
			snprintf(name, sizeof(name), "opt.%c.%s", "mv"[k],
				 p -> name);
			rc = w != NULL
				 ? hexi_ckpt_write_slice(w, name, p->ndim,
							 p->shape, sg.row_begin,
							 sg.row_end, d)
				 : hexi_ckpt_read_rows(r, name, sg.row_begin,
						       sg.row_end, d);
		}
		if (rc == HEXI_OK && w == NULL)
			rc = rt_train_seg_store(t, &sg);
	}
	return rc;
}

/* HEXI_CKPT_TIMING set: rank 0 prints the seconds of each save phase and
 * of a resume on stderr (the checkpoint benchmark reads them). */
static double ck_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds (user + system) of this process so far. */
static double ck_cpu_s(void)
{
	struct rusage u;

	getrusage(RUSAGE_SELF, &u);
	return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
	       1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

static void ck_timing(const hexi_trainer *t, const char *what, double s,
		      double cpu)
{
	if (t->rt->rank == 0 && getenv("HEXI_CKPT_TIMING") != NULL)
		fprintf(stderr,
			"hexitrain: checkpoint %s step %d: %.3f s wall, "
			"%.3f s cpu\n",
			what, t->step, s, cpu);
}

static void fill_meta(const hexi_trainer *t, hexi_ckpt_meta *m)
{
	memset(m, 0, sizeof(*m));
	hexi_strlcpy(m->model, t->rt->plan->model.name, sizeof(m->model));
	hexi_strlcpy(m->plan_hash, t->rt->plan->hash, sizeof(m->plan_hash));
	m->step = t->step;
	m->data_position = t->data_pos; /* samples, whatever the batch */
	m->tokens_seen = m->data_position * t->T;
	m->opt_step = t->opt_step;
	m->world_size = t->rt->world_size;
}

static hexi_rc commit(hexi_trainer *t, const char *dir, const char *stage,
		      const hexi_ckpt_meta *meta)
{
	char *json = NULL;
	hexi_rc rc = hexi_plan_to_json(t->rt->plan, &json);

	if (rc == HEXI_OK)
		rc = hexi_ckpt_commit_staged(dir, stage, meta, json);
	free(json);
	return rc;
}

/* Rank 0 prepares the save (takes the directory's writer lock, creates the
 * private staging directory, hexiscale-ckpt(5)) and every rank learns the
 * staging name; an empty name tells the others that it failed. */
static hexi_rc prepare(hexi_trainer *t, const char *dir,
		       const hexi_ckpt_meta *meta,
		       char stage[HEXI_CKPT_STAGE_MAX])
{
	rt_comm *c = t->rt->comm;
	rt_group *g = NULL;
	int *ranks = NULL, n = t->rt->world_size, i;
	hexi_rc rc = HEXI_OK, brc;

	memset(stage, 0, HEXI_CKPT_STAGE_MAX);
	if (t->rt->rank == 0)
		rc = hexi_ckpt_save_prepare(dir, meta, stage);
	if (n == 1)
		return rc;
	ranks = malloc((size_t)n * sizeof(int));
	if (ranks == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "save: rank list");
	for (i = 0; i < n; i++)
		ranks[i] = i;
	brc = rt_comm_group_get(c, ranks, n, &g);
	free(ranks);
	if (brc == HEXI_OK)
		brc = c->ops->bcast(g, stage, HEXI_CKPT_STAGE_MAX, 0);
	if (rc != HEXI_OK)
		return rc;
	if (brc != HEXI_OK)
		return brc;
	if (stage[0] == '\0')
		return hexi_error(HEXI_ERR_PEER,
				  "rank %d: rank 0 could not prepare the save "
				  "(see its message)",
				  t->rt->rank);
	return HEXI_OK;
}

/* The options that decide what a resumed run computes (the synthetic
 * corpus depends on the seed): blob "hexitrain.train", checked on resume. */
static int train_text(const hexi_trainer *t, char *buf, size_t cap)
{
	return snprintf(buf, cap, "seed=%llu optimizer=%s\n",
			(unsigned long long)t->o.seed,
			t->o.optimizer == HEXI_OPT_SGD ? "sgd" : "adamw");
}

static hexi_rc write_train_blob(const hexi_trainer *t, hexi_ckpt_writer *w)
{
	char buf[128];
	int n = train_text(t, buf, sizeof(buf));

	return hexi_ckpt_write_blob(w, "hexitrain.train", buf, (size_t)n);
}

/* The learning-rate schedule, blob "hexitrain.sched": a resume continues
 * the stored one (the run's --steps may differ from the writer's). */
static int sched_text(const hexi_trainer *t, char *buf, size_t cap)
{
	return snprintf(buf, cap,
			"schedule=%d lr=%.17g min_lr=%.17g warmup=%d "
			"decay_steps=%d\n",
			t->o.lr_schedule, t->o.lr, t->o.min_lr, t->o.warmup,
			t->o.decay_steps);
}

static hexi_rc write_sched_blob(const hexi_trainer *t, hexi_ckpt_writer *w)
{
	char buf[256];
	int n = sched_text(t, buf, sizeof(buf));

	return hexi_ckpt_write_blob(w, "hexitrain.sched", buf, (size_t)n);
}

/* Every rank reads it (all must agree); absent in older checkpoints. */
static hexi_rc read_sched_blob(hexi_trainer *t, hexi_ckpt_reader *r)
{
	char txt[256];
	void *got = NULL;
	size_t len = 0;
	int kind, warm, decay;
	double lr, min_lr;
	hexi_rc rc = hexi_ckpt_read_blob(r, "hexitrain.sched", &got, &len);

	if (rc == HEXI_ERR_NOTFOUND) {
		hexi_error_clear();
		return HEXI_OK;
	}
	if (rc != HEXI_OK)
		return rc;
	memcpy(txt, got, len < sizeof(txt) - 1 ? len : sizeof(txt) - 1);
	txt[len < sizeof(txt) - 1 ? len : sizeof(txt) - 1] = '\0';
	free(got);
	if (sscanf(txt,
		   "schedule=%d lr=%lg min_lr=%lg warmup=%d decay_steps=%d",
		   &kind, &lr, &min_lr, &warm, &decay) != 5 ||
	    kind < 0 || kind > 1 || !(lr > 0) || min_lr < 0 || warm < 0 ||
	    decay < 0)
		return hexi_error(HEXI_ERR_PARSE,
				  "resume: blob hexitrain.sched '%.80s'", txt);
	/* warn only where the rates differ: the constant schedule never
	 * reads min_lr or decay_steps (decay_steps follows --steps, so
	 * extending a run changed it and warned for nothing) */
	if (t->rt->rank == 0 &&
	    (kind != t->o.lr_schedule || lr != t->o.lr || warm != t->o.warmup ||
	     (kind == 1 &&
	      (min_lr != t->o.min_lr || decay != t->o.decay_steps))))
		hexi_log(HEXI_LOG_WARN,
			 "resume: continuing the checkpoint's learning-rate "
			 "schedule '%.*s', not this run's options",
			 (int)strcspn(txt, "\n"), txt);
	t->o.lr_schedule = kind;
	t->o.lr = lr;
	t->o.min_lr = min_lr;
	t->o.warmup = warm;
	t->o.decay_steps = decay;
	return HEXI_OK;
}

/* Warn (rank 0) when the resumed run differs in seed or optimizer. */
static void check_train_blob(const hexi_trainer *t, hexi_ckpt_reader *r)
{
	char want[128];
	void *got = NULL;
	size_t len = 0;
	int n = train_text(t, want, sizeof(want));

	if (t->rt->rank != 0 ||
	    hexi_ckpt_read_blob(r, "hexitrain.train", &got, &len) != HEXI_OK) {
		hexi_error_clear();
		return;
	}
	if (len != (size_t)n || memcmp(got, want, len) != 0)
		hexi_log(HEXI_LOG_WARN,
			 "resume: the checkpoint was written with '%.*s', "
			 "this run uses '%.*s'",
			 (int)(len < 100 ? len - (len > 0) : 100), (char *)got,
			 n - 1, want);
	free(got);
}

hexi_rc hexi_trainer_save(hexi_trainer *t, const char *dir)
{
	hexi_ckpt_writer *w = NULL;
	hexi_ckpt_meta meta;
	const int adamw = t->o.optimizer == HEXI_OPT_ADAMW;
	const int sharded = rt_sync_zero(rt_train_sync(t)) > 0;
	char stage[HEXI_CKPT_STAGE_MAX];
	double t0, t1, c0, c1;
	hexi_rc rc;
	int ok;

	if (dir == NULL || *dir == '\0')
		return hexi_error(HEXI_ERR_USAGE, "save: no checkpoint "
						  "directory");
	t0 = ck_now_s();
	c0 = ck_cpu_s();
	fill_meta(t, &meta);
	rc = prepare(t, dir, &meta, stage);
	if (rc == HEXI_OK)
		rc = hexi_ckpt_save_begin_staged(dir, stage, &meta, t->rt->rank,
						 &w);
	for (int i = 0; rc == HEXI_OK && i < rt_train_nparams(t); i++) {
		rt_param *p = NULL;
		rc = rt_train_param_host(t, i, adamw && !sharded ? 2 : 1, &p);
		if (rc == HEXI_OK)
			rc = write_param(t, w, p, adamw && !sharded);
	}
	if (rc == HEXI_OK && adamw && sharded)
		rc = moment_slices(t, w, NULL);
	if (rc == HEXI_OK && t->rt->rank == 0)
		rc = write_train_blob(t, w);
	if (rc == HEXI_OK && t->rt->rank == 0)
		rc = write_sched_blob(t, w);
	if (w != NULL) {
		if (rc == HEXI_OK)
			rc = hexi_ckpt_save_end(w);
		else
			hexi_ckpt_save_abort(w);
	}
	ok = hexi_rt_all_ok(t->rt, rc == HEXI_OK);
	t1 = ck_now_s();
	c1 = ck_cpu_s();
	if (!ok && t->rt->rank == 0 && stage[0] != '\0')
		hexi_ckpt_save_discard(dir, stage);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "rank %d: save step %d",
					 t->rt->rank, t->step);
	if (!ok)
		return hexi_error(HEXI_ERR_PEER,
				  "rank %d: save of step %d failed on another "
				  "rank; not committed",
				  t->rt->rank, t->step);
	if (t->rt->rank == 0)
		rc = commit(t, dir, stage, &meta);
	ok = hexi_rt_all_ok(t->rt, rc == HEXI_OK);
	ck_timing(t, "rank files", t1 - t0, c1 - c0);
	ck_timing(t, "commit", ck_now_s() - t1, ck_cpu_s() - c1);
	ck_timing(t, "save", ck_now_s() - t0, ck_cpu_s() - c0);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "commit of step %d", t->step);
	if (!ok)
		return hexi_error(HEXI_ERR_PEER,
				  "rank %d: commit of step %d failed on rank 0",
				  t->rt->rank, t->step);
	t->saved_step = t->step;
	rt_train_after_save(t, dir, ck_now_s() - t0);
	return HEXI_OK;
}

/* 1 if STEPDIR (a step directory just read) lies in --ckpt-dir: its
 * parent is that directory (device and inode, so any spelling of it). */
static int ckpt_dir_holds(const hexi_trainer *t, const char *stepdir)
{
	char parent[4200];
	struct stat a, b;

	if (t->ckpt_dir == NULL || *t->ckpt_dir == '\0')
		return 0;
	if (snprintf(parent, sizeof(parent), "%s/..", stepdir) >=
	    (int)sizeof(parent))
		return 0;
	return stat(parent, &a) == 0 && stat(t->ckpt_dir, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static hexi_rc read_param(hexi_ckpt_reader *r, rt_param *p, int moments)
{
	hexi_ckpt_tensor_info ti;
	char name[HEXI_CKPT_NAME_MAX];
	hexi_rc rc = hexi_ckpt_tensor_find(r, p->name, &ti, NULL);

	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "resume: tensor %s", p->name);
	if (ti.shape[0] != p->shape[0] || ti.shape[1] != p->shape[1])
		return hexi_error(
		    HEXI_ERR_MISMATCH,
		    "resume: tensor %s is (%lld,%lld) in the "
		    "checkpoint, (%lld,%lld) in the model",
		    p->name, (long long)ti.shape[0], (long long)ti.shape[1],
		    (long long)p->shape[0], (long long)p->shape[1]);
	rc = hexi_ckpt_read_rows(r, p->name, p->row_begin, p->row_end, p->w);
	if (rc != HEXI_OK || !moments)
		return rc;
	snprintf(name, sizeof(name), "opt.m.%s", p->name);
	rc = hexi_ckpt_read_rows(r, name, p->row_begin, p->row_end, p->m);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "resume AdamW moments");
	snprintf(name, sizeof(name), "opt.v.%s", p->name);
	return hexi_ckpt_read_rows(r, name, p->row_begin, p->row_end, p->v);
}

static hexi_rc resume_local(hexi_trainer *t, const char *dir)
{
	hexi_ckpt_open_opts oo;
	hexi_ckpt_reader *r = NULL;
	const hexi_ckpt_meta *m;
	int moments, sharded;
	hexi_rc rc;

	hexi_ckpt_open_opts_init(&oo);
	oo.model = t->rt->plan->model.name;
	rc = hexi_ckpt_open(dir, &oo, &r);
	if (rc != HEXI_OK)
		return rc;
	m = hexi_ckpt_reader_meta(r);
	moments = t->o.optimizer == HEXI_OPT_ADAMW && m->opt_step > 0;
	sharded = rt_sync_zero(rt_train_sync(t)) > 0;
	check_train_blob(t, r);
	rc = read_sched_blob(t, r);
	for (int i = 0; rc == HEXI_OK && i < rt_train_nparams(t); i++) {
		rt_param *p = NULL;
		rc = rt_train_param_host(t, i, 0, &p);
		if (rc == HEXI_OK)
			rc = read_param(r, p, moments && !sharded);
		if (rc == HEXI_OK)
			rc = rt_train_param_store(t, i, moments && !sharded);
	}
	if (rc == HEXI_OK && moments && sharded &&
	    (rc = moment_slices(t, NULL, r)) != HEXI_OK)
		rc = hexi_error_prefix(rc, "resume AdamW moments");
	if (rc == HEXI_OK) {
		t->step = (int)m->step;
		t->data_pos = m->data_position;
		t->resumed_step = t->step;
		/* counts as saved only in --ckpt-dir itself: resumed from
		 * elsewhere, a stop signal must still save there */
		t->saved_step =
		    ckpt_dir_holds(t, hexi_ckpt_reader_path(r)) ? t->step : -1;
		hexi_strlcpy(t->ev.path, hexi_ckpt_reader_path(r),
			     sizeof(t->ev.path));
		t->opt_step =
		    t->o.optimizer == HEXI_OPT_ADAMW ? m->opt_step : 0;
	}
	hexi_ckpt_close(r);
	return rc;
}

hexi_rc hexi_trainer_resume(hexi_trainer *t, const char *dir)
{
	double t0 = ck_now_s(), c0 = ck_cpu_s();
	hexi_rc rc = resume_local(t, dir);
	int ok = hexi_rt_all_ok(t->rt, rc == HEXI_OK);

	ck_timing(t, "resume", ck_now_s() - t0, ck_cpu_s() - c0);

	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "rank %d: --resume %s",
					 t->rt->rank, dir);
	if (!ok)
		return hexi_error(HEXI_ERR_PEER,
				  "rank %d: resume failed on another rank",
				  t->rt->rank);
	/* every rank the same answer: a stop-signal save is collective */
	if (!hexi_rt_all_ok(t->rt, t->saved_step == t->step))
		t->saved_step = -1;
	if (t->rt->rank == 0) {
		t->ev.loaded = 1;
		t->ev.step = t->step;
		t->ev.bytes = rt_train_dir_bytes(t->ev.path);
		t->ev.seconds = ck_now_s() - t0;
		t->ev_pending = 1;
	}
	return HEXI_OK;
}

/* Rank 0, holding the directory's writer lock: the committed steps of
 * --ckpt-dir after the step this run
 * starts from, as one refusal.  They belong to another run (a fresh run
 * into a used directory, or a rollback to an older step of it): saving
 * beside them mixes two runs, --keep rotates the run's own saves out (it
 * keeps the highest steps), latest keeps naming the newest of the other
 * run, and a later --resume DIR silently continues that one. */
static hexi_rc newer_steps(const hexi_trainer *t)
{
	hexi_ckpt_entry *e = NULL;
	int n = 0, k = 0, first = -1, last = -1;

	if (hexi_ckpt_list(t->ckpt_dir, &e, &n) != HEXI_OK) {
		hexi_error_clear(); /* no directory yet, or nothing to list */
		return HEXI_OK;
	}
	for (int i = 0; i < n; i++)
		if (e[i].committed && e[i].step > t->step) {
			if (first < 0)
				first = i;
			last = i;
			k++;
		}
	if (k == 0) {
		free(e);
		return HEXI_OK;
	}
	hexi_rc rc = hexi_error(
	    HEXI_ERR_INVAL,
	    "--ckpt-dir %s holds %d committed checkpoint%s after step %d, "
	    "where this run starts (%s%s%s): saving beside them would mix two "
	    "runs, --keep would remove this run's saves and --resume %s would "
	    "continue the other run; resume from the newest (--resume %s), "
	    "move them aside, or save to another --ckpt-dir",
	    t->ckpt_dir, k, k == 1 ? "" : "s", t->step, e[first].name,
	    k > 1 ? " .. " : "", k > 1 ? e[last].name : "", t->ckpt_dir,
	    t->ckpt_dir);
	free(e);
	return rc;
}

/* PATH cut to its parent in place (trailing '/' first stripped):
 * "a/b/" -> "a", "a" -> ".", "/a" -> "/". */
static void path_up(char *path)
{
	char *slash;
	size_t n = strlen(path);

	while (n > 1 && path[n - 1] == '/')
		path[--n] = '\0';
	slash = strrchr(path, '/');
	if (slash == NULL)
		strcpy(path, ".");
	else if (slash == path)
		path[1] = '\0';
	else
		*slash = '\0';
}

/* A failed stat's errno as this check's error: a search permission
 * missing on the way is the caller's to fix, anything else is I/O. */
static hexi_rc stat_errno_rc(int e)
{
	return e == EACCES || e == EPERM ? HEXI_ERR_PERM : HEXI_ERR_IO;
}

/* P, an existing prefix of --ckpt-dir DIR (*LST its lstat; LAST: P is
 * DIR itself), as the checkpoint writer walks it (ck_dir_open): a
 * directory, or a symlink owned by root or by us to a directory. */
static hexi_rc ckpt_dir_component(const char *dir, const char *p,
				  const struct stat *lst, int last)
{
	char target[256];
	struct stat st;
	ssize_t n;
	int e = 0;

	if (S_ISDIR(lst->st_mode))
		return HEXI_OK;
	if (!S_ISLNK(lst->st_mode))
		return last
			   ? hexi_error(HEXI_ERR_INVAL,
					"--ckpt-dir %s: exists and is not a "
					"directory",
					dir)
			   : hexi_error(HEXI_ERR_INVAL,
					"--ckpt-dir %s: %s is not a directory, "
					"so it cannot be created",
					dir, p);
	if (lst->st_uid != 0 && lst->st_uid != geteuid())
		return hexi_error(HEXI_ERR_PERM,
				  "--ckpt-dir %s: %s is a symbolic link owned "
				  "by uid %u (neither root nor you): the save "
				  "would refuse to follow it",
				  dir, p, (unsigned)lst->st_uid);
	if (stat(p, &st) != 0)
		e = errno;
	else if (S_ISDIR(st.st_mode))
		return HEXI_OK;
	n = readlink(p, target, sizeof(target) - 1);
	target[n < 0 ? 0 : n] = '\0';
	if (e == 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "--ckpt-dir %s: %s is a symbolic link to "
				  "'%s', not a directory",
				  dir, p, target);
	if (e == ENOENT || e == ENOTDIR)
		return hexi_error(HEXI_ERR_INVAL,
				  "--ckpt-dir %s: %s is a symbolic link to a "
				  "missing target '%s'",
				  dir, p, target);
	return hexi_error(stat_errno_rc(e),
			  "--ckpt-dir %s: %s, a symbolic link to '%s': %s", dir,
			  p, target, strerror(e));
}

/* Each prefix of UP (which exists; LAST: UP is --ckpt-dir DIR itself)
 * checked as ckpt_dir_component says, outermost first. */
static hexi_rc ckpt_dir_walk(const char *dir, char *up, int last)
{
	struct stat st;
	hexi_rc rc;
	size_t i, n = strlen(up);
	char c;

	for (i = 1; i <= n; i++) {
		if ((up[i] != '/' && up[i] != '\0') || up[i - 1] == '/')
			continue;
		c = up[i];
		up[i] = '\0';
		if (lstat(up, &st) != 0)
			rc = hexi_error(stat_errno_rc(errno),
					"--ckpt-dir %s: %s: %s", dir, up,
					strerror(errno));
		else
			rc = ckpt_dir_component(dir, up, &st, last && i == n);
		up[i] = c;
		if (rc != HEXI_OK)
			return rc;
	}
	return HEXI_OK;
}

/* DIR does not exist (yet): could the first save make it?  It creates
 * every missing component (like mkdir -p), so the nearest existing
 * ancestor must be a directory we may write into, reached as the writer
 * reaches it (a regular file or a dangling symlink on the way is not);
 * anything else failed only at the first save, or at a stop signal's
 * (exit 76, nothing saved).  Nothing is created here.  (Root passes the
 * write check everywhere but a read-only mount: a pseudo file system
 * such as /proc still fails only at the save.) */
static hexi_rc ckpt_dir_creatable(const char *dir)
{
	char up[4096];
	struct stat st;
	size_t n = strlen(dir);
	int last = 1, e;
	hexi_rc rc;

	if (n >= sizeof(up))
		return hexi_error(HEXI_ERR_RANGE,
				  "--ckpt-dir %.200s...: path "
				  "too long",
				  dir);
	strcpy(up, dir);
	while (n > 1 && up[n - 1] == '/') /* "f/" is f, which must be a dir */
		up[--n] = '\0';
	while (lstat(up, &st) != 0) {
		e = errno;
		if ((e != ENOENT && e != ENOTDIR) || strcmp(up, ".") == 0 ||
		    strcmp(up, "/") == 0)
			return hexi_error(stat_errno_rc(e),
					  "--ckpt-dir %s: %s: %s", dir, up,
					  strerror(e));
		path_up(up);
		last = 0;
	}
	rc = ckpt_dir_walk(dir, up, last);
	if (rc != HEXI_OK || last)
		return rc;
	if (access(up, W_OK | X_OK) != 0)
		return hexi_error(errno == EACCES || errno == EPERM ||
					  errno == EROFS
				      ? HEXI_ERR_PERM
				      : HEXI_ERR_IO,
				  "--ckpt-dir %s: cannot create it in %s: %s",
				  dir, up, strerror(errno));
	return HEXI_OK;
}

hexi_rc hexi_trainer_check_ckpt_dir(hexi_trainer *t)
{
	hexi_rc rc = HEXI_OK;
	int ok;

	if (t->ckpt_dir == NULL || *t->ckpt_dir == '\0')
		return HEXI_OK;
	if (t->rt->rank == 0) {
		/* the writer lock first: a live writer of DIR (another job)
		 * is named as such, before its newer steps are */
		rc = hexi_ckpt_claim(t->ckpt_dir);
		if (rc == HEXI_ERR_NOTFOUND) {
			/* the first save creates it, if it can */
			hexi_error_clear();
			rc = ckpt_dir_creatable(t->ckpt_dir);
		} else if (rc == HEXI_OK)
			rc = newer_steps(t);
	}
	ok = hexi_rt_all_ok(t->rt, rc == HEXI_OK);
	if (rc != HEXI_OK)
		return rc;
	if (!ok)
		return hexi_error(HEXI_ERR_PEER,
				  "rank %d: rank 0 refused --ckpt-dir %s",
				  t->rt->rank, t->ckpt_dir);
	return HEXI_OK;
}

#else /* no checkpoint library */

hexi_rc hexi_trainer_check_ckpt_dir(hexi_trainer *t)
{
	(void)t;
	return HEXI_OK;
}

hexi_rc hexi_trainer_save(hexi_trainer *t, const char *dir)
{
	(void)t;
	return hexi_error(HEXI_ERR_UNSUPPORTED,
			  "checkpoint %s: built without HDF5", dir);
}

hexi_rc hexi_trainer_resume(hexi_trainer *t, const char *dir)
{
	(void)t;
	return hexi_error(HEXI_ERR_UNSUPPORTED, "resume %s: built without HDF5",
			  dir);
}

#endif
