/*
 * backend.c - which communication backend a run uses (--backend,
 * HEXISCALE_BACKEND): "mpi" (CPU ranks), "nccl" (one GPU per rank) or
 * "auto" (nccl when this build has CUDA and a device is visible, else mpi).
 * Plain C without CUDA: the device probe is passed in, so the selection
 * table is tested on machines without a GPU.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "rt_dist.h"

const char *rt_backend_name(rt_backend b)
{
	return b == RT_BACKEND_NCCL ? "nccl" : "mpi";
}

static int known(const char *s)
{
	return strcmp(s, "mpi") == 0 || strcmp(s, "nccl") == 0 ||
	       strcmp(s, "auto") == 0;
}

hexi_rc rt_backend_choose(const char *opt, const char *env, int built_cuda,
			  rt_device_probe probe, void *probe_ctx,
			  rt_backend *out)
{
	const char *name = "mpi", *from = "default";
	char why[256] = "";
	int ndev = 0;

	*out = RT_BACKEND_MPI;
	if (opt != NULL && *opt != '\0') {
		name = opt;
		from = "--backend";
	} else if (env != NULL && *env != '\0') {
		name = env;
		from = "HEXISCALE_BACKEND";
	}
	if (!known(name))
		return hexi_error(
		    strcmp(from, "--backend") == 0 ? HEXI_ERR_USAGE
						   : HEXI_ERR_INVAL,
		    "%s '%.32s': want mpi, nccl or auto", from, name);
	if (strcmp(name, "mpi") == 0)
		return HEXI_OK;
	if (!built_cuda) {
		if (strcmp(name, "auto") == 0)
			return HEXI_OK;
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "%s nccl: this build has no CUDA support "
				  "(configure --with-cuda)",
				  from);
	}
	if (probe != NULL)
		ndev = probe(probe_ctx, why, sizeof(why));
	if (ndev <= 0) {
		if (strcmp(name, "auto") == 0)
			return HEXI_OK;
		return hexi_error(HEXI_ERR_NODEV, "%s nccl: %s", from,
				  why[0] ? why : "no usable CUDA device");
	}
	*out = RT_BACKEND_NCCL;
	return HEXI_OK;
}
