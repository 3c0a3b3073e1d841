/*
 * plan.c - the plan file (hexiscale-plan(5)): build, read, write, validate,
 * hash, clone, and the role of a rank.
 *
 * Content hash: FNV-1a 64 over the compact, key-sorted JSON (reals with 15
 * significant digits) of {format, version, world_size, model, train,
 * cluster, pipelines (without predictions)}.  Strategy, cost model, the
 * sync chunk list (derived) and the prediction are left out, so
 * re-simulating a plan does not change its identity.
 */
#include "config.h"

#include "json_util.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void hexi_plan_destroy(hexi_plan *p)
{
	if (p == NULL)
		return;
	for (int i = 0; p->pipelines != NULL && i < p->npipelines; i++) {
		hexi_pipeline *pl = &p->pipelines[i];
		for (int s = 0; pl->stages != NULL && s < pl->nstages; s++)
			free(pl->stages[s].devices);
		free(pl->stages);
	}
	free(p->pipelines);
	free(p->idle);
	hexi_cluster_destroy(p->cluster);
	free(p);
}

static hexi_rc plan_alloc(int npipelines, hexi_plan **out)
{
	hexi_plan *p;

	*out = NULL;
	if (npipelines < 1 || npipelines > HEXI_MAX_GPUS)
		return hexi_error(HEXI_ERR_RANGE,
				  "plan: %d pipelines is out of range 1..%d",
				  npipelines, HEXI_MAX_GPUS);
	p = calloc(1, sizeof(*p));
	if (p == NULL ||
	    (p->pipelines =
		 calloc((size_t)npipelines, sizeof(hexi_pipeline))) == NULL) {
		free(p);
		return hexi_error(HEXI_ERR_NOMEM, "plan: out of memory");
	}
	p->version = HEXI_PLAN_VERSION;
	p->npipelines = npipelines;
	*out = p;
	return HEXI_OK;
}

hexi_rc hexi_plan_new(const hexi_cluster *c, const hexi_model *m,
		      const hexi_train *t, int npipelines, hexi_plan **out)
{
	hexi_plan *p = NULL;
	hexi_rc rv;

	*out = NULL;
	if (c == NULL || m == NULL || t == NULL)
		return hexi_error(HEXI_ERR_INVAL, "plan: NULL argument");
	rv = plan_alloc(npipelines, &p);
	if (rv == HEXI_OK)
		rv = hexi_cluster_clone(c, &p->cluster);
	if (rv != HEXI_OK) {
		hexi_plan_destroy(p);
		return rv;
	}
	p->model = *m;
	p->train = *t;
	*out = p;
	return HEXI_OK;
}

static hexi_rc copy_pipeline(hexi_pipeline *d, const hexi_pipeline *s)
{
	*d = *s;
	d->stages = calloc((size_t)(s->nstages > 0 ? s->nstages : 1),
			   sizeof(hexi_stage));
	if (d->stages == NULL) {
		d->nstages = 0;
		return hexi_error(HEXI_ERR_NOMEM, "plan: out of memory");
	}
	for (int k = 0; k < s->nstages; k++) {
		const hexi_stage *ss = &s->stages[k];
		size_t n = (size_t)(ss->tp > 0 ? ss->tp : 0);
		d->stages[k] = *ss;
		d->stages[k].devices =
		    malloc((n ? n : 1) * sizeof(hexi_device));
		if (d->stages[k].devices == NULL) {
			d->nstages = k;
			return hexi_error(HEXI_ERR_NOMEM,
					  "plan: out of memory");
		}
		if (n > 0 && ss->devices != NULL)
			memcpy(d->stages[k].devices, ss->devices,
			       n * sizeof(hexi_device));
	}
	return HEXI_OK;
}

hexi_rc hexi_plan_clone(const hexi_plan *p, hexi_plan **out)
{
	hexi_plan *d = NULL;
	hexi_pipeline *pls;
	hexi_rc rv;

	*out = NULL;
	if (p == NULL || p->cluster == NULL)
		return hexi_error(HEXI_ERR_INVAL, "plan: NULL to clone");
	rv = hexi_plan_new(p->cluster, &p->model, &p->train, p->npipelines, &d);
	if (rv != HEXI_OK)
		return rv;
	pls = d->pipelines;
	{
		hexi_cluster *c = d->cluster;
		*d = *p;
		d->cluster = c;
		d->pipelines = pls;
		d->idle = NULL;
		d->nidle = 0;
	}
	memset(pls, 0, (size_t)p->npipelines * sizeof(*pls));
	for (int i = 0; rv == HEXI_OK && i < p->npipelines; i++)
		rv = copy_pipeline(&pls[i], &p->pipelines[i]);
	if (rv == HEXI_OK && p->nidle > 0) {
		d->idle = malloc((size_t)p->nidle * sizeof(hexi_device));
		if (d->idle == NULL)
			rv = hexi_error(HEXI_ERR_NOMEM, "plan: out of memory");
		else
			memcpy(d->idle, p->idle,
			       (size_t)p->nidle * sizeof(hexi_device));
		d->nidle = d->idle != NULL ? p->nidle : 0;
	}
	if (rv != HEXI_OK) {
		hexi_plan_destroy(d);
		return rv;
	}
	*out = d;
	return HEXI_OK;
}

/* ---- JSON: writing --------------------------------------------------------
 */

static json_t *device_json(const hexi_plan *p, const hexi_device *d)
{
	const char *node = d->node >= 0 && d->node < p->cluster->nnodes
			       ? p->cluster->nodes[d->node].name
			       : "?";

	return json_pack("{s:s,s:i,s:i}", "node", node, "gpu", d->gpu, "rank",
			 d->rank);
}

static json_t *stage_json(const hexi_plan *p, const hexi_stage *s)
{
	json_t *o = json_pack("{s:i,s:i,s:i}", "layer_begin", s->layer_begin,
			      "layer_end", s->layer_end, "tp", s->tp);
	json_t *devs = json_array();
	hexi_rc rv = HEXI_OK;

	for (int d = 0; rv == HEXI_OK && d < s->tp; d++)
		rv = hsj_append(devs, device_json(p, &s->devices[d]));
	if (rv == HEXI_OK)
		rv = hsj_set(o, "devices", devs);
	else
		json_decref(devs);
	if (rv != HEXI_OK) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *pipeline_json(const hexi_plan *p, const hexi_pipeline *pl)
{
	json_t *o = json_pack("{s:i,s:i}", "batch", pl->batch, "micro_batches",
			      pl->micro_batches);
	json_t *st = json_array();
	hexi_rc rv = o != NULL && st != NULL ? HEXI_OK : HEXI_ERR_NOMEM;

	/* written only when the pipeline overrides train.recompute, so plans
	 * without overrides keep their hash */
	if (rv == HEXI_OK && pl->recompute != HEXI_RECOMPUTE_INHERIT)
		rv = hsj_set(o, "recompute",
			     json_boolean(pl->recompute == HEXI_RECOMPUTE_ON));

	for (int s = 0; rv == HEXI_OK && s < pl->nstages; s++)
		rv = hsj_append(st, stage_json(p, &pl->stages[s]));
	if (rv == HEXI_OK)
		rv = hsj_set(o, "stages", st);
	else
		json_decref(st);
	if (rv != HEXI_OK) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The idle GPUs; written only when there are any, so plans that use
 * every GPU keep the hash they had before the key existed. */
static json_t *idle_json(const hexi_plan *p)
{
	json_t *a = json_array();
	hexi_rc rv = a != NULL ? HEXI_OK : HEXI_ERR_NOMEM;

	for (int i = 0; rv == HEXI_OK && i < p->nidle; i++)
		rv = hsj_append(a, device_json(p, &p->idle[i]));
	if (rv != HEXI_OK) {
		json_decref(a);
		return NULL;
	}
	return a;
}

/* world_size, model, train, cluster, pipelines (and idle): the hashed
 * content. */
static hexi_rc add_core(json_t *o, const hexi_plan *p)
{
	json_t *pls = json_array();
	hexi_rc rv = HEXI_OK;

	for (int i = 0; rv == HEXI_OK && i < p->npipelines; i++)
		rv = hsj_append(pls, pipeline_json(p, &p->pipelines[i]));
	if (rv != HEXI_OK) {
		json_decref(pls);
		return rv;
	}
	rv = hsj_set(o, "world_size", json_integer(p->world_size));
	if (rv == HEXI_OK)
		rv = hsj_set(o, "model", hexi__model_to_json(&p->model));
	if (rv == HEXI_OK)
		rv = hsj_set(o, "train", hexi__train_to_json(&p->train));
	if (rv == HEXI_OK)
		rv = hsj_set(o, "cluster", hexi__cluster_to_json(p->cluster));
	if (rv == HEXI_OK && p->nidle > 0)
		rv = hsj_set(o, "idle", idle_json(p));
	if (rv == HEXI_OK)
		return hsj_set(o, "pipelines", pls);
	json_decref(pls);
	return rv;
}

static hexi_rc compute_hash(const hexi_plan *p, char hex[HEXI_HASH_HEX])
{
	json_t *o = json_pack("{s:s,s:i}", "format", HEXI_PLAN_FORMAT,
			      "version", p->version);
	char *text = NULL;
	hexi_rc rv = o ? add_core(o, p) : HEXI_ERR_NOMEM;

	if (rv == HEXI_OK)
		rv = hsj_dump(o, 0, &text);
	if (rv == HEXI_OK)
		snprintf(hex, HEXI_HASH_HEX, "%016" PRIx64,
			 hsj_fnv1a64(text, strlen(text)));
	free(text);
	json_decref(o);
	if (rv != HEXI_OK)
		return hexi_error(rv, "plan: cannot compute the hash");
	return HEXI_OK;
}

hexi_rc hexi_plan_hash(hexi_plan *p)
{
	if (p == NULL || p->cluster == NULL)
		return hexi_error(HEXI_ERR_INVAL, "plan: NULL");
	return compute_hash(p, p->hash);
}

static json_t *int_array(const int *v, int n)
{
	json_t *a = json_array();

	for (int i = 0; a != NULL && i < n; i++)
		if (hsj_append(a, json_integer(v[i])) != HEXI_OK) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *sync_json(const hexi_plan *p)
{
	hexi_layout *l = NULL;
	json_t *a = NULL;

	if (hexi_layout_create(p, &l) != HEXI_OK)
		return NULL;
	a = json_array();
	for (int i = 0; a != NULL && i < l->nchunks; i++) {
		const hexi_chunk *c = &l->chunks[i];
		json_t *o = json_pack("{s:s,s:[i,i],s:o}", "tensor",
				      l->tensors[c->tensor].name, "rows",
				      c->row_begin, c->row_end, "ranks",
				      int_array(c->ranks, c->nranks));
		if (hsj_append(a, o) != HEXI_OK) {
			json_decref(a);
			a = NULL;
		}
	}
	hexi_layout_destroy(l);
	return a;
}

static json_t *pred_json(const hexi_plan *p)
{
	json_t *o = json_pack("{s:f,s:f,s:f,s:f}", "iter_s", p->pred.iter_s,
			      "dp_sync_s", p->pred.dp_sync_s, "tokens_per_s",
			      p->pred.tokens_per_s, "mfu", p->pred.mfu);
	json_t *pt = json_array(), *st = json_array(), *sm = json_array();
	hexi_rc rv = HEXI_OK;

	for (int i = 0; rv == HEXI_OK && i < p->npipelines; i++) {
		const hexi_pipeline *pl = &p->pipelines[i];
		json_t *t = json_array(), *m = json_array();
		rv = hsj_append(pt, json_real(pl->time_s));
		for (int s = 0; rv == HEXI_OK && s < pl->nstages; s++) {
			rv = hsj_append(t, json_real(pl->stages[s].time_s));
			if (rv == HEXI_OK)
				rv = hsj_append(
				    m, json_real(pl->stages[s].mem_gib));
		}
		if (rv == HEXI_OK)
			rv = hsj_append(st, t);
		else
			json_decref(t);
		if (rv == HEXI_OK)
			rv = hsj_append(sm, m);
		else
			json_decref(m);
	}
	if (rv == HEXI_OK && hsj_set(o, "pipeline_time_s", pt) == HEXI_OK &&
	    hsj_set(o, "stage_time_s", st) == HEXI_OK &&
	    hsj_set(o, "stage_mem_gib", sm) == HEXI_OK)
		return o;
	json_decref(o); /* hsj_set consumed what it was given */
	return NULL;
}

static const char *const stop_names[] = {"done", "work", "time"};

/* How the planner got the plan; like the prediction, not hashed. */
static json_t *search_json(const hexi_search *s)
{
	int k = s->stop >= 0 && s->stop <= HEXI_SEARCH_TIME ? s->stop : 0;

	return json_pack("{s:I,s:I,s:f,s:s}", "evaluations",
			 (json_int_t)s->evaluations, "max_evals",
			 (json_int_t)s->max_evals, "time_budget_s",
			 s->time_budget_s, "stopped_by", stop_names[k]);
}

static hexi_rc parse_search(const json_t *j, hexi_plan *p)
{
	static const char *const keys[] = {"evaluations", "max_evals",
					   "time_budget_s", "stopped_by", NULL};
	const char *w = "search";
	char by[16] = "done";
	long ev = 0, mx = 0;
	json_t *o = NULL;
	hexi_rc rv = hsj_get_object(j, "", w, 0, &o);

	if (rv != HEXI_OK || o == NULL)
		return rv;
	rv = hsj_check_keys(o, w, keys);
	if (rv == HEXI_OK)
		rv = hsj_get_int(o, w, "evaluations", 0, 0, 1L << 40, &ev);
	if (rv == HEXI_OK)
		rv = hsj_get_int(o, w, "max_evals", 0, 0, 1L << 40, &mx);
	if (rv == HEXI_OK)
		rv = hsj_get_num(o, w, "time_budget_s", 0, 0, 0, 1e9,
				 &p->search.time_budget_s);
	if (rv == HEXI_OK)
		rv = hsj_get_str(o, w, "stopped_by", 0, by, sizeof(by));
	p->search.evaluations = ev;
	p->search.max_evals = mx;
	for (int k = 0; rv == HEXI_OK && k <= HEXI_SEARCH_TIME; k++)
		if (strcmp(by, stop_names[k]) == 0) {
			p->search.stop = k;
			return HEXI_OK;
		}
	if (rv == HEXI_OK)
		rv = hexi_error(HEXI_ERR_PARSE,
				"search.stopped_by: '%s' is not done, work "
				"or time",
				by);
	return rv;
}

hexi_rc hexi_plan_to_json(const hexi_plan *p, char **out)
{
	char hex[HEXI_HASH_HEX];
	json_t *o = NULL;
	hexi_rc rv;

	*out = NULL;
	rv = hexi_plan_validate(p);
	if (rv == HEXI_OK)
		rv = compute_hash(p, hex);
	if (rv != HEXI_OK)
		return rv;
	o = json_pack("{s:s,s:i,s:s}", "format", HEXI_PLAN_FORMAT, "version",
		      p->version, "hash", hex);
	rv = o ? HEXI_OK : hexi_error(HEXI_ERR_NOMEM, "plan: out of memory");
	if (rv == HEXI_OK && p->strategy[0] != '\0')
		rv = hsj_set(o, "strategy", json_string(p->strategy));
	if (rv == HEXI_OK && p->cost_model[0] != '\0')
		rv = hsj_set(o, "cost_model", json_string(p->cost_model));
	if (rv == HEXI_OK)
		rv = add_core(o, p);
	if (rv == HEXI_OK)
		rv = hsj_set(o, "sync", sync_json(p));
	if (rv == HEXI_OK && p->pred.iter_s > 0)
		rv = hsj_set(o, "prediction", pred_json(p));
	if (rv == HEXI_OK && p->search.evaluations > 0)
		rv = hsj_set(o, "search", search_json(&p->search));
	if (rv == HEXI_OK)
		rv = hsj_dump(o, 1, out);
	json_decref(o);
	return rv;
}

/* ---- JSON: reading --------------------------------------------------------
 */

static const char *const plan_keys[] = {
    "format",	  "version",	"hash",	 "strategy", "cost_model",
    "world_size", "model",	"train", "cluster",  "pipelines",
    "sync",	  "prediction", "idle", "search", NULL};
static const char *const pipeline_keys[] = {"batch", "micro_batches",
					    "recompute", "stages", NULL};
static const char *const stage_keys[] = {"layer_begin", "layer_end", "tp",
					 "devices", NULL};
static const char *const device_keys[] = {"node", "gpu", "rank", NULL};
static const char *const pred_keys[] = {
    "iter_s",	       "dp_sync_s",    "tokens_per_s",	"mfu",
    "pipeline_time_s", "stage_time_s", "stage_mem_gib", NULL};

static hexi_rc parse_device(const hexi_cluster *c, const json_t *j,
			    const char *w, hexi_device *d)
{
	char node[HEXI_NAME_MAX];
	long gpu = 0, rank = 0;
	hexi_rc rv;

	rv = hsj_check_keys(j, w, device_keys);
	if (rv == HEXI_OK)
		rv =
		    hsj_get_str(j, w, "node", HSJ_REQUIRED, node, sizeof(node));
	if (rv == HEXI_OK)
		rv = hsj_get_int(j, w, "gpu", HSJ_REQUIRED, 0, 4095, &gpu);
	if (rv == HEXI_OK)
		rv = hsj_get_int(j, w, "rank", HSJ_REQUIRED, 0,
				 HEXI_MAX_GPUS - 1, &rank);
	if (rv != HEXI_OK)
		return rv;
	d->gpu = (int)gpu;
	d->rank = (int)rank;
	for (d->node = 0; d->node < c->nnodes; d->node++)
		if (strcmp(c->nodes[d->node].name, node) == 0)
			return HEXI_OK;
	return hexi_error(HEXI_ERR_INVAL,
			  "%s.node: '%s' is not a node of the "
			  "plan's cluster",
			  w, node);
}

static hexi_rc parse_stage(const hexi_cluster *c, const json_t *j,
			   const char *w, hexi_stage *s)
{
	long b = 0, e = 0, tp = 0;
	json_t *devs, *dj;
	size_t i;
	hexi_rc rv;

	rv = hsj_check_keys(j, w, stage_keys);
	if (rv == HEXI_OK)
		rv =
		    hsj_get_int(j, w, "layer_begin", 1, 0, HEXI_MAX_LAYERS, &b);
	if (rv == HEXI_OK)
		rv = hsj_get_int(j, w, "layer_end", 1, 1, HEXI_MAX_LAYERS, &e);
	if (rv == HEXI_OK)
		rv = hsj_get_int(j, w, "tp", 1, 1, HEXI_MAX_GPUS_PER_NODE, &tp);
	if (rv == HEXI_OK)
		rv = hsj_get_array(j, w, "devices", 1, HEXI_MAX_GPUS_PER_NODE,
				   0, &devs);
	if (rv == HEXI_OK && json_array_size(devs) != (size_t)tp)
		rv = hexi_error(HEXI_ERR_INVAL,
				"%s.devices: %zu devices for tp %ld", w,
				json_array_size(devs), tp);
	if (rv != HEXI_OK)
		return rv;
	s->layer_begin = (int)b;
	s->layer_end = (int)e;
	s->devices = calloc((size_t)tp, sizeof(hexi_device));
	if (s->devices == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "plan: out of memory");
	s->tp = (int)tp;
	json_array_foreach(devs, i, dj)
	{
		char p[HSJ_PATH_MAX], q[HSJ_PATH_MAX];
		hsj_path(q, sizeof(q), w, "devices");
		hsj_index(p, sizeof(p), q, i);
		rv = parse_device(c, dj, p, &s->devices[i]);
		if (rv != HEXI_OK)
			return rv;
	}
	return HEXI_OK;
}

static hexi_rc parse_pipeline(const hexi_cluster *c, const json_t *j,
			      const char *w, hexi_pipeline *pl)
{
	long batch = 0, mb = 0;
	int rc = -1;
	json_t *stages, *sj;
	size_t i;
	hexi_rc rv;

	rv = hsj_check_keys(j, w, pipeline_keys);
	if (rv == HEXI_OK)
		rv = hsj_get_int(j, w, "batch", 1, 1, 1 << 24, &batch);
	if (rv == HEXI_OK)
		rv = hsj_get_int(j, w, "micro_batches", 1, 1, 1 << 24, &mb);
	if (rv == HEXI_OK)
		rv = hsj_get_bool(j, w, "recompute", HSJ_OPTIONAL, &rc);
	if (rv == HEXI_OK)
		rv = hsj_get_array(j, w, "stages", 1, HEXI_MAX_LAYERS, 0,
				   &stages);
	if (rv != HEXI_OK)
		return rv;
	pl->batch = (int)batch;
	pl->micro_batches = (int)mb;
	pl->recompute = rc < 0	 ? HEXI_RECOMPUTE_INHERIT
			: rc > 0 ? HEXI_RECOMPUTE_ON
				 : HEXI_RECOMPUTE_OFF;
	pl->stages = calloc(json_array_size(stages), sizeof(hexi_stage));
	if (pl->stages == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "plan: out of memory");
	json_array_foreach(stages, i, sj)
	{
		char p[HSJ_PATH_MAX], q[HSJ_PATH_MAX];
		hsj_path(q, sizeof(q), w, "stages");
		hsj_index(p, sizeof(p), q, i);
		pl->nstages = (int)i + 1;
		rv = parse_stage(c, sj, p, &pl->stages[i]);
		if (rv != HEXI_OK)
			return rv;
	}
	return HEXI_OK;
}

/* An array of n numbers (or of arrays, when inner >= 0: n arrays of the
 * stage counts) into the plan's prediction fields. */
static hexi_rc pred_array(const json_t *o, const char *key, hexi_plan *p,
			  int which)
{
	json_t *a, *row;
	size_t i;
	hexi_rc rv =
	    hsj_get_array(o, "prediction", key, 0, HEXI_MAX_GPUS, 0, &a);

	if (rv != HEXI_OK || a == NULL)
		return rv;
	if (json_array_size(a) != (size_t)p->npipelines)
		return hexi_error(HEXI_ERR_INVAL,
				  "prediction.%s: %zu entries "
				  "for %d pipelines",
				  key, json_array_size(a), p->npipelines);
	json_array_foreach(a, i, row)
	{
		hexi_pipeline *pl = &p->pipelines[i];
		char w[HSJ_PATH_MAX];
		snprintf(w, sizeof(w), "prediction.%s[%zu]", key, i);
		if (which == 0) {
			rv = hsj_as_num(row, w, 0, 0, 1e15, &pl->time_s);
		} else if (!json_is_array(row) ||
			   json_array_size(row) != (size_t)pl->nstages) {
			rv = hexi_error(HEXI_ERR_INVAL,
					"%s: must be an array "
					"of %d numbers",
					w, pl->nstages);
		} else {
			for (int s = 0; rv == HEXI_OK && s < pl->nstages; s++) {
				char q[HSJ_PATH_MAX + 16];
				snprintf(q, sizeof(q), "%s[%d]", w, s);
				rv = hsj_as_num(json_array_get(row, (size_t)s),
						q, 0, 0, 1e15,
						which == 1
						    ? &pl->stages[s].time_s
						    : &pl->stages[s].mem_gib);
			}
		}
		if (rv != HEXI_OK)
			return rv;
	}
	return HEXI_OK;
}

static hexi_rc parse_prediction(const json_t *j, hexi_plan *p)
{
	const char *w = "prediction";
	json_t *o;
	hexi_rc rv = hsj_get_object(j, "", w, 0, &o);

	if (rv != HEXI_OK || o == NULL)
		return rv;
	rv = hsj_check_keys(o, w, pred_keys);
	if (rv == HEXI_OK)
		rv =
		    hsj_get_num(o, w, "iter_s", 0, 0, 0, 1e15, &p->pred.iter_s);
	if (rv == HEXI_OK)
		rv = hsj_get_num(o, w, "dp_sync_s", 0, 0, 0, 1e15,
				 &p->pred.dp_sync_s);
	if (rv == HEXI_OK)
		rv = hsj_get_num(o, w, "tokens_per_s", 0, 0, 0, 1e15,
				 &p->pred.tokens_per_s);
	if (rv == HEXI_OK)
		rv = hsj_get_num(o, w, "mfu", 0, 0, 0, 100, &p->pred.mfu);
	if (rv == HEXI_OK)
		rv = pred_array(o, "pipeline_time_s", p, 0);
	if (rv == HEXI_OK)
		rv = pred_array(o, "stage_time_s", p, 1);
	if (rv == HEXI_OK)
		rv = pred_array(o, "stage_mem_gib", p, 2);
	return rv;
}

static hexi_rc parse_idle(const json_t *j, hexi_plan *p)
{
	json_t *a = NULL, *dj;
	size_t i;
	hexi_rc rv = hsj_get_array(j, "", "idle", 0, HEXI_MAX_GPUS, 0, &a);

	if (rv != HEXI_OK || a == NULL || json_array_size(a) == 0)
		return rv;
	p->idle = calloc(json_array_size(a), sizeof(hexi_device));
	if (p->idle == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "plan: out of memory");
	json_array_foreach(a, i, dj)
	{
		char w[HSJ_PATH_MAX];
		hsj_index(w, sizeof(w), "idle", i);
		rv = parse_device(p->cluster, dj, w, &p->idle[i]);
		if (rv != HEXI_OK)
			return rv;
		p->nidle = (int)i + 1;
	}
	return HEXI_OK;
}

static hexi_rc parse_head(const json_t *j, hexi_plan *p, char *hash)
{
	json_t *sync;
	long ws = -1;
	hexi_rc rv;

	rv = hsj_check_keys(j, "", plan_keys);
	if (rv == HEXI_OK)
		rv = hsj_check_format(j, "", HEXI_PLAN_FORMAT,
				      HEXI_PLAN_VERSION, HSJ_REQUIRED);
	if (rv == HEXI_OK)
		rv = hsj_get_str(j, "", "hash", 0, hash, HEXI_HASH_HEX);
	if (rv == HEXI_OK && hash[0] != '\0' &&
	    (strlen(hash) != 16 || strspn(hash, "0123456789abcdef") != 16))
		rv = hexi_error(HEXI_ERR_PARSE,
				"hash: '%s' is not 16 lower-case hex digits",
				hash);
	if (rv == HEXI_OK)
		rv = hsj_get_str(j, "", "strategy", 0, p->strategy,
				 sizeof(p->strategy));
	if (rv == HEXI_OK)
		rv = hsj_get_str(j, "", "cost_model", 0, p->cost_model,
				 sizeof(p->cost_model));
	if (rv == HEXI_OK)
		rv = hsj_get_int(j, "", "world_size", 0, 1, HEXI_MAX_GPUS, &ws);
	if (rv == HEXI_OK)
		rv = hsj_get_array(j, "", "sync", 0, (size_t)-1, 1, &sync);
	p->world_size = (int)ws;
	return rv;
}

static hexi_rc plan_from_json(const json_t *j, const hexi_catalog *cat,
			      hexi_plan **out)
{
	char hash[HEXI_HASH_HEX] = "";
	hexi_plan tmp, *p = NULL;
	json_t *pls = NULL, *o, *pj;
	size_t i;
	hexi_rc rv;

	memset(&tmp, 0, sizeof(tmp));
	rv = parse_head(j, &tmp, hash);
	if (rv == HEXI_OK)
		rv = hsj_get_array(j, "", "pipelines", 1, HEXI_MAX_GPUS, 0,
				   &pls);
	if (rv == HEXI_OK)
		rv = plan_alloc((int)json_array_size(pls), &p);
	if (rv != HEXI_OK)
		return rv;
	memcpy(p->strategy, tmp.strategy, sizeof(p->strategy));
	memcpy(p->cost_model, tmp.cost_model, sizeof(p->cost_model));
	rv = hsj_get_object(j, "", "model", 1, &o);
	if (rv == HEXI_OK)
		rv = hexi__model_from_json(o, "model", &p->model);
	if (rv == HEXI_OK)
		rv = hsj_get_object(j, "", "train", 1, &o);
	if (rv == HEXI_OK)
		rv = hexi__train_from_json(o, "train", &p->train);
	if (rv == HEXI_OK)
		rv = hsj_get_object(j, "", "cluster", 1, &o);
	if (rv == HEXI_OK)
		rv = hexi__cluster_from_json(o, "cluster", cat, &p->cluster);
	json_array_foreach(pls, i, pj)
	{
		char w[HSJ_PATH_MAX];
		if (rv != HEXI_OK)
			break;
		hsj_index(w, sizeof(w), "pipelines", i);
		rv = parse_pipeline(p->cluster, pj, w, &p->pipelines[i]);
	}
	if (rv == HEXI_OK)
		rv = parse_idle(j, p);
	if (rv == HEXI_OK)
		rv = parse_search(j, p);
	if (rv == HEXI_OK)
		rv = parse_prediction(j, p);
	if (rv == HEXI_OK) {
		p->world_size = tmp.world_size > 0 ? tmp.world_size : 0;
		if (p->world_size == 0)
			for (int k = 0; k < p->npipelines; k++)
				for (int s = 0; s < p->pipelines[k].nstages;
				     s++)
					p->world_size +=
					    p->pipelines[k].stages[s].tp;
		rv = hexi_plan_validate(p);
	}
	if (rv == HEXI_OK)
		rv = hexi_plan_hash(p);
	if (rv == HEXI_OK && hash[0] != '\0' && strcmp(hash, p->hash) != 0)
		rv = hexi_error(HEXI_ERR_CHECKSUM,
				"hash: file says %s, content hashes to %s (the "
				"plan was edited; remove \"hash\" to accept "
				"the edit)",
				hash, p->hash);
	if (rv != HEXI_OK) {
		hexi_plan_destroy(p);
		return rv;
	}
	*out = p;
	return HEXI_OK;
}

hexi_rc hexi_plan_parse(const char *json, size_t len, const hexi_catalog *cat,
			hexi_plan **out)
{
	json_t *j = NULL;
	hexi_rc rv;

	*out = NULL;
	rv = hsj_parse(json, len, "plan", &j);
	if (rv == HEXI_OK) {
		rv = plan_from_json(j, cat, out);
		if (rv != HEXI_OK)
			hexi_error_prefix(rv, "plan");
	}
	json_decref(j);
	return rv;
}

hexi_rc hexi_plan_load(const char *path, const hexi_catalog *cat,
		       hexi_plan **out)
{
	json_t *j = NULL;
	hexi_rc rv;

	*out = NULL;
	rv = hsj_load(path, &j);
	if (rv == HEXI_OK) {
		rv = plan_from_json(j, cat, out);
		if (rv != HEXI_OK)
			hexi_error_prefix(rv, "%s", path);
	}
	json_decref(j);
	return rv;
}

/* ---- roles ----------------------------------------------------------------
 */

hexi_rc hexi_plan_find_rank(const hexi_plan *p, int rank, int *pipeline,
			    int *stage, int *tp_rank)
{
	for (int i = 0; p != NULL && i < p->npipelines; i++)
		for (int s = 0; s < p->pipelines[i].nstages; s++) {
			const hexi_stage *st = &p->pipelines[i].stages[s];
			for (int d = 0; d < st->tp; d++)
				if (st->devices[d].rank == rank) {
					*pipeline = i;
					*stage = s;
					*tp_rank = d;
					return HEXI_OK;
				}
		}
	return hexi_error(HEXI_ERR_NOTFOUND, "plan: rank %d is not in the plan",
			  rank);
}

int hexi_plan_recompute(const hexi_plan *p, int pi)
{
	int mode = p->pipelines[pi].recompute;

	if (mode == HEXI_RECOMPUTE_ON)
		return 1;
	if (mode == HEXI_RECOMPUTE_OFF)
		return 0;
	return p->train.recompute != 0;
}

int hexi_plan_find_idle(const hexi_plan *p, int rank)
{
	for (int i = 0; p != NULL && i < p->nidle; i++)
		if (p->idle[i].rank == rank)
			return i;
	return -1;
}

/* Local rank and size of (node, rank) over every task of the node: the
 * stages' devices and the idle GPUs, ordered by rank. */
static void local_counts(const hexi_plan *p, int node, int rank,
			 hexi_role *out)
{
	out->local_rank = 0;
	out->local_world_size = 0;
	for (int i = 0; i < p->npipelines; i++)
		for (int s = 0; s < p->pipelines[i].nstages; s++) {
			const hexi_stage *x = &p->pipelines[i].stages[s];
			for (int d = 0; d < x->tp; d++) {
				if (x->devices[d].node != node)
					continue;
				out->local_world_size++;
				out->local_rank += x->devices[d].rank < rank;
			}
		}
	for (int i = 0; i < p->nidle; i++)
		if (p->idle[i].node == node) {
			out->local_world_size++;
			out->local_rank += p->idle[i].rank < rank;
		}
}

static hexi_rc idle_role(const hexi_plan *p, int k, hexi_role *out)
{
	const hexi_device *d = &p->idle[k];

	*out = (hexi_role){.rank = d->rank,
			   .world_size = p->world_size,
			   .pipeline = -1,
			   .stage = -1,
			   .tp_rank = -1,
			   .node = d->node,
			   .gpu = d->gpu,
			   .zero = p->train.zero,
			   .idle = 1};
	local_counts(p, d->node, d->rank, out);
	return HEXI_OK;
}

hexi_rc hexi_plan_role(const hexi_plan *p, int rank, hexi_role *out)
{
	int pi, si, ti, node, k;
	const hexi_pipeline *pl;
	const hexi_stage *st;
	hexi_rc rv;

	if (p == NULL || out == NULL)
		return hexi_error(HEXI_ERR_INVAL, "plan: NULL");
	k = hexi_plan_find_idle(p, rank);
	if (k >= 0)
		return idle_role(p, k, out);
	rv = hexi_plan_find_rank(p, rank, &pi, &si, &ti);
	if (rv != HEXI_OK)
		return rv;
	pl = &p->pipelines[pi];
	st = &pl->stages[si];
	node = st->devices[ti].node;
	memset(out, 0, sizeof(*out));
	*out = (hexi_role){.rank = rank,
			   .world_size = p->world_size,
			   .pipeline = pi,
			   .stage = si,
			   .nstages = pl->nstages,
			   .tp_rank = ti,
			   .tp_size = st->tp,
			   .layer_begin = st->layer_begin,
			   .layer_end = st->layer_end,
			   .batch = pl->batch,
			   .micro_batches = pl->micro_batches,
			   .micro_batch_size = pl->batch / pl->micro_batches,
			   .node = node,
			   .gpu = st->devices[ti].gpu,
			   .recompute = hexi_plan_recompute(p, pi),
			   .zero = p->train.zero};
	local_counts(p, node, rank, out);
	return HEXI_OK;
}
