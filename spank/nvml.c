/*
 * nvml.c - optional check that a task's GPU is of the type the plan
 * assumed.  NVML is loaded with dlopen (never linked; there is no nvml.h
 * here), so the entry points are declared below.  The NVML index is taken
 * to be the GRES device index (gres.conf File= order = PCI bus order, the
 * order AutoDetect=nvml uses).
 */
#include "config.h"

#include "hx_spank.h"

#include <ctype.h>
#include <dlfcn.h>
#include <string.h>

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_shutdown_fn)(void);
typedef int (*nvml_handle_fn)(unsigned int index, void **device);
typedef int (*nvml_name_fn)(void *device, char *name, unsigned int len);

hexi_rc hx_nvml_check(const char *lib, int gpu, const char *want_type,
		      char *found, size_t cap)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	nvml_init_fn init;
	nvml_shutdown_fn shutdown;
	nvml_handle_fn handle;
	nvml_name_fn name;
	void *dev = NULL;
	char raw[96] = "";
	hexi_rc rv = HEXI_ERR_NOTFOUND;

	found[0] = '\0';
	if (h == NULL)
		return HEXI_ERR_NOTFOUND;
	*(void **)&init = dlsym(h, "nvmlInit_v2");
	*(void **)&shutdown = dlsym(h, "nvmlShutdown");
	*(void **)&handle = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&name = dlsym(h, "nvmlDeviceGetName");
	if (init == NULL || shutdown == NULL || handle == NULL ||
	    name == NULL || init() != 0)
		goto out;
	if (handle((unsigned)gpu, &dev) == 0 &&
	    name(dev, raw, sizeof(raw)) == 0) {
		raw[sizeof(raw) - 1] = '\0';
		hexi_strlcpy(found, raw, cap);
		rv = hx_gpu_name_matches(raw, want_type) ? HEXI_OK
							 : HEXI_ERR_MISMATCH;
	}
	shutdown();
out:
	dlclose(h);
	return rv;
}
