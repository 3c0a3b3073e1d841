/* error.c - the error table, per-thread messages and strict parsers. */
#include "config.h"

/* the out-of-line hexi_error of the library ABI lives here */
#define HEXI_COMMON_OUT_OF_LINE_ERROR 1
#include "hexi_common.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEXI_MSG_CAP 1024

static _Thread_local char errmsg[HEXI_MSG_CAP];

const char *hexi_strerror(hexi_rc rc)
{
	switch (rc) {
#define HEXI_X_STR(name, code, text)                                           \
	case name:                                                             \
		return text;
		HEXI_ERROR_TABLE(HEXI_X_STR)
#undef HEXI_X_STR
	}
	return "unknown error";
}

const char *hexi_errname(hexi_rc rc)
{
	switch (rc) {
#define HEXI_X_NAME(name, code, text)                                          \
	case name:                                                             \
		return #name;
		HEXI_ERROR_TABLE(HEXI_X_NAME)
#undef HEXI_X_NAME
	}
	return "HEXI_ERR_UNKNOWN";
}

hexi_rc hexi_verror(hexi_rc rc, const char *fmt, va_list ap)
{
	vsnprintf(errmsg, sizeof(errmsg), fmt, ap);
	return rc;
}

hexi_rc hexi_error(hexi_rc rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	hexi_verror(rc, fmt, ap);
	va_end(ap);
	return rc;
}

int hexi_error_set(const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	va_start(ap, fmt);
	hexi_verror(HEXI_OK, fmt, ap);
	va_end(ap);
	errno = e;
	return 0;
}

const char *hexi_error_fmt_prefix(const char *fmt, ...)
{
	static _Thread_local char prefix[HEXI_MSG_CAP];
	int e = errno;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	errno = e;
	return prefix;
}

void hexi_error_prefix_str(hexi_rc rc, const char *prefix)
{
	char old[HEXI_MSG_CAP];

	memcpy(old, errmsg, sizeof(old));
	if (old[0] == '\0')
		snprintf(old, sizeof(old), "%s", hexi_strerror(rc));
	snprintf(errmsg, sizeof(errmsg), "%.400s: %.600s", prefix, old);
}

hexi_rc hexi_error_prefix(hexi_rc rc, const char *fmt, ...)
{
	char prefix[HEXI_MSG_CAP];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	hexi_error_prefix_str(rc, prefix);
	return rc;
}

const char *hexi_errmsg(hexi_rc rc)
{
	if (errmsg[0] == '\0')
		return hexi_strerror(rc);
	return errmsg;
}

void hexi_error_clear(void)
{
	errmsg[0] = '\0';
}

hexi_rc hexi_parse_long(const char *s, long min, long max, long *out)
{
	char *end = NULL;
	long v;

	if (s == NULL || *s == '\0')
		return hexi_error(HEXI_ERR_PARSE,
				  "empty value, expected an integer");
	if (*s == ' ' || *s == '\t' || *s == '+')
		return hexi_error(HEXI_ERR_PARSE, "'%.64s' is not an integer",
				  s);
	errno = 0;
	v = strtol(s, &end, 10);
	if (*end != '\0')
		return hexi_error(HEXI_ERR_PARSE, "'%.64s' is not an integer",
				  s);
	if (errno == ERANGE || v < min || v > max)
		return hexi_error(HEXI_ERR_RANGE,
				  "%.64s is out of range [%ld, %ld]", s, min,
				  max);
	*out = v;
	return HEXI_OK;
}

hexi_rc hexi_parse_double(const char *s, double min, double max, double *out)
{
	char *end = NULL;
	double v;

	if (s == NULL || *s == '\0')
		return hexi_error(HEXI_ERR_PARSE,
				  "empty value, expected a number");
	if (*s == ' ' || *s == '\t')
		return hexi_error(HEXI_ERR_PARSE, "'%.64s' is not a number", s);
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0' || end == s)
		return hexi_error(HEXI_ERR_PARSE, "'%.64s' is not a number", s);
	if (errno == ERANGE || !isfinite(v) || v < min || v > max)
		return hexi_error(HEXI_ERR_RANGE,
				  "%.64s is out of range [%g, %g]", s, min,
				  max);
	*out = v;
	return HEXI_OK;
}

hexi_rc hexi_strlcpy(char *dst, const char *src, size_t cap)
{
	size_t n;

	if (cap == 0)
		return hexi_error(HEXI_ERR_RANGE, "no room to copy a string");
	n = strlen(src);
	if (n >= cap)
		return hexi_error(
		    HEXI_ERR_RANGE,
		    "string of %zu bytes exceeds the limit of %zu", n, cap - 1);
	memcpy(dst, src, n + 1);
	return HEXI_OK;
}

int hexi_is_host_name(const char *s)
{
	if (s[0] == '\0')
		return 0;
	for (; *s != '\0'; s++)
		if (!isalnum((unsigned char)*s) && *s != '-' && *s != '.' &&
		    *s != '_')
			return 0;
	return 1;
}

int hexi_is_printable(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return 0;
	return 1;
}
