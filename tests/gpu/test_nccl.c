/*
 * test_nccl.c - the NCCL backend of rt_comm.h (runtime/comm_nccl.c) in one
 * process: error paths that need no GPU (bad timeout variable, no device:
 * an error value, no abort), and with a GPU a world of one rank: group
 * creation from a broadcast unique id, all-reduce (f32, f64), broadcast,
 * barrier, refused self-sends, the non-blocking collectives of the
 * overlapped sync (ordered after a producer stream, completed by test and
 * by wait in either order, requests reused), clean teardown.  The SIMT
 * build (tests/simt/simt_nccl_one.sh) runs the same on the emulated
 * device and NCCL.
 *
 * The bootstrap is a test double of the MPI backend for one process, and
 * rt_comm_group_get is a minimal version of the runtime's (comm_mpi.c):
 * this keeps the test independent of the MPI launcher.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "rt_comm.h"
#include "tap.h"

static int bcasts;

static hexi_rc boot_group_create(rt_comm *c, const int *ranks, int n,
				 rt_group **out)
{
	rt_group *g = calloc(1, sizeof(*g));

	if (g == NULL || (g->ranks = malloc(sizeof(int) * (size_t)n)) == NULL) {
		free(g);
		return HEXI_ERR_NOMEM;
	}
	g->comm = c;
	g->n = n;
	g->me = 0;
	memcpy(g->ranks, ranks, sizeof(int) * (size_t)n);
	*out = g;
	return HEXI_OK;
}

static void boot_group_destroy(rt_group *g)
{
	if (g != NULL)
		free(g->ranks);
	free(g);
}

static hexi_rc boot_bcast(rt_group *g, void *buf, size_t bytes, int root)
{
	bcasts++;
	return HEXI_OK;
}

static void boot_destroy(rt_comm *c)
{
	free(c);
}

static const rt_comm_ops boot_ops = {
    .name = "test-boot",
    .group_create = boot_group_create,
    .group_destroy = boot_group_destroy,
    .bcast = boot_bcast,
    .destroy = boot_destroy,
};

/* Minimal group cache (the runtime's lives in comm_mpi.c): one slot per
 * communicator object is enough for this test's single rank set. */
static struct {
	rt_comm *c;
	rt_group *g;
} cache[4];

hexi_rc rt_comm_group_get(rt_comm *c, const int *ranks, int n, rt_group **out)
{
	int i;

	for (i = 0; i < 4 && cache[i].c != NULL; i++)
		if (cache[i].c == c) {
			*out = cache[i].g;
			return HEXI_OK;
		}
	if (i == 4)
		return hexi_error(HEXI_ERR_INTERNAL, "test cache full");
	cache[i].c = c;
	return c->ops->group_create(c, ranks, n, &cache[i].g) == HEXI_OK
		   ? (*out = cache[i].g, HEXI_OK)
		   : HEXI_ERR_NCCL;
}

static void cache_drop(rt_comm *c)
{
	for (int i = 0; i < 4; i++)
		if (cache[i].c == c) {
			c->ops->group_destroy(cache[i].g);
			cache[i].c = NULL;
			cache[i].g = NULL;
		}
}

static rt_comm *boot_create(void)
{
	rt_comm *b = calloc(1, sizeof(*b));

	if (b == NULL)
		tap_bail("out of memory");
	b->ops = &boot_ops;
	b->rank = 0;
	b->size = 1;
	return b;
}

/*
 * The overlapped sync's non-blocking collectives, on one rank: the data
 * is written on a producer stream (the trainer's compute stream, handed
 * over by rt_comm_nccl_order_after) and must be read by the collective
 * only after that; each request completes by test or wait, in any order,
 * and requests are reused from round to round.  The SIMT build runs this
 * with deferred streams, where a missing order reads the stale buffer,
 * and with every enqueue in progress at first (SIMT_NCCL_INPROGRESS).
 */
static void nb_part(rt_comm *c, rt_group *g)
{
	cudaStream_t s = NULL;
	float *x = NULL, *y = NULL, *z = NULL, hx[4], hz[4], out[4];
	const size_t cut[2] = {0, 4};
	const float zero[4] = {0, 0, 0, 0};

	if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) !=
		cudaSuccess ||
	    cudaMalloc((void **)&x, sizeof(hx)) != cudaSuccess ||
	    cudaMalloc((void **)&y, sizeof(hx)) != cudaSuccess ||
	    cudaMalloc((void **)&z, sizeof(hz)) != cudaSuccess)
		tap_bail("non-blocking part: stream or buffers");
	rt_comm_nccl_order_after(c, s);
	for (int round = 0; round < 3; round++) {
		rt_req *r1 = NULL, *r2 = NULL, *r3 = NULL;
		int done = 0, ok1 = 1, ok2 = 1;
		double t0 = hexi_now_s();

		for (int i = 0; i < 4; i++) {
			hx[i] = (float)(10 * round + i) + 0.5f;
			hz[i] = -(float)(10 * round + i) - 0.25f;
		}
		cudaMemcpy(x, zero, sizeof(zero), cudaMemcpyHostToDevice);
		cudaMemcpy(y, zero, sizeof(zero), cudaMemcpyHostToDevice);
		cudaMemcpy(z, zero, sizeof(zero), cudaMemcpyHostToDevice);
		/* a cudaMemcpy from pageable memory may return before its
		 * DMA lands, and s and NCCL's streams are not ordered after
		 * the legacy stream: wait, or the round can read old data */
		cudaDeviceSynchronize();
		/* produced on s, as the backward writes a bucket */
		cudaMemcpyAsync(x, hx, sizeof(hx), cudaMemcpyHostToDevice, s);
		cudaMemcpyAsync(z, hz, sizeof(hz), cudaMemcpyHostToDevice, s);
		is_int(c->ops->ireduce_scatterv_sum(g, x, y, cut, RT_F32, &r1),
		       HEXI_OK, "round %d: non-blocking reduce-scatter", round);
		is_int(c->ops->iallreduce_sum(g, z, 4, RT_F32, &r2), HEXI_OK,
		       "round %d: non-blocking all-reduce", round);
		is_int(c->ops->iallreduce_sum(g, z, 0, RT_F32, &r3), HEXI_OK,
		       "round %d: an empty one", round);
		if (round == 1) { /* the later ones first */
			is_int(c->ops->wait(r3), HEXI_OK, "wait (empty)");
			is_int(c->ops->wait(r2), HEXI_OK, "wait (all-reduce)");
			r2 = r3 = NULL;
		}
		while (r1 != NULL && !done && hexi_now_s() - t0 < 30) {
			if (c->ops->test(r1, &done) != HEXI_OK)
				ok1 = 0, done = 1;
		}
		ok(ok1 && done,
		   "round %d: the reduce-scatter completes by test", round);
		if (r2 != NULL)
			ok2 = c->ops->wait(r2) == HEXI_OK &&
			      c->ops->wait(r3) == HEXI_OK;
		ok(ok2, "round %d: the others complete by wait", round);
		cudaMemcpy(out, y, sizeof(out), cudaMemcpyDeviceToHost);
		ok(memcmp(out, hx, sizeof(hx)) == 0,
		   "round %d: reduce-scatter read what the producer stream "
		   "wrote (%g %g %g %g)",
		   round, out[0], out[1], out[2], out[3]);
		cudaMemcpy(out, z, sizeof(out), cudaMemcpyDeviceToHost);
		ok(memcmp(out, hz, sizeof(hz)) == 0,
		   "round %d: all-reduce too (%g %g %g %g)", round, out[0],
		   out[1], out[2], out[3]);
	}
	rt_comm_nccl_order_after(c, NULL);
	cudaStreamDestroy(s);
	cudaFree(x);
	cudaFree(y);
	cudaFree(z);
}

static void gpu_part(rt_comm *boot)
{
	rt_comm *c = NULL;
	rt_group *g = NULL;
	float *df = NULL, hf[3] = {1.5f, -2, 4};
	double *dd = NULL, hd[2] = {3.25, -1};
	int r0 = 0;

	is_int(rt_comm_nccl_create(boot, 0, &c), HEXI_OK,
	       "NCCL backend on "
	       "device 0");
	if (c == NULL)
		return;
	ok(bcasts >= 1, "unique id went through the bootstrap broadcast");
	is_str(c->ops->name, "nccl", "backend name");
	is_int(c->ops->group_create(c, &r0, 1, &g), HEXI_OK, "group {0}");
	ok(g != NULL && g->n == 1 && g->me == 0, "group head filled");
	if (cudaMalloc((void **)&df, sizeof(hf)) != cudaSuccess ||
	    cudaMalloc((void **)&dd, sizeof(hd)) != cudaSuccess)
		tap_bail("cudaMalloc");
	cudaMemcpy(df, hf, sizeof(hf), cudaMemcpyHostToDevice);
	cudaMemcpy(dd, hd, sizeof(hd), cudaMemcpyHostToDevice);
	cudaDeviceSynchronize(); /* as above: the DMA may still be in flight */
	is_int(c->ops->allreduce_sum(g, df, 3, RT_F32), HEXI_OK,
	       "all-reduce f32");
	is_int(c->ops->allreduce_sum(g, dd, 2, RT_F64), HEXI_OK,
	       "all-reduce f64");
	memset(hf, 0, sizeof(hf));
	memset(hd, 0, sizeof(hd));
	cudaMemcpy(hf, df, sizeof(hf), cudaMemcpyDeviceToHost);
	cudaMemcpy(hd, dd, sizeof(hd), cudaMemcpyDeviceToHost);
	ok(hf[0] == 1.5f && hf[1] == -2 && hf[2] == 4,
	   "sum over one rank keeps f32 values");
	ok(hd[0] == 3.25 && hd[1] == -1, "sum over one rank keeps f64 values");
	is_int(c->ops->bcast(g, df, sizeof(hf), 0), HEXI_OK, "broadcast");
	is_int(c->ops->bcast(g, df, sizeof(hf), 1), HEXI_ERR_INVAL,
	       "broadcast from a non-member root refused");
	is_int(c->ops->barrier(c, g), HEXI_OK, "barrier on a group");
	is_int(c->ops->send(c, df, 4, 0, 1), HEXI_ERR_INVAL,
	       "send to self refused");
	is_int(c->ops->send(c, df, 4, 5, 1), HEXI_ERR_INVAL,
	       "send outside the world refused");
	is_int(c->ops->flush(c), HEXI_OK, "flush with nothing queued");
	nb_part(c, g);
	c->ops->group_destroy(g);
	cache_drop(c);
	c->ops->destroy(c);
	cudaFree(df);
	cudaFree(dd);
}

int main(void)
{
	rt_comm *boot = boot_create(), *c = NULL;
	int n = 0;
	cudaError_t e;

	setenv("HEXISCALE_NCCL_TIMEOUT_S", "soon", 1);
	is_int(rt_comm_nccl_create(boot, 0, &c), HEXI_ERR_PARSE,
	       "bad HEXISCALE_NCCL_TIMEOUT_S: %s", hexi_errmsg(HEXI_ERR_PARSE));
	setenv("HEXISCALE_NCCL_TIMEOUT_S", "0", 1);
	is_int(rt_comm_nccl_create(boot, 0, &c), HEXI_ERR_PARSE,
	       "timeout 0 refused");
	unsetenv("HEXISCALE_NCCL_TIMEOUT_S");
	is_int(rt_comm_nccl_create(NULL, 0, &c), HEXI_ERR_INVAL,
	       "no bootstrap refused");
	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n < 1) {
		hexi_rc rv = rt_comm_nccl_create(boot, 0, &c);

		is_int(rv, HEXI_ERR_CUDA,
		       "no device: an error value, not an abort (%s)",
		       hexi_errmsg(rv));
		ok(c == NULL, "nothing returned");
		tap_diag("no CUDA device: cudaGetDeviceCount returned %d (%s); "
			 "GPU part skipped",
			 (int)e, cudaGetErrorString(e));
	} else {
		gpu_part(boot);
	}
	cache_drop(boot);
	boot->ops->destroy(boot);
	return tap_done();
}
