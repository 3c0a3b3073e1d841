/*
 * reader.c - open a committed checkpoint, read any row range of any tensor
 * from whichever stored slices cover it, verify checksums.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt_internal.h"
#include "reader_internal.h"

static void drop_dset(hexi_ckpt_reader *r);

void hexi_ckpt_open_opts_init(hexi_ckpt_open_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->verify = 1;
	o->step = -1;
}

static int is_step_name(const char *s, long *step)
{
	return ck_is_step_name(s, step);
}

/* NAME/MANIFEST.json below DFD, without following anything. */
static int committed_below(int dfd, const char *name)
{
	char p[300];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", name, HEXI_CKPT_MANIFEST);
	return fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISREG(st.st_mode);
}

/* Highest committed step directory below DFD, or -1. */
static long scan_latest(int dfd)
{
	int fd = dup(dfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *e;
	struct stat st;
	long best = -1, s;

	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		if (!is_step_name(e->d_name, &s) || s <= best)
			continue;
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode) && committed_below(dfd, e->d_name))
			best = s;
	}
	closedir(d);
	return best;
}

/* 'latest' must name a step directory if it is there (and be a plain
 * file: a FIFO or symlink is refused, not waited on or followed). */
static hexi_rc check_latest(int dfd, const char *path)
{
	char what[CK_PATH_MAX + 16], *text = NULL;
	size_t len;
	long s;
	hexi_rc rc;

	snprintf(what, sizeof(what), "%s/%s", path, HEXI_CKPT_LATEST);
	rc = ck_read_at(dfd, HEXI_CKPT_LATEST, 64, what, &text, &len);
	if (rc == HEXI_ERR_NOTFOUND) {
		hexi_error_clear();
		return HEXI_OK;
	}
	if (rc != HEXI_OK)
		return rc;
	while (len > 0 && text[len - 1] == '\n')
		text[--len] = '\0';
	if (!is_step_name(text, &s))
		rc = hexi_error(HEXI_ERR_PARSE,
				"%s: does not name a step directory", what);
	free(text);
	return rc;
}

/* PATH (a checkpoint directory or a step directory) to a step directory:
 * its name in OUT and a descriptor in *STEPFD.  PATH is opened component
 * by component (ck_dir_open: a symlink only when root or the caller owns
 * it, hexiscale-ckpt(5) SECURITY); nothing below it is followed. */
static hexi_rc resolve(const char *path, int64_t step, char *out, size_t cap,
		       int *stepfd)
{
	char name[32];
	long s;
	int dfd = -1;
	hexi_rc rc;

	*stepfd = -1;
	rc = ck_dir_open(path, 0, &dfd);
	if (rc == HEXI_ERR_NOTFOUND)
		return hexi_error(HEXI_ERR_NOTFOUND,
				  "%s: no such checkpoint directory", path);
	if (rc != HEXI_OK)
		return rc;
	if (is_step_name(ck_base(path), &s) ||
	    faccessat(dfd, HEXI_CKPT_MANIFEST, F_OK, AT_SYMLINK_NOFOLLOW) ==
		0) {
		*stepfd = dfd;
		return snprintf(out, cap, "%s", path) >= (int)cap
			   ? hexi_error(HEXI_ERR_RANGE, "%.200s: path too long",
					path)
			   : HEXI_OK;
	}
	/* 'latest' is written just after the commit: a save killed between
	 * the two leaves a newer commit than 'latest' names, so the newest
	 * committed step wins; a 'latest' that names no step is an error. */
	if (step < 0 && (rc = check_latest(dfd, path)) != HEXI_OK)
		goto out;
	s = step >= 0 ? (long)step : scan_latest(dfd);
	if (s < 0) {
		rc = hexi_error(HEXI_ERR_NOTFOUND,
				"%s: no committed checkpoint", path);
		goto out;
	}
	snprintf(name, sizeof(name), "step-%08ld", s);
	if (ck_step_dir(out, cap, path, s) < 0) {
		rc = hexi_error(HEXI_ERR_RANGE, "%.200s: path too long", path);
		goto out;
	}
	*stepfd =
	    openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	rc = *stepfd >= 0 ? HEXI_OK
			  : hexi_error(HEXI_ERR_NOTFOUND,
				       "%s: no such step directory%s", out,
				       errno == ELOOP || errno == ENOTDIR
					   ? " (a symlink or file: refused)"
					   : "");
out:
	close(dfd);
	return rc;
}

static hexi_rc check_opts(const hexi_ckpt_reader *r,
			  const hexi_ckpt_open_opts *o)
{
	const hexi_ckpt_meta *m = &r->man.meta;

	/* a step directory given as PATH is that step: a --step naming
	 * another is an error, not ignored */
	if (o->step >= 0 && m->step != o->step)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "%s: a step directory of step %lld; the "
				  "step asked for is %lld",
				  r->stepdir, (long long)m->step,
				  (long long)o->step);
	if (o->model != NULL && strcmp(o->model, m->model) != 0)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "%s: checkpoint of model "
				  "'%s', expected '%s'",
				  r->stepdir, m->model, o->model);
	if (o->plan_hash != NULL && strcmp(o->plan_hash, m->plan_hash) != 0)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "%s: written by plan %s, "
				  "expected plan %s",
				  r->stepdir, m->plan_hash, o->plan_hash);
	return HEXI_OK;
}

/* Format 1 has no whole-file checksums: its rank files reach libhdf5
 * unchecked.  Accepted (resume of one's own old checkpoints works), with a
 * warning; refused for root on another user's directory unless asked. */
static hexi_rc check_unchecked(const hexi_ckpt_reader *r,
			       const hexi_ckpt_open_opts *o)
{
	struct stat st;

	if (r->man.file_xxh != NULL)
		return HEXI_OK;
	if (geteuid() == 0 && !o->allow_unchecked &&
	    (fstat(r->stepfd, &st) < 0 || st.st_uid != 0))
		return hexi_error(HEXI_ERR_PERM,
				  "%s: format version %d has no whole-file "
				  "checksums and belongs to uid %u: root does "
				  "not let libhdf5 parse it unchecked "
				  "(hexickpt --allow-unchecked to override)",
				  r->stepdir, r->man.version,
				  (unsigned)st.st_uid);
	hexi_log(HEXI_LOG_WARN,
		 "%s: format version %d: no whole-file checksums, rank files "
		 "are not checked before libhdf5 opens them",
		 r->stepdir, r->man.version);
	return HEXI_OK;
}

/* A stored hexiscale plan must parse (which checks its own hash) and be
 * the plan the manifest names; other plan JSON is kept opaque. */
static hexi_rc check_plan(const hexi_ckpt_reader *r)
{
	const char *js = r->man.plan_json;
	json_t *j, *f;
	hexi_plan *p = NULL;
	hexi_rc rc;
	int is_plan;

	if (js == NULL || js[0] == '\0')
		return HEXI_OK;
	j = json_loads(js, 0, NULL);
	f = json_object_get(j, "format");
	is_plan = json_is_string(f) &&
		  strcmp(json_string_value(f), HEXI_PLAN_FORMAT) == 0;
	json_decref(j);
	if (!is_plan)
		return HEXI_OK;
	rc = hexi_plan_parse(js, strlen(js), NULL, &p);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "%s: stored plan", r->stepdir);
	if (strcmp(p->hash, r->man.meta.plan_hash) != 0)
		rc = hexi_error(HEXI_ERR_MISMATCH,
				"%s: stored plan has hash %s, "
				"the manifest says %s",
				r->stepdir, p->hash, r->man.meta.plan_hash);
	hexi_plan_destroy(p);
	return rc;
}

/* Rank files: present with the size the manifest recorded. */
static hexi_rc check_files(const hexi_ckpt_reader *r)
{
	char p[CK_PATH_MAX], name[32];
	struct stat st;
	int i;

	for (i = 0; i < r->man.meta.world_size; i++) {
		ck_rank_path(p, sizeof(p), r->stepdir, i);
		snprintf(name, sizeof(name), "rank-%05d.h5", i);
		if (fstatat(r->stepfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return hexi_error(
			    HEXI_ERR_NOTFOUND,
			    "%s: rank file "
			    "missing (listed in the manifest): %s",
			    p, strerror(errno));
		if (!S_ISREG(st.st_mode))
			return hexi_error(HEXI_ERR_INVAL,
					  "%s: not a regular file (symlink, "
					  "FIFO...): refused",
					  p);
		if ((uint64_t)st.st_size != r->man.file_bytes[i])
			return hexi_error(
			    HEXI_ERR_IO,
			    "%s: %lld bytes, the "
			    "manifest says %" PRIu64 " (truncated "
			    "or replaced)",
			    p, (long long)st.st_size, r->man.file_bytes[i]);
	}
	return HEXI_OK;
}

hexi_rc hexi_ckpt_open(const char *path, const hexi_ckpt_open_opts *o,
		       hexi_ckpt_reader **out)
{
	hexi_ckpt_open_opts def;
	hexi_ckpt_reader *r = NULL;
	char mpath[CK_PATH_MAX + 32], *text = NULL;
	size_t len;
	hexi_rc rv;
	int i;

	*out = NULL;
	if (o == NULL) {
		hexi_ckpt_open_opts_init(&def);
		o = &def;
	}
	ck_h5_init();
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%s: reader", path);
	r->verify = o->verify;
	r->stepfd = -1;
	r->last_fid = r->last_fd = -1;
	r->dset = r->dspace = H5I_INVALID_HID;
	if ((rv = resolve(path, o->step, r->stepdir, sizeof(r->stepdir),
			  &r->stepfd)))
		goto out;
	snprintf(mpath, sizeof(mpath), "%s/%s", r->stepdir, HEXI_CKPT_MANIFEST);
	if (faccessat(r->stepfd, HEXI_CKPT_MANIFEST, F_OK,
		      AT_SYMLINK_NOFOLLOW) < 0) {
		rv = hexi_error(HEXI_ERR_NOTFOUND,
				"%s: not committed (no %s): "
				"an interrupted or unfinished save",
				r->stepdir, HEXI_CKPT_MANIFEST);
		goto out;
	}
	if ((rv = ck_read_at(r->stepfd, HEXI_CKPT_MANIFEST,
			     CK_MANIFEST_MAX_BYTES, mpath, &text, &len)))
		goto out;
	if ((rv = ck_manifest_parse(text, len, mpath, &r->man)) != HEXI_OK)
		goto out;
	r->have_man = 1;
	if ((rv = check_unchecked(r, o)) != HEXI_OK ||
	    (rv = check_opts(r, o)) != HEXI_OK || (rv = check_plan(r)) ||
	    (rv = check_files(r)))
		goto out;
	r->fids = malloc((size_t)r->man.meta.world_size * sizeof(hid_t));
	if (r->fids == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "%s: reader", path);
		goto out;
	}
	for (i = 0; i < r->man.meta.world_size; i++)
		r->fids[i] = H5I_INVALID_HID;
	r->fds = malloc((size_t)r->man.meta.world_size * sizeof(int));
	if (r->fds == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "%s: reader", path);
		goto out;
	}
	for (i = 0; i < r->man.meta.world_size; i++)
		r->fds[i] = -1;
	r->hashed = calloc((size_t)r->man.meta.world_size, sizeof(*r->hashed));
	if (r->hashed == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "%s: reader", path);
		goto out;
	}
	*out = r;
	r = NULL;
	rv = HEXI_OK;
out:
	free(text);
	hexi_ckpt_close(r);
	return rv;
}

void hexi_ckpt_close(hexi_ckpt_reader *r)
{
	int i;

	if (r == NULL)
		return;
	drop_dset(r);
	for (i = 0; r->fids != NULL && i < r->man.meta.world_size; i++)
		if (r->fids[i] >= 0)
			H5Fclose(r->fids[i]);
	free(r->fids);
	for (i = 0; r->fds != NULL && i < r->man.meta.world_size; i++)
		if (r->fds[i] >= 0)
			close(r->fds[i]);
	free(r->fds);
	free(r->hashed);
	free(r->buf);
	if (r->stepfd >= 0)
		close(r->stepfd);
	if (r->have_man)
		ck_manifest_fini(&r->man);
	free(r);
}

const hexi_ckpt_meta *hexi_ckpt_reader_meta(const hexi_ckpt_reader *r)
{
	return &r->man.meta;
}

const char *hexi_ckpt_reader_plan_json(const hexi_ckpt_reader *r)
{
	return r->man.plan_json ? r->man.plan_json : "";
}

const char *hexi_ckpt_reader_path(const hexi_ckpt_reader *r)
{
	return r->stepdir;
}

int hexi_ckpt_reader_version(const hexi_ckpt_reader *r)
{
	return r->man.version;
}

int hexi_ckpt_ntensors(const hexi_ckpt_reader *r)
{
	return r->man.ntensors;
}

static void fill_info(const ck_tensor *t, hexi_ckpt_tensor_info *out)
{
	out->name = t->name;
	out->ndim = t->ndim;
	out->shape[0] = t->shape[0];
	out->shape[1] = t->shape[1];
	out->nslices = t->nslices;
}

hexi_rc hexi_ckpt_tensor_at(const hexi_ckpt_reader *r, int i,
			    hexi_ckpt_tensor_info *out)
{
	if (i < 0 || i >= r->man.ntensors)
		return hexi_error(HEXI_ERR_RANGE,
				  "tensor index %d outside "
				  "[0,%d)",
				  i, r->man.ntensors);
	fill_info(&r->man.tensors[i], out);
	return HEXI_OK;
}

hexi_rc hexi_ckpt_tensor_find(const hexi_ckpt_reader *r, const char *name,
			      hexi_ckpt_tensor_info *out, int *idx)
{
	const ck_tensor *t = ck_manifest_find(&r->man, name);

	if (t == NULL)
		return hexi_error(HEXI_ERR_NOTFOUND, "%s: no tensor '%s'",
				  r->stepdir, name);
	if (out != NULL)
		fill_info(t, out);
	if (idx != NULL)
		*idx = (int)(t - r->man.tensors);
	return HEXI_OK;
}

hexi_rc hexi_ckpt_slice_at(const hexi_ckpt_reader *r, int tensor, int slice,
			   hexi_ckpt_slice_info *out)
{
	const ck_tensor *t;

	if (tensor < 0 || tensor >= r->man.ntensors)
		return hexi_error(HEXI_ERR_RANGE, "tensor index %d", tensor);
	t = &r->man.tensors[tensor];
	if (slice < 0 || slice >= t->nslices)
		return hexi_error(HEXI_ERR_RANGE, "tensor '%s': slice index %d",
				  t->name, slice);
	out->rank = t->slices[slice].rank;
	out->row_begin = t->slices[slice].b;
	out->row_end = t->slices[slice].e;
	out->xxh64 = t->slices[slice].xxh;
	return HEXI_OK;
}

/* ---- reading ----------------------------------------------------------- */

#define CK_MAX_OPEN_FILES 64

static void mark_verified(hexi_ckpt_reader *r, int rank)
{
	int i, j;

	for (i = 0; i < r->man.ntensors; i++)
		for (j = 0; j < r->man.tensors[i].nslices; j++)
			if (r->man.tensors[i].slices[j].rank == rank)
				r->man.tensors[i].slices[j].verified = 1;
}

/* Open rank file RANK for libhdf5 only after its size and whole-file
 * xxh64 match the manifest (version >= 2), so a crafted file never reaches
 * HDF5's parser; HDF5 is given the checked descriptor's /proc name. */
/* Rank file RANK (path P, for messages) opened below the step directory
 * without following anything, a regular file of the manifest's size. */
static hexi_rc open_rank(const hexi_ckpt_reader *r, int rank, const char *p,
			 int *fd, struct stat *st)
{
	char name[32];
	hexi_rc rc;

	snprintf(name, sizeof(name), "rank-%05d.h5", rank);
	if ((rc = ck_open_at(r->stepfd, name, p, fd, st)) != HEXI_OK)
		return rc;
	if ((uint64_t)st->st_size != r->man.file_bytes[rank]) {
		close(*fd);
		*fd = -1;
		return hexi_error(HEXI_ERR_IO,
				  "%s: %lld bytes, the manifest says %" PRIu64
				  " (truncated or replaced)",
				  p, (long long)st->st_size,
				  r->man.file_bytes[rank]);
	}
	return HEXI_OK;
}

static int same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* The file st describes is the one hashed before, unchanged since: same
 * inode, size, status-change and modification times (any write or
 * truncation changes ctime, which only root can set). */
static int hashed_before(const struct ck_hashed *h, const struct stat *st)
{
	return h->ok && h->dev == st->st_dev && h->ino == st->st_ino &&
	       h->size == st->st_size && same_time(&h->ctim, &st->st_ctim) &&
	       same_time(&h->mtim, &st->st_mtim);
}

/* After a matching hash of fd, opened as st: remembered only when the
 * file did not change while it was hashed. */
static void remember_hash(struct ck_hashed *h, int fd, const struct stat *st)
{
	struct stat now;

	h->ok = 0;
	if (fstat(fd, &now) != 0 || now.st_size != st->st_size ||
	    !same_time(&now.st_ctim, &st->st_ctim) ||
	    !same_time(&now.st_mtim, &st->st_mtim))
		return;
	h->dev = st->st_dev;
	h->ino = st->st_ino;
	h->size = st->st_size;
	h->ctim = st->st_ctim;
	h->mtim = st->st_mtim;
	h->ok = 1;
}

static hexi_rc open_checked(hexi_ckpt_reader *r, int rank, const char *p,
			    hid_t *out)
{
	char fdp[64];
	struct stat st;
	uint64_t bytes = 0, xxh = 0;
	int fd = -1;
	hexi_rc rc;

	if ((rc = open_rank(r, rank, p, &fd, &st)) != HEXI_OK)
		return rc;
	if (r->man.file_xxh != NULL && !hashed_before(&r->hashed[rank], &st)) {
		if ((rc = ck_hash_fd(fd, p, &bytes, &xxh)) != HEXI_OK)
			goto out;
		if (bytes != r->man.file_bytes[rank] ||
		    xxh != r->man.file_xxh[rank]) {
			rc = hexi_error(HEXI_ERR_CHECKSUM,
					"%s: whole-file xxh64 %016" PRIx64
					" (%" PRIu64 " bytes), the manifest "
					"says %016" PRIx64
					": corrupt or replaced, not opened",
					p, xxh, bytes, r->man.file_xxh[rank]);
			goto out;
		}
		remember_hash(&r->hashed[rank], fd, &st);
	}
	ck_fd_path(fdp, sizeof(fdp), fd, NULL);
	*out = ck_h5_open(ck_have_proc_fd() ? fdp : p);
	rc = *out >= 0 ? HEXI_OK : ck_h5_error("%s: cannot open", p);
out:
	close(fd);
	return rc;
}

/* The rank file of RANK, opened once (attributes checked then); at most
 * CK_MAX_OPEN_FILES stay open. */
hexi_rc ck_reader_file(hexi_ckpt_reader *r, int rank, hid_t *out)
{
	char p[CK_PATH_MAX];
	hid_t f = H5I_INVALID_HID;
	hexi_rc rc;
	int i;

	if (r->fids[rank] >= 0) {
		*out = r->fids[rank];
		return HEXI_OK;
	}
	/* At the cap, the file opened last goes: reads walk tensor by
	 * tensor over the ranks, and with more ranks than the cap every
	 * other choice (the oldest, or all) reopens every file on each walk;
	 * this one keeps the cap's first files open. */
	if (r->nopen >= CK_MAX_OPEN_FILES) {
		drop_dset(r);
		i = r->last_fid;
		if (i >= 0 && r->fids[i] >= 0) {
			H5Fclose(r->fids[i]);
			r->fids[i] = H5I_INVALID_HID;
			r->nopen--;
		}
		for (i = 0; r->nopen >= CK_MAX_OPEN_FILES &&
			    i < r->man.meta.world_size;
		     i++)
			if (r->fids[i] >= 0) {
				H5Fclose(r->fids[i]);
				r->fids[i] = H5I_INVALID_HID;
				r->nopen--;
			}
	}
	ck_rank_path(p, sizeof(p), r->stepdir, rank);
	if ((rc = open_checked(r, rank, p, &f)) != HEXI_OK)
		return rc;
	if ((rc = ck_h5_check_meta(f, &r->man.meta, rank, p)) != HEXI_OK) {
		H5Fclose(f);
		return rc;
	}
	/* The whole file's xxh64 was just checked: its slices' bytes are
	 * covered, so reads skip the second hash and the copy through the
	 * verification buffer (hexi_ckpt_verify still checks every slice). */
	if (r->man.file_xxh != NULL)
		mark_verified(r, rank);
	r->fids[rank] = f;
	r->nopen++;
	r->last_fid = rank;
	*out = f;
	return HEXI_OK;
}

/* Rows [b, e) (relative to the slice) of stored slice S into DST. */
static void drop_dset(hexi_ckpt_reader *r)
{
	if (r->dspace >= 0)
		H5Sclose(r->dspace);
	if (r->dset >= 0)
		H5Dclose(r->dset);
	r->dspace = r->dset = H5I_INVALID_HID;
	r->dset_slice = NULL;
}

/* Open the dataset of slice S (kept open for the next call on S) and check
 * its shape against the manifest. */
static hexi_rc open_dset(hexi_ckpt_reader *r, const ck_tensor *t,
			 const ck_slice *s, const char *p)
{
	char dname[HEXI_CKPT_NAME_MAX + 64];
	hsize_t dims[2] = {0, 0};
	hid_t f;
	hexi_rc rv;

	if (r->dset_slice == s)
		return HEXI_OK;
	drop_dset(r);
	if ((rv = ck_reader_file(r, s->rank, &f)) != HEXI_OK)
		return rv;
	ck_slice_dset(dname, sizeof(dname), t->name, s->b);
	r->dset = H5Dopen2(f, dname, H5P_DEFAULT);
	if (r->dset < 0 || (r->dspace = H5Dget_space(r->dset)) < 0) {
		rv = ck_h5_error("%s: tensor '%s' rows [%lld,%lld)", p, t->name,
				 (long long)s->b, (long long)s->e);
		drop_dset(r);
		return rv;
	}
	if (H5Sget_simple_extent_ndims(r->dspace) != t->ndim ||
	    H5Sget_simple_extent_dims(r->dspace, dims, NULL) < 0 ||
	    dims[0] != (hsize_t)(s->e - s->b) ||
	    (t->ndim == 2 && dims[1] != (hsize_t)t->shape[1])) {
		drop_dset(r);
		return hexi_error(HEXI_ERR_MISMATCH,
				  "%s: tensor '%s' rows [%lld,%lld): dataset "
				  "shape differs from the manifest",
				  p, t->name, (long long)s->b, (long long)s->e);
	}
	r->dset_slice = s;
	return HEXI_OK;
}

/* Rows [b, e) (relative to the slice) of stored slice S into DST. */
/* ---- reads by offset (format version 3) -------------------------------
 * The manifest says where each slice's and blob's bytes start in its rank
 * file, and their xxh64: they are read with pread straight into the
 * caller's memory, and libhdf5 never parses the file.  Offsets were
 * checked against the file sizes when the manifest was parsed, and the
 * descriptor's size against the manifest here; the slice checksums do the
 * rest (a verified read is one pass over the disk, like dd). */

/* Stored little-endian float32: read as they lie only on a little-endian
 * host (elsewhere libhdf5 converts). */
static int direct_ok(uint64_t off)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return off != CK_NO_OFFSET;
#else
	(void)off;
	return 0;
#endif
}

/* The descriptor of rank file RANK (regular file, not followed, its size
 * the manifest's); at most CK_MAX_OPEN_FILES stay open. */
static hexi_rc rank_fd(hexi_ckpt_reader *r, int rank, int *fd)
{
	char p[CK_PATH_MAX];
	struct stat st;
	int i, f = -1;
	hexi_rc rc;

	if (r->fds[rank] >= 0) {
		*fd = r->fds[rank];
		return HEXI_OK;
	}
	if (r->nfds >= CK_MAX_OPEN_FILES) { /* as ck_reader_file */
		i = r->last_fd;
		if (i >= 0 && r->fds[i] >= 0) {
			close(r->fds[i]);
			r->fds[i] = -1;
			r->nfds--;
		}
		for (i = 0;
		     r->nfds >= CK_MAX_OPEN_FILES && i < r->man.meta.world_size;
		     i++)
			if (r->fds[i] >= 0) {
				close(r->fds[i]);
				r->fds[i] = -1;
				r->nfds--;
			}
	}
	ck_rank_path(p, sizeof(p), r->stepdir, rank);
	if ((rc = open_rank(r, rank, p, &f, &st)) != HEXI_OK)
		return rc;
	/* The shared lock libhdf5 would take: a file another process holds
	 * exclusively (being written) is refused, never read. */
	if (flock(f, LOCK_SH | LOCK_NB) != 0 && errno != ENOLCK &&
	    errno != ENOSYS && errno != EOPNOTSUPP) {
		rc = hexi_error(HEXI_ERR_IO,
				"%s: locked by another process (%s); not read",
				p, strerror(errno));
		close(f);
		return rc;
	}
	(void)posix_fadvise(f, 0, 0, POSIX_FADV_SEQUENTIAL);
	r->fds[rank] = f;
	r->nfds++;
	r->last_fd = rank;
	*fd = f;
	return HEXI_OK;
}

/* LEN bytes at OFF of rank file RANK into DST. */
static hexi_rc pread_all(hexi_ckpt_reader *r, int rank, uint64_t off, void *dst,
			 size_t len, const char *what)
{
	char p[CK_PATH_MAX];
	char *d = dst;
	size_t done = 0;
	ssize_t n;
	int fd;
	hexi_rc rc;

	if ((rc = rank_fd(r, rank, &fd)) != HEXI_OK)
		return rc;
	while (done < len) {
		n = pread(fd, d + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ck_rank_path(p, sizeof(p), r->stepdir, rank);
			return hexi_error(
			    HEXI_ERR_IO, "%s: %s: %s at byte %" PRIu64, p, what,
			    n < 0 ? strerror(errno) : "file ends", off + done);
		}
		done += (size_t)n;
	}
	return HEXI_OK;
}

static hexi_rc read_part(hexi_ckpt_reader *r, const ck_tensor *t,
			 const ck_slice *s, int64_t b, int64_t e, float *dst)
{
	char p[CK_PATH_MAX];
	hsize_t start[2] = {0, 0}, count[2];
	hid_t ms = H5I_INVALID_HID;
	hexi_rc rv;

	if (direct_ok(s->off)) {
		size_t row = (size_t)t->shape[1] * 4;
		return pread_all(r, s->rank, s->off + (uint64_t)b * row, dst,
				 (size_t)(e - b) * row, t->name);
	}
	ck_rank_path(p, sizeof(p), r->stepdir, s->rank);
	if ((rv = open_dset(r, t, s, p)) != HEXI_OK)
		return rv;
	start[0] = (hsize_t)b;
	count[0] = (hsize_t)(e - b);
	count[1] = (hsize_t)t->shape[1];
	ms = H5Screate_simple(t->ndim, count, NULL);
	if (ms < 0 ||
	    H5Sselect_hyperslab(r->dspace, H5S_SELECT_SET, start, NULL, count,
				NULL) < 0 ||
	    H5Dread(r->dset, H5T_NATIVE_FLOAT, ms, r->dspace, H5P_DEFAULT,
		    dst) < 0)
		rv = ck_h5_error("%s: reading tensor '%s' rows [%lld,%lld)", p,
				 t->name, (long long)(s->b + b),
				 (long long)(s->b + e));
	if (ms >= 0)
		H5Sclose(ms);
	return rv;
}

static hexi_rc bad_sum(const hexi_ckpt_reader *r, const ck_tensor *t,
		       const ck_slice *s, uint64_t got)
{
	char p[CK_PATH_MAX];

	ck_rank_path(p, sizeof(p), r->stepdir, s->rank);
	return hexi_error(HEXI_ERR_CHECKSUM,
			  "%s: tensor '%s' rows [%lld,%lld): "
			  "checksum mismatch (stored %016" PRIx64 ", data "
			  "%016" PRIx64 ")",
			  p, t->name, (long long)s->b, (long long)s->e, s->xxh,
			  got);
}

static hexi_rc grow_buf(hexi_ckpt_reader *r, size_t need, const char *name)
{
	if (r->buf != NULL && r->bufcap >= need)
		return HEXI_OK;
	free(r->buf);
	r->cached = NULL;
	r->buf = malloc(need);
	r->bufcap = r->buf ? need : 0;
	if (r->buf == NULL)
		return hexi_error(HEXI_ERR_NOMEM,
				  "tensor '%s': %zu-byte read "
				  "buffer",
				  name, need);
	return HEXI_OK;
}

/* Read the whole slice and check its checksum.  A slice of at most
 * CK_CACHE_BYTES stays in r->buf (r->cached), so reading its parts
 * afterwards costs no I/O; a larger one is streamed in blocks. */
hexi_rc ck_verify_slice(hexi_ckpt_reader *r, const ck_tensor *t, ck_slice *s)
{
	size_t row_bytes = (size_t)t->shape[1] * 4;
	size_t bytes = (size_t)(s->e - s->b) * row_bytes;
	int64_t blk = (int64_t)(CK_IO_BLOCK_BYTES / row_bytes), b;
	XXH64_state_t *st = NULL;
	uint64_t h;
	hexi_rc rv;

	if (bytes <= CK_CACHE_BYTES)
		blk = s->e - s->b;
	if (blk < 1)
		blk = 1;
	r->cached = NULL;
	if ((rv = grow_buf(r, (size_t)blk * row_bytes, t->name)) != HEXI_OK)
		return rv;
	st = XXH64_createState();
	if (st == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "xxh64 state");
	XXH64_reset(st, 0);
	for (b = 0; b < s->e - s->b && rv == HEXI_OK; b += blk) {
		int64_t e = b + blk < s->e - s->b ? b + blk : s->e - s->b;
		rv = read_part(r, t, s, b, e, r->buf);
		if (rv == HEXI_OK)
			XXH64_update(st, r->buf, (size_t)(e - b) * row_bytes);
	}
	h = XXH64_digest(st);
	XXH64_freeState(st);
	if (rv != HEXI_OK)
		return rv;
	if (h != s->xxh)
		return bad_sum(r, t, s, h);
	s->verified = 1;
	if (blk == s->e - s->b)
		r->cached = s;
	return HEXI_OK;
}

/* Read slice S whole into DST and check it, in cache-sized blocks so each
 * block is hashed while still in the CPU cache. */
static hexi_rc read_whole(hexi_ckpt_reader *r, const ck_tensor *t, ck_slice *s,
			  float *dst)
{
	size_t row = (size_t)t->shape[1];
	/* By offset, the reads are the disk's: large ones, as dd makes (1
	 * MiB preads of a cold file cost 1.5-2x the time of 8 MiB ones) */
	size_t piece =
	    direct_ok(s->off) ? CK_IO_BLOCK_BYTES : CK_CPU_BLOCK_BYTES;
	int64_t blk = (int64_t)(piece / (row * 4)), b, e;
	XXH64_state_t *st = XXH64_createState();
	uint64_t h;
	hexi_rc rc = HEXI_OK;

	if (st == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "xxh64 state");
	if (blk < 1)
		blk = 1;
	XXH64_reset(st, 0);
	for (b = 0; b < s->e - s->b && rc == HEXI_OK; b = e) {
		e = b + blk < s->e - s->b ? b + blk : s->e - s->b;
		rc = read_part(r, t, s, b, e, dst + (size_t)b * row);
		if (rc == HEXI_OK)
			XXH64_update(st, dst + (size_t)b * row,
				     (size_t)(e - b) * row * 4);
	}
	h = XXH64_digest(st);
	XXH64_freeState(st);
	if (rc != HEXI_OK)
		return rc;
	if (h != s->xxh)
		return bad_sum(r, t, s, h);
	s->verified = 1;
	return HEXI_OK;
}

hexi_rc hexi_ckpt_read_rows(hexi_ckpt_reader *r, const char *name,
			    int64_t row_begin, int64_t row_end, float *dst)
{
	ck_tensor *t;
	hexi_rc rc;
	int i;

	if (r == NULL || name == NULL || dst == NULL)
		return hexi_error(HEXI_ERR_INVAL, "read_rows: NULL argument");
	t = ck_manifest_find(&r->man, name);
	if (t == NULL)
		return hexi_error(HEXI_ERR_NOTFOUND, "%s: no tensor '%s'",
				  r->stepdir, name);
	if (row_begin < 0 || row_end <= row_begin || row_end > t->shape[0])
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: tensor '%s': rows "
				  "[%lld,%lld) outside [0,%lld)",
				  r->stepdir, name, (long long)row_begin,
				  (long long)row_end, (long long)t->shape[0]);
	for (i = 0; i < t->nslices; i++) {
		ck_slice *s = &t->slices[i];
		int64_t ob = s->b > row_begin ? s->b : row_begin;
		int64_t oe = s->e < row_end ? s->e : row_end;
		float *d = dst + (size_t)(ob - row_begin) * (size_t)t->shape[1];
		/* Read by offset, a slice is always checked: its checksum
		 * stands in for the whole-file check libhdf5's path has. */
		int check = (r->verify || direct_ok(s->off)) && !s->verified;
		if (ob >= oe)
			continue;
		if (check && ob == s->b && oe == s->e) {
			/* Whole slice wanted: one pass reads and checks it. */
			if ((rc = read_whole(r, t, s, d)) != HEXI_OK)
				return rc;
			continue;
		}
		if (check && (rc = ck_verify_slice(r, t, s)) != HEXI_OK)
			return rc;
		if ((rc = read_part(r, t, s, ob - s->b, oe - s->b, d)) !=
		    HEXI_OK)
			return rc;
	}
	return HEXI_OK;
}

/* ---- blobs ------------------------------------------------------------- */

int hexi_ckpt_nblobs(const hexi_ckpt_reader *r)
{
	return r->man.nblobs;
}

const char *hexi_ckpt_blob_name(const hexi_ckpt_reader *r, int i)
{
	return i >= 0 && i < r->man.nblobs ? r->man.blobs[i].name : NULL;
}

static hexi_rc read_blob_data(hexi_ckpt_reader *r, const ck_blob *b, void *buf)
{
	char p[CK_PATH_MAX], dn[HEXI_CKPT_NAME_MAX + 16];
	hid_t f, d = H5I_INVALID_HID, s = H5I_INVALID_HID;
	hexi_rc rv;

	if (direct_ok(b->off))
		return pread_all(r, b->rank, b->off, buf, (size_t)b->bytes,
				 b->name);
	if ((rv = ck_reader_file(r, b->rank, &f)) != HEXI_OK)
		return rv;
	ck_rank_path(p, sizeof(p), r->stepdir, b->rank);
	snprintf(dn, sizeof(dn), "/blobs/%s", b->name);
	rv = HEXI_ERR_HDF5;
	d = H5Dopen2(f, dn, H5P_DEFAULT);
	if (d < 0 || (s = H5Dget_space(d)) < 0)
		goto out;
	if (H5Sget_simple_extent_npoints(s) != (hssize_t)b->bytes) {
		rv = hexi_error(HEXI_ERR_MISMATCH,
				"%s: blob '%s': size differs "
				"from the manifest",
				p, b->name);
		goto out;
	}
	if (b->bytes > 0 && H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL,
				    H5P_DEFAULT, buf) < 0)
		goto out;
	rv = HEXI_OK;
out:
	if (rv == HEXI_ERR_HDF5)
		rv = ck_h5_error("%s: reading blob '%s'", p, b->name);
	if (s >= 0)
		H5Sclose(s);
	if (d >= 0)
		H5Dclose(d);
	return rv;
}

hexi_rc ck_blob_read(hexi_ckpt_reader *r, const ck_blob *b, void **data)
{
	void *buf = malloc(b->bytes ? b->bytes : 1);
	uint64_t h;
	hexi_rc rv;

	if (buf == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "blob '%s'", b->name);
	rv = read_blob_data(r, b, buf);
	if (rv == HEXI_OK && (h = XXH64(buf, b->bytes, 0)) != b->xxh)
		rv = hexi_error(HEXI_ERR_CHECKSUM,
				"%s/rank-%05d.h5: blob '%s': "
				"checksum mismatch (stored %016" PRIx64
				", data %016" PRIx64 ")",
				r->stepdir, b->rank, b->name, b->xxh, h);
	if (rv != HEXI_OK) {
		free(buf);
		return rv;
	}
	*data = buf;
	return HEXI_OK;
}

hexi_rc hexi_ckpt_read_blob(hexi_ckpt_reader *r, const char *name, void **data,
			    size_t *len)
{
	int i;

	for (i = 0; i < r->man.nblobs; i++)
		if (strcmp(r->man.blobs[i].name, name) == 0) {
			*len = r->man.blobs[i].bytes;
			return ck_blob_read(r, &r->man.blobs[i], data);
		}
	return hexi_error(HEXI_ERR_NOTFOUND, "%s: no blob '%s'", r->stepdir,
			  name);
}

/* ---- verify ------------------------------------------------------------ */

static hexi_rc check_dset_sum(hexi_ckpt_reader *r, const ck_tensor *t,
			      const ck_slice *s)
{
	char dname[HEXI_CKPT_NAME_MAX + 64], p[CK_PATH_MAX];
	uint64_t h = 0;
	hid_t f, d;
	int bad;
	hexi_rc rc;

	if ((rc = ck_reader_file(r, s->rank, &f)) != HEXI_OK)
		return rc;
	ck_rank_path(p, sizeof(p), r->stepdir, s->rank);
	ck_slice_dset(dname, sizeof(dname), t->name, s->b);
	d = H5Dopen2(f, dname, H5P_DEFAULT);
	if (d < 0)
		return ck_h5_error("%s: tensor '%s' rows [%lld,%lld)", p,
				   t->name, (long long)s->b, (long long)s->e);
	bad = ck_h5_read_u64_attr(d, "xxh64", &h) < 0 || h != s->xxh;
	H5Dclose(d);
	if (bad)
		return hexi_error(
		    HEXI_ERR_CHECKSUM,
		    "%s: tensor '%s' rows "
		    "[%lld,%lld): checksum attribute differs from "
		    "the manifest",
		    p, t->name, (long long)s->b, (long long)s->e);
	return HEXI_OK;
}

hexi_rc hexi_ckpt_verify(hexi_ckpt_reader *r, hexi_ckpt_progress_fn progress,
			 void *arg)
{
	uint64_t total = 0, done = 0;
	hexi_rc rc;
	void *buf;
	int i, j;

	for (i = 0; i < r->man.ntensors; i++)
		total += (uint64_t)r->man.tensors[i].shape[0] *
			 (uint64_t)r->man.tensors[i].shape[1] * 4;
	for (i = 0; i < r->man.meta.world_size; i++)
		if ((rc = ck_reader_file(r, i, &(hid_t){0})) != HEXI_OK)
			return rc;
	for (i = 0; i < r->man.ntensors; i++) {
		ck_tensor *t = &r->man.tensors[i];
		for (j = 0; j < t->nslices; j++) {
			t->slices[j].verified = 0;
			if ((rc = check_dset_sum(r, t, &t->slices[j])) ||
			    (rc = ck_verify_slice(r, t, &t->slices[j])))
				return rc;
		}
		done += (uint64_t)t->shape[0] * (uint64_t)t->shape[1] * 4;
		if (progress != NULL)
			progress(t->name, done, total, arg);
	}
	for (i = 0; i < r->man.nblobs; i++) {
		if ((rc = ck_blob_read(r, &r->man.blobs[i], &buf)) != HEXI_OK)
			return rc;
		free(buf);
	}
	return HEXI_OK;
}
