/*
 * json_util.h - internal helpers of libhexisched (not installed).
 *
 * Strict reading of JSON objects: every getter names the field by its path
 * ("nodes[2].count") in the error message, checks the JSON type and the
 * range, and returns HEXI_ERR_PARSE (missing field, wrong type, unknown key)
 * or HEXI_ERR_RANGE (value outside its bounds).  Also the cross-file
 * internals of the format modules (cluster/model/train objects inside a plan,
 * catalog entries inside a cluster).  Names start with hsj_/hexi__ so the
 * library's export list (^hexi_[a-z]) hides them.
 */
#ifndef HEXI_JSON_UTIL_H
#define HEXI_JSON_UTIL_H

#include <jansson.h>

#include "hexi_sched.h"

/* Largest JSON document any parser accepts (plans of 16k GPUs fit). */
#define HSJ_MAX_BYTES (64u << 20)
/* Doubles are written (and hashed) with 15 significant digits: any such
 * decimal survives a text -> double -> text round trip unchanged. */
#define HSJ_REAL_PREC 15
#define HSJ_PATH_MAX  256

enum { HSJ_OPTIONAL = 0, HSJ_REQUIRED = 1 };

/* Parse text into a JSON object (duplicate keys rejected); what names the
 * document in errors ("cluster", "plan"). */
hexi_rc hsj_parse(const char *json, size_t len, const char *what, json_t **out);
/* Read a file (<= HSJ_MAX_BYTES) and parse it; errors name the path. */
hexi_rc hsj_load(const char *path, json_t **out);

/* "where.key" or "key" when where is empty. */
void hsj_path(char *buf, size_t cap, const char *where, const char *key);
/* "where[i]" */
void hsj_index(char *buf, size_t cap, const char *where, size_t i);

/* obj must be an object whose keys are all in allowed (NULL-terminated). */
hexi_rc hsj_check_keys(const json_t *obj, const char *where,
		       const char *const *allowed);
/* Optional "format"/"version": when present they must equal fmt/ver. */
hexi_rc hsj_check_format(const json_t *obj, const char *where, const char *fmt,
			 int ver, int required);

/* Getters: absent and optional -> *out untouched, HEXI_OK.
 * gt_min: value must be > min (else >= min). */
hexi_rc hsj_get_int(const json_t *obj, const char *where, const char *key,
		    int required, long min, long max, long *out);
hexi_rc hsj_get_num(const json_t *obj, const char *where, const char *key,
		    int required, double min, int gt_min, double max,
		    double *out);
hexi_rc hsj_get_bool(const json_t *obj, const char *where, const char *key,
		     int required, int *out);
/* Printable ASCII, 1..cap-1 bytes. */
hexi_rc hsj_get_str(const json_t *obj, const char *where, const char *key,
		    int required, char *dst, size_t cap);
/* Array of 1..max elements (0 allowed if min0). *out borrowed or NULL. */
hexi_rc hsj_get_array(const json_t *obj, const char *where, const char *key,
		      int required, size_t max, int min0, json_t **out);
hexi_rc hsj_get_object(const json_t *obj, const char *where, const char *key,
		       int required, json_t **out);
/* Element checks (for arrays of numbers). */
hexi_rc hsj_as_int(const json_t *v, const char *path, long min, long max,
		   long *out);
/* A number in [min, max], or (min, max] with gt_min.  "> 0" (gt_min with
 * min 0: bandwidths, TFLOPS, memory, efficiencies) means at least
 * HSJ_POS_MIN: a subnormal 1e-315 is "> 0" too, and made the cost model's
 * times inf and NaN (a NaN pipeline time lost every comparison). */
#define HSJ_POS_MIN 1e-6
hexi_rc hsj_as_num(const json_t *v, const char *path, double min, int gt_min,
		   double max, double *out);

/* json_object_set_new with NULL checks (val is consumed). */
hexi_rc hsj_set(json_t *obj, const char *key, json_t *val);
/* json_array_append_new with NULL checks (val is consumed). */
hexi_rc hsj_append(json_t *arr, json_t *val);
/* Serialise; pretty = indented, else compact with sorted keys. */
hexi_rc hsj_dump(const json_t *j, int pretty, char **out);

/* FNV-1a 64-bit. */
uint64_t hsj_fnv1a64(const void *data, size_t len);

/* ---- internals shared by the format modules ------------------------------ */

/* Catalog: one entry as JSON, and merging entries from a JSON array. */
json_t *hexi__gpu_type_to_json(const hexi_gpu_type *t);
hexi_rc hexi__catalog_merge_array(hexi_catalog *cat, const json_t *arr,
				  const char *where);
/* fn(path, arg) for a file, or for each *.json file of a directory in name
 * order (hexiprof profiles). */
hexi_rc hexi__profile_paths(const char *path,
			    hexi_rc (*fn)(const char *, void *), void *arg);
hexi_rc hexi__catalog_clone(const hexi_catalog *cat, hexi_catalog **out);

/* Cluster object <-> struct (cat NULL = built-in catalog). */
hexi_rc hexi__cluster_from_json(const json_t *obj, const char *where,
				const hexi_catalog *cat, hexi_cluster **out);
json_t *hexi__cluster_to_json(const hexi_cluster *c);

/* Model / train objects <-> struct. */
hexi_rc hexi__model_from_json(const json_t *obj, const char *where,
			      hexi_model *out);
json_t *hexi__model_to_json(const hexi_model *m);
hexi_rc hexi__train_from_json(const json_t *obj, const char *where,
			      hexi_train *out);
json_t *hexi__train_to_json(const hexi_train *t);

#endif /* HEXI_JSON_UTIL_H */
