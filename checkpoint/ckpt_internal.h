/*
 * ckpt_internal.h - shared by the checkpoint module's sources only.
 */
#ifndef HEXI_CKPT_INTERNAL_H
#define HEXI_CKPT_INTERNAL_H

#include <sys/stat.h>

#include <hdf5.h>
#include <jansson.h>

#include "hexi_ckpt.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checksums are defined over little-endian float32 bytes"
#endif

#define CK_MANIFEST_MAX_BYTES ((size_t)1 << 30)
#define CK_INDEX_MAX_BYTES    ((size_t)256 << 20)
#define CK_PLAN_MAX_BYTES     ((size_t)64 << 20)
#define CK_BLOB_MAX_BYTES     ((size_t)64 << 20)
#define CK_MAX_ROWS	      ((int64_t)1 << 40)
#define CK_MAX_ELEMS	      ((int64_t)1 << 40)
#define CK_MAX_TENSORS	      1000000
#define CK_MAX_SLICES	      10000000
#define CK_IO_BLOCK_BYTES     ((size_t)8 << 20)
/* Pieces that stay in the CPU cache between the copy, the hash and the
 * write: measured 2.8x less CPU than 32 MiB pieces for reshard. */
#define CK_CPU_BLOCK_BYTES ((size_t)1 << 20)
#define CK_CACHE_BYTES	   ((size_t)32 << 20) /* reader: one verified slice */
#define CK_PATH_MAX	   4096

/* No byte offset recorded (format versions before 3). */
#define CK_NO_OFFSET UINT64_MAX

typedef struct ck_slice {
	int rank;
	int64_t b, e; /* rows [b, e) */
	uint64_t xxh;
	uint64_t off; /* its data's byte offset in the rank file, or
		       * CK_NO_OFFSET (version < 3) */
	int verified; /* reader: checksum checked */
} ck_slice;

typedef struct ck_tensor {
	char name[HEXI_CKPT_NAME_MAX];
	int ndim;
	int64_t shape[2]; /* shape[1] == 1 for ndim 1 */
	int nslices;
	ck_slice *slices; /* sorted by b once validated */
} ck_tensor;

typedef struct ck_blob {
	char name[HEXI_CKPT_NAME_MAX];
	int rank;
	uint64_t bytes, xxh;
	uint64_t off; /* as ck_slice.off */
} ck_blob;

/* A slice as added, before ck_manifest_validate groups them by tensor. */
typedef struct ck_raw {
	char name[HEXI_CKPT_NAME_MAX];
	int ndim;
	int64_t shape[2];
	ck_slice s;
} ck_raw;

typedef struct ck_manifest {
	hexi_ckpt_meta meta;
	int version;
	uint64_t *file_bytes; /* [world_size] */
	uint64_t *file_xxh;   /* [world_size], version >= 2 (else NULL) */
	int nraw, rawcap;
	ck_raw *raw; /* consumed by ck_manifest_validate */
	int ntensors;
	ck_tensor *tensors; /* sorted by name once validated */
	int nblobs, bcap;
	ck_blob *blobs;
	char *plan_json; /* compact JSON text or "" */
} ck_manifest;

/* manifest.c */
hexi_rc ck_manifest_init(ck_manifest *m, const hexi_ckpt_meta *meta);
void ck_manifest_fini(ck_manifest *m);
hexi_rc ck_manifest_add_slice(ck_manifest *m, const char *name, int ndim,
			      const int64_t shape[2], int rank, int64_t b,
			      int64_t e, uint64_t xxh, uint64_t off,
			      const char *where);
hexi_rc ck_manifest_add_blob(ck_manifest *m, const char *name, int rank,
			     uint64_t bytes, uint64_t xxh, uint64_t off,
			     const char *where);
/* Sort, then check coverage, overlaps, duplicates; WHERE names the source. */
hexi_rc ck_manifest_validate(ck_manifest *m, const char *where);
hexi_rc ck_manifest_parse(const char *json, size_t len, const char *where,
			  ck_manifest *out);
hexi_rc ck_manifest_to_json(const ck_manifest *m, char **out);
ck_tensor *ck_manifest_find(const ck_manifest *m, const char *name);
hexi_rc ck_meta_check(const hexi_ckpt_meta *meta, const char *where);
int ck_name_ok(const char *name);
/* Strict JSON helpers shared with the index parser. */
hexi_rc ck_json_keys(json_t *o, const char *const *keys, const char *where);
hexi_rc ck_json_i64(json_t *o, const char *key, int64_t min, int64_t max,
		    int64_t *out, const char *where);
hexi_rc ck_json_str(json_t *o, const char *key, char *buf, size_t cap,
		    const char *where);
hexi_rc ck_json_hex64(json_t *o, const char *key, uint64_t *out,
		      const char *where);
hexi_rc ck_json_shape(json_t *o, int *ndim, int64_t shape[2],
		      const char *where);
hexi_rc ck_json_rows(json_t *o, int64_t *b, int64_t *e, const char *where);
json_t *ck_json_shape_new(int ndim, const int64_t shape[2]);
json_t *ck_json_hex64_new(uint64_t v);

int ck_is_step_name(const char *s, long *step);

/* writer.c: save_end with the fsyncs optional (one process writing many
 * rank files syncs them together afterwards). */
hexi_rc ck_save_end(hexi_ckpt_writer *w, int sync);

/* h5util.c */
void ck_h5_init(void);
/* Message of the innermost HDF5 error on the stack (static buffer). */
const char *ck_h5_msg(void);
/* hexi_error with the HDF5 message appended; NOSPACE when it says so. */
hexi_rc ck_h5_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
hid_t ck_h5_create(const char *path);
hid_t ck_h5_open(const char *path);
int ck_h5_write_str_attr(hid_t loc, const char *name, const char *v);
int ck_h5_write_i64_attr(hid_t loc, const char *name, int64_t v);
int ck_h5_write_u64_attr(hid_t loc, const char *name, uint64_t v);
int ck_h5_write_i64v_attr(hid_t loc, const char *name, int n, const int64_t *v);
int ck_h5_read_str_attr(hid_t loc, const char *name, char *buf, size_t cap);
int ck_h5_read_i64_attr(hid_t loc, const char *name, int64_t *v);
int ck_h5_read_u64_attr(hid_t loc, const char *name, uint64_t *v);
int ck_h5_write_str_dset(hid_t loc, const char *name, const char *text);
/* Heap copy of a string dataset, at most max bytes; -1 on failure. */
int ck_h5_read_str_dset(hid_t loc, const char *name, size_t max, char **out);
/* Root attributes of a rank or export file. */
int ck_h5_write_meta(hid_t fid, const hexi_ckpt_meta *m);
/* Check a rank file's root attributes against META; hexi_rc. */
hexi_rc ck_h5_check_meta(hid_t fid, const hexi_ckpt_meta *m, int rank,
			 const char *path);
/* H5Fclose; if that fails (metadata flush on a full disk), truncate PATH
 * (the file is being discarded) and close again, so no id stays open. */
herr_t ck_h5_close_discard(hid_t f, const char *path);
/* fsync a file or directory by path. */
hexi_rc ck_fsync_path(const char *path, int is_dir);

/* safeio.c: descriptor-relative, never-following file access */
#define CK_LOCK_NAME	  ".hexickpt.lock"
#define CK_STAGE_RAND	  10
#define CK_STAGE_NAME_MAX HEXI_CKPT_STAGE_MAX
/* Open directory PATH component by component (symlinks only when owned by
 * root or the caller), creating missing ones (0755) when CREATE. */
hexi_rc ck_dir_open(const char *path, int create, int *fd);
/* NAME below DFD for reading: a regular file by fstat of an O_PATH
 * descriptor (O_NOFOLLOW) before it is opened (no FIFO or device is ever
 * opened), in another user's directory no hard link to a file that user
 * does not own; WHAT names it in messages. */
hexi_rc ck_open_at(int dfd, const char *name, const char *what, int *fd,
		   struct stat *st);
hexi_rc ck_read_at(int dfd, const char *name, size_t max, const char *what,
		   char **out, size_t *len);
/* The same for an input that is not a checkpoint (a Hugging Face model):
 * a symlink is followed when root or the caller made it, or when the
 * file it leads to belongs to the link's owner (fstat of an O_PATH
 * descriptor); another user's link to someone else's file is refused. */
hexi_rc ck_open_in(int dfd, const char *name, const char *what, int *fd,
		   struct stat *st);
hexi_rc ck_read_in(int dfd, const char *name, size_t max, const char *what,
		   char **out, size_t *len);
/* Size and xxh64 of a whole file, streaming with pread (8 MiB buffer),
 * never mapped: a file truncated meanwhile gives a short size (the
 * caller's size check fails), not a SIGBUS. */
hexi_rc ck_hash_fd(int fd, const char *what, uint64_t *bytes, uint64_t *xxh);
/* "/proc/self/fd/FD[/NAME]": a path that names what FD holds. */
int ck_fd_path(char *buf, size_t cap, int fd, const char *name);
int ck_have_proc_fd(void);
hexi_rc ck_fsync_fd(int fd, const char *what);
/* NAME below DFD written atomically: a random temporary name created with
 * O_EXCL|O_NOFOLLOW, FILL writes it, fsync, renameat over NAME (a planted
 * symlink or FIFO named NAME is replaced, never followed), fsync DFD; the
 * temporary is removed on any error. */
typedef hexi_rc (*ck_fill_fn)(int fd, const char *what, void *arg);
hexi_rc ck_write_at_atomic_fn(int dfd, const char *name, const char *what,
			      ck_fill_fn fill, void *arg);
/* The same with LEN bytes of TEXT. */
hexi_rc ck_write_at_atomic(int dfd, const char *name, const char *text,
			   size_t len, const char *what);
int ck_is_stage_name(const char *s);
/* N random characters of [a-z0-9] and a NUL into BUF (N <= 32). */
void ck_random_name(char *buf, size_t n);
hexi_rc ck_stage_create(int dfd, int64_t step, const char *dir, char *name,
			size_t cap);
/* A staging directory owned by the caller with mode 0700. */
hexi_rc ck_stage_open(int dfd, const char *name, const char *dir, int *fd);
/* Remove directory NAME (ours) and the files in it. */
hexi_rc ck_dir_remove(int dfd, const char *name);
void ck_stage_cleanup(int dfd);
/* DIR's writer lock, kept until the process exits; *fresh set only when
 * the lock was taken now and is really held (0 when this process held it
 * already, or when the file system has no locks and HEXI_OK means "no
 * live holder known"): stage cleanup runs only when *fresh.  A lock file
 * of ours that we cannot write, or a lock error other than a conflict or
 * "locks unsupported", is an error. */
hexi_rc ck_lock_dir(int dfd, const char *dir, int *fresh);

/* paths */
int ck_step_dir(char *buf, size_t cap, const char *dir, int64_t step);
int ck_rank_path(char *buf, size_t cap, const char *stepdir, int rank);
const char *ck_base(const char *path);
/* Dataset name in /slices of a rank file. */
int ck_slice_dset(char *buf, size_t cap, const char *name, int64_t b);

#endif /* HEXI_CKPT_INTERNAL_H */
