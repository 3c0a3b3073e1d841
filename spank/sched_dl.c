/*
 * sched_dl.c - libhexisched (jansson, METIS) is loaded with dlopen in srun
 * only, so the plugin itself links libc alone and slurmstepd never maps the
 * planner's dependencies.  sbatch and salloc load it too, to check a
 * model or a user plan file at submission (allocator.c).
 */
#include "config.h"

#include "hx_spank.h"

#include <dlfcn.h>
#include <string.h>

/* The library has its own copy of the common module: its log goes to
 * Slurm's log at one level lower (errors are copied by hx_sched_err). */
static void lib_log_sink(hexi_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level == HEXI_LOG_ERROR)
		slurm_error("hexiscale: %s", msg);
	else if (level <= HEXI_LOG_INFO)
		slurm_verbose("hexiscale: %s", msg);
	else
		slurm_debug("hexiscale: %s", msg);
}

hexi_rc hx_sched_open(const char *path, hx_sched *s)
{
	const char *err;

	memset(s, 0, sizeof(*s));
	s->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (s->handle == NULL) {
		err = dlerror();
		return hexi_error(HEXI_ERR_NOTFOUND,
				  "cannot load the planner library %s: %s (set "
				  "libsched= in plugstack.conf)",
				  path, err != NULL ? err : "unknown error");
	}
#define HX_SCHED_LOAD(name)                                                    \
	*(void **)(&s->name) = dlsym(s->handle, #name);                        \
	if (s->name == NULL) {                                                 \
		hx_sched_close(s);                                             \
		return hexi_error(HEXI_ERR_NOTFOUND, "%s: no symbol %s", path, \
				  #name);                                      \
	}
	HX_SCHED_SYMBOLS(HX_SCHED_LOAD)
#undef HX_SCHED_LOAD
#define HX_SCHED_LOAD_OPT(name) *(void **)(&s->name) = dlsym(s->handle, #name);
	HX_SCHED_OPTIONAL(HX_SCHED_LOAD_OPT)
#undef HX_SCHED_LOAD_OPT
	s->hexi_log_set_sink(lib_log_sink, NULL);
	return HEXI_OK;
}

void hx_sched_close(hx_sched *s)
{
	if (s->handle != NULL)
		dlclose(s->handle);
	memset(s, 0, sizeof(*s));
}

hexi_rc hx_sched_err(const hx_sched *s, hexi_rc rc, const char *what)
{
	if (rc == HEXI_OK)
		return rc;
	return hexi_error(rc, "%s: %s", what, s->hexi_errmsg(rc));
}

hexi_rc hx_sched_catalog(const hx_sched *s, hexi_catalog **out)
{
	hexi_rc rc;

	*out = NULL;
	if (hx_g_conf.catalog[0] != '\0')
		rc = hx_sched_err(
		    s, s->hexi_catalog_load(hx_g_conf.catalog, out), "catalog");
	else
		rc = hx_sched_err(s, s->hexi_catalog_builtin(out),
				  "built-in catalog");
	if (rc == HEXI_OK && hx_g_conf.profiles[0] != '\0')
		rc = hx_sched_err(
		    s, s->hexi_catalog_apply_profiles(*out, hx_g_conf.profiles),
		    "profiles");
	return rc;
}
