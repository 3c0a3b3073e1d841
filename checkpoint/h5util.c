/*
 * h5util.c - the few HDF5 idioms the checkpoint module uses: error printing
 * off once, the innermost message of the error stack, file open/create with
 * a fallback for file systems where HDF5's file locking fails, attributes.
 *
 * Every helper returns < 0 (or H5I_INVALID_HID) on failure and leaves the
 * HDF5 error stack for ck_h5_msg(); ids are closed in reverse order.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_internal.h"

static int h5_ready;
/* Set once locking failed on this process's file system (see
 * hexiscale-ckpt(5), HDF5_USE_FILE_LOCKING). */
static int h5_nolock;
static char h5_msg[512];
/* Message of the last failure that left no HDF5 error stack: a failed
 * open (H5Pclose clears its stack) or a refusal of our own (an attribute
 * or dataset of the wrong shape); ck_h5_msg falls back to it. */
static char h5_open_msg[512];

void ck_h5_init(void)
{
	if (h5_ready)
		return;
	/* Errors are reported through hexi_error with ck_h5_msg(). */
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	h5_ready = 1;
}

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *arg)
{
	(void)arg;
	if (n == 0 && e->desc != NULL)
		snprintf(h5_msg, sizeof(h5_msg), "%s (in %s)", e->desc,
			 e->func_name ? e->func_name : "?");
	return 0;
}

const char *ck_h5_msg(void)
{
	h5_msg[0] = '\0';
	H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, NULL);
	if (h5_msg[0] == '\0' && h5_open_msg[0] != '\0')
		snprintf(h5_msg, sizeof(h5_msg), "%s", h5_open_msg);
	if (h5_msg[0] == '\0')
		snprintf(h5_msg, sizeof(h5_msg), "unknown HDF5 error");
	return h5_msg;
}

hexi_rc ck_h5_error(const char *fmt, ...)
{
	char head[1024];
	const char *why = ck_h5_msg();
	hexi_rc rc = HEXI_ERR_HDF5;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	if (strstr(why, "No space left") != NULL ||
	    strstr(why, "errno = 28") != NULL)
		rc = HEXI_ERR_NOSPACE;
	else if (strstr(why, "truncated file") != NULL)
		rc = HEXI_ERR_IO;
	return hexi_error(rc, "%s: %s", head, why);
}

static hid_t make_fapl(int lock)
{
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);

	if (fapl < 0)
		return H5I_INVALID_HID;
	/* ignore_when_disabled=1: file systems that report locking as
	 * unsupported (ENOSYS) are used without locks. */
	if (H5Pset_file_locking(fapl, lock ? 1 : 0, 1) < 0) {
		H5Pclose(fapl);
		return H5I_INVALID_HID;
	}
	return fapl;
}

/* Called right after a failed open: keep its message, say if it was the
 * file lock that failed. */
static int note_open_failure(void)
{
	h5_open_msg[0] = '\0';
	snprintf(h5_open_msg, sizeof(h5_open_msg), "%s", ck_h5_msg());
	/* EAGAIN/EWOULDBLOCK (errno 11) is a real conflict: another process
	 * holds the file.  Never retried without locks (issue 18: the retry
	 * truncated the other job's file). */
	if (strstr(h5_open_msg, "errno = 11") != NULL ||
	    strstr(h5_open_msg, "temporarily unavailable") != NULL)
		return 0;
	return strstr(h5_open_msg, "lock") != NULL;
}

/* Open or create (exclusively: O_CREAT|O_EXCL, so never through a symlink
 * or onto an existing file); retry once without file locking when locking
 * itself is unsupported (NFS without lockd, Lustre with flock off: ENOLCK,
 * ENOSYS), never on a lock conflict. */
static hid_t open_or_create(const char *path, int create)
{
	hid_t fid = H5I_INVALID_HID, fapl;
	int pass, locked;

	ck_h5_init();
	h5_open_msg[0] = '\0';
	for (pass = h5_nolock; pass < 2; pass++) {
		fapl = make_fapl(pass == 0);
		if (fapl < 0)
			return H5I_INVALID_HID;
		if (create)
			fid = H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
		else
			fid = H5Fopen(path, H5F_ACC_RDONLY, fapl);
		locked = fid < 0 && note_open_failure();
		H5Pclose(fapl);
		if (fid >= 0 || pass == 1 || !locked)
			break;
		hexi_log(HEXI_LOG_WARN,
			 "%s: HDF5 file locking failed (%s); continuing "
			 "without locks (set HDF5_USE_FILE_LOCKING=FALSE to "
			 "skip this attempt)",
			 path, h5_open_msg);
		h5_nolock = 1;
	}
	if (fid >= 0)
		h5_open_msg[0] = '\0';
	return fid;
}

hid_t ck_h5_create(const char *path)
{
	return open_or_create(path, 1);
}

hid_t ck_h5_open(const char *path)
{
	return open_or_create(path, 0);
}

static int write_attr(hid_t loc, const char *name, hid_t ftype, hid_t mtype,
		      hid_t space, const void *v)
{
	hid_t a = H5Acreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
	int rv = -1;

	if (a < 0)
		return -1;
	if (H5Awrite(a, mtype, v) >= 0)
		rv = 0;
	H5Aclose(a);
	return rv;
}

int ck_h5_write_str_attr(hid_t loc, const char *name, const char *v)
{
	hid_t t = H5I_INVALID_HID, s = H5I_INVALID_HID;
	int rv = -1;

	t = H5Tcopy(H5T_C_S1);
	if (t < 0)
		goto out;
	if (H5Tset_size(t, strlen(v) + 1) < 0 ||
	    H5Tset_strpad(t, H5T_STR_NULLTERM) < 0)
		goto out;
	s = H5Screate(H5S_SCALAR);
	if (s < 0)
		goto out;
	rv = write_attr(loc, name, t, t, s, v);
out:
	if (s >= 0)
		H5Sclose(s);
	if (t >= 0)
		H5Tclose(t);
	return rv;
}

static int write_num_attr(hid_t loc, const char *name, hid_t ft, hid_t mt,
			  hsize_t n, const void *v)
{
	hid_t s =
	    n == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, NULL);
	int rv;

	if (s < 0)
		return -1;
	rv = write_attr(loc, name, ft, mt, s, v);
	H5Sclose(s);
	return rv;
}

int ck_h5_write_i64_attr(hid_t loc, const char *name, int64_t v)
{
	return write_num_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, 0,
			      &v);
}

int ck_h5_write_u64_attr(hid_t loc, const char *name, uint64_t v)
{
	return write_num_attr(loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, 0,
			      &v);
}

int ck_h5_write_i64v_attr(hid_t loc, const char *name, int n, const int64_t *v)
{
	return write_num_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64,
			      (hsize_t)n, v);
}

/* 0 when dataspace S (closed here) holds exactly one element: a read
 * writes one element per point, and the string buffers below hold one
 * (a crafted file may give any shape). */
static int one_point(hid_t s)
{
	hssize_t n = s < 0 ? -1 : H5Sget_simple_extent_npoints(s);

	if (s >= 0)
		H5Sclose(s);
	if (n == 1)
		return 0;
	if (n < 0)
		snprintf(h5_open_msg, sizeof(h5_open_msg),
			 "dataspace unreadable");
	else
		snprintf(h5_open_msg, sizeof(h5_open_msg),
			 "%lld elements, not one string", (long long)n);
	return -1;
}

/* 0 when FT is a fixed-length string type of 1..MAX bytes (*sz). */
static int str_type(hid_t ft, size_t max, size_t *sz)
{
	if (ft < 0)
		return -1;
	*sz = 0;
	if (H5Tget_class(ft) == H5T_STRING && !H5Tis_variable_str(ft))
		*sz = H5Tget_size(ft);
	if (*sz >= 1 && *sz <= max)
		return 0;
	snprintf(h5_open_msg, sizeof(h5_open_msg),
		 "not a fixed-length string of at most %zu bytes", max);
	return -1;
}

int ck_h5_read_str_attr(hid_t loc, const char *name, char *buf, size_t cap)
{
	hid_t a = H5I_INVALID_HID, ft = H5I_INVALID_HID, mt = H5I_INVALID_HID;
	size_t sz;
	char *tmp = NULL;
	int rv = -1;

	h5_open_msg[0] = '\0';
	a = H5Aopen(loc, name, H5P_DEFAULT);
	if (a < 0 || one_point(H5Aget_space(a)) < 0)
		goto out;
	ft = H5Aget_type(a);
	if (str_type(ft, 1 << 20, &sz) < 0)
		goto out;
	mt = H5Tcopy(H5T_C_S1);
	if (mt < 0 || H5Tset_size(mt, sz + 1) < 0 ||
	    H5Tset_strpad(mt, H5T_STR_NULLTERM) < 0)
		goto out;
	tmp = calloc(1, sz + 1);
	if (tmp == NULL || H5Aread(a, mt, tmp) < 0)
		goto out;
	if (strlen(tmp) >= cap) {
		snprintf(h5_open_msg, sizeof(h5_open_msg),
			 "longer than %zu bytes", cap - 1);
		goto out;
	}
	memcpy(buf, tmp, strlen(tmp) + 1);
	rv = 0;
out:
	free(tmp);
	if (mt >= 0)
		H5Tclose(mt);
	if (ft >= 0)
		H5Tclose(ft);
	if (a >= 0)
		H5Aclose(a);
	return rv;
}

static int read_num_attr(hid_t loc, const char *name, hid_t mt, void *v)
{
	hid_t a = H5Aopen(loc, name, H5P_DEFAULT), s = H5I_INVALID_HID;
	int rv = -1;

	if (a < 0)
		return -1;
	s = H5Aget_space(a);
	if (s < 0 || H5Sget_simple_extent_npoints(s) != 1)
		goto out;
	if (H5Aread(a, mt, v) >= 0)
		rv = 0;
out:
	if (s >= 0)
		H5Sclose(s);
	H5Aclose(a);
	return rv;
}

int ck_h5_read_i64_attr(hid_t loc, const char *name, int64_t *v)
{
	return read_num_attr(loc, name, H5T_NATIVE_INT64, v);
}

int ck_h5_read_u64_attr(hid_t loc, const char *name, uint64_t *v)
{
	return read_num_attr(loc, name, H5T_NATIVE_UINT64, v);
}

int ck_h5_write_str_dset(hid_t loc, const char *name, const char *text)
{
	hid_t t = H5I_INVALID_HID, s = H5I_INVALID_HID, d = H5I_INVALID_HID;
	int rv = -1;

	t = H5Tcopy(H5T_C_S1);
	if (t < 0 || H5Tset_size(t, strlen(text) + 1) < 0 ||
	    H5Tset_strpad(t, H5T_STR_NULLTERM) < 0)
		goto out;
	s = H5Screate(H5S_SCALAR);
	if (s < 0)
		goto out;
	d = H5Dcreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (d < 0)
		goto out;
	if (H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, text) < 0)
		goto out;
	rv = 0;
out:
	if (d >= 0)
		H5Dclose(d);
	if (s >= 0)
		H5Sclose(s);
	if (t >= 0)
		H5Tclose(t);
	return rv;
}

int ck_h5_read_str_dset(hid_t loc, const char *name, size_t max, char **out)
{
	hid_t d = H5I_INVALID_HID, ft = H5I_INVALID_HID, mt = H5I_INVALID_HID;
	char *buf = NULL;
	size_t sz;
	int rv = -1;

	h5_open_msg[0] = '\0';
	d = H5Dopen2(loc, name, H5P_DEFAULT);
	if (d < 0 || one_point(H5Dget_space(d)) < 0)
		goto out;
	ft = H5Dget_type(d);
	if (str_type(ft, max, &sz) < 0)
		goto out;
	mt = H5Tcopy(H5T_C_S1);
	if (mt < 0 || H5Tset_size(mt, sz + 1) < 0 ||
	    H5Tset_strpad(mt, H5T_STR_NULLTERM) < 0)
		goto out;
	buf = calloc(1, sz + 1);
	if (buf == NULL ||
	    H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
		goto out;
	*out = buf;
	buf = NULL;
	rv = 0;
out:
	free(buf);
	if (mt >= 0)
		H5Tclose(mt);
	if (ft >= 0)
		H5Tclose(ft);
	if (d >= 0)
		H5Dclose(d);
	return rv;
}

int ck_h5_write_meta(hid_t fid, const hexi_ckpt_meta *m)
{
	if (ck_h5_write_str_attr(fid, "format", HEXI_CKPT_FORMAT) < 0 ||
	    ck_h5_write_i64_attr(fid, "version", HEXI_CKPT_VERSION) < 0 ||
	    ck_h5_write_str_attr(fid, "model", m->model) < 0 ||
	    ck_h5_write_str_attr(fid, "plan_hash", m->plan_hash) < 0 ||
	    ck_h5_write_i64_attr(fid, "step", m->step) < 0 ||
	    ck_h5_write_i64_attr(fid, "tokens_seen", m->tokens_seen) < 0 ||
	    ck_h5_write_i64_attr(fid, "data_position", m->data_position) < 0 ||
	    ck_h5_write_i64_attr(fid, "opt_step", m->opt_step) < 0 ||
	    ck_h5_write_i64_attr(fid, "world_size", m->world_size) < 0)
		return -1;
	return 0;
}

static hexi_rc check_i64(hid_t fid, const char *key, int64_t want,
			 const char *path)
{
	int64_t got;

	if (ck_h5_read_i64_attr(fid, key, &got) < 0)
		return ck_h5_error("%s: attribute '%s' missing or unreadable",
				   path, key);
	if (got != want)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "%s: attribute '%s' is %lld, expected %lld",
				  path, key, (long long)got, (long long)want);
	return HEXI_OK;
}

/* Root string attribute KEY of rank file PATH into S (cap bytes). */
static hexi_rc meta_str(hid_t fid, const char *key, char *s, size_t cap,
			const char *path)
{
	if (ck_h5_read_str_attr(fid, key, s, cap) == 0)
		return HEXI_OK;
	return hexi_error(HEXI_ERR_PARSE, "%s: attribute '%s' unreadable: %s",
			  path, key, ck_h5_msg());
}

hexi_rc ck_h5_check_meta(hid_t fid, const hexi_ckpt_meta *m, int rank,
			 const char *path)
{
	char s[256];
	int64_t v;
	hexi_rc rc;

	if (ck_h5_read_str_attr(fid, "format", s, sizeof(s)) < 0)
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: not a %s rank file (attribute 'format' "
				  "unreadable: %s)",
				  path, HEXI_CKPT_FORMAT, ck_h5_msg());
	if (strcmp(s, HEXI_CKPT_FORMAT) != 0)
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: not a %s rank file (attribute 'format')",
				  path, HEXI_CKPT_FORMAT);
	if (ck_h5_read_i64_attr(fid, "version", &v) < 0)
		return ck_h5_error("%s: attribute 'version'", path);
	if (v < HEXI_CKPT_VERSION_MIN || v > HEXI_CKPT_VERSION)
		return hexi_error(HEXI_ERR_VERSION,
				  "%s: format version %lld, this build reads "
				  "versions %d to %d",
				  path, (long long)v, HEXI_CKPT_VERSION_MIN,
				  HEXI_CKPT_VERSION);
	if ((rc = meta_str(fid, "model", s, sizeof(s), path)) != HEXI_OK)
		return rc;
	if (strcmp(s, m->model) != 0)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "%s: model '%s', expected '%s'", path, s,
				  m->model);
	if ((rc = meta_str(fid, "plan_hash", s, sizeof(s), path)) != HEXI_OK)
		return rc;
	if (strcmp(s, m->plan_hash) != 0)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "%s: plan hash '%s', expected '%s' (a file "
				  "of another plan's save)",
				  path, s, m->plan_hash);
	if ((rc = check_i64(fid, "step", m->step, path)) != HEXI_OK ||
	    (rc = check_i64(fid, "tokens_seen", m->tokens_seen, path)) !=
		HEXI_OK ||
	    (rc = check_i64(fid, "data_position", m->data_position, path)) !=
		HEXI_OK ||
	    (rc = check_i64(fid, "opt_step", m->opt_step, path)) != HEXI_OK ||
	    (rc = check_i64(fid, "world_size", m->world_size, path)) !=
		HEXI_OK ||
	    (rc = check_i64(fid, "rank", rank, path)) != HEXI_OK)
		return rc;
	return check_i64(fid, "complete", 1, path);
}

hexi_rc ck_fsync_path(const char *path, int is_dir)
{
	int fd = open(path,
		      (is_dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
	int e;

	if (fd < 0)
		return hexi_error(
		    errno == ENOENT ? HEXI_ERR_NOTFOUND : HEXI_ERR_IO,
		    "%s: cannot open for fsync: %s", path, strerror(errno));
	if (fsync(fd) < 0 && !(is_dir && errno == EINVAL)) {
		e = errno;
		close(fd);
		return hexi_error(e == ENOSPC ? HEXI_ERR_NOSPACE : HEXI_ERR_IO,
				  "%s: fsync failed: %s", path, strerror(e));
	}
	close(fd);
	return HEXI_OK;
}

/* Close a file id that may fail to close because its metadata cannot be
 * flushed (ENOSPC): the file is garbage then, so truncating it frees the
 * space the flush needs; a file id left open would make HDF5 crash at
 * exit.  Returns the result of the first H5Fclose. */
herr_t ck_h5_close_discard(hid_t f, const char *path)
{
	herr_t rc = H5Fclose(f);

	if (rc < 0 && path[0] != '\0' && truncate(path, 0) == 0 &&
	    H5Fclose(f) < 0)
		hexi_log(HEXI_LOG_WARN, "%s: HDF5 file id could not be closed",
			 path);
	return rc;
}

int ck_step_dir(char *buf, size_t cap, const char *dir, int64_t step)
{
	int n = snprintf(buf, cap, "%s/step-%08lld", dir, (long long)step);

	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int ck_rank_path(char *buf, size_t cap, const char *stepdir, int rank)
{
	int n = snprintf(buf, cap, "%s/rank-%05d.h5", stepdir, rank);

	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

const char *ck_base(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

int ck_slice_dset(char *buf, size_t cap, const char *name, int64_t b)
{
	int n = snprintf(buf, cap, "/slices/%s@%lld", name, (long long)b);

	return n < 0 || (size_t)n >= cap ? -1 : 0;
}
