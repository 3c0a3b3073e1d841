/*
 * hf_safetensors.c - read and write safetensors files (hf_internal.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hf_internal.h"

static const struct {
	const char *name;
	hf_dtype dt;
	int size;
} dtypes[] = {{"F32", HF_F32, 4}, {"F16", HF_F16, 2}, {"BF16", HF_BF16, 2}};

static int dtype_size(hf_dtype d)
{
	return d == HF_F32 ? 4 : 2;
}

hexi_rc hf_dtype_parse(const char *s, hf_dtype *out)
{
	static const char *opt[] = {"fp32", "fp16", "bf16"};
	static const hf_dtype v[] = {HF_F32, HF_F16, HF_BF16};

	for (int i = 0; i < 3; i++)
		if (strcmp(s, opt[i]) == 0) {
			*out = v[i];
			return HEXI_OK;
		}
	return hexi_error(HEXI_ERR_USAGE, "--dtype '%.40s': fp32, bf16 or fp16",
			  s);
}

uint64_t hf_st_numel(const hf_st_tensor *t)
{
	uint64_t n = 1;

	for (int d = 0; d < t->ndim; d++)
		n *= (uint64_t)t->shape[d];
	return n;
}

void hf_st_destroy(hf_st *st)
{
	if (st == NULL)
		return;
	for (int i = 0; i < st->n; i++)
		free(st->t[i].name);
	free(st->t);
	if (st->fd >= 0)
		close(st->fd);
	free(st->path);
	free(st);
}

int hf_st_find(const hf_st *st, const char *name)
{
	for (int i = 0; i < st->n; i++)
		if (strcmp(st->t[i].name, name) == 0)
			return i;
	return -1;
}

/* One tensor entry: dtype, shape and offsets checked against data_len. */
static hexi_rc parse_entry(const char *what, const char *name, json_t *e,
			   uint64_t data_len, hf_st_tensor *t)
{
	json_t *dt = json_object_get(e, "dtype");
	json_t *sh = json_object_get(e, "shape");
	json_t *off = json_object_get(e, "data_offsets");
	uint64_t numel = 1, bytes;
	size_t i;

	if (!json_is_object(e) || !json_is_string(dt) || !json_is_array(sh) ||
	    !json_is_array(off) || json_array_size(off) != 2 ||
	    json_object_size(e) != 3)
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: tensor '%.80s': want exactly dtype, "
				  "shape and data_offsets [begin, end]",
				  what, name);
	for (i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (strcmp(json_string_value(dt), dtypes[i].name) == 0)
			break;
	if (i == sizeof(dtypes) / sizeof(dtypes[0]))
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "%s: tensor '%.80s': dtype '%.16s' (F32, F16 "
				  "and BF16 are read)",
				  what, name, json_string_value(dt));
	t->dtype = dtypes[i].dt;
	if (json_array_size(sh) > HF_ST_MAX_DIMS)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: tensor '%.80s': %zu dims", what, name,
				  json_array_size(sh));
	t->ndim = (int)json_array_size(sh);
	for (i = 0; i < json_array_size(sh); i++) {
		json_t *d = json_array_get(sh, i);
		json_int_t v = json_is_integer(d) ? json_integer_value(d) : -1;
		if (v < 0 || v > ((json_int_t)1 << 40) ||
		    (v > 0 && numel > ((uint64_t)1 << 40) / (uint64_t)v))
			return hexi_error(HEXI_ERR_RANGE,
					  "%s: tensor '%.80s': bad shape", what,
					  name);
		t->shape[i] = v;
		numel *= (uint64_t)v;
	}
	json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
	if (!json_is_integer(b) || !json_is_integer(en) ||
	    json_integer_value(b) < 0 ||
	    json_integer_value(en) < json_integer_value(b))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: tensor '%.80s': bad data_offsets", what,
				  name);
	t->begin = (uint64_t)json_integer_value(b);
	t->end = (uint64_t)json_integer_value(en);
	if (t->end > data_len)
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: tensor '%.80s': data_offsets end %llu "
				  "past the end of the data (%llu bytes)",
				  what, name, (unsigned long long)t->end,
				  (unsigned long long)data_len);
	bytes = numel * (uint64_t)dtype_size(t->dtype);
	if (t->end - t->begin != bytes)
		return hexi_error(
		    HEXI_ERR_MISMATCH,
		    "%s: tensor '%.80s': %llu bytes of data for "
		    "%llu elements of %s",
		    what, name, (unsigned long long)(t->end - t->begin),
		    (unsigned long long)numel, json_string_value(dt));
	return HEXI_OK;
}

static int by_begin(const void *a, const void *b)
{
	const hf_st_tensor *x = a, *y = b;

	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static hexi_rc check_overlaps(const char *what, hf_st *st)
{
	hf_st_tensor *s = malloc(sizeof(*s) * (size_t)(st->n ? st->n : 1));

	if (s == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%s", what);
	int m = 0;

	for (int i = 0; i < st->n; i++) /* empty tensors occupy nothing */
		if (st->t[i].end > st->t[i].begin)
			s[m++] = st->t[i];
	qsort(s, (size_t)m, sizeof(*s), by_begin);
	for (int i = 1; i < m; i++)
		if (s[i].begin < s[i - 1].end) {
			hexi_rc rc = hexi_error(
			    HEXI_ERR_PARSE,
			    "%s: tensors '%.80s' and '%.80s' overlap", what,
			    s[i - 1].name, s[i].name);
			free(s);
			return rc;
		}
	free(s);
	return HEXI_OK;
}

hexi_rc hf_st_parse(const char *what, const char *json, size_t len,
		    uint64_t data_len, hf_st **out)
{
	json_error_t jerr;
	json_t *root = NULL, *e;
	const char *key;
	hf_st *st = calloc(1, sizeof(*st));
	hexi_rc rc = HEXI_OK;

	*out = NULL;
	if (st == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%s", what);
	st->fd = -1;
	st->data_len = data_len;
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(root))
		rc = hexi_error(HEXI_ERR_PARSE,
				"%s: header is not a JSON object (%.80s)", what,
				root ? "not an object" : jerr.text);
	else if (json_object_size(root) > HF_ST_MAX_TENSORS)
		rc = hexi_error(HEXI_ERR_RANGE, "%s: too many tensors", what);
	if (rc == HEXI_OK) {
		st->t = calloc(json_object_size(root) + 1, sizeof(*st->t));
		if (st->t == NULL)
			rc = hexi_error(HEXI_ERR_NOMEM, "%s", what);
	}
	if (rc == HEXI_OK)
		json_object_foreach(root, key, e)
		{
			if (strcmp(key, "__metadata__") == 0) {
				if (!json_is_object(e))
					rc = hexi_error(
					    HEXI_ERR_PARSE,
					    "%s: __metadata__ is not "
					    "an object",
					    what);
			} else {
				hf_st_tensor *t = &st->t[st->n];
				rc = parse_entry(what, key, e, data_len, t);
				if (rc == HEXI_OK &&
				    (t->name = strdup(key)) == NULL)
					rc = hexi_error(HEXI_ERR_NOMEM, "%s",
							what);
				if (rc == HEXI_OK)
					st->n++;
			}
			if (rc != HEXI_OK)
				break;
		}
	if (rc == HEXI_OK)
		rc = check_overlaps(what, st);
	json_decref(root);
	if (rc != HEXI_OK) {
		hf_st_destroy(st);
		return rc;
	}
	*out = st;
	return HEXI_OK;
}

static hexi_rc read_at(int fd, const char *path, void *buf, size_t n,
		       uint64_t off)
{
	size_t done = 0;

	while (done < n) {
		ssize_t k = pread(fd, (char *)buf + done, n - done,
				  (off_t)(off + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return hexi_error(HEXI_ERR_IO, "%s: %s", path,
					  k < 0 ? strerror(errno)
						: "unexpected end of file");
		done += (size_t)k;
	}
	return HEXI_OK;
}

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

hexi_rc hf_st_open_fd(int fd, const char *path, hf_st **out)
{
	unsigned char lenb[8];
	struct stat sb;
	char *hdr = NULL;
	uint64_t hl = 0;
	hexi_rc rc = HEXI_OK;

	*out = NULL;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
		rc = hexi_error(HEXI_ERR_INVAL, "%s: not a regular file", path);
	else if (sb.st_size < 8)
		rc = hexi_error(HEXI_ERR_PARSE,
				"%s: truncated (%lld bytes, no header length)",
				path, (long long)sb.st_size);
	if (rc == HEXI_OK && (rc = read_at(fd, path, lenb, 8, 0)) == HEXI_OK) {
		hl = le64(lenb);
		if (hl > HF_ST_MAX_HEADER)
			rc = hexi_error(HEXI_ERR_RANGE,
					"%s: header of %llu bytes is over the "
					"%llu-byte limit",
					path, (unsigned long long)hl,
					(unsigned long long)HF_ST_MAX_HEADER);
		else if (hl > (uint64_t)sb.st_size - 8)
			rc = hexi_error(HEXI_ERR_PARSE,
					"%s: truncated (header of %llu bytes, "
					"file of %lld)",
					path, (unsigned long long)hl,
					(long long)sb.st_size);
	}
	if (rc == HEXI_OK && (hdr = malloc(hl + 1)) == NULL)
		rc = hexi_error(HEXI_ERR_NOMEM, "%s: header", path);
	if (rc == HEXI_OK)
		rc = read_at(fd, path, hdr, hl, 8);
	if (rc == HEXI_OK)
		rc = hf_st_parse(path, hdr, hl, (uint64_t)sb.st_size - 8 - hl,
				 out);
	free(hdr);
	if (rc == HEXI_OK && ((*out)->path = strdup(path)) == NULL)
		rc = hexi_error(HEXI_ERR_NOMEM, "%s", path);
	if (rc != HEXI_OK) {
		hf_st_destroy(*out);
		*out = NULL;
		close(fd);
		return rc;
	}
	(*out)->fd = fd;
	(*out)->data_start = 8 + hl;
	return HEXI_OK;
}

static float half_to_f32(uint16_t h)
{
	uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31,
		 m = h & 1023, u;
	float f;

	if (e == 0 && m == 0)
		u = s;
	else if (e == 0) { /* subnormal */
		e = 127 - 15 + 1;
		while (!(m & 1024)) {
			m <<= 1;
			e--;
		}
		u = s | e << 23 | (m & 1023) << 13;
	} else if (e == 31)
		u = s | 0x7f800000u | m << 13;
	else
		u = s | (e + 127 - 15) << 23 | m << 13;
	memcpy(&f, &u, 4);
	return f;
}

hexi_rc hf_st_read_f32(const hf_st *st, int i, float *dst)
{
	const hf_st_tensor *t = &st->t[i];
	uint64_t n = hf_st_numel(t), bytes = t->end - t->begin;
	hexi_rc rc;

	if (t->dtype == HF_F32)
		return read_at(st->fd, st->path, dst, bytes,
			       st->data_start + t->begin);
	/* 2-byte values: read into the upper half of dst, then widen from
	 * the front (value k is read before float k overwrites it). */
	unsigned char *h = (unsigned char *)dst + 2 * n;
	rc = read_at(st->fd, st->path, h, bytes, st->data_start + t->begin);
	for (uint64_t k = 0; rc == HEXI_OK && k < n; k++) {
		uint16_t v = (uint16_t)(h[2 * k] | h[2 * k + 1] << 8);
		if (t->dtype == HF_BF16) {
			uint32_t u = (uint32_t)v << 16;
			memcpy(&dst[k], &u, 4);
		} else {
			dst[k] = half_to_f32(v);
		}
	}
	return rc;
}

/* ---- writing ---------------------------------------------------------- */

static uint16_t f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN stays NaN */
		return (uint16_t)(u >> 16 | 0x40);
	u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
	return (uint16_t)(u >> 16);
}

static uint16_t f32_to_f16(float f)
{
	uint32_t u, s, m;
	int e;

	memcpy(&u, &f, 4);
	s = (u >> 16) & 0x8000;
	e = (int)((u >> 23) & 255) - 127 + 15;
	m = u & 0x7fffff;
	if (((u >> 23) & 255) == 255)
		return (uint16_t)(s | 0x7c00 | (m ? 0x200 : 0));
	if (e >= 31)
		return (uint16_t)(s | 0x7c00); /* overflow: inf */
	if (e <= 0) {			       /* subnormal or zero */
		if (e < -10)
			return (uint16_t)s;
		m |= 0x800000;
		int shift = 14 - e;
		uint32_t h = m >> shift, rem = m & ((1u << shift) - 1),
			 half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1)))
			h++;
		return (uint16_t)(s | h);
	}
	uint32_t h = (uint32_t)e << 10 | m >> 13, rem = m & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++; /* may carry into the exponent: still correct */
	return (uint16_t)(s | h);
}

static char *header_json(const hf_st_out *t, int nt, hf_dtype dtype,
			 size_t *len)
{
	json_t *root = json_object();
	uint64_t off = 0;
	char *s;

	json_object_set_new(root, "__metadata__",
			    json_pack("{s:s}", "format", "pt"));
	for (int i = 0; i < nt; i++) {
		uint64_t n = (uint64_t)t[i].shape[0] *
			     (uint64_t)(t[i].ndim == 2 ? t[i].shape[1] : 1);
		uint64_t b = n * (uint64_t)dtype_size(dtype);
		json_t *sh = json_array();
		for (int d = 0; d < t[i].ndim; d++)
			json_array_append_new(sh, json_integer(t[i].shape[d]));
		json_object_set_new(root, t[i].name,
				    json_pack("{s:s,s:o,s:[I,I]}", "dtype",
					      dtype == HF_F32	? "F32"
					      : dtype == HF_F16 ? "F16"
								: "BF16",
					      "shape", sh, "data_offsets",
					      (json_int_t)off,
					      (json_int_t)(off + b)));
		off += b;
	}
	s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(root);
	*len = s ? strlen(s) : 0;
	return s;
}

static hexi_rc write_all(int fd, const char *path, const void *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t k = write(fd, (const char *)buf + done, n - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return hexi_error(
			    errno == ENOSPC ? HEXI_ERR_NOSPACE : HEXI_ERR_IO,
			    "%s: write: %s", path, strerror(errno));
		done += (size_t)k;
	}
	return HEXI_OK;
}

static hexi_rc write_tensor(int fd, const char *path, const hf_st_out *t, int i,
			    hf_dtype dtype, hf_st_get_fn get, void *ctx)
{
	uint64_t n =
	    (uint64_t)t->shape[0] * (uint64_t)(t->ndim == 2 ? t->shape[1] : 1);
	float *buf = malloc(sizeof(float) * (size_t)(n ? n : 1));
	hexi_rc rc;

	if (buf == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%s: tensor %s", path,
				  t->name);
	rc = get(ctx, i, buf);
	if (rc == HEXI_OK && dtype != HF_F32) {
		unsigned char *o = (unsigned char *)buf;
		for (uint64_t k = 0; k < n; k++) {
			uint16_t v = dtype == HF_BF16 ? f32_to_bf16(buf[k])
						      : f32_to_f16(buf[k]);
			o[2 * k] = (unsigned char)(v & 255);
			o[2 * k + 1] = (unsigned char)(v >> 8);
		}
	}
	if (rc == HEXI_OK)
		rc = write_all(fd, path, buf, (size_t)n * dtype_size(dtype));
	free(buf);
	return rc;
}

hexi_rc hf_st_write(int fd, const char *what, const hf_st_out *t, int nt,
		    hf_dtype dtype, hf_st_get_fn get, void *ctx)
{
	unsigned char lenb[8];
	size_t hl = 0;
	char *hdr = header_json(t, nt, dtype, &hl);
	hexi_rc rc = HEXI_OK;

	if (hdr == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%s: header", what);
	/* pad the header with spaces to a multiple of 8 (data alignment) */
	size_t padded = (hl + 7) / 8 * 8;
	for (int b = 0; b < 8; b++)
		lenb[b] = (unsigned char)((uint64_t)padded >> (8 * b));
	rc = write_all(fd, what, lenb, 8);
	if (rc == HEXI_OK)
		rc = write_all(fd, what, hdr, hl);
	if (rc == HEXI_OK)
		rc = write_all(fd, what, "        ", padded - hl);
	for (int i = 0; rc == HEXI_OK && i < nt; i++)
		rc = write_tensor(fd, what, &t[i], i, dtype, get, ctx);
	free(hdr);
	return rc;
}
