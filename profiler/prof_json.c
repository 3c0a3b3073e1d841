/*
 * prof_json.c - the profile file (format "hexiscale-profile", version 1) and
 * hexiprof's --json report.  Numbers that were not measured (NAN) are left
 * out; objects that would be empty are left out too.
 */
#include "config.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_prof.h"

hexi_rc hexi_profile_init(hexi_profile *p, const char *host)
{
	memset(p, 0, sizeof(*p));
	p->cpu_gemm_gflops = NAN;
	p->cpu_mem_bw_gbps = NAN;
	p->intra_bw_gbps = p->intra_lat_s = NAN;
	p->inter_bw_gbps = p->inter_lat_s = NAN;
	if (host == NULL || host[0] == '\0' || !hexi_is_printable(host))
		return hexi_error(
		    HEXI_ERR_INVAL,
		    "profile: host name missing or not printable");
	if (hexi_strlcpy(p->host, host, sizeof(p->host)) != HEXI_OK)
		return hexi_error(
		    HEXI_ERR_RANGE,
		    "profile: host name '%.40s...' longer than %d", host,
		    HEXI_PROF_NAME_MAX - 1);
	return HEXI_OK;
}

void hexi_prof_gpu_init(hexi_prof_gpu *g, int index)
{
	memset(g, 0, sizeof(*g));
	g->index = index;
	g->gemm_tflops_bf16 = g->gemm_tflops_fp16 = g->gemm_tflops_fp32 = NAN;
	g->mem_bw_gbps = g->h2d_gbps = g->d2h_gbps = NAN;
}

/* Set key to a real if it is finite; 0 on success. */
static int set_num(json_t *o, const char *key, double v)
{
	if (!isfinite(v))
		return 0;
	return json_object_set_new(o, key, json_real(v));
}

/* Attach child under key unless it is empty (then it is freed). */
static int set_obj(json_t *o, const char *key, json_t *child)
{
	if (child == NULL)
		return -1;
	if (json_object_size(child) == 0) {
		json_decref(child);
		return 0;
	}
	return json_object_set_new(o, key, child);
}

static json_t *gpu_json(const hexi_prof_gpu *g)
{
	json_t *o = json_object(), *t = json_object();
	int e = 0;

	if (o == NULL || t == NULL) {
		json_decref(o);
		json_decref(t);
		return NULL;
	}
	if (g->type[0])
		e |= json_object_set_new(o, "type", json_string(g->type));
	e |= json_object_set_new(o, "index", json_integer(g->index));
	if (g->name[0])
		e |= json_object_set_new(o, "name", json_string(g->name));
	e |= set_num(t, "bf16", g->gemm_tflops_bf16);
	e |= set_num(t, "fp16", g->gemm_tflops_fp16);
	e |= set_num(t, "fp32", g->gemm_tflops_fp32);
	e |= set_obj(o, "gemm_tflops", t);
	e |= set_num(o, "mem_bw_gbps", g->mem_bw_gbps);
	e |= set_num(o, "h2d_gbps", g->h2d_gbps);
	e |= set_num(o, "d2h_gbps", g->d2h_gbps);
	if (e) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *profile_json(const hexi_profile *p)
{
	json_t *o = json_object(), *gpus = json_array(), *cpu = json_object();
	json_t *links = json_object();
	int e = (o == NULL || gpus == NULL || cpu == NULL || links == NULL);

	if (!e) {
		e |= json_object_set_new(o, "format",
					 json_string(HEXI_PROFILE_FORMAT));
		e |= json_object_set_new(o, "version",
					 json_integer(HEXI_PROFILE_VERSION));
		e |= json_object_set_new(o, "host", json_string(p->host));
		for (int i = 0; i < p->ngpus && !e; i++) {
			json_t *g = gpu_json(&p->gpus[i]);

			e |= g == NULL || json_array_append_new(gpus, g);
		}
		if (p->ngpus > 0 && !e) {
			e |= json_object_set_new(o, "gpus", gpus);
			gpus = NULL;
		}
		if (isfinite(p->cpu_gemm_gflops) && !e) {
			e |= set_num(cpu, "gemm_gflops", p->cpu_gemm_gflops);
			if (isfinite(p->cpu_mem_bw_gbps))
				e |= set_num(cpu, "mem_bw_gbps",
					     p->cpu_mem_bw_gbps);
			if (p->cpu_threads > 0)
				e |= json_object_set_new(
				    cpu, "threads",
				    json_integer(p->cpu_threads));
		}
		e |= set_obj(o, "cpu", cpu);
		cpu = NULL;
		e |= set_num(links, "intra_bw_gbps", p->intra_bw_gbps);
		e |= set_num(links, "intra_lat_s", p->intra_lat_s);
		e |= set_num(links, "inter_bw_gbps", p->inter_bw_gbps);
		e |= set_num(links, "inter_lat_s", p->inter_lat_s);
		e |= set_obj(o, "links", links);
		links = NULL;
	}
	json_decref(gpus);
	json_decref(cpu);
	json_decref(links);
	if (e) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static hexi_rc dump(json_t *o, size_t flags, const char *what, char **out)
{
	char *s = NULL;

	if (o != NULL)
		s = json_dumps(o, flags | JSON_REAL_PRECISION(6));
	json_decref(o);
	if (s == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%s: cannot build JSON",
				  what);
	*out = s;
	return HEXI_OK;
}

hexi_rc hexi_profile_to_json(const hexi_profile *p, char **out)
{
	if (p == NULL || out == NULL)
		return hexi_error(HEXI_ERR_INVAL, "profile: NULL argument");
	return dump(profile_json(p), JSON_COMPACT | JSON_PRESERVE_ORDER,
		    "profile", out);
}

static json_t *meas_json(const hexi_prof_meas *m)
{
	json_t *o = json_pack(
	    "{s:s, s:s, s:s, s:f, s:f, s:i, s:f, s:f, s:f, "
	    "s:f, s:f}",
	    "name", m->name, "shape", m->shape, "unit", m->unit, "value",
	    m->value, "best", m->best, "repeats", m->stat.repeats, "median_s",
	    m->stat.median_s, "min_s", m->stat.min_s, "max_s", m->stat.max_s,
	    "spread_pct", m->stat.spread_pct, "check_err", m->check_err);

	if (o != NULL &&
	    json_object_set_new(o, "calls_per_sample",
				json_integer(m->stat.calls_per_sample))) {
		json_decref(o);
		return NULL;
	}
	if (o != NULL && m->device >= 0 &&
	    json_object_set_new(o, "device", json_integer(m->device))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

hexi_rc hexi_prof_report_to_json(const hexi_profile *p,
				 const hexi_prof_report *r, const char *mode,
				 char **out)
{
	json_t *o = json_object(), *arr = json_array(), *prof = NULL;
	int e;

	if (p == NULL || r == NULL || mode == NULL || out == NULL) {
		json_decref(o);
		json_decref(arr);
		return hexi_error(HEXI_ERR_INVAL, "report: NULL argument");
	}
	prof = profile_json(p);
	e = o == NULL || arr == NULL || prof == NULL;
	for (int i = 0; i < r->nmeas && !e; i++) {
		json_t *m = meas_json(&r->meas[i]);

		e |= m == NULL || json_array_append_new(arr, m);
	}
	if (!e) {
		e |= json_object_set_new(
		    o, "format", json_string("hexiscale-profile-report"));
		e |= json_object_set_new(o, "version", json_integer(1));
		e |= json_object_set_new(o, "mode", json_string(mode));
		e |= json_object_set_new(o, "profile", prof);
		prof = NULL;
		e |= json_object_set_new(o, "measurements", arr);
		arr = NULL;
	}
	json_decref(prof);
	json_decref(arr);
	if (e) {
		json_decref(o);
		o = NULL;
	}
	return dump(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER, "report", out);
}
