/*
 * hexi_ckpt.h - HexiScale checkpoints: HDF5 files in the asymmetric layout of
 * the plan that wrote them, an atomic commit, per-slice xxh64 checksums, and
 * reading any row range of any tensor whatever plan wrote it.
 *
 * On disk (hexiscale-ckpt(5)):
 *   DIR/latest                      "step-00000012\n", replaced atomically
 *   DIR/step-00000012/rank-00003.h5 slices written by rank 3
 *   DIR/step-00000012/MANIFEST.json written last: its presence is the commit
 *
 * A tensor is a float32 array of global shape (rows) or (rows, cols); a slice
 * is a contiguous row range [row_begin, row_end) of it (doc/LAYOUT.md: every
 * shard is a row range).  Only one replica of each slice is stored: the
 * caller decides which rank writes which slice (hexi_ckpt_shard_is_writer()
 * gives the usual choice from a layout).
 *
 * Save protocol (the runtime provides the barrier):
 *   every rank 0..W-1:  hexi_ckpt_save_begin, hexi_ckpt_write_slice...,
 * hexi_ckpt_save_end barrier (all save_end returned HEXI_OK) one rank:
 * hexi_ckpt_commit A crash anywhere before the manifest rename leaves the
 * previous checkpoint intact and the new one invisible.
 *
 * Ownership: the _begin and _open calls return heap objects released by
 * _end, _abort or _close (NULL is a no-op).  Strings returned by a reader
 * belong to it.
 * Every fallible call returns hexi_rc and sets hexi_errmsg() naming the file,
 * tensor or field and the cause.  Not thread-safe: one object per thread.
 */
#ifndef HEXI_CKPT_H
#define HEXI_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "hexi_common.h"
#include "hexi_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HEXI_CKPT_FORMAT "hexiscale-ckpt"
/* Format versions this build reads: HEXI_CKPT_VERSION_MIN..HEXI_CKPT_VERSION
 * (hexiscale-ckpt(5), VERSIONS).  It writes HEXI_CKPT_VERSION.  Version 2
 * added each rank file's whole-file xxh64 to the manifest; version 3 each
 * slice's and blob's byte offset in its rank file, so reads need no
 * libhdf5 (one pass over the disk, every slice checked by its xxh64). */
#define HEXI_CKPT_VERSION     3
#define HEXI_CKPT_VERSION_MIN 1
#define HEXI_CKPT_NAME_MAX    128 /* tensor / blob name, NUL included */
#define HEXI_CKPT_MANIFEST    "MANIFEST.json"
#define HEXI_CKPT_LATEST      "latest"
#define HEXI_CKPT_MAX_RANKS   65536
#define HEXI_CKPT_MAX_STEP    99999999 /* step-%08d */

/* Non-tensor training state; stored in every rank file and the manifest. */
typedef struct hexi_ckpt_meta {
	char model[HEXI_NAME_MAX];     /* model name, checked on resume */
	char plan_hash[HEXI_HASH_HEX]; /* hexi_plan.hash of the writing plan */
	int64_t step;		       /* optimizer steps completed, >= 0 */
	int64_t tokens_seen;	       /* tokens consumed so far */
	int64_t data_position; /* samples consumed from the data stream */
	int64_t opt_step;      /* AdamW step t (bias correction) */
	int world_size;	       /* ranks (rank files) of the save */
} hexi_ckpt_meta;

/* ---- save ---------------------------------------------------------------- */

typedef struct hexi_ckpt_writer hexi_ckpt_writer;

/* A save is written into a fresh private staging directory
 * DIR/.step-NNNNNNNN.XXXXXXXXXX (mode 0700, created by the saving user) and
 * renamed to DIR/step-NNNNNNNN at the commit; rank files are created with
 * O_CREAT|O_EXCL|O_NOFOLLOW semantics only.  The process that prepares a
 * save takes DIR's writer lock (DIR/.hexickpt.lock, held until it exits): a
 * second writer of DIR (another job, another user) fails at once with a
 * message naming the holder.
 *
 * Several processes (the runtime's ranks): one process calls
 * hexi_ckpt_save_prepare, hands the staging name STAGE to every rank, each
 * rank calls hexi_ckpt_save_begin_staged, and after all save_end the
 * preparing process calls hexi_ckpt_commit_staged (or, on failure,
 * hexi_ckpt_save_discard).  [Added in format version 2.]
 *
 * One process writing every rank file (tools, importers, tests): the
 * original calls hexi_ckpt_save_begin / hexi_ckpt_commit do the same
 * implicitly (the first save_begin of a step prepares it). */
#define HEXI_CKPT_STAGE_MAX 32 /* staging name, NUL included */

hexi_rc hexi_ckpt_save_prepare(const char *dir, const hexi_ckpt_meta *meta,
			       char stage[HEXI_CKPT_STAGE_MAX]);
hexi_rc hexi_ckpt_save_begin_staged(const char *dir, const char *stage,
				    const hexi_ckpt_meta *meta, int rank,
				    hexi_ckpt_writer **out);
hexi_rc hexi_ckpt_commit_staged(const char *dir, const char *stage,
				const hexi_ckpt_meta *meta,
				const char *plan_json);
/* Remove an uncommitted staging directory (the save failed). */
void hexi_ckpt_save_discard(const char *dir, const char *stage);
/* Take DIR's writer lock now, before any save (held until the process
 * exits, as hexi_ckpt_save_prepare's): a run claims its checkpoint
 * directory when it starts, so a second writer fails then, not at its
 * first save.  DIR must exist (HEXI_ERR_NOTFOUND if not: the first save
 * creates and locks it); HEXI_ERR_PERM naming the holder when another
 * process holds it. */
hexi_rc hexi_ckpt_claim(const char *dir);

/* Start rank RANK's part of the save of DIR/step-NNNNNNNN (meta->step) in
 * this process's staging directory of that step (prepared on first use):
 * creates DIR if needed and the rank file rank-RRRRR.h5.  Every rank
 * 0..meta->world_size-1 calls it, even one that writes no slice.  Fails with
 * HEXI_ERR_INVAL if that step is already committed, HEXI_ERR_PERM if
 * another writer holds DIR or DIR/step-NNNNNNNN exists and is not ours. */
hexi_rc hexi_ckpt_save_begin(const char *dir, const hexi_ckpt_meta *meta,
			     int rank, hexi_ckpt_writer **out);

/* One slice: rows [row_begin, row_end) of tensor NAME of global shape
 * shape[0..ndim-1] (ndim 1 or 2).  DATA is row-major float32,
 * (row_end - row_begin) * cols values (cols = shape[1], or 1).  NAME is 1..127
 * characters of [A-Za-z0-9._-]; optimizer moments use "opt.m.NAME" and
 * "opt.v.NAME" with the layout of NAME.  DATA is not kept. */
hexi_rc hexi_ckpt_write_slice(hexi_ckpt_writer *w, const char *name, int ndim,
			      const int64_t shape[2], int64_t row_begin,
			      int64_t row_end, const float *data);

/* The same in pieces, for slices larger than memory: slice_begin, then
 * slice_rows() with consecutive rows until all are given, then slice_end. */
hexi_rc hexi_ckpt_slice_begin(hexi_ckpt_writer *w, const char *name, int ndim,
			      const int64_t shape[2], int64_t row_begin,
			      int64_t row_end);
hexi_rc hexi_ckpt_slice_rows(hexi_ckpt_writer *w, const float *rows,
			     int64_t nrows);
hexi_rc hexi_ckpt_slice_end(hexi_ckpt_writer *w);

/* Opaque bytes (RNG state, data-loader state...), at most 64 MiB; a blob
 * name must be unique over the whole checkpoint (e.g. "rng.rank3"). */
hexi_rc hexi_ckpt_write_blob(hexi_ckpt_writer *w, const char *name,
			     const void *data, size_t len);

/* Finish this rank's file: index, close, fsync file and directory.  W is
 * freed whatever the result; on failure the rank file is removed. */
hexi_rc hexi_ckpt_save_end(hexi_ckpt_writer *w);

/* Give up (error path elsewhere): close and remove this rank's file. */
void hexi_ckpt_save_abort(hexi_ckpt_writer *w);

/* Commit, by the process that began the save (hexi_ckpt_save_begin) after
 * every rank's save_end succeeded: checks that rank files 0..W-1 exist, are
 * complete and agree with META, that every tensor is covered exactly once
 * (no gap, no overlap) with one global shape, then writes MANIFEST.json
 * (with each rank file's size and whole-file xxh64) with PLAN_JSON (a JSON
 * object; the plan that wrote it) into the staging directory, renames that
 * to DIR/step-NNNNNNNN (the commit point) and points DIR/latest at it.  A
 * failed commit removes the staging directory (the save is lost).
 * PLAN_JSON may be NULL only if meta->plan_hash is "". */
hexi_rc hexi_ckpt_commit(const char *dir, const hexi_ckpt_meta *meta,
			 const char *plan_json);

/* Which shard of a tensor layout is written: the shards of the pipeline
 * holding the tensor with the largest TP degree (most shards; ties: the
 * lowest pipeline index), so the bytes spread over the most ranks, and
 * among shards with equal row ranges (TP-replicated tensors) the lowest
 * rank.  Returns 1 or 0.  The runtime and reshard use the same rule. */
int hexi_ckpt_shard_is_writer(const hexi_tensor_layout *t, int shard);

/* ---- load ---------------------------------------------------------------- */

typedef struct hexi_ckpt_reader hexi_ckpt_reader;

typedef struct hexi_ckpt_open_opts {
	int verify;	   /* 1 (default): check each slice's checksum */
	int64_t step;	   /* -1 (default): the one DIR/latest names */
	const char *model; /* non-NULL: must match, else HEXI_ERR_MISMATCH */
	const char
	    *plan_hash; /* non-NULL: must match, else HEXI_ERR_MISMATCH */
	/* Added with format 2 (initialise with hexi_ckpt_open_opts_init):
	 * 1 lets root open a format-1 checkpoint (no whole-file checksums)
	 * owned by another user; 0 (default) refuses it with HEXI_ERR_PERM. */
	int allow_unchecked;
} hexi_ckpt_open_opts;

void hexi_ckpt_open_opts_init(hexi_ckpt_open_opts *o);

/* PATH is a checkpoint directory (DIR: latest or o->step) or one step
 * directory (DIR/step-NNNNNNNN).  Only committed checkpoints open.  Reads and
 * checks the manifest, the rank files' sizes and attributes (format,
 * version, model, plan hash, step).  O may be NULL (defaults).  Inside PATH
 * nothing is followed (a symlink or FIFO named MANIFEST.json, latest or a
 * rank file is refused), and each rank file's size and whole-file xxh64
 * (version 2) are checked before libhdf5 opens it. */
hexi_rc hexi_ckpt_open(const char *path, const hexi_ckpt_open_opts *o,
		       hexi_ckpt_reader **out);
void hexi_ckpt_close(hexi_ckpt_reader *r);

const hexi_ckpt_meta *hexi_ckpt_reader_meta(const hexi_ckpt_reader *r);
/* The plan JSON stored with the checkpoint ("" if none). */
const char *hexi_ckpt_reader_plan_json(const hexi_ckpt_reader *r);
/* The step directory opened. */
const char *hexi_ckpt_reader_path(const hexi_ckpt_reader *r);
/* Format version of the opened checkpoint's manifest; below 2 there are no
 * whole-file checksums, so rank files reach libhdf5 unchecked. */
int hexi_ckpt_reader_version(const hexi_ckpt_reader *r);

typedef struct hexi_ckpt_tensor_info {
	const char *name; /* owned by the reader */
	int ndim;
	int64_t shape[2]; /* shape[1] == 1 when ndim == 1 */
	int nslices;
} hexi_ckpt_tensor_info;

typedef struct hexi_ckpt_slice_info {
	int rank; /* rank file holding it */
	int64_t row_begin, row_end;
	uint64_t xxh64; /* of the slice's float32 little-endian bytes */
} hexi_ckpt_slice_info;

/* Tensors in name order. */
int hexi_ckpt_ntensors(const hexi_ckpt_reader *r);
hexi_rc hexi_ckpt_tensor_at(const hexi_ckpt_reader *r, int i,
			    hexi_ckpt_tensor_info *out);
/* HEXI_ERR_NOTFOUND if absent; index in *idx if idx != NULL. */
hexi_rc hexi_ckpt_tensor_find(const hexi_ckpt_reader *r, const char *name,
			      hexi_ckpt_tensor_info *out, int *idx);
hexi_rc hexi_ckpt_slice_at(const hexi_ckpt_reader *r, int tensor, int slice,
			   hexi_ckpt_slice_info *out);

/* Rows [row_begin, row_end) of tensor NAME into DST ((row_end-row_begin) *
 * cols floats), read from whichever stored slices cover them.  With verify
 * on, each stored slice touched is checked once (the whole slice is read
 * the first time), and a mismatch fails with HEXI_ERR_CHECKSUM naming the
 * tensor, rows and file. */
hexi_rc hexi_ckpt_read_rows(hexi_ckpt_reader *r, const char *name,
			    int64_t row_begin, int64_t row_end, float *dst);

/* A blob into a heap buffer (*data, caller frees); HEXI_ERR_NOTFOUND if
 * absent.  Always verified. */
hexi_rc hexi_ckpt_read_blob(hexi_ckpt_reader *r, const char *name, void **data,
			    size_t *len);
/* Blob names, for listing. */
int hexi_ckpt_nblobs(const hexi_ckpt_reader *r);
const char *hexi_ckpt_blob_name(const hexi_ckpt_reader *r, int i);

/* Progress of long operations: bytes done of total (may be NULL). */
typedef void (*hexi_ckpt_progress_fn)(const char *what, uint64_t done_bytes,
				      uint64_t total_bytes, void *arg);

/* Read every slice and blob and check every checksum and dataset attribute;
 * coverage and overlaps were checked by hexi_ckpt_open.  Stops at the
 * first failure (HEXI_ERR_CHECKSUM names tensor and file). */
hexi_rc hexi_ckpt_verify(hexi_ckpt_reader *r, hexi_ckpt_progress_fn progress,
			 void *arg);

/* ---- tools (hexickpt) ------------------------------------------------------
 */

/* Write the whole checkpoint as one HDF5 file of full tensors
 * (/tensors/NAME, float32) with the metadata as attributes, streaming with
 * bounded memory.  Written to a temporary name and renamed. */
hexi_rc hexi_ckpt_export(hexi_ckpt_reader *r, const char *path,
			 hexi_ckpt_progress_fn progress, void *arg);

/* Write the checkpoint in the layout of another plan to DIR (committed, at
 * the same step): LAYOUT from hexi_layout_create() of the target plan, its
 * world size, hash and JSON.  Blobs are copied.  Streams tensor by tensor;
 * memory stays under max_buffer_bytes (0: 1 MiB, CK_CPU_BLOCK_BYTES) plus
 * HDF5's own and the reader's one cached slice (up to 32 MiB). */
typedef struct hexi_ckpt_reshard_target {
	const hexi_layout *layout;
	int world_size;
	const char *plan_hash;
	const char *plan_json;
	size_t max_buffer_bytes;
} hexi_ckpt_reshard_target;

hexi_rc hexi_ckpt_reshard(hexi_ckpt_reader *r,
			  const hexi_ckpt_reshard_target *t, const char *dir,
			  hexi_ckpt_progress_fn progress, void *arg);

/* One checkpoint of a directory, for listing. */
typedef struct hexi_ckpt_entry {
	char name[32]; /* "step-00000012" */
	int64_t step;
	int committed;	/* manifest present and readable */
	int latest;	/* DIR/latest names it */
	int nfiles;	/* rank files present */
	uint64_t bytes; /* total size of its files */
} hexi_ckpt_entry;

/* Entries sorted by step; *out is a heap array (caller frees). */
hexi_rc hexi_ckpt_list(const char *dir, hexi_ckpt_entry **out, int *n);

/* Check a manifest text without touching files (also the fuzz target). */
hexi_rc hexi_ckpt_manifest_check(const char *json, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* HEXI_CKPT_H */
