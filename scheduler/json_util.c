/* json_util.c - strict JSON getters and writers for the format modules. */
#include "config.h"

#include "json_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hexi_rc hsj_parse(const char *json, size_t len, const char *what, json_t **out)
{
	json_error_t err;
	json_t *j;

	*out = NULL;
	if (json == NULL)
		return hexi_error(HEXI_ERR_INVAL, "%s: no JSON text", what);
	if (len > HSJ_MAX_BYTES)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: %zu bytes exceeds the limit of %u", what,
				  len, HSJ_MAX_BYTES);
	j = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
	if (j == NULL)
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: malformed JSON at line %d column %d: %s",
				  what, err.line, err.column, err.text);
	if (!json_is_object(j)) {
		json_decref(j);
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: top level must be a JSON object", what);
	}
	*out = j;
	return HEXI_OK;
}

hexi_rc hsj_load(const char *path, json_t **out)
{
	char *buf = NULL;
	size_t len = 0;
	hexi_rc rv;

	*out = NULL;
	rv = hexi_read_file(path, HSJ_MAX_BYTES, &buf, &len);
	if (rv != HEXI_OK)
		return rv;
	rv = hsj_parse(buf, len, path, out);
	free(buf);
	return rv;
}

void hsj_path(char *buf, size_t cap, const char *where, const char *key)
{
	if (where == NULL || where[0] == '\0')
		snprintf(buf, cap, "%s", key);
	else
		snprintf(buf, cap, "%s.%s", where, key);
}

void hsj_index(char *buf, size_t cap, const char *where, size_t i)
{
	snprintf(buf, cap, "%s[%zu]", where, i);
}

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a real number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

hexi_rc hsj_check_keys(const json_t *obj, const char *where,
		       const char *const *allowed)
{
	const char *key;
	json_t *v;

	if (!json_is_object(obj))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: expected an object, got %s",
				  where[0] ? where : "(top)", type_name(obj));
	json_object_foreach((json_t *)obj, key, v)
	{
		int found = 0;
		for (size_t i = 0; allowed[i] != NULL && !found; i++)
			found = strcmp(key, allowed[i]) == 0;
		if (!found) {
			char p[HSJ_PATH_MAX];
			hsj_path(p, sizeof(p), where, key);
			return hexi_error(HEXI_ERR_PARSE, "%.200s: unknown key",
					  p);
		}
	}
	return HEXI_OK;
}

/* Fetch key: HEXI_OK with *v NULL when absent and optional. */
static hexi_rc fetch(const json_t *obj, const char *where, const char *key,
		     int required, json_t **v, char *p, size_t cap)
{
	hsj_path(p, cap, where, key);
	*v = json_object_get(obj, key);
	if (*v == NULL && required)
		return hexi_error(HEXI_ERR_PARSE, "%s: missing", p);
	return HEXI_OK;
}

hexi_rc hsj_check_format(const json_t *obj, const char *where, const char *fmt,
			 int ver, int required)
{
	char s[HEXI_NAME_MAX] = "";
	long v = ver;
	hexi_rc rv;

	rv = hsj_get_str(obj, where, "format", required, s, sizeof(s));
	if (rv != HEXI_OK)
		return rv;
	if (s[0] != '\0' && strcmp(s, fmt) != 0) {
		char p[HSJ_PATH_MAX];
		hsj_path(p, sizeof(p), where, "format");
		return hexi_error(HEXI_ERR_PARSE, "%s: \"%s\" is not \"%s\"", p,
				  s, fmt);
	}
	rv = hsj_get_int(obj, where, "version", required, 0, 1000000, &v);
	if (rv != HEXI_OK)
		return rv;
	if (v != ver) {
		char p[HSJ_PATH_MAX];
		hsj_path(p, sizeof(p), where, "version");
		return hexi_error(HEXI_ERR_VERSION,
				  "%s: %s version %ld is not supported (this "
				  "build reads version %d)",
				  p, fmt, v, ver);
	}
	return HEXI_OK;
}

hexi_rc hsj_as_int(const json_t *v, const char *path, long min, long max,
		   long *out)
{
	json_int_t x;

	if (!json_is_integer(v))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: expected an integer, got %s", path,
				  type_name(v));
	x = json_integer_value(v);
	if (x < min || x > max)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: %lld is out of range %ld..%ld", path,
				  (long long)x, min, max);
	*out = (long)x;
	return HEXI_OK;
}

hexi_rc hsj_as_num(const json_t *v, const char *path, double min, int gt_min,
		   double max, double *out)
{
	double x;

	if (!json_is_number(v))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: expected a number, got %s", path,
				  type_name(v));
	x = json_number_value(v);
	if (gt_min && min == 0 && isfinite(x) && x > 0 && x < HSJ_POS_MIN)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: %g is out of range (must be at least "
				  "%g and <= %g)",
				  path, x, HSJ_POS_MIN, max);
	if (!isfinite(x) || (gt_min ? !(x > min) : !(x >= min)) || x > max)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: %g is out of range (must be %s %g and "
				  "<= %g)",
				  path, x, gt_min ? ">" : ">=", min, max);
	*out = x;
	return HEXI_OK;
}

hexi_rc hsj_get_int(const json_t *obj, const char *where, const char *key,
		    int required, long min, long max, long *out)
{
	char p[HSJ_PATH_MAX];
	json_t *v;
	hexi_rc rv = fetch(obj, where, key, required, &v, p, sizeof(p));

	if (rv != HEXI_OK || v == NULL)
		return rv;
	return hsj_as_int(v, p, min, max, out);
}

hexi_rc hsj_get_num(const json_t *obj, const char *where, const char *key,
		    int required, double min, int gt_min, double max,
		    double *out)
{
	char p[HSJ_PATH_MAX];
	json_t *v;
	hexi_rc rv = fetch(obj, where, key, required, &v, p, sizeof(p));

	if (rv != HEXI_OK || v == NULL)
		return rv;
	return hsj_as_num(v, p, min, gt_min, max, out);
}

hexi_rc hsj_get_bool(const json_t *obj, const char *where, const char *key,
		     int required, int *out)
{
	char p[HSJ_PATH_MAX];
	json_t *v;
	hexi_rc rv = fetch(obj, where, key, required, &v, p, sizeof(p));

	if (rv != HEXI_OK || v == NULL)
		return rv;
	if (!json_is_boolean(v))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: expected true or false, got %s", p,
				  type_name(v));
	*out = json_is_true(v);
	return HEXI_OK;
}

hexi_rc hsj_get_str(const json_t *obj, const char *where, const char *key,
		    int required, char *dst, size_t cap)
{
	char p[HSJ_PATH_MAX];
	json_t *v;
	const char *s;
	hexi_rc rv = fetch(obj, where, key, required, &v, p, sizeof(p));

	if (rv != HEXI_OK || v == NULL)
		return rv;
	if (!json_is_string(v))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: expected a string, got %s", p,
				  type_name(v));
	s = json_string_value(v);
	if (s[0] == '\0' || strlen(s) != json_string_length(v) ||
	    !hexi_is_printable(s))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: must be a non-empty printable ASCII "
				  "string",
				  p);
	if (hexi_strlcpy(dst, s, cap) != HEXI_OK)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: longer than %zu characters", p, cap - 1);
	return HEXI_OK;
}

hexi_rc hsj_get_array(const json_t *obj, const char *where, const char *key,
		      int required, size_t max, int min0, json_t **out)
{
	char p[HSJ_PATH_MAX];
	json_t *v;
	hexi_rc rv = fetch(obj, where, key, required, &v, p, sizeof(p));

	*out = NULL;
	if (rv != HEXI_OK || v == NULL)
		return rv;
	if (!json_is_array(v))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: expected an array, got %s", p,
				  type_name(v));
	if (json_array_size(v) == 0 && !min0)
		return hexi_error(HEXI_ERR_PARSE, "%s: must not be empty", p);
	if (json_array_size(v) > max)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: %zu elements exceeds the cap of %zu", p,
				  json_array_size(v), max);
	*out = v;
	return HEXI_OK;
}

hexi_rc hsj_get_object(const json_t *obj, const char *where, const char *key,
		       int required, json_t **out)
{
	char p[HSJ_PATH_MAX];
	json_t *v;
	hexi_rc rv = fetch(obj, where, key, required, &v, p, sizeof(p));

	*out = NULL;
	if (rv != HEXI_OK || v == NULL)
		return rv;
	if (!json_is_object(v))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: expected an object, got %s", p,
				  type_name(v));
	*out = v;
	return HEXI_OK;
}

hexi_rc hsj_set(json_t *obj, const char *key, json_t *val)
{
	if (obj != NULL &&
	    val == NULL) /* jansson refuses NaN, inf, bad UTF-8 */
		return hexi_error(HEXI_ERR_RANGE,
				  "JSON: the value of '%s' cannot be written "
				  "(not a finite number, or not UTF-8)",
				  key);
	if (obj == NULL || json_object_set_new(obj, key, val)) {
		json_decref(val);
		return hexi_error(HEXI_ERR_NOMEM, "JSON: no memory for '%s'",
				  key);
	}
	return HEXI_OK;
}

hexi_rc hsj_append(json_t *arr, json_t *val)
{
	if (arr != NULL && val == NULL)
		return hexi_error(HEXI_ERR_RANGE,
				  "JSON: an array element cannot be written "
				  "(not a finite number, or not UTF-8)");
	if (arr == NULL || json_array_append_new(arr, val)) {
		json_decref(val);
		return hexi_error(HEXI_ERR_NOMEM,
				  "JSON: no memory for an array");
	}
	return HEXI_OK;
}

#define HSJ_LINE 100 /* a container whose text fits stays on one line */

/* Pretty printing that keeps short objects and arrays on one line, so a
 * plan reads as one line per device list and per sync chunk. */
static int dump_pretty(FILE *f, const json_t *j, int indent)
{
	size_t flags = JSON_ENCODE_ANY | JSON_PRESERVE_ORDER |
		       JSON_REAL_PRECISION(HSJ_REAL_PREC);
	char *flat = json_dumps(j, flags);
	int obj = json_is_object(j), rc = 0;
	size_t i = 0, n;

	if (flat == NULL)
		return -1;
	n = obj ? json_object_size(j) : json_array_size(j);
	if ((!obj && !json_is_array(j)) || n == 0 ||
	    strlen(flat) + (size_t)indent <= HSJ_LINE) {
		fputs(flat, f);
		free(flat);
		return 0;
	}
	free(flat);
	fputs(obj ? "{\n" : "[\n", f);
	if (obj) {
		const char *key;
		json_t *v;
		json_object_foreach((json_t *)j, key, v)
		{
			fprintf(f, "%*s\"%s\": ", indent + 2, "", key);
			rc |= dump_pretty(f, v, indent + 2);
			fputs(++i < n ? ",\n" : "\n", f);
		}
	} else {
		for (i = 0; i < n; i++) {
			fprintf(f, "%*s", indent + 2, "");
			rc |= dump_pretty(f, json_array_get(j, i), indent + 2);
			fputs(i + 1 < n ? ",\n" : "\n", f);
		}
	}
	fprintf(f, "%*s%s", indent, "", obj ? "}" : "]");
	return rc;
}

hexi_rc hsj_dump(const json_t *j, int pretty, char **out)
{
	size_t flags =
	    JSON_REAL_PRECISION(HSJ_REAL_PREC) | JSON_COMPACT | JSON_SORT_KEYS;
	size_t len = 0;
	FILE *f;
	int rc;

	*out = NULL;
	if (j == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "JSON: cannot serialise");
	if (!pretty) {
		*out = json_dumps(j, flags);
		return *out ? HEXI_OK
			    : hexi_error(HEXI_ERR_NOMEM,
					 "JSON: cannot serialise");
	}
	f = open_memstream(out, &len);
	if (f == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "JSON: cannot serialise");
	rc = dump_pretty(f, j, 0);
	fputc('\n', f);
	if (fclose(f) != 0 || rc != 0 || *out == NULL) {
		free(*out);
		*out = NULL;
		return hexi_error(HEXI_ERR_NOMEM, "JSON: cannot serialise");
	}
	return HEXI_OK;
}

uint64_t hsj_fnv1a64(const void *data, size_t len)
{
	return hexi_fnv1a64(data, len); /* one FNV-1a, in common/ */
}
