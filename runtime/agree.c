/*
 * agree.c - the two collectives every bootstrap phase ends with: whether
 * every rank succeeded, and failing together when one did not.  Below
 * boot.c and the backends (backend_*.c), which all use them, so no file
 * calls back up into the bootstrap.
 */
#include "config.h"

#ifdef HAVE_MPI
#include <mpi.h>
#endif

#include "rt_dist.h"

/* Until the idle tasks have left (boot.c) every task of the job agrees;
 * from then on the training ranks, over their own communicator. */
int hexi_rt_all_ok(hexi_rt *rt, int ok)
{
	double v = ok ? 0.0 : 1.0;
	int n = rt->trainers_only ? rt->world_size : rt->ntasks;

	if (!rt->mpi_started || n <= 1)
		return ok;
#ifdef HAVE_MPI
	{
		MPI_Comm comm = MPI_COMM_WORLD;
		void *h =
		    rt->trainers_only ? rt_comm_mpi_handle(rt->comm) : NULL;

		if (h != NULL)
			comm = *(MPI_Comm *)h;
		if (MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM,
				  comm) != MPI_SUCCESS)
			return 0;
	}
#endif
	return v == 0.0;
}

/* Every rank ran a phase: fail together when any rank failed. */
hexi_rc rt_together(hexi_rt *rt, hexi_rc rc, const char *phase)
{
	int ok = hexi_rt_all_ok(rt, rc == HEXI_OK);

	if (rc != HEXI_OK)
		return rc;
	if (!ok)
		return hexi_error(HEXI_ERR_PEER,
				  "rank %d: another rank failed during %s (see "
				  "its message)",
				  rt->rank, phase);
	return HEXI_OK;
}
