/*
 * tools.c - whole-checkpoint operations used by hexickpt: export to one
 * file of full tensors, reshard into another plan's layout, list.
 * Both stream tensor by tensor through one bounded buffer.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_internal.h"
#include "reader_internal.h"

#define CK_DEFAULT_BUFFER CK_CPU_BLOCK_BYTES

static int64_t block_rows(const ck_tensor *t, size_t cap)
{
	int64_t n = (int64_t)(cap / ((size_t)t->shape[1] * 4));

	return n < 1 ? 1 : n;
}

static hexi_rc grow(float **buf, size_t *cap, size_t need)
{
	float *n;

	if (*cap >= need)
		return HEXI_OK;
	n = realloc(*buf, need);
	if (n == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%zu-byte copy buffer", need);
	*buf = n;
	*cap = need;
	return HEXI_OK;
}

/* ---- export ------------------------------------------------------------ */

static hexi_rc export_tensor(hexi_ckpt_reader *r, hid_t grp, const ck_tensor *t,
			     float **buf, size_t *cap, const char *path)
{
	hsize_t dims[2] = {(hsize_t)t->shape[0], (hsize_t)t->shape[1]};
	hsize_t start[2] = {0, 0}, count[2];
	hid_t s = H5I_INVALID_HID, d = H5I_INVALID_HID, ms = H5I_INVALID_HID;
	int64_t blk = block_rows(t, CK_DEFAULT_BUFFER), b, e;
	hexi_rc rv = HEXI_ERR_HDF5;

	if (grow(buf, cap, (size_t)blk * (size_t)t->shape[1] * 4) != HEXI_OK)
		return HEXI_ERR_NOMEM;
	s = H5Screate_simple(t->ndim, dims, NULL);
	if (s < 0)
		goto out;
	d = H5Dcreate2(grp, t->name, H5T_IEEE_F32LE, s, H5P_DEFAULT,
		       H5P_DEFAULT, H5P_DEFAULT);
	if (d < 0)
		goto out;
	for (b = 0; b < t->shape[0]; b = e) {
		e = b + blk < t->shape[0] ? b + blk : t->shape[0];
		if ((rv = hexi_ckpt_read_rows(r, t->name, b, e, *buf)) !=
		    HEXI_OK)
			goto out;
		rv = HEXI_ERR_HDF5;
		start[0] = (hsize_t)b;
		count[0] = (hsize_t)(e - b);
		count[1] = (hsize_t)t->shape[1];
		ms = H5Screate_simple(t->ndim, count, NULL);
		if (ms < 0 ||
		    H5Sselect_hyperslab(s, H5S_SELECT_SET, start, NULL, count,
					NULL) < 0 ||
		    H5Dwrite(d, H5T_NATIVE_FLOAT, ms, s, H5P_DEFAULT, *buf) < 0)
			goto out;
		H5Sclose(ms);
		ms = H5I_INVALID_HID;
	}
	rv = HEXI_OK;
out:
	if (rv == HEXI_ERR_HDF5)
		rv = ck_h5_error("%s: tensor '%s'", path, t->name);
	if (ms >= 0)
		H5Sclose(ms);
	if (d >= 0)
		H5Dclose(d);
	if (s >= 0)
		H5Sclose(s);
	return rv;
}

static hexi_rc export_blobs(hexi_ckpt_reader *r, hid_t grp, const char *path)
{
	hsize_t n;
	hid_t s, d;
	void *data;
	hexi_rc rc;
	int i, bad;

	for (i = 0; i < r->man.nblobs; i++) {
		const ck_blob *b = &r->man.blobs[i];
		if ((rc = ck_blob_read(r, b, &data)) != HEXI_OK)
			return rc;
		n = b->bytes;
		s = H5Screate_simple(1, &n, NULL);
		d = s < 0 ? H5I_INVALID_HID
			  : H5Dcreate2(grp, b->name, H5T_STD_U8LE, s,
				       H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
		bad = d < 0 ||
		      (n > 0 && H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL,
					 H5P_DEFAULT, data) < 0);
		if (bad)
			rc = ck_h5_error("%s: blob '%s'", path, b->name);
		free(data);
		if (d >= 0)
			H5Dclose(d);
		if (s >= 0)
			H5Sclose(s);
		if (bad)
			return rc;
	}
	return HEXI_OK;
}

/* Export target PATH: its directory (opened without following symlinks of
 * other users), a fresh temporary name in it that HDF5 creates exclusively
 * through the directory's descriptor, and the final name. */
typedef struct export_target {
	int dfd;
	char base[256];
	char tmp[300];
	char h5tmp[CK_PATH_MAX + 64];
} export_target;

static hexi_rc export_prepare(const char *path, export_target *x)
{
	char dir[CK_PATH_MAX], sfx[CK_STAGE_NAME_MAX];
	const char *b = ck_base(path);
	struct stat st;
	hexi_rc rc;
	size_t dl = (size_t)(b - path);
	int fd;

	x->dfd = -1;
	if (*b == '\0' || strlen(b) >= sizeof(x->base) || dl >= sizeof(dir) ||
	    strcmp(b, ".") == 0 || strcmp(b, "..") == 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "%.200s: bad output file name", path);
	memcpy(x->base, b, strlen(b) + 1);
	if (dl == 0)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)dl, path);
	/* A name of a descriptor (-o /dev/stdout): the rename would replace
	 * the link (as root, the machine's /dev/stdout), and HDF5 writes a
	 * file by name, seeking; refused. */
	if ((fd = hexi_path_fd(path)) >= 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: names file descriptor %d, not a file: "
				  "export writes an HDF5 file by name (give "
				  "its path)",
				  path, fd);
	if ((rc = ck_dir_open(dir, 0, &x->dfd)) != HEXI_OK)
		return rc;
	/* A target that exists must be a regular file (or a symlink, which
	 * the rename replaces): never /dev/null, a FIFO or a directory. */
	if (fstatat(x->dfd, x->base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: exists and is not a regular file: "
				  "refusing to replace it",
				  path);
	/* Unpredictable, and created O_EXCL by HDF5 (H5F_ACC_EXCL). */
	ck_random_name(sfx, 12);
	snprintf(x->tmp, sizeof(x->tmp), ".%.200s.tmp.%s", x->base, sfx);
	if (ck_have_proc_fd())
		ck_fd_path(x->h5tmp, sizeof(x->h5tmp), x->dfd, x->tmp);
	else
		snprintf(x->h5tmp, sizeof(x->h5tmp), "%.3700s/%.300s", dir,
			 x->tmp);
	return HEXI_OK;
}

static hexi_rc export_finish(export_target *x, const char *path)
{
	int fd = openat(x->dfd, x->tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	hexi_rc rc;

	if (fd < 0)
		return hexi_error(HEXI_ERR_IO, "%s: %s", path, strerror(errno));
	rc = ck_fsync_fd(fd, path);
	close(fd);
	if (rc != HEXI_OK)
		return rc;
	if (renameat(x->dfd, x->tmp, x->dfd, x->base) < 0)
		return hexi_error(HEXI_ERR_IO, "%s: rename failed: %s", path,
				  strerror(errno));
	return ck_fsync_fd(x->dfd, path);
}

hexi_rc hexi_ckpt_export(hexi_ckpt_reader *r, const char *path,
			 hexi_ckpt_progress_fn progress, void *arg)
{
	export_target x;
	const char *tmp = x.h5tmp;
	hid_t f = H5I_INVALID_HID, g = H5I_INVALID_HID, gb = H5I_INVALID_HID;
	float *buf = NULL;
	size_t cap = 0;
	uint64_t total = 0, done = 0;
	hexi_rc rv = HEXI_ERR_HDF5;
	int i, created = 0;

	if (r == NULL || path == NULL)
		return hexi_error(HEXI_ERR_INVAL, "export: NULL argument");
	if ((rv = export_prepare(path, &x)) != HEXI_OK) {
		if (x.dfd >= 0)
			close(x.dfd);
		return rv;
	}
	rv = HEXI_ERR_HDF5;
	for (i = 0; i < r->man.ntensors; i++)
		total += (uint64_t)r->man.tensors[i].shape[0] *
			 (uint64_t)r->man.tensors[i].shape[1] * 4;
	f = ck_h5_create(tmp);
	if (f < 0)
		goto out;
	created = 1;
	if (ck_h5_write_meta(f, &r->man.meta) < 0 ||
	    ck_h5_write_str_attr(f, "layout", "consolidated") < 0 ||
	    ck_h5_write_str_dset(f, "plan", hexi_ckpt_reader_plan_json(r)) < 0)
		goto out;
	g = H5Gcreate2(f, "tensors", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	gb = g < 0 ? g
		   : H5Gcreate2(f, "blobs", H5P_DEFAULT, H5P_DEFAULT,
				H5P_DEFAULT);
	if (gb < 0)
		goto out;
	for (i = 0; i < r->man.ntensors; i++) {
		const ck_tensor *t = &r->man.tensors[i];
		if ((rv = export_tensor(r, g, t, &buf, &cap, path)) != HEXI_OK)
			goto out;
		done += (uint64_t)t->shape[0] * (uint64_t)t->shape[1] * 4;
		if (progress != NULL)
			progress(t->name, done, total, arg);
	}
	if ((rv = export_blobs(r, gb, path)) != HEXI_OK)
		goto out;
	rv = HEXI_ERR_HDF5;
	H5Gclose(gb);
	gb = H5I_INVALID_HID;
	H5Gclose(g);
	g = H5I_INVALID_HID;
	i = ck_h5_close_discard(f, tmp);
	f = H5I_INVALID_HID;
	if (i < 0)
		goto out;
	if ((rv = export_finish(&x, path)) != HEXI_OK)
		goto out;
	created = 0;
	rv = HEXI_OK;
out:
	if (rv == HEXI_ERR_HDF5)
		rv = ck_h5_error("%s: export", path);
	free(buf);
	if (gb >= 0)
		H5Gclose(gb);
	if (g >= 0)
		H5Gclose(g);
	if (f >= 0) {
		/* A failed export: free its space before HDF5 flushes. */
		if (truncate(tmp, 0) < 0)
			hexi_log(HEXI_LOG_DEBUG, "%s: truncate failed", tmp);
		ck_h5_close_discard(f, tmp);
	}
	if (rv != HEXI_OK && created)
		unlinkat(x.dfd, x.tmp, 0);
	close(x.dfd);
	return rv;
}

/* ---- reshard ----------------------------------------------------------- */

/* The layout entry for checkpoint tensor NAME: itself, or for optimizer
 * moments "opt.m.X" / "opt.v.X" the entry of X. */
static const hexi_tensor_layout *layout_of(const hexi_layout *l,
					   const char *name)
{
	int i, pass;

	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < l->ntensors; i++)
			if (strcmp(l->tensors[i].name, name) == 0)
				return &l->tensors[i];
		if (strncmp(name, "opt.m.", 6) != 0 &&
		    strncmp(name, "opt.v.", 6) != 0)
			return NULL;
		name += 6;
	}
	return NULL;
}

static hexi_rc check_target(hexi_ckpt_reader *r,
			    const hexi_ckpt_reshard_target *t)
{
	int i;

	for (i = 0; i < r->man.ntensors; i++) {
		const ck_tensor *ct = &r->man.tensors[i];
		const hexi_tensor_layout *lt = layout_of(t->layout, ct->name);
		if (lt == NULL)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "tensor '%s' of the "
					  "checkpoint is not in the target "
					  "plan's layout",
					  ct->name);
		if (lt->ndim != ct->ndim || lt->shape[0] != ct->shape[0] ||
		    (ct->ndim == 2 && lt->shape[1] != ct->shape[1]))
			return hexi_error(HEXI_ERR_MISMATCH,
					  "tensor '%s': shape "
					  "differs between the checkpoint and "
					  "the target plan",
					  ct->name);
	}
	for (i = 0; i < t->layout->ntensors; i++)
		if (ck_manifest_find(&r->man, t->layout->tensors[i].name) ==
		    NULL)
			return hexi_error(
			    HEXI_ERR_MISMATCH,
			    "tensor '%s' of the "
			    "target plan is not in the checkpoint",
			    t->layout->tensors[i].name);
	return HEXI_OK;
}

/* Copy rows [b, e) of T into the open slice of W, in blocks that end at
 * stored slice boundaries (so a whole stored slice is read once). */
static hexi_rc copy_rows(hexi_ckpt_reader *r, hexi_ckpt_writer *w,
			 const ck_tensor *t, int64_t b, int64_t e, float **buf,
			 size_t *cap, size_t maxbuf)
{
	int64_t blk = block_rows(t, maxbuf), x, y;
	hexi_rc rc;
	int i;

	if ((rc = grow(buf, cap, (size_t)blk * (size_t)t->shape[1] * 4)))
		return rc;
	for (x = b; x < e; x = y) {
		y = x + blk < e ? x + blk : e;
		for (i = 0; i < t->nslices; i++)
			if (t->slices[i].b > x && t->slices[i].b < y)
				y = t->slices[i].b;
		if ((rc = hexi_ckpt_read_rows(r, t->name, x, y, *buf)) ||
		    (rc = hexi_ckpt_slice_rows(w, *buf, y - x)))
			return rc;
	}
	return HEXI_OK;
}

static hexi_rc reshard_rank(hexi_ckpt_reader *r,
			    const hexi_ckpt_reshard_target *t,
			    const hexi_ckpt_meta *meta, const char *dir,
			    const char *stage, int rank, float **buf,
			    size_t *cap)
{
	hexi_ckpt_writer *w = NULL;
	size_t maxbuf =
	    t->max_buffer_bytes ? t->max_buffer_bytes : CK_DEFAULT_BUFFER;
	void *data;
	hexi_rc rc;
	int i, j;

	if ((rc = hexi_ckpt_save_begin_staged(dir, stage, meta, rank, &w)) !=
	    HEXI_OK)
		return rc;
	for (i = 0; i < r->man.ntensors; i++) {
		const ck_tensor *ct = &r->man.tensors[i];
		const hexi_tensor_layout *lt = layout_of(t->layout, ct->name);
		for (j = 0; j < lt->nshards; j++) {
			const hexi_shard *s = &lt->shards[j];
			if (s->rank != rank ||
			    !hexi_ckpt_shard_is_writer(lt, j))
				continue;
			if ((rc = hexi_ckpt_slice_begin(w, ct->name, ct->ndim,
							ct->shape, s->row_begin,
							s->row_end)) ||
			    (rc = copy_rows(r, w, ct, s->row_begin, s->row_end,
					    buf, cap, maxbuf)) ||
			    (rc = hexi_ckpt_slice_end(w)))
				goto fail;
		}
	}
	for (i = 0; rank == 0 && i < r->man.nblobs; i++) {
		if ((rc = ck_blob_read(r, &r->man.blobs[i], &data)) != HEXI_OK)
			goto fail;
		rc = hexi_ckpt_write_blob(w, r->man.blobs[i].name, data,
					  r->man.blobs[i].bytes);
		free(data);
		if (rc != HEXI_OK)
			goto fail;
	}
	return ck_save_end(w, 0); /* synced together by hexi_ckpt_reshard */
fail:
	hexi_ckpt_save_abort(w);
	return rc;
}

/* fsync the W rank files of a staging directory, then the directory. */
static hexi_rc stage_sync(const char *dir, const char *stage, int w)
{
	char name[32], what[CK_PATH_MAX + 64];
	struct stat st;
	int dfd = -1, sfd = -1, fd, i;
	hexi_rc rc;

	if ((rc = ck_dir_open(dir, 0, &dfd)) != HEXI_OK)
		return rc;
	rc = ck_stage_open(dfd, stage, dir, &sfd);
	for (i = 0; rc == HEXI_OK && i < w; i++) {
		snprintf(name, sizeof(name), "rank-%05d.h5", i);
		snprintf(what, sizeof(what), "%s/%s/%s", dir, stage, name);
		if ((rc = ck_open_at(sfd, name, what, &fd, &st)) != HEXI_OK)
			break;
		rc = ck_fsync_fd(fd, what);
		close(fd);
	}
	if (rc == HEXI_OK)
		rc = ck_fsync_fd(sfd, dir);
	if (sfd >= 0)
		close(sfd);
	close(dfd);
	return rc;
}

hexi_rc hexi_ckpt_reshard(hexi_ckpt_reader *r,
			  const hexi_ckpt_reshard_target *t, const char *dir,
			  hexi_ckpt_progress_fn progress, void *arg)
{
	hexi_ckpt_meta meta;
	char stage[CK_STAGE_NAME_MAX];
	float *buf = NULL;
	size_t cap = 0;
	hexi_rc rc = HEXI_OK;
	int rank;

	if (r == NULL || t == NULL || t->layout == NULL || dir == NULL)
		return hexi_error(HEXI_ERR_INVAL, "reshard: NULL argument");
	if ((rc = check_target(r, t)) != HEXI_OK)
		return rc;
	meta = r->man.meta;
	meta.world_size = t->world_size;
	if (hexi_strlcpy(meta.plan_hash, t->plan_hash ? t->plan_hash : "",
			 sizeof(meta.plan_hash)) != HEXI_OK)
		return hexi_error(HEXI_ERR_RANGE,
				  "reshard: plan hash too long");
	if ((rc = hexi_ckpt_save_prepare(dir, &meta, stage)) != HEXI_OK)
		return rc;
	for (rank = 0; rank < t->world_size; rank++) {
		rc = reshard_rank(r, t, &meta, dir, stage, rank, &buf, &cap);
		if (rc != HEXI_OK)
			break;
		if (progress != NULL)
			progress("rank files", (uint64_t)rank + 1,
				 (uint64_t)t->world_size, arg);
	}
	free(buf);
	/* fsync every rank file and the directory before the commit: one
	 * pass after all writes lets the device work on them together. */
	if (rc == HEXI_OK)
		rc = stage_sync(dir, stage, t->world_size);
	if (rc != HEXI_OK) {
		hexi_ckpt_save_discard(dir, stage);
		return rc;
	}
	return hexi_ckpt_commit_staged(dir, stage, &meta, t->plan_json);
}

/* ---- list -------------------------------------------------------------- */

static void entry_scan(int dfd, const char *dir, hexi_ckpt_entry *e)
{
	char fp[CK_PATH_MAX + 64], *text = NULL;
	struct dirent *de;
	struct stat st;
	size_t len;
	int sfd;
	DIR *d;

	sfd = openat(dfd, e->name,
		     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return;
	d = fdopendir(dup(sfd));
	while (d != NULL && (de = readdir(d)) != NULL) {
		if (fstatat(sfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		e->bytes += (uint64_t)st.st_size;
		if (strncmp(de->d_name, "rank-", 5) == 0 &&
		    strstr(de->d_name, ".h5") != NULL)
			e->nfiles++;
	}
	if (d != NULL)
		closedir(d);
	snprintf(fp, sizeof(fp), "%s/%s/%s", dir, e->name, HEXI_CKPT_MANIFEST);
	if (ck_read_at(sfd, HEXI_CKPT_MANIFEST, CK_MANIFEST_MAX_BYTES, fp,
		       &text, &len) == HEXI_OK &&
	    hexi_ckpt_manifest_check(text, len) == HEXI_OK)
		e->committed = 1;
	free(text);
	close(sfd);
	hexi_error_clear();
}

static int entry_cmp(const void *a, const void *b)
{
	const hexi_ckpt_entry *x = a, *y = b;

	return x->step < y->step ? -1 : x->step > y->step;
}

hexi_rc hexi_ckpt_list(const char *dir, hexi_ckpt_entry **out, int *n)
{
	hexi_ckpt_entry *v = NULL, *nv;
	char lp[CK_PATH_MAX], *latest = NULL;
	struct dirent *de;
	int cnt = 0, cap = 0, dfd = -1;
	size_t len;
	long s;
	hexi_rc rc;
	DIR *d;

	*out = NULL;
	*n = 0;
	/* Component by component, as every reader (hexiscale-ckpt(5)
	 * SECURITY): another user's symlink is not followed. */
	if (dir == NULL)
		return hexi_error(HEXI_ERR_INVAL, "list: NULL directory");
	if ((rc = ck_dir_open(dir, 0, &dfd)) != HEXI_OK)
		return rc;
	d = fdopendir(dup(dfd));
	if (d == NULL) {
		rc = hexi_error(HEXI_ERR_IO, "%s: cannot open directory: %s",
				dir, strerror(errno));
		close(dfd);
		return rc;
	}
	snprintf(lp, sizeof(lp), "%s/%s", dir, HEXI_CKPT_LATEST);
	if (ck_read_at(dfd, HEXI_CKPT_LATEST, 64, lp, &latest, &len) != HEXI_OK)
		latest = NULL;
	hexi_error_clear();
	while ((de = readdir(d)) != NULL) {
		if (!ck_is_step_name(de->d_name, &s))
			continue;
		if (cnt == cap) {
			cap = cap ? 2 * cap : 16;
			nv = realloc(v, (size_t)cap * sizeof(*v));
			if (nv == NULL) {
				free(v);
				free(latest);
				closedir(d);
				close(dfd);
				return hexi_error(HEXI_ERR_NOMEM, "%s: list",
						  dir);
			}
			v = nv;
		}
		memset(&v[cnt], 0, sizeof(v[cnt]));
		snprintf(v[cnt].name, sizeof(v[cnt].name), "%.13s", de->d_name);
		v[cnt].step = s;
		v[cnt].latest =
		    latest != NULL && strncmp(latest, de->d_name, 13) == 0;
		entry_scan(dfd, dir, &v[cnt]);
		cnt++;
	}
	closedir(d);
	close(dfd);
	free(latest);
	if (cnt > 0)
		qsort(v, (size_t)cnt, sizeof(*v), entry_cmp);
	*out = v;
	*n = cnt;
	return HEXI_OK;
}
