/*
 * test_backend.c - the backend choice of hexi_rt_init (rt_backend_choose):
 * --backend over HEXISCALE_BACKEND over the default, and what mpi, nccl and
 * auto give with and without CUDA support and a device (the device probe is
 * faked, so the whole table runs without a GPU).
 */
#include "config.h"

#include <string.h>

#include "rt_dist.h"
#include "rt_train.h"
#include "tap.h"

static int ncalls;

/* ctx: the number of devices to report (0: none, with a reason). */
static int fake_probe(void *ctx, char *why, size_t cap)
{
	int n = *(const int *)ctx;

	ncalls++;
	if (n <= 0)
		snprintf(why, cap, "no usable CUDA device (fake: no driver)");
	return n;
}


int main(void)
{
	static const struct {
		const char *opt, *env;
		int built, ndev;
		hexi_rc rc;
		rt_backend want;
		int probed;	 /* the probe must (1) or must not (0) run */
		const char *msg; /* in the error message */
	} cases[] = {
	    /* default and precedence */
	    {NULL, NULL, 1, 1, HEXI_OK, RT_BACKEND_MPI, 0, NULL},
	    {"", "", 1, 1, HEXI_OK, RT_BACKEND_MPI, 0, NULL},
	    {NULL, "nccl", 1, 1, HEXI_OK, RT_BACKEND_NCCL, 1, NULL},
	    {"mpi", "nccl", 1, 1, HEXI_OK, RT_BACKEND_MPI, 0, NULL},
	    {"nccl", "mpi", 1, 2, HEXI_OK, RT_BACKEND_NCCL, 1, NULL},
	    /* mpi never looks for a device */
	    {"mpi", NULL, 0, 0, HEXI_OK, RT_BACKEND_MPI, 0, NULL},
	    {"mpi", NULL, 1, 0, HEXI_OK, RT_BACKEND_MPI, 0, NULL},
	    /* nccl: needs the build and a device */
	    {"nccl", NULL, 0, 1, HEXI_ERR_UNSUPPORTED, RT_BACKEND_MPI, 0,
	     "--backend nccl: this build has no CUDA support"},
	    {"nccl", NULL, 1, 0, HEXI_ERR_NODEV, RT_BACKEND_MPI, 1,
	     "--backend nccl: no usable CUDA device (fake: no driver)"},
	    {NULL, "nccl", 1, 0, HEXI_ERR_NODEV, RT_BACKEND_MPI, 1,
	     "HEXISCALE_BACKEND nccl: no usable CUDA device"},
	    {NULL, "nccl", 0, 0, HEXI_ERR_UNSUPPORTED, RT_BACKEND_MPI, 0,
	     "HEXISCALE_BACKEND nccl: this build has no CUDA"},
	    /* auto: nccl when both, else mpi */
	    {"auto", NULL, 1, 1, HEXI_OK, RT_BACKEND_NCCL, 1, NULL},
	    {"auto", NULL, 1, 0, HEXI_OK, RT_BACKEND_MPI, 1, NULL},
	    {"auto", NULL, 0, 1, HEXI_OK, RT_BACKEND_MPI, 0, NULL},
	    {NULL, "auto", 1, 4, HEXI_OK, RT_BACKEND_NCCL, 1, NULL},
	    /* bad names: option is a usage error, environment invalid */
	    {"gpu", NULL, 1, 1, HEXI_ERR_USAGE, RT_BACKEND_MPI, 0,
	     "--backend 'gpu': want mpi, nccl or auto"},
	    {"NCCL", NULL, 1, 1, HEXI_ERR_USAGE, RT_BACKEND_MPI, 0, "'NCCL'"},
	    {"nccl ", NULL, 1, 1, HEXI_ERR_USAGE, RT_BACKEND_MPI, 0, NULL},
	    {NULL, "cuda", 1, 1, HEXI_ERR_INVAL, RT_BACKEND_MPI, 0,
	     "HEXISCALE_BACKEND 'cuda'"},
	    {NULL, "mpi,nccl", 1, 1, HEXI_ERR_INVAL, RT_BACKEND_MPI, 0, NULL},
	    {"mpi", "bogus", 1, 1, HEXI_OK, RT_BACKEND_MPI, 0, NULL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rt_backend b = RT_BACKEND_NCCL;
		int nd = cases[i].ndev;
		hexi_rc rc;

		ncalls = 0;
		rc = rt_backend_choose(cases[i].opt, cases[i].env,
				       cases[i].built, fake_probe, &nd, &b);
		is_int(rc, cases[i].rc,
		       "case %zu (opt %s env %s built %d "
		       "ndev %d): rc",
		       i, cases[i].opt ? cases[i].opt : "-",
		       cases[i].env ? cases[i].env : "-", cases[i].built,
		       cases[i].ndev);
		is_str(rt_backend_name(b), rt_backend_name(cases[i].want),
		       "case %zu: backend", i);
		is_int(ncalls > 0, cases[i].probed, "case %zu: probed", i);
		if (cases[i].msg != NULL)
			ok(strstr(hexi_errmsg(rc), cases[i].msg) != NULL,
			   "case %zu: message '%s' has '%s'", i,
			   hexi_errmsg(rc), cases[i].msg);
		hexi_error_clear();
	}
	/* no probe at all (a build without CUDA passes NULL) */
	{
		rt_backend b = RT_BACKEND_NCCL;
		hexi_rc rc = rt_backend_choose("auto", NULL, 0, NULL, NULL, &b);
		is_int(rc, HEXI_OK, "auto without CUDA and no probe");
		is_str(rt_backend_name(b), "mpi", "auto without CUDA: mpi");
	}
	return tap_done();
}
