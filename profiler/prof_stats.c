/*
 * prof_stats.c - timing loop (warm-up, repeats, median and spread), the
 * measurement list, and the strict parsers of hexiprof's option values.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_prof.h"
#include "hexi_sched.h"

#define MAX_REPEATS    10000
#define MAX_PER_SAMPLE 1000
#define MAX_DIM	       65536L
#define MAX_ELEMS      (1L << 31)
#define MAX_BYTES      (1ULL << 34)

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

hexi_rc hexi_prof_stat_of(double *samples_s, int n, hexi_prof_stat *out)
{
	if (samples_s == NULL || out == NULL || n < 1)
		return hexi_error(HEXI_ERR_INVAL, "statistics of %d samples",
				  n);
	qsort(samples_s, (size_t)n, sizeof(*samples_s), cmp_double);
	out->repeats = n;
	out->calls_per_sample = 1;
	out->min_s = samples_s[0];
	out->max_s = samples_s[n - 1];
	if (n % 2)
		out->median_s = samples_s[n / 2];
	else
		out->median_s = 0.5 * (samples_s[n / 2 - 1] + samples_s[n / 2]);
	out->spread_pct = out->median_s > 0 ? (out->max_s - out->min_s) /
						  out->median_s * 100.0
					    : 0.0;
	return HEXI_OK;
}

hexi_rc hexi_prof_time(hexi_prof_fn fn, void *arg, int warmup, int repeats,
		       hexi_prof_stat *out)
{
	return hexi_prof_time_min(fn, arg, warmup, repeats, 0.0, out);
}

/* Calls per sample so that a sample lasts about min_s (one timed call). */
static hexi_rc calibrate(hexi_prof_fn fn, void *arg, double min_s, int *k)
{
	double t0, t;
	hexi_rc rv;

	*k = 1;
	if (!(min_s > 0))
		return HEXI_OK;
	t0 = hexi_now_s();
	if ((rv = fn(arg)) != HEXI_OK)
		return rv;
	t = hexi_now_s() - t0;
	if (t < min_s)
		*k = t > min_s / MAX_PER_SAMPLE ? (int)(min_s / t) + 1
						: MAX_PER_SAMPLE;
	return HEXI_OK;
}

hexi_rc hexi_prof_time_min(hexi_prof_fn fn, void *arg, int warmup, int repeats,
			   double min_sample_s, hexi_prof_stat *out)
{
	double *t = NULL;
	hexi_rc rv = HEXI_ERR_INVAL;
	int k = 1;

	if (fn == NULL || out == NULL || warmup < 0 || warmup > MAX_REPEATS ||
	    repeats < 1 || repeats > MAX_REPEATS || !(min_sample_s >= 0) ||
	    min_sample_s > 10)
		return hexi_error(HEXI_ERR_INVAL,
				  "timing: warmup %d, repeats %d (1..%d)",
				  warmup, repeats, MAX_REPEATS);
	t = malloc((size_t)repeats * sizeof(*t));
	if (t == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "timing: %d samples", repeats);
		goto out;
	}
	for (int i = 0; i < warmup; i++)
		if ((rv = fn(arg)) != HEXI_OK)
			goto out;
	if ((rv = calibrate(fn, arg, min_sample_s, &k)) != HEXI_OK)
		goto out;
	for (int i = 0; i < repeats; i++) {
		double t0 = hexi_now_s();

		for (int j = 0; j < k; j++)
			if ((rv = fn(arg)) != HEXI_OK)
				goto out;
		t[i] = (hexi_now_s() - t0) / k;
	}
	rv = hexi_prof_stat_of(t, repeats, out);
	out->calls_per_sample = k;
out:
	free(t);
	return rv;
}

hexi_rc hexi_prof_report_add(hexi_prof_report *r, const hexi_prof_meas *m)
{
	if (r == NULL || m == NULL)
		return HEXI_OK;
	if (r->nmeas >= HEXI_PROF_MAX_MEAS)
		return hexi_error(HEXI_ERR_RANGE,
				  "report: more than %d measurements",
				  HEXI_PROF_MAX_MEAS);
	r->meas[r->nmeas++] = *m;
	return HEXI_OK;
}

/* A positive decimal integer without sign, spaces or leading junk. */
static hexi_rc parse_dim(const char *s, size_t len, long max, long *out)
{
	char buf[24];

	if (len == 0 || len >= sizeof(buf))
		return HEXI_ERR_PARSE;
	for (size_t i = 0; i < len; i++)
		if (!isdigit((unsigned char)s[i]))
			return HEXI_ERR_PARSE;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return hexi_parse_long(buf, 1, max, out);
}

hexi_rc hexi_prof_parse_shape(const char *s, hexi_prof_shape *out)
{
	long v[3];
	const char *p = s;

	if (s == NULL || out == NULL)
		return hexi_error(HEXI_ERR_INVAL, "GEMM shape: none given");
	const char *colon = strchr(s == NULL ? "" : s, ':');
	int ta = 0, tb = 0, acc = 0;

	if (colon != NULL) {
		size_t sl = strlen(colon);
		if ((sl != 3 && !(sl == 4 && colon[3] == 'a')) ||
		    !strchr("nt", colon[1]) || !strchr("nt", colon[2]) ||
		    colon[1] == 0 || colon[2] == 0)
			return hexi_error(HEXI_ERR_PARSE,
					  "GEMM shape '%.80s': the suffix "
					  "after ':' is two of n or t, then "
					  "optionally a (e.g. :nt, :tna)",
					  s);
		ta = colon[1] == 't';
		tb = colon[2] == 't';
		acc = sl == 4;
	}
	for (int i = 0; i < 3; i++) {
		const char *end = strchr(p, 'x');

		if (i == 2)
			end = colon != NULL ? colon : p + strlen(p);
		if (end == NULL ||
		    parse_dim(p, (size_t)(end - p), MAX_DIM, &v[i]) != HEXI_OK)
			return hexi_error(HEXI_ERR_PARSE,
					  "GEMM shape '%.80s': want MxNxK with "
					  "each 1..%ld",
					  s, MAX_DIM);
		p = end + 1;
	}
	if (v[0] * v[1] > MAX_ELEMS || v[1] * v[2] > MAX_ELEMS ||
	    v[0] * v[2] > MAX_ELEMS)
		return hexi_error(HEXI_ERR_RANGE,
				  "GEMM shape '%.80s': a matrix has more than "
				  "%ld elements",
				  s, MAX_ELEMS);
	out->m = v[0];
	out->n = v[1];
	out->k = v[2];
	out->ta = ta;
	out->tb = tb;
	out->acc = acc;
	return HEXI_OK;
}

hexi_rc hexi_prof_parse_bytes(const char *s, size_t *out)
{
	size_t len;
	unsigned long long mult = 1;
	long v;

	if (s == NULL || out == NULL || (len = strlen(s)) == 0)
		return hexi_error(HEXI_ERR_PARSE, "size: empty");
	switch (s[len - 1]) {
	case 'K':
		mult = 1ULL << 10;
		len--;
		break;
	case 'M':
		mult = 1ULL << 20;
		len--;
		break;
	case 'G':
		mult = 1ULL << 30;
		len--;
		break;
	default:
		break;
	}
	if (parse_dim(s, len, (long)(MAX_BYTES / mult), &v) != HEXI_OK)
		return hexi_error(HEXI_ERR_PARSE,
				  "size '%.80s': want N, NK, NM or NG between "
				  "1 and 16G",
				  s);
	*out = (size_t)((unsigned long long)v * mult);
	return HEXI_OK;
}

void hexi_prof_opts_defaults(hexi_prof_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->warmup = 2;
	o->repeats = 10;
	o->max_msg_bytes = 64u << 20;
	o->membw_bytes = 64u << 20;
	o->min_sample_s = 0.02;
}

/* Square shapes plus the GEMMs of a Llama-2-7B layer for 4096 tokens
 * (QKV: 3C x C, FFN up: F x C, FFN down: C x F) on GPU; on CPU the same
 * pattern for a small model (C=512, F=1408, 512 tokens). */
int hexi_prof_default_shapes(const char *mode, int quick, hexi_prof_shape *out,
			     int cap)
{
	static const hexi_prof_shape gpu[] = {{4096, 4096, 4096, 0, 0, 0},
					      {8192, 8192, 8192, 0, 0, 0},
					      {12288, 4096, 4096, 0, 0, 0},
					      {11008, 4096, 4096, 0, 0, 0},
					      {4096, 4096, 11008, 0, 0, 0}};
	static const hexi_prof_shape gpu_q[] = {{2048, 2048, 2048, 0, 0, 0},
						{12288, 4096, 4096, 0, 0, 0}};
	static const hexi_prof_shape cpu[] = {{512, 512, 512, 0, 0, 0},
					      {1024, 1024, 1024, 0, 0, 0},
					      {1536, 512, 512, 0, 0, 0},
					      {1408, 512, 512, 0, 0, 0},
					      {512, 512, 1408, 0, 0, 0}};
	static const hexi_prof_shape cpu_q[] = {{256, 256, 256, 0, 0, 0},
						{384, 128, 128, 0, 0, 0}};
	const hexi_prof_shape *t;
	int n;

	if (strcmp(mode, "gpu") == 0) {
		t = quick ? gpu_q : gpu;
		n = quick ? 2 : 5;
	} else {
		t = quick ? cpu_q : cpu;
		n = quick ? 2 : 5;
	}
	if (n > cap)
		n = cap;
	for (int i = 0; i < n; i++)
		out[i] = t[i];
	return n;
}

/* One table: the scheduler's built-in catalog, so that every type written
 * here is one the planner knows (a profile of a type it does not know is
 * refused whole). */
const char *hexi_prof_gpu_type_guess(const char *name)
{
	const char *t = hexi_catalog_builtin_type(name);

	return t != NULL ? t : "unknown";
}
