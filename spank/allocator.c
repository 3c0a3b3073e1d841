/*
 * allocator.c - sbatch and salloc: there is no job yet, so only check what
 * the user asked for and refuse the submission on any error: options,
 * environment twins, a plan file's access and size, and, with libhexisched
 * loaded by dlopen as srun does, the model (name or file: load + validate)
 * or the user plan file (parse, hash, validate).  Whether a plan fits the
 * allocation cannot be known before the allocation exists: srun checks
 * that for each step, before launch.  If the library cannot be loaded here
 * the submission goes on (verbose message) and srun does these checks.
 */
#include "config.h"

#include "hx_spank.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hexi_rc check_model(const hx_sched *lib, const hx_settings *s,
			   const char *origin)
{
	hexi_model m;
	hexi_rc rc;

	rc = hx_sched_err(lib, lib->hexi_model_load(s->model, &m), "model");
	if (rc == HEXI_OK && s->seq_len > 0)
		m.seq_len = s->seq_len;
	if (rc == HEXI_OK)
		rc = hx_sched_err(lib, lib->hexi_model_validate(&m), s->model);
	if (rc != HEXI_OK)
		hexi_error_prefix(rc, "%s=%s", origin, s->model);
	return rc;
}

static hexi_rc check_plan(const hx_sched *lib, const hx_settings *s,
			  const char *origin)
{
	hexi_catalog *cat = NULL;
	hexi_plan *plan = NULL;
	hexi_rc rc;

	rc = hx_sched_catalog(lib, &cat);
	if (rc == HEXI_OK)
		rc = hx_sched_err(lib,
				  lib->hexi_plan_parse(s->plan_text,
						       s->plan_len, cat, &plan),
				  "plan file");
	if (rc == HEXI_OK)
		rc = hx_sched_err(lib, lib->hexi_plan_validate(plan),
				  "plan file");
	if (rc != HEXI_OK)
		hexi_error_prefix(rc, "%s=%s", origin, s->plan_file);
	if (plan != NULL)
		lib->hexi_plan_destroy(plan);
	if (cat != NULL)
		lib->hexi_catalog_destroy(cat);
	return rc;
}

/* The checks that need libhexisched.  -1: refuse the submission. */
static int check_with_library(const hx_settings *s)
{
	hx_sched lib;
	char origin[96];
	hexi_rc rc;

	if (s->mode == HX_MODE_OFF ||
	    (s->mode == HX_MODE_AUTO && s->mode_from_default))
		return 0; /* nothing the user asked to plan */
	rc = hx_sched_open(hx_g_conf.libsched, &lib);
	if (rc != HEXI_OK) {
		slurm_verbose("hexiscale: model and plan checks left to srun: "
			      "%s",
			      hexi_errmsg(rc));
		return 0;
	}
	if (s->mode == HX_MODE_AUTO) {
		hx_setting_origin(s, HX_OPT_MODEL, "model", origin,
				  sizeof(origin));
		rc = check_model(&lib, s, origin);
	} else {
		hx_setting_origin(s, HX_OPT_MODE, "default_mode", origin,
				  sizeof(origin));
		rc = check_plan(&lib, s, origin);
	}
	hx_sched_close(&lib);
	if (rc != HEXI_OK) {
		hx_err("%s", hexi_errmsg(rc));
		return -1;
	}
	return 0;
}

int hx_allocator_post_opt(spank_t sp)
{
	hx_settings s;
	int ret;

	(void)sp;
	ret = hx_check_settings(&s);
	if (ret == 0)
		ret = check_with_library(&s);
	hx_settings_fini(&s);
	return ret;
}
