/*
 * backend_nccl.c - the "nccl" row of the backend registry (backend.c): one
 * CUDA device per rank (CUDA_VISIBLE_DEVICES and the local rank,
 * rt_cuda_pick_device), device buffers over an NCCL communicator made over
 * the host one.  Without CUDA in the build the row stays in the registry
 * and its setup says so; the choice (rt_backend_choose) refuses it first.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif

#include "rt_dist.h"
#ifdef RT_GPU
#include "rt_cuda.h"
#endif

#ifdef RT_GPU
/* rt_device_probe over the CUDA runtime. */
int rt_nccl_probe(void *ctx, char *why, size_t cap)
{
	int n = 0;
	hexi_rc rc = rt_cuda_device_count(&n);

	(void)ctx;
	if (rc != HEXI_OK) {
		snprintf(why, cap, "no usable CUDA device (%s)",
			 hexi_errmsg(rc));
		hexi_error_clear();
		return 0;
	}
	if (n <= 0)
		snprintf(why, cap,
			 "no usable CUDA device (the CUDA "
			 "runtime sees none)");
	return n;
}

/* Collective: NCCL needs one GPU per rank and, given two ranks on one GPU,
 * fails with a bare "invalid usage"; say which ranks share which GPU. */
static hexi_rc one_gpu_each(hexi_rt *rt)
{
	double *id;
	hexi_rc rc = HEXI_OK;

	if (!rt->mpi_started || rt->world_size == 1)
		return HEXI_OK;
	id = calloc((size_t)rt->world_size, sizeof(*id));
	if (id == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU identities");
	id[rt->rank] = (double)rt_cuda_device_id(rt->cuda);
#ifdef HAVE_MPI
	/* before the groups exist: over the training ranks' communicator
	 * (idle tasks have left), indexed by plan rank */
	if (rt_comm_mpi_handle(rt->comm) == NULL ||
	    MPI_Allreduce(MPI_IN_PLACE, id, rt->world_size, MPI_DOUBLE, MPI_SUM,
			  *(MPI_Comm *)rt_comm_mpi_handle(rt->comm)) !=
		MPI_SUCCESS)
		rc = hexi_error(HEXI_ERR_MPI, "rank %d: GPU identities",
				rt->rank);
#endif
	for (int r = 0; rc == HEXI_OK && r < rt->world_size; r++)
		if (r != rt->rank && id[r] == id[rt->rank])
			rc = hexi_error(
			    HEXI_ERR_NODEV,
			    "ranks %d and %d both drive GPU %d (%s) of node "
			    "%d: NCCL needs one GPU per rank (give each task "
			    "its own GPU, e.g. srun --gpus-per-task=1, or "
			    "use --backend mpi)",
			    r < rt->rank ? r : rt->rank,
			    r < rt->rank ? rt->rank : r,
			    rt_cuda_device(rt->cuda),
			    rt_cuda_device_name(rt->cuda), rt->node);
	free(id);
	return rc;
}

/* Collective: this rank's device, then the NCCL communicator. */
hexi_rc rt_nccl_setup(hexi_rt *rt)
{
	hexi_rc rc = rt_cuda_create(rt->local_rank, rt->local_size, &rt->cuda);

	if (rc != HEXI_OK)
		hexi_error_prefix(rc, "rank %d (local rank %d of %d): GPU",
				  rt->rank, rt->local_rank, rt->local_size);
	rc = rt_together(rt, rc, "GPU setup");
	/* only the ranks sharing a GPU see it: the others must not go on
	 * into the communicators' collectives without them */
	if (rc == HEXI_OK)
		rc = rt_together(rt, one_gpu_each(rt),
				 "the one-GPU-per-rank "
				 "check");
	if (rc != HEXI_OK)
		return rc;
	rc =
	    rt_comm_nccl_create(rt->comm, rt_cuda_device(rt->cuda), &rt->gcomm);
	if (rc != HEXI_OK)
		hexi_error_prefix(rc, "rank %d: NCCL communicator", rt->rank);
	return rc;
}
#else
int rt_nccl_probe(void *ctx, char *why, size_t cap)
{
	(void)ctx;
	snprintf(why, cap, "this build has no CUDA support");
	return 0;
}

hexi_rc rt_nccl_setup(hexi_rt *rt)
{
	return hexi_error(HEXI_ERR_UNSUPPORTED,
			  "rank %d: backend nccl: built without CUDA",
			  rt->rank);
}
#endif
