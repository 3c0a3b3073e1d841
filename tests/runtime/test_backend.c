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
		const char *want;
		int probed;	 /* the probe must (1) or must not (0) run */
		const char *msg; /* in the error message */
	} cases[] = {
	    /* default and precedence */
	    {NULL, NULL, 1, 1, HEXI_OK, "mpi", 0, NULL},
	    {"", "", 1, 1, HEXI_OK, "mpi", 0, NULL},
	    {NULL, "nccl", 1, 1, HEXI_OK, "nccl", 1, NULL},
	    {"mpi", "nccl", 1, 1, HEXI_OK, "mpi", 0, NULL},
	    {"nccl", "mpi", 1, 2, HEXI_OK, "nccl", 1, NULL},
	    /* mpi never looks for a device */
	    {"mpi", NULL, 0, 0, HEXI_OK, "mpi", 0, NULL},
	    {"mpi", NULL, 1, 0, HEXI_OK, "mpi", 0, NULL},
	    /* nccl: needs the build and a device */
	    {"nccl", NULL, 0, 1, HEXI_ERR_UNSUPPORTED, "mpi", 0,
	     "--backend nccl: this build has no CUDA support"},
	    {"nccl", NULL, 1, 0, HEXI_ERR_NODEV, "mpi", 1,
	     "--backend nccl: no usable CUDA device (fake: no driver)"},
	    {NULL, "nccl", 1, 0, HEXI_ERR_NODEV, "mpi", 1,
	     "HEXISCALE_BACKEND nccl: no usable CUDA device"},
	    {NULL, "nccl", 0, 0, HEXI_ERR_UNSUPPORTED, "mpi", 0,
	     "HEXISCALE_BACKEND nccl: this build has no CUDA"},
	    /* auto: nccl when both, else mpi */
	    {"auto", NULL, 1, 1, HEXI_OK, "nccl", 1, NULL},
	    {"auto", NULL, 1, 0, HEXI_OK, "mpi", 1, NULL},
	    {"auto", NULL, 0, 1, HEXI_OK, "mpi", 0, NULL},
	    {NULL, "auto", 1, 4, HEXI_OK, "nccl", 1, NULL},
	    /* bad names: option is a usage error, environment invalid */
	    {"gpu", NULL, 1, 1, HEXI_ERR_USAGE, "mpi", 0,
	     "--backend 'gpu': want mpi, nccl or auto"},
	    {"NCCL", NULL, 1, 1, HEXI_ERR_USAGE, "mpi", 0, "'NCCL'"},
	    {"nccl ", NULL, 1, 1, HEXI_ERR_USAGE, "mpi", 0, NULL},
	    {NULL, "cuda", 1, 1, HEXI_ERR_INVAL, "mpi", 0,
	     "HEXISCALE_BACKEND 'cuda'"},
	    {NULL, "mpi,nccl", 1, 1, HEXI_ERR_INVAL, "mpi", 0, NULL},
	    {"mpi", "bogus", 1, 1, HEXI_OK, "mpi", 0, NULL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const rt_backend *b = rt_backend_find("nccl");
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
		is_str(rt_backend_name(b), cases[i].want,
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
		const rt_backend *b = rt_backend_find("nccl");
		hexi_rc rc = rt_backend_choose("auto", NULL, 0, NULL, NULL, &b);
		is_int(rc, HEXI_OK, "auto without CUDA and no probe");
		is_str(rt_backend_name(b), "mpi", "auto without CUDA: mpi");
	}
	/* the registry: unique names, the device kind per row, lookups */
	for (int i = 0; i < rt_backend_count(); i++) {
		const rt_backend *r = rt_backend_at(i);
		ok(r != NULL && r->name != NULL && r->what != NULL,
		   "row %d has a name and a description", i);
		ok(rt_backend_find(r->name) == r, "row %d (%s) found by name",
		   i, r->name);
		ok(hexi_rt_backend_known(r->name), "%s is known", r->name);
		ok(r->device == RT_DEVICE_HOST || r->probe != NULL,
		   "%s: a device backend has a probe", r->name);
	}
	ok(rt_backend_at(rt_backend_count()) == NULL, "past the last row");
	ok(rt_backend_default() == rt_backend_at(0) &&
	       strcmp(rt_backend_default()->name, "mpi") == 0 &&
	       rt_backend_default()->device == RT_DEVICE_HOST,
	   "default: mpi, on the host");
	ok(rt_backend_find("nccl") != NULL &&
	       rt_backend_find("nccl")->device == RT_DEVICE_CUDA,
	   "nccl runs on CUDA devices");
	ok(rt_backend_find("auto") == NULL && rt_backend_find("NCCL") == NULL &&
	       rt_backend_find(NULL) == NULL,
	   "auto is a choice, not a row; names are exact");
	ok(hexi_rt_backend_known("auto") && !hexi_rt_backend_known("gpu") &&
	       !hexi_rt_backend_known(NULL),
	   "hexi_rt_backend_known");
	return tap_done();
}
