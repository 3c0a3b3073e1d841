/* data.c - the deterministic synthetic corpus, and token files and raw
 * bytes read from disk (rt_data.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_data.h"
#include "rt_model.h"

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

void hexi_rt_data_sample(uint64_t seed, int vocab, int T, int64_t sample,
			 int *tokens)
{
	if (vocab < 1)
		vocab = 1; /* degenerate but defined: all zeros */
	const uint64_t key = mix64(mix64(seed) ^ (uint64_t)sample);
	const int stride = 1 + (int)(key % 7);
	tokens[0] = (int)(mix64(key) % (uint64_t)vocab);
	for (int t = 1; t <= T; t++) {
		uint64_t h = mix64(key + (uint64_t)t * 0xd1b54a32d192ed03ULL);
		if ((h & 7) == 0)
			tokens[t] = (int)((h >> 8) % (uint64_t)vocab);
		else
			tokens[t] = (tokens[t - 1] + stride) % vocab;
	}
}

/* ---- token files and raw bytes (rt_data.h, hexiscale-data(5)) ------------ */

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* The header checks of rt_data_parse_header, messages naming OPT. */
static hexi_rc parse_header(const char *opt, const char *path,
			    const unsigned char *buf, size_t file_bytes,
			    int *width, uint64_t *ntokens)
{
	uint32_t magic, version;
	uint64_t n, need;
	int w;

	if (file_bytes < RT_DATA_HEADER_BYTES)
		return hexi_error(HEXI_ERR_PARSE,
				  "%s %s: %zu bytes, shorter than the "
				  "%d-byte token file header",
				  opt, path, file_bytes, RT_DATA_HEADER_BYTES);
	magic = le32(buf);
	version = le32(buf + 4);
	if (magic != RT_DATA_MAGIC)
		return hexi_error(HEXI_ERR_PARSE,
				  "%s %s: not a token file (magic %u, want "
				  "%u); raw text needs --data-format bytes",
				  opt, path, magic, RT_DATA_MAGIC);
	if (version == 1) { /* llm.c: count in word 2, uint16 tokens */
		n = le32(buf + 8);
		w = 2;
	} else if (version == 2) {
		n = (uint64_t)le32(buf + 8) | (uint64_t)le32(buf + 12) << 32;
		w = (int)le32(buf + 16);
		for (int i = 5; i < RT_DATA_HEADER_BYTES / 4; i++)
			if (le32(buf + 4 * i) != 0)
				return hexi_error(HEXI_ERR_PARSE,
						  "%s %s: header word %d "
						  "is %u, reserved (0)",
						  opt, path, i,
						  le32(buf + 4 * i));
	} else {
		return hexi_error(HEXI_ERR_VERSION,
				  "%s %s: token file version %u, this "
				  "hexitrain reads 1 and 2",
				  opt, path, version);
	}
	if (w != 2 && w != 4)
		return hexi_error(HEXI_ERR_PARSE,
				  "%s %s: token width %d bytes, want 2 "
				  "(uint16) or 4 (uint32)",
				  opt, path, w);
	if (n > ((uint64_t)1 << 48))
		return hexi_error(HEXI_ERR_RANGE,
				  "%s %s: %llu tokens is more than 2^48", opt,
				  path, (unsigned long long)n);
	need = RT_DATA_HEADER_BYTES + n * (uint64_t)w;
	if (need != (uint64_t)file_bytes)
		return hexi_error(
		    HEXI_ERR_PARSE,
		    "%s %s: header says %llu tokens of %d "
		    "bytes (%llu bytes with the header), the file "
		    "has %zu bytes (%s)",
		    opt, path, (unsigned long long)n, w,
		    (unsigned long long)need, file_bytes,
		    need > file_bytes ? "truncated" : "trailing bytes");
	*width = w;
	*ntokens = n;
	return HEXI_OK;
}

hexi_rc rt_data_parse_header(const char *path, const unsigned char *buf,
			     size_t file_bytes, int *width, uint64_t *ntokens)
{
	return parse_header("--data", path, buf, file_bytes, width, ntokens);
}

/* Open without following a FIFO into a hang: O_NONBLOCK, then the
 * descriptor itself must be a regular file.  The file is read with pread,
 * window by window, not mapped: a file truncated while training (say,
 * tokenized again in place) would make a mapped read fault with SIGBUS,
 * killing the job with no message; a short pread is an error that names
 * the file. */
static hexi_rc open_file(rt_data *d, const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	hexi_rc rc = HEXI_OK;

	if (fd < 0)
		return hexi_error(errno == ENOENT ? HEXI_ERR_NOTFOUND
						  : HEXI_ERR_IO,
				  "%s %s: %s", d->opt, path, strerror(errno));
	if (fstat(fd, &st) != 0)
		rc = hexi_error(HEXI_ERR_IO, "%s %s: %s", d->opt, path,
				strerror(errno));
	else if (!S_ISREG(st.st_mode))
		rc = hexi_error(HEXI_ERR_INVAL, "%s %s: not a regular file",
				d->opt, path);
	else if (st.st_size == 0)
		rc = hexi_error(HEXI_ERR_INVAL, "%s %s: empty file", d->opt,
				path);
	if (rc != HEXI_OK) {
		close(fd);
		return rc;
	}
	/* regular files never block: plain reads from here on */
	(void)fcntl(fd, F_SETFL, 0);
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	d->fd = fd;
	d->file_bytes = (uint64_t)st.st_size;
	return HEXI_OK;
}

/* N bytes at OFF of the file into BUF; a short read is an error. */
static hexi_rc read_at(const rt_data *d, uint64_t off, size_t n, void *buf)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(d->fd, (char *)buf + got, n - got,
				  (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return hexi_error(HEXI_ERR_IO,
					  "%s %s: read of %zu bytes at "
					  "offset %llu: %s",
					  d->opt, d->path, n,
					  (unsigned long long)off,
					  strerror(errno));
		if (r == 0)
			return hexi_error(HEXI_ERR_IO,
					  "%s %s: %zu of %zu bytes at "
					  "offset %llu: the file is shorter "
					  "than when it was opened (%llu "
					  "bytes): truncated or rewritten in "
					  "place while training",
					  d->opt, d->path, got, n,
					  (unsigned long long)off,
					  (unsigned long long)d->file_bytes);
		got += (size_t)r;
	}
	return HEXI_OK;
}

hexi_rc rt_data_open(rt_data *d, const char *path, rt_data_format fmt, int T,
		     int V, uint64_t seed)
{
	return rt_data_open_opt(d, "--data", path, fmt, T, V, seed);
}

hexi_rc rt_data_open_opt(rt_data *d, const char *opt, const char *path,
			 rt_data_format fmt, int T, int V, uint64_t seed)
{
	unsigned char hdr[RT_DATA_HEADER_BYTES];
	hexi_rc rc;

	memset(d, 0, sizeof(*d));
	d->fd = -1;
	d->T = T;
	d->V = V;
	d->seed = seed;
	d->opt = opt;
	d->path = strdup(path);
	if (d->path == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%s %s", opt, path);
	rc = open_file(d, path);
	if (rc == HEXI_OK && fmt == RT_DATA_BYTES) {
		d->width = 1;
		d->ntokens = d->file_bytes;
		d->data_off = 0;
	} else if (rc == HEXI_OK) {
		size_t n = d->file_bytes < sizeof(hdr) ? (size_t)d->file_bytes
						       : sizeof(hdr);
		rc = read_at(d, 0, n, hdr);
		if (rc == HEXI_OK)
			rc = parse_header(opt, path, hdr, (size_t)d->file_bytes,
					  &d->width, &d->ntokens);
		d->data_off = RT_DATA_HEADER_BYTES;
	}
	if (rc == HEXI_OK && d->ntokens < (uint64_t)T + 1)
		rc = hexi_error(HEXI_ERR_INVAL,
				"%s %s: %llu tokens, need at least %d "
				"(sequence length + 1)",
				opt, path, (unsigned long long)d->ntokens,
				T + 1);
	if (rc == HEXI_OK) {
		d->buf = malloc((size_t)(T + 1) * (size_t)d->width);
		if (d->buf == NULL)
			rc = hexi_error(HEXI_ERR_NOMEM, "%s %s: window", opt,
					path);
	}
	if (rc != HEXI_OK) {
		rt_data_fini(d);
		return rc;
	}
	d->nwindows = (d->ntokens - 1) / (uint64_t)T;
	return HEXI_OK;
}

void rt_data_fini(rt_data *d)
{
	if (d->path != NULL && d->fd >= 0)
		close(d->fd);
	free(d->buf);
	free(d->path);
	memset(d, 0, sizeof(*d));
	d->fd = -1;
}

/* Bijective on k-bit words: odd multiply-add and xor-shift are each
 * invertible modulo 2^k, so every round is; cycle-walking then restricts
 * the permutation of 0..2^k-1 to 0..n-1 (fewer than 2 rounds on average,
 * since 2^k < 2n). */
uint64_t rt_data_permute(uint64_t i, uint64_t n, uint64_t key)
{
	int k = 1;
	uint64_t mask, x = i;

	if (n <= 1)
		return 0;
	while (k < 64 && ((uint64_t)1 << k) < n)
		k++;
	mask = k == 64 ? ~(uint64_t)0 : ((uint64_t)1 << k) - 1;
	do {
		for (int r = 0; r < 4; r++) {
			uint64_t rk = mix64(key + (uint64_t)r);
			x = (x * (rk | 1) + (rk >> 17)) & mask;
			x ^= x >> ((k + 1) / 2);
		}
	} while (x >= n);
	return x;
}

uint64_t rt_data_window(const rt_data *d, int64_t s)
{
	uint64_t u = (uint64_t)s, epoch = u / d->nwindows;

	return rt_data_permute(u % d->nwindows, d->nwindows,
			       mix64(d->seed ^ mix64(epoch + 0x5851f42dULL)));
}

hexi_rc rt_data_read(rt_data *d, uint64_t w, int *seq)
{
	uint64_t pos = w * (uint64_t)d->T;
	const size_t n = (size_t)(d->T + 1) * (size_t)d->width;
	hexi_rc rc = read_at(d, d->data_off + pos * (uint64_t)d->width, n,
			     d->buf);

	if (rc != HEXI_OK)
		return rc;
	for (int i = 0; i <= d->T; i++) {
		const unsigned char *p = d->buf + (size_t)i * d->width;
		uint32_t v = d->width == 1   ? p[0]
			     : d->width == 2 ? (uint32_t)p[0] | p[1] << 8
					     : le32(p);
		if (v >= (uint32_t)d->V)
			return hexi_error(
			    HEXI_ERR_RANGE,
			    "%s %s: %s %u at %s %llu is outside the "
			    "model's vocabulary (%d)",
			    d->opt, d->path, d->width == 1 ? "byte" : "token",
			    v, d->width == 1 ? "offset" : "token position",
			    (unsigned long long)(pos + i), d->V);
		seq[i] = (int)v;
	}
	return HEXI_OK;
}
