/*
 * backend.c - the backend registry and the choice of a run's backend
 * (--backend, HEXISCALE_BACKEND).  A backend is one row: its name, where a
 * rank's tensors live (host memory or a CUDA device), how to probe for its
 * devices and how to set it up once the host communicator exists.  "auto"
 * takes the first device backend that is built and finds a device, else the
 * first row (mpi).  Adding a backend is its own file (setup, probe,
 * communicator) plus one row here.  Plain C: the device probe can be passed
 * in, so the selection table is tested on machines without a GPU.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "rt_dist.h"

static const rt_backend registry[] = {
    {.name = "mpi",
     .device = RT_DEVICE_HOST,
     .what = "CPU ranks, host buffers over MPI (or one process)",
     .probe = NULL,
     .setup = NULL},
    {.name = "nccl",
     .device = RT_DEVICE_CUDA,
     .what = "one GPU per rank, device buffers over NCCL",
     .probe = rt_nccl_probe,
     .setup = rt_nccl_setup},
};
#define NBACKENDS ((int)(sizeof(registry) / sizeof(registry[0])))

int rt_backend_count(void)
{
	return NBACKENDS;
}

const rt_backend *rt_backend_at(int i)
{
	return i >= 0 && i < NBACKENDS ? &registry[i] : NULL;
}

const rt_backend *rt_backend_default(void)
{
	return &registry[0];
}

const rt_backend *rt_backend_find(const char *name)
{
	for (int i = 0; name != NULL && i < NBACKENDS; i++)
		if (strcmp(registry[i].name, name) == 0)
			return &registry[i];
	return NULL;
}

int hexi_rt_backend_known(const char *name)
{
	return name != NULL &&
	       (strcmp(name, "auto") == 0 || rt_backend_find(name) != NULL);
}

const char *rt_backend_name(const rt_backend *b)
{
	return b != NULL ? b->name : registry[0].name;
}

/* "mpi, nccl or auto": the registry's names for messages. */
static void names(char *buf, size_t cap)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < NBACKENDS && n < cap; i++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%s",
				      i == 0 ? "" : ", ", registry[i].name);
	if (n < cap)
		snprintf(buf + n, cap - n, " or auto");
}

/* Whether row b can run here: built, and (device backends) a device found.
 * why gets the reason when not. */
static int usable(const rt_backend *b, int built_devices, rt_device_probe probe,
		  void *probe_ctx, char *why, size_t cap)
{
	rt_device_probe p = probe != NULL ? probe : b->probe;

	if (b->device == RT_DEVICE_HOST)
		return 1;
	if (!built_devices) {
		snprintf(why, cap, "this build has no CUDA support (configure "
				   "--with-cuda)");
		return -1;
	}
	if (p == NULL || p(probe_ctx, why, cap) <= 0) {
		if (why[0] == '\0')
			snprintf(why, cap, "no usable CUDA device");
		return 0;
	}
	return 1;
}

hexi_rc rt_backend_choose(const char *opt, const char *env, int built_devices,
			  rt_device_probe probe, void *probe_ctx,
			  const rt_backend **out)
{
	const char *name = registry[0].name, *from = "default";
	const rt_backend *b;
	char why[256] = "", list[128];
	int ok;

	*out = &registry[0];
	if (opt != NULL && *opt != '\0') {
		name = opt;
		from = "--backend";
	} else if (env != NULL && *env != '\0') {
		name = env;
		from = "HEXISCALE_BACKEND";
	}
	if (strcmp(name, "auto") == 0) {
		for (int i = 0; i < NBACKENDS; i++) {
			if (registry[i].device == RT_DEVICE_HOST)
				continue;
			why[0] = '\0';
			if (usable(&registry[i], built_devices, probe,
				   probe_ctx, why, sizeof(why)) > 0) {
				*out = &registry[i];
				break;
			}
		}
		return HEXI_OK;
	}
	if ((b = rt_backend_find(name)) == NULL) {
		names(list, sizeof(list));
		return hexi_error(
		    strcmp(from, "--backend") == 0 ? HEXI_ERR_USAGE
						   : HEXI_ERR_INVAL,
		    "%s '%.32s': want %s", from, name, list);
	}
	ok = usable(b, built_devices, probe, probe_ctx, why, sizeof(why));
	if (ok > 0) {
		*out = b;
		return HEXI_OK;
	}
	return hexi_error(ok < 0 ? HEXI_ERR_UNSUPPORTED : HEXI_ERR_NODEV,
			  "%s %s: %s", from, b->name, why);
}
