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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt_internal.h"

struct hexi_ckpt_writer {
	char stepdir[CK_PATH_MAX];
	char path[CK_PATH_MAX];
	hexi_ckpt_meta meta;
	int rank;
	hid_t fid, slices, blobs;
	json_t *index_slices, *index_blobs;
	/* the slice being written */
	hid_t dset, fspace;
	char name[HEXI_CKPT_NAME_MAX];
	int ndim;
	int64_t shape[2], b, e, next;
	XXH64_state_t *xxh;
};

static hexi_rc mkdir_p(const char *path)
{
	char buf[CK_PATH_MAX];
	size_t i, n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return hexi_error(HEXI_ERR_RANGE, "%.200s: bad directory path",
				  path);
	memcpy(buf, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return hexi_error(errno == ENOSPC   ? HEXI_ERR_NOSPACE
					  : errno == EACCES ? HEXI_ERR_PERM
							    : HEXI_ERR_IO,
					  "%s: cannot create directory: %s",
					  buf, strerror(errno));
		buf[i] = i == n ? '\0' : '/';
	}
	return HEXI_OK;
}

static hexi_rc writer_open(hexi_ckpt_writer *w)
{
	hid_t f;

	f = ck_h5_create(w->path);
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

static void writer_free(hexi_ckpt_writer *w, int remove_file)
{
	if (w == NULL)
		return;
	/* A file being discarded: release its space before HDF5 flushes. */
	if (remove_file && w->path[0] != '\0' && w->fid >= 0 &&
	    truncate(w->path, 0) < 0)
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
		ck_h5_close_discard(w->fid, w->path);
	if (remove_file && w->path[0] != '\0')
		unlink(w->path);
	if (w->xxh != NULL)
		XXH64_freeState(w->xxh);
	json_decref(w->index_blobs);
	json_decref(w->index_slices);
	free(w);
}

hexi_rc hexi_ckpt_save_begin(const char *dir, const hexi_ckpt_meta *meta,
			     int rank, hexi_ckpt_writer **out)
{
	hexi_ckpt_writer *w = NULL;
	char mpath[CK_PATH_MAX + 32];
	struct stat st;
	hexi_rc rv;

	*out = NULL;
	if (dir == NULL || meta == NULL)
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
	w->meta = *meta;
	w->rank = rank;
	rv = HEXI_ERR_RANGE;
	if (ck_step_dir(w->stepdir, sizeof(w->stepdir), dir, meta->step) < 0 ||
	    ck_rank_path(w->path, sizeof(w->path), w->stepdir, rank) < 0) {
		rv = hexi_error(HEXI_ERR_RANGE, "%.200s: path too long", dir);
		w->path[0] = '\0';
		goto out;
	}
	snprintf(mpath, sizeof(mpath), "%s/%s", w->stepdir, HEXI_CKPT_MANIFEST);
	if (stat(mpath, &st) == 0) {
		rv = hexi_error(HEXI_ERR_INVAL,
				"%s: step %lld is already "
				"committed; remove it or save another step",
				w->stepdir, (long long)meta->step);
		w->path[0] = '\0';
		goto out;
	}
	if ((rv = mkdir_p(w->stepdir)) != HEXI_OK)
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
	if (w->dset < 0)
		goto fail;
	H5Pclose(dcpl);
	return HEXI_OK;
fail:
	rv = ck_h5_error("%s: creating dataset for tensor '%s' rows "
			 "[%lld,%lld)",
			 w->path, w->name, (long long)w->b, (long long)w->e);
	if (dcpl >= 0)
		H5Pclose(dcpl);
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
				   row_end, 0, w->path);
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
	e = json_pack("{s:s,s:o,s:[I,I],s:o}", "name", w->name, "shape",
		      ck_json_shape_new(w->ndim, w->shape), "rows",
		      (json_int_t)w->b, (json_int_t)w->e, "xxh64",
		      ck_json_hex64_new(h));
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
	hid_t s = H5I_INVALID_HID, d = H5I_INVALID_HID;
	json_t *e;
	uint64_t h;
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
	d = H5Dcreate2(w->blobs, name, H5T_STD_U8LE, s, H5P_DEFAULT,
		       H5P_DEFAULT, H5P_DEFAULT);
	if (d < 0 ||
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
	e = json_pack("{s:s,s:I,s:o}", "name", name, "bytes", (json_int_t)len,
		      "xxh64", ck_json_hex64_new(h));
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
	if (ck_h5_close_discard(f, w->path) < 0) {
		rv = ck_h5_error("%s: closing", w->path);
		goto out;
	}
	if (sync && ((rv = ck_fsync_path(w->path, 0)) != HEXI_OK ||
		     (rv = ck_fsync_path(w->stepdir, 1)) != HEXI_OK))
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
	static const char *const sk[] = {"name", "shape", "rows", "xxh64",
					 NULL};
	static const char *const bk[] = {"name", "bytes", "xxh64", NULL};
	char name[HEXI_CKPT_NAME_MAX];
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, NULL), *a, *o;
	int64_t shape[2], b, e, bytes;
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
		    (rc = ck_json_hex64(o, "xxh64", &xxh, path)))
			break;
		rc = ck_manifest_add_slice(m, name, ndim, shape, rank, b, e,
					   xxh, path);
	}
	a = json_object_get(root, "blobs");
	for (i = 0; rc == HEXI_OK && i < json_array_size(a); i++) {
		o = json_array_get(a, i);
		if ((rc = ck_json_keys(o, bk, path)) ||
		    (rc = ck_json_str(o, "name", name, sizeof(name), path)) ||
		    (rc = ck_json_i64(o, "bytes", 0, (int64_t)CK_BLOB_MAX_BYTES,
				      &bytes, path)) ||
		    (rc = ck_json_hex64(o, "xxh64", &xxh, path)))
			break;
		rc = ck_manifest_add_blob(m, name, rank, (uint64_t)bytes, xxh,
					  path);
	}
	json_decref(root);
	return rc;
}

static hexi_rc commit_read_rank(ck_manifest *m, const char *stepdir, int rank)
{
	char path[CK_PATH_MAX];
	char *text = NULL;
	struct stat st;
	hid_t f = H5I_INVALID_HID;
	hexi_rc rv;

	if (ck_rank_path(path, sizeof(path), stepdir, rank) < 0)
		return hexi_error(HEXI_ERR_RANGE, "%.200s: path too long",
				  stepdir);
	if (stat(path, &st) < 0)
		return hexi_error(HEXI_ERR_NOTFOUND,
				  "%s: rank file missing: %s "
				  "(did rank %d finish its save?)",
				  path, strerror(errno), rank);
	m->file_bytes[rank] = (uint64_t)st.st_size;
	f = ck_h5_open(path);
	if (f < 0)
		return ck_h5_error("%s: cannot open", path);
	if ((rv = ck_h5_check_meta(f, &m->meta, rank, path)) != HEXI_OK)
		goto out;
	if (ck_h5_read_str_dset(f, "index", CK_INDEX_MAX_BYTES, &text) < 0) {
		rv = ck_h5_error("%s: reading /index", path);
		goto out;
	}
	rv = index_add(m, text, rank, path);
out:
	free(text);
	H5Fclose(f);
	return rv;
}

static hexi_rc update_latest(const char *dir, int64_t step)
{
	char path[CK_PATH_MAX], *cur = NULL, text[32];
	long old = -1;
	size_t len;
	hexi_rc rc;

	if (snprintf(path, sizeof(path), "%s/%s", dir, HEXI_CKPT_LATEST) >=
	    (int)sizeof(path))
		return hexi_error(HEXI_ERR_RANGE, "%.200s: path too long", dir);
	if (hexi_read_file(path, 64, &cur, &len) == HEXI_OK) {
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
	rc = hexi_write_file_atomic(path, text, strlen(text), 0644);
	if (rc == HEXI_OK)
		rc = ck_fsync_path(dir, 1);
	return rc;
}

hexi_rc hexi_ckpt_commit(const char *dir, const hexi_ckpt_meta *meta,
			 const char *plan_json)
{
	char stepdir[CK_PATH_MAX], mpath[CK_PATH_MAX + 32];
	char *text = NULL;
	ck_manifest m;
	struct stat st;
	json_t *plan = NULL;
	hexi_rc rv;
	int r;

	ck_manifest_init(&m, meta);
	if (dir == NULL || meta == NULL)
		return hexi_error(HEXI_ERR_INVAL, "commit: NULL argument");
	if ((rv = ck_meta_check(meta, dir)) != HEXI_OK)
		return rv;
	if (ck_step_dir(stepdir, sizeof(stepdir), dir, meta->step) < 0)
		return hexi_error(HEXI_ERR_RANGE, "%.200s: path too long", dir);
	snprintf(mpath, sizeof(mpath), "%s/%s", stepdir, HEXI_CKPT_MANIFEST);
	if (stat(mpath, &st) == 0)
		return hexi_error(HEXI_ERR_INVAL, "%s: already committed",
				  stepdir);
	if (plan_json != NULL) {
		plan = json_loads(plan_json, JSON_REJECT_DUPLICATES, NULL);
		if (!json_is_object(plan)) {
			json_decref(plan);
			return hexi_error(HEXI_ERR_PARSE,
					  "%s: the plan given to "
					  "commit is not a JSON object",
					  stepdir);
		}
		m.plan_json = json_dumps(plan, JSON_COMPACT);
		json_decref(plan);
	} else if (meta->plan_hash[0] != '\0') {
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: plan hash without a plan", stepdir);
	} else {
		m.plan_json = strdup("");
	}
	m.file_bytes = calloc((size_t)meta->world_size, sizeof(uint64_t));
	if (m.plan_json == NULL || m.file_bytes == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "%s: manifest", stepdir);
		goto out;
	}
	for (r = 0; r < meta->world_size; r++)
		if ((rv = commit_read_rank(&m, stepdir, r)) != HEXI_OK)
			goto out;
	if ((rv = ck_manifest_validate(&m, stepdir)) != HEXI_OK ||
	    (rv = ck_manifest_to_json(&m, &text)) != HEXI_OK)
		goto out;
	/* The commit point: MANIFEST.json.tmp.PID, fsync, rename, fsync dir. */
	if ((rv = hexi_write_file_atomic(mpath, text, strlen(text), 0644)) !=
	    HEXI_OK)
		goto out;
	rv = update_latest(dir, meta->step);
out:
	free(text);
	ck_manifest_fini(&m);
	return rv;
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
