/*
 * sched_dl.c - libhexisched (jansson, METIS) is loaded with dlopen in srun
 * only, so the plugin itself links libc alone and slurmstepd never maps the
 * planner's dependencies.
 */
#include "config.h"

#include "hx_spank.h"

#include <dlfcn.h>
#include <string.h>

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
	return HEXI_OK;
}

void hx_sched_close(hx_sched *s)
{
	if (s->handle != NULL)
		dlclose(s->handle);
	memset(s, 0, sizeof(*s));
}
