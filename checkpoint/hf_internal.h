/*
 * hf_internal.h - internal to hexickpt: safetensors files (hf_safetensors.c)
 * and the Hugging Face Llama mapping (hf_llama.c).
 *
 * safetensors: 8-byte little-endian header length N, N bytes of a JSON
 * object {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]},
 * "__metadata__": {...}}, then the data; offsets are relative to the end
 * of the header.  The header is hostile input: its size is capped
 * (HF_ST_MAX_HEADER), every offset, shape and size is checked against the
 * file before any read, and tensors may not overlap.
 */
#ifndef HEXI_HF_INTERNAL_H
#define HEXI_HF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hexi_common.h"
#include "hexi_sched.h"

#define HF_ST_MAX_HEADER  ((uint64_t)100 * 1000 * 1000)
#define HF_ST_MAX_DIMS	  8
#define HF_ST_MAX_TENSORS 1000000

typedef enum hf_dtype { HF_F32 = 0, HF_F16 = 1, HF_BF16 = 2 } hf_dtype;

typedef struct hf_st_tensor {
	char *name;
	hf_dtype dtype;
	int ndim;
	int64_t shape[HF_ST_MAX_DIMS];
	uint64_t begin, end; /* byte offsets in the data section */
} hf_st_tensor;

typedef struct hf_st {
	char *path;
	int fd;		     /* -1 for a parsed header only */
	uint64_t data_start; /* 8 + header length */
	uint64_t data_len;
	int n;
	hf_st_tensor *t;
} hf_st;

/* Parse a header (LEN bytes of JSON) for a data section of DATA_LEN bytes;
 * WHAT names the file in errors.  *out: hf_st_destroy. (Fuzz target.) */
hexi_rc hf_st_parse(const char *what, const char *json, size_t len,
		    uint64_t data_len, hf_st **out);
/* Parse the header of the regular file open on FD (PATH names it in
 * errors); FD is the hf_st's from then on, closed on error.  The caller
 * opens it (ck_open_in: no FIFO, no other user's link). */
hexi_rc hf_st_open_fd(int fd, const char *path, hf_st **out);
void hf_st_destroy(hf_st *st);
/* Index of NAME or -1. */
int hf_st_find(const hf_st *st, const char *name);
/* Tensor i converted to float32 into dst (numel floats). */
hexi_rc hf_st_read_f32(const hf_st *st, int i, float *dst);
uint64_t hf_st_numel(const hf_st_tensor *t);

/* Writing: NT tensors stored as DTYPE into FD, an open, empty file (WHAT
 * names it in errors), streamed one tensor at a time: get(ctx, i, buf)
 * fills tensor i as float32 (numel floats).  The caller creates FD (a
 * temporary name, O_EXCL|O_NOFOLLOW), fsyncs and renames it. */
typedef struct hf_st_out {
	char name[128];
	int ndim;
	int64_t shape[2];
} hf_st_out;
typedef hexi_rc (*hf_st_get_fn)(void *ctx, int i, float *buf);
hexi_rc hf_st_write(int fd, const char *what, const hf_st_out *t, int nt,
		    hf_dtype dtype, hf_st_get_fn get, void *ctx);
hexi_rc hf_dtype_parse(const char *s, hf_dtype *out);

/* A Hugging Face Llama config.json: LEN bytes of JSON (WHAT names it in
 * errors) into *m, named NAME and validated (hexi_model_validate), and
 * *tied (tie_word_embeddings).  Keys whose value the runtime cannot honour
 * (model_type, hidden_act, rope_theta, rms_norm_eps, rope_scaling, biases)
 * are refused.  The file is hostile input.  (Fuzz target.) */
hexi_rc hf_config_parse(const char *what, const char *json, size_t len,
			const char *name, hexi_model *m, int *tied);

#endif /* HEXI_HF_INTERNAL_H */
