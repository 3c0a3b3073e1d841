/* cluster.c - cluster description (hexiscale-cluster(5)). */
#include "config.h"

#include "json_util.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_INTRA_LAT_S 1e-5
#define DEFAULT_INTER_LAT_S 1e-4
#define MAX_BW_GBPS	    1e5
#define MAX_LAT_S	    10.0
#define MAX_GPU_INDEX	    4095

void hexi_cluster_destroy(hexi_cluster *c)
{
	if (c == NULL)
		return;
	for (int i = 0; c->nodes != NULL && i < c->nnodes; i++)
		free(c->nodes[i].gpu_index);
	free(c->nodes);
	free(c->pair_bw_gbps);
	hexi_catalog_destroy(c->catalog);
	free(c);
}

hexi_rc hexi_cluster_create(int nnodes, const hexi_catalog *cat,
			    hexi_cluster **out)
{
	hexi_cluster *c = NULL;
	hexi_rc rv;

	*out = NULL;
	if (nnodes < 1 || nnodes > HEXI_MAX_NODES)
		return hexi_error(HEXI_ERR_RANGE,
				  "cluster: %d nodes is out of range 1..%d",
				  nnodes, HEXI_MAX_NODES);
	c = calloc(1, sizeof(*c));
	if (c == NULL ||
	    (c->nodes = calloc((size_t)nnodes, sizeof(hexi_node))) == NULL) {
		free(c);
		return hexi_error(HEXI_ERR_NOMEM, "cluster: out of memory");
	}
	c->nnodes = nnodes;
	c->intra_lat_s = DEFAULT_INTRA_LAT_S;
	c->inter_lat_s = DEFAULT_INTER_LAT_S;
	rv = hexi__catalog_clone(cat, &c->catalog);
	if (rv != HEXI_OK) {
		hexi_cluster_destroy(c);
		return rv;
	}
	*out = c;
	return HEXI_OK;
}

hexi_rc hexi_cluster_set_node(hexi_cluster *c, int i, const char *name,
			      const char *gpu_type, int ngpus,
			      const int *gpu_index, double intra_bw_gbps)
{
	const hexi_gpu_type *t;
	hexi_node *n;
	int *idx;

	if (c == NULL || i < 0 || i >= c->nnodes || name == NULL ||
	    gpu_type == NULL)
		return hexi_error(HEXI_ERR_INVAL, "cluster: bad node argument");
	if (hexi_strlcpy(c->nodes[i].name, name, HEXI_NAME_MAX) != HEXI_OK ||
	    !hexi_is_host_name(name))
		return hexi_error(HEXI_ERR_INVAL,
				  "nodes[%d].name: '%.80s' is not a host name "
				  "of 1..%d characters [A-Za-z0-9._-]",
				  i, name, HEXI_NAME_MAX - 1);
	t = hexi_catalog_find(c->catalog, gpu_type);
	if (t == NULL)
		return hexi_error(HEXI_ERR_NOTFOUND,
				  "nodes[%d].gpu: unknown GPU type '%.80s' "
				  "(see hexiscale-cluster(5) for the catalog)",
				  i, gpu_type);
	if (ngpus < 1 || ngpus > HEXI_MAX_GPUS_PER_NODE)
		return hexi_error(HEXI_ERR_RANGE,
				  "nodes[%d].count: %d is out of range 1..%d",
				  i, ngpus, HEXI_MAX_GPUS_PER_NODE);
	idx = malloc((size_t)ngpus * sizeof(int));
	if (idx == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "cluster: out of memory");
	for (int k = 0; k < ngpus; k++)
		idx[k] = gpu_index ? gpu_index[k] : k;
	n = &c->nodes[i];
	free(n->gpu_index);
	n->gpu_index = idx;
	n->ngpus = ngpus;
	hexi_strlcpy(n->gpu_type, t->name, HEXI_NAME_MAX);
	n->intra_bw_gbps = intra_bw_gbps > 0 ? intra_bw_gbps : t->intra_bw_gbps;
	return HEXI_OK;
}

const hexi_gpu_type *hexi_cluster_gpu(const hexi_cluster *c, int node)
{
	if (c == NULL || node < 0 || node >= c->nnodes)
		return NULL;
	return hexi_catalog_find(c->catalog, c->nodes[node].gpu_type);
}

int hexi_cluster_total_gpus(const hexi_cluster *c)
{
	long n = 0;

	for (int i = 0; c != NULL && i < c->nnodes; i++)
		n += c->nodes[i].ngpus;
	return n > HEXI_MAX_GPUS * 64L ? -1 : (int)n;
}

double hexi_cluster_bw(const hexi_cluster *c, int a, int b)
{
	if (c == NULL || a < 0 || b < 0 || a >= c->nnodes || b >= c->nnodes)
		return 0.0;
	if (a == b)
		return c->nodes[a].intra_bw_gbps;
	if (c->pair_bw_gbps != NULL)
		return c
		    ->pair_bw_gbps[(size_t)a * (size_t)c->nnodes + (size_t)b];
	return c->inter_bw_gbps;
}

static hexi_rc validate_node(const hexi_cluster *c, int i)
{
	const hexi_node *n = &c->nodes[i];

	if (!hexi_is_host_name(n->name))
		return hexi_error(HEXI_ERR_INVAL,
				  "nodes[%d].name: missing or "
				  "not a host name",
				  i);
	for (int k = 0; k < i; k++)
		if (strcmp(c->nodes[k].name, n->name) == 0)
			return hexi_error(HEXI_ERR_INVAL,
					  "nodes[%d].name: '%s' is also "
					  "nodes[%d]",
					  i, n->name, k);
	if (hexi_catalog_find(c->catalog, n->gpu_type) == NULL)
		return hexi_error(HEXI_ERR_NOTFOUND,
				  "nodes[%d].gpu: unknown GPU type '%s'", i,
				  n->gpu_type);
	if (n->ngpus < 1 || n->ngpus > HEXI_MAX_GPUS_PER_NODE ||
	    n->gpu_index == NULL)
		return hexi_error(HEXI_ERR_RANGE,
				  "nodes[%d].count: %d is out of range 1..%d",
				  i, n->ngpus, HEXI_MAX_GPUS_PER_NODE);
	for (int g = 0; g < n->ngpus; g++) {
		if (n->gpu_index[g] < 0 || n->gpu_index[g] > MAX_GPU_INDEX)
			return hexi_error(HEXI_ERR_RANGE,
					  "nodes[%d].gpus[%d]: %d is out of "
					  "range 0..%d",
					  i, g, n->gpu_index[g], MAX_GPU_INDEX);
		for (int h = 0; h < g; h++)
			if (n->gpu_index[h] == n->gpu_index[g])
				return hexi_error(HEXI_ERR_INVAL,
						  "nodes[%d].gpus[%d]: GPU %d "
						  "listed twice",
						  i, g, n->gpu_index[g]);
	}
	if (!(n->intra_bw_gbps > 0 && n->intra_bw_gbps <= MAX_BW_GBPS))
		return hexi_error(HEXI_ERR_RANGE,
				  "nodes[%d].intra_bw_gbps: %g must be > 0 and "
				  "<= %g",
				  i, n->intra_bw_gbps, MAX_BW_GBPS);
	return HEXI_OK;
}

static hexi_rc validate_links(const hexi_cluster *c)
{
	int n = c->nnodes;

	if (n > 1 && !(c->inter_bw_gbps > 0 && c->inter_bw_gbps <= MAX_BW_GBPS))
		return hexi_error(HEXI_ERR_RANGE,
				  "inter_bw_gbps: %g must be > 0 and <= %g",
				  c->inter_bw_gbps, MAX_BW_GBPS);
	if (!(c->intra_lat_s >= 0 && c->intra_lat_s <= MAX_LAT_S))
		return hexi_error(HEXI_ERR_RANGE,
				  "intra_lat_s: %g is out of range 0..%g",
				  c->intra_lat_s, MAX_LAT_S);
	if (!(c->inter_lat_s >= 0 && c->inter_lat_s <= MAX_LAT_S))
		return hexi_error(HEXI_ERR_RANGE,
				  "inter_lat_s: %g is out of range 0..%g",
				  c->inter_lat_s, MAX_LAT_S);
	for (int a = 0; c->pair_bw_gbps != NULL && a < n; a++)
		for (int b = 0; b < n; b++) {
			double v =
			    c->pair_bw_gbps[(size_t)a * (size_t)n + (size_t)b];
			if (a != b && !(v > 0 && v <= MAX_BW_GBPS))
				return hexi_error(HEXI_ERR_RANGE,
						  "inter_bw_gbps[%d][%d]: %g "
						  "must be > 0 and <= %g",
						  a, b, v, MAX_BW_GBPS);
		}
	return HEXI_OK;
}

hexi_rc hexi_cluster_validate(const hexi_cluster *c)
{
	long total = 0;
	hexi_rc rv;

	if (c == NULL || c->nodes == NULL || c->catalog == NULL)
		return hexi_error(HEXI_ERR_INVAL, "cluster: NULL or empty");
	if (c->nnodes < 1 || c->nnodes > HEXI_MAX_NODES)
		return hexi_error(HEXI_ERR_RANGE,
				  "nodes: %d nodes is out of range 1..%d",
				  c->nnodes, HEXI_MAX_NODES);
	for (int i = 0; i < c->nnodes; i++) {
		rv = validate_node(c, i);
		if (rv != HEXI_OK)
			return rv;
		total += c->nodes[i].ngpus;
	}
	if (total > HEXI_MAX_GPUS)
		return hexi_error(HEXI_ERR_RANGE,
				  "nodes: %ld GPUs in total exceeds the cap of "
				  "%d",
				  total, HEXI_MAX_GPUS);
	return validate_links(c);
}

/* ---- JSON --------------------------------------------------------------- */

static const char *const cluster_keys[] = {
    "format",	     "version",	    "gpu_types",   "nodes",
    "inter_bw_gbps", "inter_lat_s", "intra_lat_s", NULL};
static const char *const node_keys[] = {"name", "gpu",		 "count",
					"gpus", "intra_bw_gbps", NULL};

static hexi_rc node_indices(const json_t *nj, const char *w, long count,
			    int **idx, int *n)
{
	json_t *arr, *v;
	size_t i;
	hexi_rc rv = hsj_get_array(nj, w, "gpus", HSJ_OPTIONAL,
				   HEXI_MAX_GPUS_PER_NODE, 0, &arr);

	*idx = NULL;
	*n = (int)count;
	if (rv != HEXI_OK || arr == NULL) {
		if (rv == HEXI_OK && count < 1)
			rv = hexi_error(HEXI_ERR_PARSE,
					"%s: needs \"count\" or \"gpus\"", w);
		return rv;
	}
	if (count >= 1 && (size_t)count != json_array_size(arr))
		return hexi_error(HEXI_ERR_INVAL,
				  "%s.count: %ld does not match the %zu "
				  "entries of gpus",
				  w, count, json_array_size(arr));
	*idx = malloc(json_array_size(arr) * sizeof(int));
	if (*idx == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "cluster: out of memory");
	*n = (int)json_array_size(arr);
	json_array_foreach(arr, i, v)
	{
		char p[HSJ_PATH_MAX], q[HSJ_PATH_MAX];
		long x;
		hsj_path(q, sizeof(q), w, "gpus");
		hsj_index(p, sizeof(p), q, i);
		rv = hsj_as_int(v, p, 0, MAX_GPU_INDEX, &x);
		if (rv != HEXI_OK) {
			free(*idx);
			*idx = NULL;
			return rv;
		}
		(*idx)[i] = (int)x;
	}
	return HEXI_OK;
}

static hexi_rc parse_node(hexi_cluster *c, int i, const json_t *nj)
{
	char w[HSJ_PATH_MAX], name[HEXI_NAME_MAX], gpu[HEXI_NAME_MAX];
	double intra = -1;
	long count = 0;
	int *idx = NULL, n = 0;
	hexi_rc rv;

	hsj_index(w, sizeof(w), "nodes", (size_t)i);
	rv = hsj_check_keys(nj, w, node_keys);
	if (rv == HEXI_OK)
		rv = hsj_get_str(nj, w, "name", HSJ_REQUIRED, name,
				 sizeof(name));
	if (rv == HEXI_OK)
		rv = hsj_get_str(nj, w, "gpu", HSJ_REQUIRED, gpu, sizeof(gpu));
	if (rv == HEXI_OK)
		rv = hsj_get_int(nj, w, "count", HSJ_OPTIONAL, 1,
				 HEXI_MAX_GPUS_PER_NODE, &count);
	if (rv == HEXI_OK)
		rv = hsj_get_num(nj, w, "intra_bw_gbps", HSJ_OPTIONAL, 0, 1,
				 MAX_BW_GBPS, &intra);
	if (rv == HEXI_OK)
		rv = node_indices(nj, w, count, &idx, &n);
	if (rv == HEXI_OK)
		rv = hexi_cluster_set_node(c, i, name, gpu, n, idx, intra);
	free(idx);
	return rv;
}

static hexi_rc parse_matrix(hexi_cluster *c, const json_t *m)
{
	size_t n = (size_t)c->nnodes, i, j;
	json_t *row, *v;

	if (json_array_size(m) != n)
		return hexi_error(HEXI_ERR_INVAL,
				  "inter_bw_gbps: matrix has %zu rows, the "
				  "cluster %zu nodes",
				  json_array_size(m), n);
	c->pair_bw_gbps = calloc(n * n, sizeof(double));
	if (c->pair_bw_gbps == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "cluster: out of memory");
	c->inter_bw_gbps = INFINITY;
	json_array_foreach(m, i, row)
	{
		if (!json_is_array(row) || json_array_size(row) != n)
			return hexi_error(HEXI_ERR_PARSE,
					  "inter_bw_gbps[%zu]: must be an "
					  "array of %zu numbers",
					  i, n);
		json_array_foreach(row, j, v)
		{
			char p[HSJ_PATH_MAX];
			double *x = &c->pair_bw_gbps[i * n + j];
			hexi_rc rv;
			snprintf(p, sizeof(p), "inter_bw_gbps[%zu][%zu]", i, j);
			rv = hsj_as_num(v, p, 0, i != j, MAX_BW_GBPS, x);
			if (rv != HEXI_OK)
				return rv;
			if (i != j && *x < c->inter_bw_gbps)
				c->inter_bw_gbps = *x;
		}
	}
	if (n == 1)
		c->inter_bw_gbps = 0;
	return HEXI_OK;
}

static hexi_rc parse_links(hexi_cluster *c, const json_t *obj)
{
	json_t *bw = json_object_get(obj, "inter_bw_gbps");
	hexi_rc rv = HEXI_OK;

	if (bw != NULL && json_is_array(bw))
		rv = parse_matrix(c, bw);
	else if (bw != NULL)
		rv = hsj_get_num(obj, "", "inter_bw_gbps", HSJ_REQUIRED, 0, 1,
				 MAX_BW_GBPS, &c->inter_bw_gbps);
	else if (c->nnodes > 1)
		rv = hexi_error(HEXI_ERR_PARSE,
				"inter_bw_gbps: missing (needed with more than "
				"one node)");
	if (rv == HEXI_OK)
		rv = hsj_get_num(obj, "", "intra_lat_s", HSJ_OPTIONAL, 0, 0,
				 MAX_LAT_S, &c->intra_lat_s);
	if (rv == HEXI_OK)
		rv = hsj_get_num(obj, "", "inter_lat_s", HSJ_OPTIONAL, 0, 0,
				 MAX_LAT_S, &c->inter_lat_s);
	return rv;
}

/* Count the GPUs before allocating anything, so that 100k GPUs are refused
 * with a message about the cap rather than a node-level error. */
static hexi_rc precount(const json_t *nodes)
{
	long total = 0;
	json_t *nj, *v;
	size_t i;

	json_array_foreach(nodes, i, nj)
	{
		v = json_object_get(nj, "count");
		if (json_is_integer(v) && json_integer_value(v) > 0 &&
		    json_integer_value(v) <= HEXI_MAX_GPUS_PER_NODE)
			total += (long)json_integer_value(v);
		v = json_object_get(nj, "gpus");
		if (json_is_array(v) && json_object_get(nj, "count") == NULL)
			total += (long)json_array_size(v);
	}
	if (total > HEXI_MAX_GPUS)
		return hexi_error(HEXI_ERR_RANGE,
				  "nodes: %ld GPUs in total exceeds the cap of "
				  "%d",
				  total, HEXI_MAX_GPUS);
	return HEXI_OK;
}

hexi_rc hexi__cluster_from_json(const json_t *obj, const char *where,
				const hexi_catalog *cat, hexi_cluster **out)
{
	hexi_cluster *c = NULL;
	json_t *nodes = NULL, *types = NULL;
	hexi_rc rv;

	*out = NULL;
	rv = hsj_check_keys(obj, "", cluster_keys);
	if (rv == HEXI_OK)
		rv = hsj_check_format(obj, "", HEXI_CLUSTER_FORMAT,
				      HEXI_CLUSTER_VERSION, HSJ_OPTIONAL);
	if (rv == HEXI_OK)
		rv = hsj_get_array(obj, "", "nodes", HSJ_REQUIRED,
				   HEXI_MAX_NODES, 0, &nodes);
	if (rv == HEXI_OK)
		rv = precount(nodes);
	if (rv == HEXI_OK)
		rv = hsj_get_array(obj, "", "gpu_types", HSJ_OPTIONAL,
				   HEXI_MAX_GPU_TYPES, 1, &types);
	if (rv == HEXI_OK)
		rv = hexi_cluster_create((int)json_array_size(nodes), cat, &c);
	if (rv == HEXI_OK && types != NULL)
		rv = hexi__catalog_merge_array(c->catalog, types, "gpu_types");
	for (int i = 0; rv == HEXI_OK && i < c->nnodes; i++)
		rv = parse_node(c, i, json_array_get(nodes, (size_t)i));
	if (rv == HEXI_OK)
		rv = parse_links(c, obj);
	if (rv == HEXI_OK)
		rv = hexi_cluster_validate(c);
	if (rv != HEXI_OK) {
		hexi_cluster_destroy(c);
		return hexi_error_prefix(rv, "%s", where);
	}
	*out = c;
	return HEXI_OK;
}

hexi_rc hexi_cluster_parse(const char *json, size_t len,
			   const hexi_catalog *cat, hexi_cluster **out)
{
	json_t *j = NULL;
	hexi_rc rv;

	*out = NULL;
	rv = hsj_parse(json, len, "cluster", &j);
	if (rv == HEXI_OK)
		rv = hexi__cluster_from_json(j, "cluster", cat, out);
	json_decref(j);
	return rv;
}

hexi_rc hexi_cluster_load(const char *path, const hexi_catalog *cat,
			  hexi_cluster **out)
{
	json_t *j = NULL;
	hexi_rc rv;

	*out = NULL;
	rv = hsj_load(path, &j);
	if (rv == HEXI_OK)
		rv = hexi__cluster_from_json(j, path, cat, out);
	json_decref(j);
	return rv;
}

static json_t *node_to_json(const hexi_node *n)
{
	json_t *o = json_pack("{s:s,s:s}", "name", n->name, "gpu", n->gpu_type);
	int plain = 1;

	for (int g = 0; g < n->ngpus; g++)
		plain = plain && n->gpu_index[g] == g;
	if (plain) {
		if (hsj_set(o, "count", json_integer(n->ngpus)) != HEXI_OK) {
			json_decref(o);
			return NULL;
		}
	} else {
		json_t *a = json_array();
		for (int g = 0; g < n->ngpus; g++)
			if (hsj_append(a, json_integer(n->gpu_index[g])) !=
			    HEXI_OK)
				break;
		if (json_array_size(a) != (size_t)n->ngpus ||
		    hsj_set(o, "gpus", a) != HEXI_OK) {
			json_decref(o);
			return NULL;
		}
	}
	if (hsj_set(o, "intra_bw_gbps", json_real(n->intra_bw_gbps)) !=
	    HEXI_OK) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *types_to_json(const hexi_cluster *c)
{
	json_t *a = json_array();

	for (int i = 0; a != NULL && i < c->nnodes; i++) {
		int seen = 0;
		for (int k = 0; k < i && !seen; k++)
			seen = strcmp(c->nodes[k].gpu_type,
				      c->nodes[i].gpu_type) == 0;
		const hexi_gpu_type *t = hexi_cluster_gpu(c, i);
		if (t == NULL || (!seen && hsj_append(a, hexi__gpu_type_to_json(
							     t)) != HEXI_OK)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *links_to_json(const hexi_cluster *c)
{
	size_t n = (size_t)c->nnodes;
	json_t *m;

	if (c->pair_bw_gbps == NULL)
		return json_real(c->inter_bw_gbps);
	m = json_array();
	for (size_t a = 0; m != NULL && a < n; a++) {
		json_t *row = json_array();
		for (size_t b = 0; row != NULL && b < n; b++)
			if (hsj_append(
				row,
				json_real(a == b
					      ? 0.0
					      : c->pair_bw_gbps[a * n + b])) !=
			    HEXI_OK) {
				json_decref(row);
				row = NULL;
			}
		if (hsj_append(m, row) != HEXI_OK) {
			json_decref(m);
			m = NULL;
		}
	}
	return m;
}

json_t *hexi__cluster_to_json(const hexi_cluster *c)
{
	json_t *o = json_pack("{s:s,s:i}", "format", HEXI_CLUSTER_FORMAT,
			      "version", HEXI_CLUSTER_VERSION);
	json_t *nodes = json_array();
	hexi_rc rv = nodes ? HEXI_OK : HEXI_ERR_NOMEM;

	for (int i = 0; rv == HEXI_OK && i < c->nnodes; i++)
		rv = hsj_append(nodes, node_to_json(&c->nodes[i]));
	if (rv == HEXI_OK)
		rv = hsj_set(o, "gpu_types", types_to_json(c));
	if (rv == HEXI_OK) {
		rv = hsj_set(o, "nodes", nodes);
		nodes = NULL;
	}
	if (rv == HEXI_OK && (c->inter_bw_gbps > 0 || c->pair_bw_gbps != NULL))
		rv = hsj_set(o, "inter_bw_gbps", links_to_json(c));
	if (rv == HEXI_OK)
		rv = hsj_set(o, "intra_lat_s", json_real(c->intra_lat_s));
	if (rv == HEXI_OK)
		rv = hsj_set(o, "inter_lat_s", json_real(c->inter_lat_s));
	json_decref(nodes);
	if (rv != HEXI_OK) {
		json_decref(o);
		return NULL;
	}
	return o;
}

hexi_rc hexi_cluster_to_json(const hexi_cluster *c, char **out)
{
	json_t *j;
	hexi_rc rv;

	*out = NULL;
	rv = hexi_cluster_validate(c);
	if (rv != HEXI_OK)
		return rv;
	j = hexi__cluster_to_json(c);
	if (j == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "cluster: cannot build JSON");
	rv = hsj_dump(j, 1, out);
	json_decref(j);
	return rv;
}

hexi_rc hexi_cluster_clone(const hexi_cluster *c, hexi_cluster **out)
{
	hexi_cluster *d = NULL;
	hexi_rc rv;

	*out = NULL;
	if (c == NULL)
		return hexi_error(HEXI_ERR_INVAL, "cluster: NULL to clone");
	rv = hexi_cluster_create(c->nnodes, c->catalog, &d);
	for (int i = 0; rv == HEXI_OK && i < c->nnodes; i++) {
		const hexi_node *n = &c->nodes[i];
		d->nodes[i] = *n;
		d->nodes[i].gpu_index =
		    malloc((size_t)n->ngpus * sizeof(int) + 1);
		if (d->nodes[i].gpu_index == NULL)
			rv = hexi_error(HEXI_ERR_NOMEM,
					"cluster: out of memory");
		else if (n->ngpus > 0)
			memcpy(d->nodes[i].gpu_index, n->gpu_index,
			       (size_t)n->ngpus * sizeof(int));
	}
	if (rv == HEXI_OK && c->pair_bw_gbps != NULL) {
		size_t k = (size_t)c->nnodes * (size_t)c->nnodes;
		d->pair_bw_gbps = malloc(k * sizeof(double));
		if (d->pair_bw_gbps == NULL)
			rv = hexi_error(HEXI_ERR_NOMEM,
					"cluster: out of memory");
		else
			memcpy(d->pair_bw_gbps, c->pair_bw_gbps,
			       k * sizeof(double));
	}
	if (rv != HEXI_OK) {
		hexi_cluster_destroy(d);
		return rv;
	}
	d->inter_bw_gbps = c->inter_bw_gbps;
	d->inter_lat_s = c->inter_lat_s;
	d->intra_lat_s = c->intra_lat_s;
	*out = d;
	return HEXI_OK;
}

/* ---- profiles and synthetic clusters ------------------------------------ */

static const char *const cprof_keys[] = {"format", "version", "host", "gpus",
					 "cpu",	   "links",   NULL};
static const char *const cprof_link_keys[] = {
    "intra_bw_gbps", "intra_lat_s", "inter_bw_gbps", "inter_lat_s", NULL};

static hexi_rc cluster_prof_file(const char *path, void *arg)
{
	hexi_cluster *c = arg;
	char host[256] = "";
	double intra = -1, inter = -1, ilat = -1, elat = -1;
	json_t *j = NULL, *links = NULL;
	hexi_rc rv = hsj_load(path, &j);

	if (rv == HEXI_OK)
		rv = hsj_check_keys(j, "", cprof_keys);
	if (rv == HEXI_OK)
		rv = hsj_check_format(j, "", "hexiscale-profile", 1, 1);
	if (rv == HEXI_OK)
		rv = hsj_get_str(j, "", "host", 0, host, sizeof(host));
	if (rv == HEXI_OK)
		rv = hsj_get_object(j, "", "links", 0, &links);
	if (rv == HEXI_OK && links != NULL) {
		rv = hsj_check_keys(links, "links", cprof_link_keys);
		if (rv == HEXI_OK)
			rv = hsj_get_num(links, "links", "intra_bw_gbps", 0, 0,
					 1, MAX_BW_GBPS, &intra);
		if (rv == HEXI_OK)
			rv = hsj_get_num(links, "links", "inter_bw_gbps", 0, 0,
					 1, MAX_BW_GBPS, &inter);
		if (rv == HEXI_OK)
			rv = hsj_get_num(links, "links", "intra_lat_s", 0, 0, 0,
					 MAX_LAT_S, &ilat);
		if (rv == HEXI_OK)
			rv = hsj_get_num(links, "links", "inter_lat_s", 0, 0, 0,
					 MAX_LAT_S, &elat);
	}
	json_decref(j);
	if (rv != HEXI_OK)
		return hexi_error_prefix(rv, "%s", path);
	for (int i = 0; i < c->nnodes && intra > 0; i++)
		if (strcmp(c->nodes[i].name, host) == 0)
			c->nodes[i].intra_bw_gbps = intra;
	if (inter > 0 && c->nnodes > 1 && c->pair_bw_gbps == NULL &&
	    inter < c->inter_bw_gbps)
		c->inter_bw_gbps = inter;
	if (ilat > c->intra_lat_s)
		c->intra_lat_s = ilat;
	if (elat > c->inter_lat_s)
		c->inter_lat_s = elat;
	return HEXI_OK;
}

hexi_rc hexi_cluster_apply_profiles(hexi_cluster *c, const char *path)
{
	if (c == NULL || path == NULL)
		return hexi_error(HEXI_ERR_INVAL, "profiles: NULL argument");
	return hexi__profile_paths(path, cluster_prof_file, c);
}

hexi_rc hexi_cluster_synthetic(int ngpus, int gpus_per_node,
			       const char *const *types, int ntypes,
			       double inter_bw_gbps, hexi_cluster **out)
{
	hexi_cluster *c = NULL;
	int nnodes;
	hexi_rc rv;

	*out = NULL;
	if (ngpus < 1 || ngpus > HEXI_MAX_GPUS || gpus_per_node < 1 ||
	    gpus_per_node > HEXI_MAX_GPUS_PER_NODE || types == NULL ||
	    ntypes < 1 || !(inter_bw_gbps > 0))
		return hexi_error(HEXI_ERR_INVAL,
				  "synthetic cluster: bad arguments");
	nnodes = (ngpus + gpus_per_node - 1) / gpus_per_node;
	rv = hexi_cluster_create(nnodes, NULL, &c);
	for (int i = 0; rv == HEXI_OK && i < nnodes; i++) {
		char name[HEXI_NAME_MAX];
		int k = ngpus - i * gpus_per_node;
		snprintf(name, sizeof(name), "node%04d", i);
		rv = hexi_cluster_set_node(
		    c, i, name, types[i % ntypes],
		    k < gpus_per_node ? k : gpus_per_node, NULL, 0);
	}
	if (rv == HEXI_OK) {
		c->inter_bw_gbps = inter_bw_gbps;
		rv = hexi_cluster_validate(c);
	}
	if (rv != HEXI_OK) {
		hexi_cluster_destroy(c);
		return rv;
	}
	*out = c;
	return HEXI_OK;
}
