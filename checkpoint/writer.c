/*
 * writer.c - one rank's part of a save (its rank file) and the commit.
 *
 * A rank file holds /slices/NAME@ROW_BEGIN datasets (float32, contiguous,
 * never filled, so each byte is written once), /blobs/NAME (uint8), and
 * /index: a JSON text listing what the file holds with each checksum, which
 * the commit reads instead of walking the file.  The root attribute
 * 'complete' is written last; the file is fsynced after closing.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt_internal.h"

struct hexi_ckpt_writer {
	char stepdir[CK_PATH_MAX]; /* the staging directory, for messages */
	char path[CK_PATH_MAX];	   /* the rank file, for messages */
	char h5path[CK_PATH_MAX];  /* the name HDF5 is given */
	char fname[32];		   /* rank-RRRRR.h5 */
	char stage[CK_STAGE_NAME_MAX];
	int implicit; /* begun by hexi_ckpt_save_begin: a failure discards */
	int dirfd, stagefd;
	hexi_ckpt_meta meta;
	int rank;
	hid_t fid, slices, blobs;
	json_t *index_slices, *index_blobs;
	/* the slice being written */
	hid_t dset, fspace;
	char name[HEXI_CKPT_NAME_MAX];
	int ndim;
	int64_t shape[2], b, e, next;
	uint64_t off; /* its data's byte offset in the file */
	XXH64_state_t *xxh;
};

/* Where a dataset's data starts in the file: contiguous, allocated at
 * create (H5D_ALLOC_TIME_EARLY), so readers can find it without libhdf5
 * (format version 3).  An empty dataset has no storage: 0. */
static int dset_offset(hid_t d, uint64_t bytes, uint64_t *off)
{
	haddr_t a = H5Dget_offset(d);

	if (a == HADDR_UNDEF) {
		*off = 0;
		return bytes == 0 ? 0 : -1;
	}
	*off = (uint64_t)a;
	return 0;
}

static hexi_rc writer_open(hexi_ckpt_writer *w)
{
	hid_t f;

	f = ck_h5_create(w->h5path);
	if (f < 0)
		return ck_h5_error("%s: cannot create", w->path);
	w->fid = f;
	if (ck_h5_write_meta(f, &w->meta) < 0 ||
	    ck_h5_write_i64_attr(f, "rank", w->rank) < 0)
		return ck_h5_error("%s: writing attributes", w->path);
	w->slices =
	    H5Gcreate2(f, "slices", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (w->slices < 0)
		return ck_h5_error("%s: creating /slices", w->path);
	w->blobs =
	    H5Gcreate2(f, "blobs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (w->blobs < 0)
		return ck_h5_error("%s: creating /blobs", w->path);
	return HEXI_OK;
}

static void session_discard(const char *stage);

static void writer_free(hexi_ckpt_writer *w, int remove_file)
{
	if (w == NULL)
		return;
	/* A file being discarded: release its space before HDF5 flushes. */
	if (remove_file && w->fname[0] != '\0' && w->fid >= 0 &&
	    truncate(w->h5path, 0) < 0)
		hexi_log(HEXI_LOG_WARN, "%s: cannot truncate: %s", w->path,
			 strerror(errno));
	if (w->fspace >= 0)
		H5Sclose(w->fspace);
	if (w->dset >= 0)
		H5Dclose(w->dset);
	if (w->blobs >= 0)
		H5Gclose(w->blobs);
	if (w->slices >= 0)
		H5Gclose(w->slices);
	if (w->fid >= 0)
		ck_h5_close_discard(w->fid, w->h5path);
	if (remove_file && w->fname[0] != '\0' && w->stagefd >= 0)
		unlinkat(w->stagefd, w->fname, 0);
	if (w->stagefd >= 0)
		close(w->stagefd);
	/* One process writes every rank file: a failed one loses the save,
	 * and nothing of it stays on disk (a full disk, issue 18). */
	if (remove_file && w->implicit && w->dirfd >= 0) {
		if (ck_dir_remove(w->dirfd, w->stage) != HEXI_OK)
			hexi_error_clear();
		session_discard(w->stage);
	}
	if (w->dirfd >= 0)
		close(w->dirfd);
	if (w->xxh != NULL)
		XXH64_freeState(w->xxh);
	json_decref(w->index_blobs);
	json_decref(w->index_slices);
	free(w);
}

/* ---- staging ------------------------------------------------------------
 * Saves begun through the original API (one process writes every rank
 * file): the staging directory of (DIR, step), prepared on first use. */

#define CK_MAX_SESSIONS 8

static struct session {
	char dir[CK_PATH_MAX];
	int64_t step;
	char stage[CK_STAGE_NAME_MAX];
} sessions[CK_MAX_SESSIONS];

static struct session *session_find(const char *dir, int64_t step)
{
	int i;

	for (i = 0; i < CK_MAX_SESSIONS; i++)
		if (sessions[i].stage[0] != '\0' && sessions[i].step == step &&
		    strcmp(sessions[i].dir, dir) == 0)
			return &sessions[i];
	return NULL;
}

static void session_drop(struct session *ss)
{
	if (ss != NULL)
		memset(ss, 0, sizeof(*ss));
}

static void session_discard(const char *stage)
{
	int i;

	for (i = 0; i < CK_MAX_SESSIONS; i++)
		if (strcmp(sessions[i].stage, stage) == 0)
			session_drop(&sessions[i]);
}

static int committed_at(int dfd, const char *stepname)
{
	char p[64];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", stepname, HEXI_CKPT_MANIFEST);
	return fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* DIR/step-N must be absent, or an uncommitted directory of ours (left by
 * an old-format save; replaced at the commit).  Anything else, a symlink,
 * another user's (0777) directory, is refused. */
static hexi_rc check_step_entry(int dfd, const char *dir, int64_t step)
{
	char name[32];
	struct stat st;

	snprintf(name, sizeof(name), "step-%08lld", (long long)step);
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return HEXI_OK;
	if (S_ISDIR(st.st_mode) && committed_at(dfd, name))
		return hexi_error(HEXI_ERR_INVAL,
				  "%s/%s: step %lld is already committed; "
				  "remove it or save another step",
				  dir, name, (long long)step);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return hexi_error(HEXI_ERR_PERM,
				  "%s/%s exists and is %s owned by uid %u, not "
				  "a directory of yours: refusing to save "
				  "there (remove it)",
				  dir, name,
				  S_ISLNK(st.st_mode)	? "a symlink"
				  : S_ISDIR(st.st_mode) ? "a directory"
							: "a file",
				  (unsigned)st.st_uid);
	return HEXI_OK;
}

hexi_rc hexi_ckpt_save_prepare(const char *dir, const hexi_ckpt_meta *meta,
			       char stage[HEXI_CKPT_STAGE_MAX])
{
	int dfd = -1, fresh = 0;
	hexi_rc rv;

	if (dir == NULL || meta == NULL || stage == NULL)
		return hexi_error(HEXI_ERR_INVAL, "save: NULL argument");
	stage[0] = '\0';
	if ((rv = ck_meta_check(meta, dir)) != HEXI_OK)
		return rv;
	if ((rv = ck_dir_open(dir, 1, &dfd)) != HEXI_OK)
		return rv;
	if ((rv = ck_lock_dir(dfd, dir, &fresh)) != HEXI_OK)
		goto out;
	if (fresh) /* no save of ours runs: leftovers of killed ones */
		ck_stage_cleanup(dfd);
	if ((rv = check_step_entry(dfd, dir, meta->step)) != HEXI_OK)
		goto out;
	rv = ck_stage_create(dfd, meta->step, dir, stage, HEXI_CKPT_STAGE_MAX);
out:
	if (rv != HEXI_OK)
		stage[0] = '\0';
	close(dfd);
	return rv;
}

hexi_rc hexi_ckpt_claim(const char *dir)
{
	struct stat st;
	int dfd = -1, fresh = 0;
	hexi_rc rv;

	if (dir == NULL)
		return hexi_error(HEXI_ERR_INVAL, "claim: NULL directory");
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return hexi_error(HEXI_ERR_NOTFOUND,
				  "%s: no such checkpoint directory (yet)",
				  dir);
	if ((rv = ck_dir_open(dir, 0, &dfd)) != HEXI_OK)
		return rv;
	rv = ck_lock_dir(dfd, dir, &fresh);
	if (rv == HEXI_OK && fresh) /* no save of ours runs */
		ck_stage_cleanup(dfd);
	close(dfd);
	return rv;
}

void hexi_ckpt_save_discard(const char *dir, const char *stage)
{
	int dfd = -1;

	if (dir == NULL || stage == NULL || !ck_is_stage_name(stage) ||
	    ck_dir_open(dir, 0, &dfd) != HEXI_OK) {
		hexi_error_clear();
		return;
	}
	if (ck_dir_remove(dfd, stage) != HEXI_OK)
		hexi_error_clear();
	close(dfd);
}

hexi_rc hexi_ckpt_save_begin(const char *dir, const hexi_ckpt_meta *meta,
			     int rank, hexi_ckpt_writer **out)
{
	struct session *ss;
	char stage[CK_STAGE_NAME_MAX];
	hexi_rc rv;
	int i;

	*out = NULL;
	if (dir == NULL || meta == NULL)
		return hexi_error(HEXI_ERR_INVAL,
				  "save: NULL directory or meta");
	if (strlen(dir) >= CK_PATH_MAX)
		return hexi_error(HEXI_ERR_RANGE, "%.200s: path too long", dir);
	ss = session_find(dir, meta->step);
	if (ss != NULL) {
		rv = hexi_ckpt_save_begin_staged(dir, ss->stage, meta, rank,
						 out);
		if (rv == HEXI_OK)
			(*out)->implicit = 1;
		return rv;
	}
	for (i = 0; i < CK_MAX_SESSIONS && sessions[i].stage[0]; i++)
		;
	if (i == CK_MAX_SESSIONS)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: more than %d uncommitted saves in this "
				  "process",
				  dir, CK_MAX_SESSIONS);
	if ((rv = hexi_ckpt_save_prepare(dir, meta, stage)) != HEXI_OK)
		return rv;
	rv = hexi_ckpt_save_begin_staged(dir, stage, meta, rank, out);
	if (rv != HEXI_OK) {
		hexi_ckpt_save_discard(dir, stage);
		return rv;
	}
	memcpy(sessions[i].dir, dir, strlen(dir) + 1);
	sessions[i].step = meta->step;
	memcpy(sessions[i].stage, stage, sizeof(stage));
	(*out)->implicit = 1;
	return HEXI_OK;
}

static hexi_rc writer_paths(hexi_ckpt_writer *w, const char *dir,
			    const char *stage)
{
	int n1, n2, n3;

	snprintf(w->fname, sizeof(w->fname), "rank-%05d.h5", w->rank);
	n1 = snprintf(w->stepdir, sizeof(w->stepdir), "%s/%s", dir, stage);
	n2 = snprintf(w->path, sizeof(w->path), "%s/%s", w->stepdir, w->fname);
	/* HDF5 opens by name: through the staging directory's descriptor
	 * no path component can be swapped under it. */
	n3 = ck_have_proc_fd()
		 ? (ck_fd_path(w->h5path, sizeof(w->h5path), w->stagefd,
			       w->fname) < 0
			? -1
			: 0)
		 : snprintf(w->h5path, sizeof(w->h5path), "%s", w->path);
	if (n1 < 0 || n2 < 0 || n3 < 0 || (size_t)n2 >= sizeof(w->path) ||
	    (size_t)n3 >= sizeof(w->h5path))
		return hexi_error(HEXI_ERR_RANGE, "%.200s: path too long", dir);
	return HEXI_OK;
}

hexi_rc hexi_ckpt_save_begin_staged(const char *dir, const char *stage,
				    const hexi_ckpt_meta *meta, int rank,
				    hexi_ckpt_writer **out)
{
	hexi_ckpt_writer *w = NULL;
	char sname[32];
	hexi_rc rv;

	*out = NULL;
	if (dir == NULL || meta == NULL || stage == NULL)
		return hexi_error(HEXI_ERR_INVAL,
				  "save: NULL directory or meta");
	if ((rv = ck_meta_check(meta, dir)) != HEXI_OK)
		return rv;
	if (rank < 0 || rank >= meta->world_size)
		return hexi_error(HEXI_ERR_RANGE, "%s: rank %d outside [0,%d)",
				  dir, rank, meta->world_size);
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%s: writer", dir);
	w->fid = w->slices = w->blobs = w->dset = w->fspace = H5I_INVALID_HID;
	w->dirfd = w->stagefd = -1;
	w->meta = *meta;
	w->rank = rank;
	if (strlen(stage) < sizeof(w->stage))
		memcpy(w->stage, stage, strlen(stage) + 1);
	if ((rv = ck_dir_open(dir, 0, &w->dirfd)) != HEXI_OK)
		goto out;
	snprintf(sname, sizeof(sname), "step-%08lld", (long long)meta->step);
	if (committed_at(w->dirfd, sname)) {
		rv = hexi_error(HEXI_ERR_INVAL,
				"%s/%s: step %lld is already "
				"committed; remove it or save another step",
				dir, sname, (long long)meta->step);
		goto out;
	}
	if ((rv = ck_stage_open(w->dirfd, stage, dir, &w->stagefd)) ||
	    (rv = writer_paths(w, dir, stage)))
		goto out;
	w->index_slices = json_array();
	w->index_blobs = json_array();
	w->xxh = XXH64_createState();
	if (w->index_slices == NULL || w->index_blobs == NULL ||
	    w->xxh == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "%s: writer", w->path);
		goto out;
	}
	if ((rv = writer_open(w)) != HEXI_OK)
		goto out;
	*out = w;
	w = NULL;
	rv = HEXI_OK;
out:
	/* A rank file that exists already is not ours to remove. */
	if (w != NULL && w->fid < 0)
		w->fname[0] = '\0';
	writer_free(w, 1);
	return rv;
}

static hexi_rc create_slice_dset(hexi_ckpt_writer *w, const char *dname)
{
	hsize_t dims[2] = {(hsize_t)(w->e - w->b), (hsize_t)w->shape[1]};
	hid_t dcpl = H5I_INVALID_HID;
	hexi_rc rv = HEXI_ERR_HDF5;

	w->fspace = H5Screate_simple(w->ndim, dims, NULL);
	if (w->fspace < 0)
		goto fail;
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (dcpl < 0 || H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 ||
	    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) < 0)
		goto fail;
	w->dset = H5Dcreate2(w->fid, dname, H5T_IEEE_F32LE, w->fspace,
			     H5P_DEFAULT, dcpl, H5P_DEFAULT);
	if (w->dset < 0 ||
	    dset_offset(w->dset,
			(uint64_t)(w->e - w->b) * (uint64_t)w->shape[1] * 4,
			&w->off) < 0)
		goto fail;
	H5Pclose(dcpl);
	return HEXI_OK;
fail:
	rv = ck_h5_error("%s: creating dataset for tensor '%s' rows "
			 "[%lld,%lld)",
			 w->path, w->name, (long long)w->b, (long long)w->e);
	/* No id outlives a failed create (issue 18, finding 8). */
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (w->fspace >= 0)
		H5Sclose(w->fspace);
	w->fspace = H5I_INVALID_HID;
	return rv;
}

hexi_rc hexi_ckpt_slice_begin(hexi_ckpt_writer *w, const char *name, int ndim,
			      const int64_t shape[2], int64_t row_begin,
			      int64_t row_end)
{
	char dname[HEXI_CKPT_NAME_MAX + 64];
	ck_manifest tmp;
	hexi_rc rc;

	if (w == NULL || name == NULL || shape == NULL)
		return hexi_error(HEXI_ERR_INVAL, "slice_begin: NULL argument");
	if (w->dset >= 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: tensor '%s': slice '%s' "
				  "still open",
				  w->path, name, w->name);
	/* Same checks as the manifest will make. */
	ck_manifest_init(&tmp, &w->meta);
	rc = ck_manifest_add_slice(&tmp, name, ndim, shape, w->rank, row_begin,
				   row_end, 0, 0, w->path);
	ck_manifest_fini(&tmp);
	if (rc != HEXI_OK)
		return rc;
	memcpy(w->name, name, strlen(name) + 1);
	w->ndim = ndim;
	w->shape[0] = shape[0];
	w->shape[1] = ndim == 2 ? shape[1] : 1;
	w->b = w->next = row_begin;
	w->e = row_end;
	ck_slice_dset(dname, sizeof(dname), name, row_begin);
	if (H5Lexists(w->fid, dname, H5P_DEFAULT) > 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: tensor '%s' rows from "
				  "%lld written twice",
				  w->path, name, (long long)row_begin);
	XXH64_reset(w->xxh, 0);
	return create_slice_dset(w, dname);
}

hexi_rc hexi_ckpt_slice_rows(hexi_ckpt_writer *w, const float *rows,
			     int64_t nrows)
{
	hsize_t start[2] = {0, 0}, count[2];
	hid_t mspace = H5I_INVALID_HID;
	hexi_rc rv = HEXI_OK;

	if (w == NULL || w->dset < 0 || (rows == NULL && nrows > 0))
		return hexi_error(HEXI_ERR_INVAL, "slice_rows: no open slice");
	if (nrows < 0 || nrows > w->e - w->next)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: tensor '%s': %lld rows "
				  "given, %lld left",
				  w->path, w->name, (long long)nrows,
				  (long long)(w->e - w->next));
	if (nrows == 0)
		return HEXI_OK;
	/* Hash first: the write then copies from the CPU cache. */
	XXH64_update(w->xxh, rows, (size_t)nrows * (size_t)w->shape[1] * 4);
	start[0] = (hsize_t)(w->next - w->b);
	count[0] = (hsize_t)nrows;
	count[1] = (hsize_t)w->shape[1];
	mspace = H5Screate_simple(w->ndim, count, NULL);
	if (mspace < 0 ||
	    H5Sselect_hyperslab(w->fspace, H5S_SELECT_SET, start, NULL, count,
				NULL) < 0 ||
	    H5Dwrite(w->dset, H5T_NATIVE_FLOAT, mspace, w->fspace, H5P_DEFAULT,
		     rows) < 0)
		rv = ck_h5_error("%s: writing tensor '%s' rows [%lld,%lld)",
				 w->path, w->name, (long long)w->next,
				 (long long)(w->next + nrows));
	if (mspace >= 0)
		H5Sclose(mspace);
	if (rv != HEXI_OK)
		return rv;
	w->next += nrows;
	return HEXI_OK;
}

hexi_rc hexi_ckpt_slice_end(hexi_ckpt_writer *w)
{
	int64_t rows[2];
	uint64_t h;
	json_t *e;
	hexi_rc rv = HEXI_OK;

	if (w == NULL || w->dset < 0)
		return hexi_error(HEXI_ERR_INVAL, "slice_end: no open slice");
	if (w->next != w->e)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: tensor '%s': slice ended "
				  "after %lld of %lld rows",
				  w->path, w->name, (long long)(w->next - w->b),
				  (long long)(w->e - w->b));
	h = XXH64_digest(w->xxh);
	rows[0] = w->b;
	rows[1] = w->e;
	if (ck_h5_write_str_attr(w->dset, "tensor", w->name) < 0 ||
	    ck_h5_write_i64v_attr(w->dset, "shape", w->ndim, w->shape) < 0 ||
	    ck_h5_write_i64v_attr(w->dset, "rows", 2, rows) < 0 ||
	    ck_h5_write_u64_attr(w->dset, "xxh64", h) < 0)
		rv = ck_h5_error("%s: tensor '%s': writing attributes", w->path,
				 w->name);
	if (H5Sclose(w->fspace) < 0 && rv == HEXI_OK)
		rv = ck_h5_error("%s: tensor '%s'", w->path, w->name);
	w->fspace = H5I_INVALID_HID;
	if (H5Dclose(w->dset) < 0 && rv == HEXI_OK)
		rv = ck_h5_error("%s: tensor '%s': closing", w->path, w->name);
	w->dset = H5I_INVALID_HID;
	if (rv != HEXI_OK)
		return rv;
	e = json_pack("{s:s,s:o,s:[I,I],s:o,s:I}", "name", w->name, "shape",
		      ck_json_shape_new(w->ndim, w->shape), "rows",
		      (json_int_t)w->b, (json_int_t)w->e, "xxh64",
		      ck_json_hex64_new(h), "offset", (json_int_t)w->off);
	if (json_array_append_new(w->index_slices, e) < 0)
		return hexi_error(HEXI_ERR_NOMEM, "%s: index", w->path);
	return HEXI_OK;
}

hexi_rc hexi_ckpt_write_slice(hexi_ckpt_writer *w, const char *name, int ndim,
			      const int64_t shape[2], int64_t row_begin,
			      int64_t row_end, const float *data)
{
	hexi_rc rc =
	    hexi_ckpt_slice_begin(w, name, ndim, shape, row_begin, row_end);

	if (rc == HEXI_OK)
		rc = hexi_ckpt_slice_rows(w, data, row_end - row_begin);
	if (rc == HEXI_OK)
		rc = hexi_ckpt_slice_end(w);
	return rc;
}

hexi_rc hexi_ckpt_write_blob(hexi_ckpt_writer *w, const char *name,
			     const void *data, size_t len)
{
	hsize_t n = len;
	hid_t s = H5I_INVALID_HID, d = H5I_INVALID_HID, dcpl;
	json_t *e;
	uint64_t h, off = 0;
	hexi_rc rv = HEXI_ERR_HDF5;

	if (w == NULL || name == NULL || (data == NULL && len > 0))
		return hexi_error(HEXI_ERR_INVAL, "write_blob: NULL argument");
	if (!ck_name_ok(name) || len > CK_BLOB_MAX_BYTES)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: blob '%.*s': bad name or "
				  "larger than %zu bytes",
				  w->path, HEXI_CKPT_NAME_MAX, name,
				  CK_BLOB_MAX_BYTES);
	h = XXH64(data, len, 0);
	s = H5Screate_simple(1, &n, NULL);
	if (s < 0)
		goto out;
	/* contiguous, allocated now: its offset goes in the manifest */
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (dcpl >= 0 && H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0 &&
	    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0)
		d = H5Dcreate2(w->blobs, name, H5T_STD_U8LE, s, H5P_DEFAULT,
			       dcpl, H5P_DEFAULT);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (d < 0 || dset_offset(d, len, &off) < 0 ||
	    (len > 0 && H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL,
				 H5P_DEFAULT, data) < 0) ||
	    ck_h5_write_u64_attr(d, "xxh64", h) < 0)
		goto out;
	rv = HEXI_OK;
out:
	if (rv != HEXI_OK)
		rv = ck_h5_error("%s: blob '%s'", w->path, name);
	if (d >= 0)
		H5Dclose(d);
	if (s >= 0)
		H5Sclose(s);
	if (rv != HEXI_OK)
		return rv;
	e = json_pack("{s:s,s:I,s:o,s:I}", "name", name, "bytes",
		      (json_int_t)len, "xxh64", ck_json_hex64_new(h), "offset",
		      (json_int_t)off);
	if (json_array_append_new(w->index_blobs, e) < 0)
		return hexi_error(HEXI_ERR_NOMEM, "%s: index", w->path);
	return HEXI_OK;
}

static hexi_rc write_index(hexi_ckpt_writer *w)
{
	json_t *root = json_pack("{s:O,s:O}", "slices", w->index_slices,
				 "blobs", w->index_blobs);
	char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
	hexi_rc rv = HEXI_OK;

	json_decref(root);
	if (text == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%s: index", w->path);
	if (ck_h5_write_str_dset(w->fid, "index", text) < 0 ||
	    ck_h5_write_i64_attr(w->fid, "complete", 1) < 0)
		rv = ck_h5_error("%s: writing /index", w->path);
	free(text);
	return rv;
}

/* Size and whole-file xxh64 of the closed rank file (read back while it
 * is in the page cache), kept next to it as rank-RRRRR.sum for the commit;
 * the file is fsynced through the same descriptor. */
static hexi_rc write_sum(hexi_ckpt_writer *w, int sync)
{
	char text[96], name[40];
	uint64_t bytes = 0, xxh = 0;
	struct stat st;
	int fd = -1;
	hexi_rc rv;

	if ((rv = ck_open_at(w->stagefd, w->fname, w->path, &fd, &st)) ||
	    (rv = ck_hash_fd(fd, w->path, &bytes, &xxh)))
		goto out;
	if (sync && (rv = ck_fsync_fd(fd, w->path)) != HEXI_OK)
		goto out;
	snprintf(text, sizeof(text), "bytes=%" PRIu64 " xxh64=%016" PRIx64 "\n",
		 bytes, xxh);
	snprintf(name, sizeof(name), "rank-%05d.sum", w->rank);
	rv = ck_write_at_atomic(w->stagefd, name, text, strlen(text), w->path);
out:
	if (fd >= 0)
		close(fd);
	return rv;
}

hexi_rc ck_save_end(hexi_ckpt_writer *w, int sync)
{
	hexi_rc rv;
	hid_t f;

	if (w == NULL)
		return hexi_error(HEXI_ERR_INVAL, "save_end: NULL writer");
	if (w->dset >= 0) {
		rv = hexi_error(HEXI_ERR_INVAL,
				"%s: tensor '%s': slice not "
				"ended",
				w->path, w->name);
		goto out;
	}
	if ((rv = write_index(w)) != HEXI_OK)
		goto out;
	H5Gclose(w->blobs);
	w->blobs = H5I_INVALID_HID;
	H5Gclose(w->slices);
	w->slices = H5I_INVALID_HID;
	f = w->fid;
	w->fid = H5I_INVALID_HID;
	if (ck_h5_close_discard(f, w->h5path) < 0) {
		rv = ck_h5_error("%s: closing", w->path);
		goto out;
	}
	if ((rv = write_sum(w, sync)) != HEXI_OK)
		goto out;
	rv = HEXI_OK;
out:
	writer_free(w, rv != HEXI_OK);
	return rv;
}

hexi_rc hexi_ckpt_save_end(hexi_ckpt_writer *w)
{
	return ck_save_end(w, 1);
}

void hexi_ckpt_save_abort(hexi_ckpt_writer *w)
{
	writer_free(w, 1);
}

/* ---- commit ------------------------------------------------------------ */

static hexi_rc index_add(ck_manifest *m, const char *text, int rank,
			 const char *path)
{
	static const char *const root_keys[] = {"slices", "blobs", NULL};
	static const char *const sk[] = {"name",  "shape",  "rows",
					 "xxh64", "offset", NULL};
	static const char *const bk[] = {"name", "bytes", "xxh64", "offset",
					 NULL};
	char name[HEXI_CKPT_NAME_MAX];
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, NULL), *a, *o;
	int64_t shape[2], b, e, bytes, off;
	uint64_t xxh;
	int ndim = 0;
	size_t i;
	hexi_rc rc;

	if (root == NULL)
		return hexi_error(HEXI_ERR_PARSE, "%s: /index is not JSON",
				  path);
	rc = ck_json_keys(root, root_keys, path);
	a = json_object_get(root, "slices");
	for (i = 0; rc == HEXI_OK && i < json_array_size(a); i++) {
		o = json_array_get(a, i);
		if ((rc = ck_json_keys(o, sk, path)) ||
		    (rc = ck_json_str(o, "name", name, sizeof(name), path)) ||
		    (rc = ck_json_shape(o, &ndim, shape, path)) ||
		    (rc = ck_json_rows(o, &b, &e, path)) ||
		    (rc = ck_json_hex64(o, "xxh64", &xxh, path)) ||
		    (rc = ck_json_i64(o, "offset", 0, INT64_MAX, &off, path)))
			break;
		rc = ck_manifest_add_slice(m, name, ndim, shape, rank, b, e,
					   xxh, (uint64_t)off, path);
	}
	a = json_object_get(root, "blobs");
	for (i = 0; rc == HEXI_OK && i < json_array_size(a); i++) {
		o = json_array_get(a, i);
		if ((rc = ck_json_keys(o, bk, path)) ||
		    (rc = ck_json_str(o, "name", name, sizeof(name), path)) ||
		    (rc = ck_json_i64(o, "bytes", 0, (int64_t)CK_BLOB_MAX_BYTES,
				      &bytes, path)) ||
		    (rc = ck_json_hex64(o, "xxh64", &xxh, path)) ||
		    (rc = ck_json_i64(o, "offset", 0, INT64_MAX, &off, path)))
			break;
		rc = ck_manifest_add_blob(m, name, rank, (uint64_t)bytes, xxh,
					  (uint64_t)off, path);
	}
	json_decref(root);
	return rc;
}

static hexi_rc read_sum(int sfd, int rank, const char *stepdir, uint64_t *bytes,
			uint64_t *xxh)
{
	char name[40], what[CK_PATH_MAX + 48], *text = NULL, hex[17];
	unsigned long long b = 0;
	size_t len;
	hexi_rc rv;

	snprintf(name, sizeof(name), "rank-%05d.sum", rank);
	snprintf(what, sizeof(what), "%s/%s", stepdir, name);
	if ((rv = ck_read_at(sfd, name, 256, what, &text, &len)) != HEXI_OK)
		return rv == HEXI_ERR_NOTFOUND
			   ? hexi_error(HEXI_ERR_NOTFOUND,
					"%s/rank-%05d.h5: rank file missing or "
					"unfinished (did rank %d finish its "
					"save?)",
					stepdir, rank, rank)
			   : rv;
	if (sscanf(text, "bytes=%llu xxh64=%16[0-9a-f]", &b, hex) != 2 ||
	    strlen(hex) != 16)
		rv = hexi_error(HEXI_ERR_PARSE, "%s: malformed", what);
	else {
		*bytes = (uint64_t)b;
		*xxh = strtoull(hex, NULL, 16);
	}
	free(text);
	return rv;
}

static hexi_rc commit_read_rank(ck_manifest *m, int sfd, const char *stepdir,
				int rank)
{
	char path[CK_PATH_MAX], h5p[64], fname[32];
	char *text = NULL;
	struct stat st;
	hid_t f = H5I_INVALID_HID;
	int fd = -1;
	hexi_rc rv;

	if (ck_rank_path(path, sizeof(path), stepdir, rank) < 0)
		return hexi_error(HEXI_ERR_RANGE, "%.200s: path too long",
				  stepdir);
	snprintf(fname, sizeof(fname), "rank-%05d.h5", rank);
	if ((rv = read_sum(sfd, rank, stepdir, &m->file_bytes[rank],
			   &m->file_xxh[rank])) != HEXI_OK)
		return rv;
	if ((rv = ck_open_at(sfd, fname, path, &fd, &st)) != HEXI_OK)
		return rv;
	if ((uint64_t)st.st_size != m->file_bytes[rank]) {
		rv = hexi_error(
		    HEXI_ERR_IO, "%s: %lld bytes, its save recorded %" PRIu64,
		    path, (long long)st.st_size, m->file_bytes[rank]);
		goto out;
	}
	ck_fd_path(h5p, sizeof(h5p), fd, NULL);
	f = ck_h5_open(ck_have_proc_fd() ? h5p : path);
	if (f < 0) {
		rv = ck_h5_error("%s: cannot open", path);
		goto out;
	}
	if ((rv = ck_h5_check_meta(f, &m->meta, rank, path)) != HEXI_OK)
		goto out;
	if (ck_h5_read_str_dset(f, "index", CK_INDEX_MAX_BYTES, &text) < 0) {
		rv = ck_h5_error("%s: reading /index", path);
		goto out;
	}
	rv = index_add(m, text, rank, path);
out:
	free(text);
	if (f >= 0)
		H5Fclose(f);
	if (fd >= 0)
		close(fd);
	return rv;
}

static hexi_rc update_latest(int dfd, const char *dir, int64_t step)
{
	char what[CK_PATH_MAX + 16], *cur = NULL, text[32];
	long old = -1;
	size_t len;

	snprintf(what, sizeof(what), "%s/%s", dir, HEXI_CKPT_LATEST);
	/* A FIFO or symlink named latest is refused here, and replaced (never
	 * followed) by the rename below. */
	if (ck_read_at(dfd, HEXI_CKPT_LATEST, 64, what, &cur, &len) ==
	    HEXI_OK) {
		if (len >= 14 && strncmp(cur, "step-", 5) == 0) {
			cur[13] = '\0';
			if (hexi_parse_long(cur + 5, 0, HEXI_CKPT_MAX_STEP,
					    &old) != HEXI_OK)
				old = -1;
		}
		free(cur);
	}
	hexi_error_clear();
	if (old > step)
		return HEXI_OK; /* a newer checkpoint stays the latest */
	snprintf(text, sizeof(text), "step-%08lld\n", (long long)step);
	return ck_write_at_atomic(dfd, HEXI_CKPT_LATEST, text, strlen(text),
				  what);
}

static hexi_rc commit_plan(ck_manifest *m, const hexi_ckpt_meta *meta,
			   const char *plan_json, const char *dir)
{
	json_t *plan;

	if (plan_json != NULL) {
		plan = json_loads(plan_json, JSON_REJECT_DUPLICATES, NULL);
		if (!json_is_object(plan)) {
			json_decref(plan);
			return hexi_error(HEXI_ERR_PARSE,
					  "%s: the plan given to "
					  "commit is not a JSON object",
					  dir);
		}
		m->plan_json = json_dumps(plan, JSON_COMPACT);
		json_decref(plan);
	} else if (meta->plan_hash[0] != '\0') {
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: plan hash without a plan", dir);
	} else {
		m->plan_json = strdup("");
	}
	m->file_bytes = calloc((size_t)meta->world_size, sizeof(uint64_t));
	m->file_xxh = calloc((size_t)meta->world_size, sizeof(uint64_t));
	if (m->plan_json == NULL || m->file_bytes == NULL ||
	    m->file_xxh == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%s: manifest", dir);
	return HEXI_OK;
}

/* The manifest into the staging directory, the .sum files out, then the
 * commit point: renaming the staging directory to step-NNNNNNNN. */
static hexi_rc commit_publish(int dfd, int sfd, const char *dir,
			      const char *stage, const char *stepdir,
			      const ck_manifest *m)
{
	char sname[32], name[40], *text = NULL;
	mode_t um;
	hexi_rc rv;
	int r;

	if ((rv = ck_manifest_to_json(m, &text)) != HEXI_OK)
		return rv;
	rv = ck_write_at_atomic(sfd, HEXI_CKPT_MANIFEST, text, strlen(text),
				stepdir);
	free(text);
	if (rv != HEXI_OK)
		return rv;
	for (r = 0; r < m->meta.world_size; r++) {
		snprintf(name, sizeof(name), "rank-%05d.sum", r);
		unlinkat(sfd, name, 0);
	}
	/* Private while written; once committed readable as a directory made
	 * by mkdir(0755) would be (others' tools, root's reshard output). */
	um = umask(022);
	umask(um);
	if (fchmod(sfd, 0755 & ~um) < 0)
		return hexi_error(HEXI_ERR_IO, "%s: chmod: %s", stepdir,
				  strerror(errno));
	if ((rv = ck_fsync_fd(sfd, stepdir)) != HEXI_OK)
		return rv;
	snprintf(sname, sizeof(sname), "step-%08lld", (long long)m->meta.step);
	/* An uncommitted step directory of ours (old-format leftover). */
	if ((rv = check_step_entry(dfd, dir, m->meta.step)) != HEXI_OK ||
	    (rv = ck_dir_remove(dfd, sname)) != HEXI_OK)
		return rv;
	if (renameat2(dfd, stage, dfd, sname, RENAME_NOREPLACE) < 0 &&
	    (errno != EINVAL ||
	     faccessat(dfd, sname, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
	     renameat(dfd, stage, dfd, sname) < 0))
		return hexi_error(errno == ENOSPC ? HEXI_ERR_NOSPACE
						  : HEXI_ERR_IO,
				  "%s/%s: cannot rename into place: %s", dir,
				  sname, strerror(errno));
	return ck_fsync_fd(dfd, dir);
}

hexi_rc hexi_ckpt_commit_staged(const char *dir, const char *stage,
				const hexi_ckpt_meta *meta,
				const char *plan_json)
{
	char stepdir[CK_PATH_MAX];
	ck_manifest m;
	int dfd = -1, sfd = -1, fresh = 0, r, published = 0;
	hexi_rc rv;

	ck_manifest_init(&m, meta);
	if (dir == NULL || meta == NULL || stage == NULL)
		return hexi_error(HEXI_ERR_INVAL, "commit: NULL argument");
	if ((rv = ck_meta_check(meta, dir)) != HEXI_OK)
		return rv;
	if (snprintf(stepdir, sizeof(stepdir), "%s/%s", dir, stage) >=
	    (int)sizeof(stepdir))
		return hexi_error(HEXI_ERR_RANGE, "%.200s: path too long", dir);
	if ((rv = ck_dir_open(dir, 0, &dfd)) != HEXI_OK)
		goto out;
	/* Only the lock holder commits (normally the preparing process). */
	if ((rv = ck_lock_dir(dfd, dir, &fresh)) ||
	    (rv = check_step_entry(dfd, dir, meta->step)) ||
	    (rv = ck_stage_open(dfd, stage, dir, &sfd)) ||
	    (rv = commit_plan(&m, meta, plan_json, stepdir)))
		goto out;
	for (r = 0; r < meta->world_size; r++)
		if ((rv = commit_read_rank(&m, sfd, stepdir, r)) != HEXI_OK)
			goto out;
	if ((rv = ck_manifest_validate(&m, stepdir)) != HEXI_OK ||
	    (rv = commit_publish(dfd, sfd, dir, stage, stepdir, &m)) != HEXI_OK)
		goto out;
	published = 1;
	rv = update_latest(dfd, dir, meta->step);
out:
	/* A failed commit loses the save: no incomplete rank file stays. */
	if (rv != HEXI_OK && !published && dfd >= 0 && sfd >= 0 &&
	    ck_dir_remove(dfd, stage) != HEXI_OK)
		hexi_log(HEXI_LOG_WARN, "%s: staging directory not removed",
			 stepdir);
	if (sfd >= 0)
		close(sfd);
	if (dfd >= 0)
		close(dfd);
	ck_manifest_fini(&m);
	return rv;
}

hexi_rc hexi_ckpt_commit(const char *dir, const hexi_ckpt_meta *meta,
			 const char *plan_json)
{
	struct session *ss;
	char stage[CK_STAGE_NAME_MAX];
	char sname[32];
	int dfd = -1, done;

	if (dir == NULL || meta == NULL)
		return hexi_error(HEXI_ERR_INVAL, "commit: NULL argument");
	ss = session_find(dir, meta->step);
	if (ss == NULL) {
		snprintf(sname, sizeof(sname), "step-%08lld",
			 (long long)meta->step);
		done = ck_dir_open(dir, 0, &dfd) == HEXI_OK &&
		       committed_at(dfd, sname);
		if (dfd >= 0)
			close(dfd);
		hexi_error_clear();
		if (done)
			return hexi_error(HEXI_ERR_INVAL,
					  "%s/%s: already committed", dir,
					  sname);
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: no save of step %lld was begun by this "
				  "process (several processes: "
				  "hexi_ckpt_save_prepare and _staged)",
				  dir, (long long)meta->step);
	}
	memcpy(stage, ss->stage, sizeof(stage));
	session_drop(ss);
	return hexi_ckpt_commit_staged(dir, stage, meta, plan_json);
}

/* Shards of pipeline P in T (its TP degree for this tensor). */
static int pipeline_shards(const hexi_tensor_layout *t, int p)
{
	int i, n = 0;

	for (i = 0; i < t->nshards; i++)
		n += t->shards[i].pipeline == p;
	return n;
}

int hexi_ckpt_shard_is_writer(const hexi_tensor_layout *t, int shard)
{
	int i, best = -1, bestn = 0, n;
	const hexi_shard *s;

	if (t == NULL || shard < 0 || shard >= t->nshards)
		return 0;
	/* The pipeline with the most shards (ties: lowest index) writes, so
	 * the bytes are spread over as many ranks as possible. */
	for (i = 0; i < t->nshards; i++) {
		int p = t->shards[i].pipeline;
		n = pipeline_shards(t, p);
		if (n > bestn || (n == bestn && p < best)) {
			best = p;
			bestn = n;
		}
	}
	s = &t->shards[shard];
	if (s->pipeline != best)
		return 0;
	for (i = 0; i < t->nshards; i++) {
		const hexi_shard *o = &t->shards[i];
		if (i != shard && o->pipeline == best &&
		    o->row_begin == s->row_begin && o->row_end == s->row_end &&
		    (o->rank < s->rank || (o->rank == s->rank && i < shard)))
			return 0;
	}
	return 1;
}
