/* test_data.c - token files and window sampling (runtime/data.c):
 * the permutation is a bijection for every n, an epoch covers every window
 * for many file lengths (the old formula's collapse at 791,916 bytes),
 * sampling depends on the seed only, bad token files fail with one clear
 * error, and a token outside the vocabulary is named with its position. */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_data.h"
#include "tap.h"

static char dir[] = "/tmp/hexi-test-data-XXXXXX";

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* A token file of n tokens (id i % mod) of width w; hdr edits after. */
static const char *write_tok(const char *name, uint64_t n, int w, int mod,
			     int version, long trunc)
{
	static char path[512];
	unsigned char hdr[RT_DATA_HEADER_BYTES] = {0};
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	put32(hdr, RT_DATA_MAGIC);
	put32(hdr + 4, (uint32_t)version);
	put32(hdr + 8, (uint32_t)n);
	if (version == 2) {
		put32(hdr + 12, (uint32_t)(n >> 32));
		put32(hdr + 16, (uint32_t)w);
	}
	fwrite(hdr, 1, sizeof(hdr), f);
	for (uint64_t i = 0; i < n; i++) {
		unsigned char b[8] = {0};
		put32(b, (uint32_t)(i % (uint64_t)mod));
		fwrite(b, 1, w == 2 || w == 3 ? 2 : (size_t)w, f);
	}
	fclose(f);
	if (trunc > 0 && truncate(path, trunc) != 0)
		return NULL;
	return path;
}

static void test_permutation(void)
{
	static const uint64_t ns[] = {1,  2,   3,    5,	   7,
				      64, 100, 1000, 4097, 65535};
	int bad = 0;

	for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
		uint64_t n = ns[k];
		unsigned char *seen = calloc(n, 1);
		for (uint64_t i = 0; i < n; i++) {
			uint64_t v = rt_data_permute(i, n, 0x1234 + k);
			if (v >= n || seen[v]++)
				bad++;
		}
		free(seen);
	}
	is_int(bad, 0, "permutation is a bijection of 0..n-1 for 10 sizes");
}

/* Distinct windows of one epoch of bytes files of many lengths, as the
 * trainer draws them (rt_data_window over samples 0..W-1). */
static void test_coverage(void)
{
	static const size_t lens[] = {
	    791916,	   791917, 791915, 65536,  65537, 100003,
	    7919 * 16 + 1, 12345,  999999, 524288, 33};
	static const int Ts[] = {16, 64, 100};
	double worst = 1.0;
	char path[512];

	snprintf(path, sizeof(path), "%s/bytes.txt", dir);
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
		for (size_t ti = 0; ti < sizeof(Ts) / sizeof(Ts[0]); ti++) {
			rt_data d;
			int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (fd < 0 || ftruncate(fd, (off_t)lens[li]) != 0)
				tap_bail("cannot write the bytes file");
			close(fd);
			if (rt_data_open(&d, path, RT_DATA_BYTES, Ts[ti], 256,
					 1234) != HEXI_OK)
				continue; /* too short for T: fine */
			unsigned char *seen = calloc(d.nwindows, 1);
			uint64_t distinct = 0;
			for (uint64_t s = 0; s < d.nwindows; s++) {
				uint64_t w = rt_data_window(&d, (int64_t)s);
				if (w < d.nwindows && !seen[w]++)
					distinct++;
			}
			double r = (double)distinct / (double)d.nwindows;
			if (r < worst)
				worst = r;
			if (lens[li] == 791916 && Ts[ti] == 16)
				is_int((long)distinct, (long)d.nwindows,
				       "791916 bytes, T=16: all %llu windows "
				       "in one epoch",
				       (unsigned long long)d.nwindows);
			free(seen);
			rt_data_fini(&d);
		}
	ok(worst >= 0.99,
	   "distinct windows >= 99%% of ideal for 33 "
	   "length/T pairs (worst %.4f)",
	   worst);
}

static void test_epochs_and_seed(void)
{
	rt_data d, e;
	const char *p = write_tok("ep.tok", 16 * 50 + 1, 2, 7, 2, 0);
	int same_epoch = 1, diff_seed = 0;

	ok(rt_data_open(&d, p, RT_DATA_TOKENS, 16, 64, 1) == HEXI_OK &&
	       rt_data_open(&e, p, RT_DATA_TOKENS, 16, 64, 2) == HEXI_OK,
	   "open a v2 uint16 token file");
	is_int((long)d.nwindows, 50, "50 windows of T=16 in 801 tokens");
	for (int s = 0; s < 50; s++) {
		if (rt_data_window(&d, s) != rt_data_window(&d, 50 + s))
			same_epoch = 0;
		if (rt_data_window(&d, s) != rt_data_window(&e, s))
			diff_seed = 1;
	}
	ok(!same_epoch, "each epoch has its own order");
	ok(diff_seed, "the seed changes the order");
	int seq[17];
	ok(rt_data_read(&d, 1, seq) == HEXI_OK && seq[0] == 16 % 7 &&
	       seq[16] == 32 % 7,
	   "window 1 is tokens 16..32");
	rt_data_fini(&d);
	rt_data_fini(&e);
}

static void expect_open_fails(const char *what, const char *path,
			      rt_data_format f, int V, hexi_rc want,
			      const char *needle)
{
	rt_data d;
	hexi_rc rc = rt_data_open(&d, path, f, 16, V, 1);
	const char *msg = hexi_errmsg(rc);

	ok(rc == want && strstr(msg, needle) != NULL, "%s: rc %d, '%s'", what,
	   (int)rc, msg);
	if (rc == HEXI_OK)
		rt_data_fini(&d);
	hexi_error_clear();
}

static void test_bad_files(void)
{
	char path[600];
	rt_data d;
	int seq[17];

	expect_open_fails("truncated tokens",
			  write_tok("tr.tok", 100, 2, 5, 2, 1024 + 150),
			  RT_DATA_TOKENS, 64, HEXI_ERR_PARSE, "truncated");
	expect_open_fails("short header",
			  write_tok("sh.tok", 100, 2, 5, 2, 1000),
			  RT_DATA_TOKENS, 64, HEXI_ERR_PARSE, "header");
	expect_open_fails("width 3", write_tok("w3.tok", 100, 3, 5, 2, 0),
			  RT_DATA_TOKENS, 64, HEXI_ERR_PARSE, "token width 3");
	expect_open_fails("width 8", write_tok("w8.tok", 100, 8, 5, 2, 0),
			  RT_DATA_TOKENS, 64, HEXI_ERR_PARSE, "token width 8");
	expect_open_fails("version 9", write_tok("v9.tok", 100, 2, 5, 9, 0),
			  RT_DATA_TOKENS, 64, HEXI_ERR_VERSION, "version 9");
	snprintf(path, sizeof(path), "%s/text", dir);
	FILE *f = fopen(path, "w");
	for (int i = 0; i < 200; i++)
		fputs("hello world\n", f);
	fclose(f);
	expect_open_fails("text as tokens", path, RT_DATA_TOKENS, 64,
			  HEXI_ERR_PARSE, "--data-format bytes");
	expect_open_fails("tokens fewer than T+1",
			  write_tok("few.tok", 10, 2, 5, 2, 0), RT_DATA_TOKENS,
			  64, HEXI_ERR_INVAL, "need at least 17");
	snprintf(path, sizeof(path), "%s/fifo", dir);
	mkfifo(path, 0600);
	expect_open_fails("FIFO (no hang)", path, RT_DATA_TOKENS, 64,
			  HEXI_ERR_INVAL, "not a regular file");
	expect_open_fails("directory", dir, RT_DATA_TOKENS, 64, HEXI_ERR_INVAL,
			  "not a regular file");
	expect_open_fails("missing", "/nonexistent/x.tok", RT_DATA_TOKENS, 64,
			  HEXI_ERR_NOTFOUND, "/nonexistent/x.tok");
	/* llm.c version 1: uint16, count in word 2 */
	const char *v1 = write_tok("v1.tok", 100, 2, 70, 1, 0);
	ok(rt_data_open(&d, v1, RT_DATA_TOKENS, 16, 64, 1) == HEXI_OK,
	   "llm.c version-1 file opens");
	hexi_rc rc = rt_data_read(&d, 3, seq); /* tokens 48..64: 64 >= V */
	ok(rc == HEXI_ERR_RANGE &&
	       strstr(hexi_errmsg(rc), "token 64 at token position 64") != NULL,
	   "out-of-vocab token named with its position: '%s'", hexi_errmsg(rc));
	hexi_error_clear();
	rt_data_fini(&d);
	const char *w4 = write_tok("w4.tok", 100, 4, 70000, 2, 0);
	ok(rt_data_open(&d, w4, RT_DATA_TOKENS, 16, 100000, 1) == HEXI_OK &&
	       rt_data_read(&d, 5, seq) == HEXI_OK && seq[16] == 96,
	   "uint32 tokens read");
	rt_data_fini(&d);
	/* truncated while open (tokenized again in place): a clear error,
	 * not SIGBUS as from a mapped file */
	ok(rt_data_open(&d, w4, RT_DATA_TOKENS, 16, 100000, 1) == HEXI_OK &&
	       truncate(w4, RT_DATA_HEADER_BYTES + 40 * 4) == 0,
	   "open, then the file is truncated to its first 40 tokens");
	ok(rt_data_read(&d, 0, seq) == HEXI_OK && seq[16] == 16,
	   "window 0 (tokens 0..16) still reads");
	rc = rt_data_read(&d, 5, seq);
	ok(rc == HEXI_ERR_IO &&
	       strstr(hexi_errmsg(rc), "shorter than when it was opened") !=
		   NULL,
	   "window 5 past the new end: IO error, '%s'", hexi_errmsg(rc));
	hexi_error_clear();
	rt_data_fini(&d);
	ok(rt_data_open(&d, path[0] ? dir : dir, RT_DATA_BYTES, 16, 64, 1) !=
	       HEXI_OK,
	   "bytes format also refuses a directory");
	hexi_error_clear();
	snprintf(path, sizeof(path), "%s/text", dir);
	ok(rt_data_open(&d, path, RT_DATA_BYTES, 16, 128, 1) == HEXI_OK &&
	       rt_data_read(&d, 0, seq) == HEXI_OK && seq[0] == 'h',
	   "raw bytes as tokens");
	rt_data_fini(&d);
	ok(rt_data_open(&d, path, RT_DATA_BYTES, 16, 64, 1) == HEXI_OK,
	   "bytes with a small vocabulary open");
	rc = rt_data_read(&d, 0, seq);
	ok(rc == HEXI_ERR_RANGE &&
	       strstr(hexi_errmsg(rc), "byte 104 at offset 0") != NULL,
	   "byte outside the vocabulary named: '%s'", hexi_errmsg(rc));
	hexi_error_clear();
	rt_data_fini(&d);
}

int main(void)
{
	char cmd[600];

	if (mkdtemp(dir) == NULL)
		tap_bail("mkdtemp");
	test_permutation();
	test_coverage();
	test_epochs_and_seed();
	test_bad_files();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "# could not remove %s\n", dir);
	return tap_done();
}
