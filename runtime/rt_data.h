/*
 * rt_data.h - internal: training data sources of the trainer (data.c).
 *
 * A source is a token file (hexiscale-data(5): 1024-byte header, then
 * uint16 or uint32 tokens; llm.c's version-1 .bin files read as is) or raw
 * bytes (one token per byte), read with pread one window at a time, so a
 * rank reads only the samples it uses (and a file truncated under it is an
 * error naming it, not SIGBUS).  Sample s of the stream is window
 * perm_e(s mod W) of epoch e = s / W, where window w is tokens
 * [w*T, w*T+T] and perm_e is a seeded bijection of 0..W-1: every window is
 * seen once per epoch whatever the file length, and the sample depends
 * only on (seed, s), never on the plan.
 */
#ifndef HEXI_RT_DATA_H
#define HEXI_RT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "hexi_common.h"

#define RT_DATA_MAGIC	     20240520u /* llm.c's magic, kept for its files */
#define RT_DATA_HEADER_BYTES 1024
#define RT_DATA_VERSION	     2

typedef enum rt_data_format {
	RT_DATA_TOKENS = 0, /* token file (default of --data) */
	RT_DATA_BYTES = 1,  /* raw bytes, --data-format bytes */
} rt_data_format;

typedef struct rt_data {
	const char *opt;     /* option named in errors ("--data"), static */
	char *path;	     /* NULL: not open (no --data) */
	int fd;		     /* read with pread, window by window */
	uint64_t file_bytes; /* size when opened */
	uint64_t data_off;   /* offset of the first token */
	unsigned char *buf;  /* one window of T+1 tokens */
	int width;	     /* bytes per token: 1, 2 or 4 */
	uint64_t ntokens;
	uint64_t nwindows; /* (ntokens - 1) / T */
	int T, V;
	uint64_t seed;
} rt_data;

/* Header of a token file, checked against the file's size.  Returns
 * HEXI_OK and *width, *ntokens, or one error line naming PATH. */
hexi_rc rt_data_parse_header(const char *path, const unsigned char *buf,
			     size_t file_bytes, int *width, uint64_t *ntokens);
/* Open PATH (a regular file, opened without blocking) as FMT for windows
 * of T+1 tokens of a vocabulary V.  D is caller-owned; rt_data_fini.
 * Errors (here and of rt_data_read) name the file as "--data PATH". */
hexi_rc rt_data_open(rt_data *d, const char *path, rt_data_format fmt, int T,
		     int V, uint64_t seed);
/* rt_data_open, errors naming the file as "OPT PATH" (OPT: a string that
 * outlives D, e.g. "--val-data"). */
hexi_rc rt_data_open_opt(rt_data *d, const char *opt, const char *path,
			 rt_data_format fmt, int T, int V, uint64_t seed);
void rt_data_fini(rt_data *d);
/* Window of sample S of the shuffled stream (0..nwindows-1). */
uint64_t rt_data_window(const rt_data *d, int64_t s);
/* Window w as T+1 tokens into seq (read through d's window buffer: one
 * caller at a time); HEXI_ERR_RANGE naming the position of a token
 * outside the vocabulary, HEXI_ERR_IO when the file has shrunk. */
hexi_rc rt_data_read(rt_data *d, uint64_t w, int *seq);
/* A seeded bijection of 0..n-1 (n >= 1), key selects the permutation. */
uint64_t rt_data_permute(uint64_t i, uint64_t n, uint64_t key);

#endif /* HEXI_RT_DATA_H */
