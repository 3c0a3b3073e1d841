/*
 * bench_sync - chunked asymmetric gradient sync vs one MPI_Allreduce of the
 * same bytes on the same ranks (issue 5 benchmark; goal ratio <= 1.1).
 *
 *   mpirun -np W bench_sync PLAN.json [ITERS] [--json]
 *
 * Every rank fills gradient buffers for exactly its shards of the plan's
 * layout, then times rt_sync_run() without the norm (pack, all-reduce per
 * holder set, unpack), rt_sync_run() with the global norm (what a training
 * step does), and an MPI_Allreduce over all W ranks of max-over-ranks sync
 * bytes, in turn (the baseline first and last on alternate repetitions),
 * after a warm-up; medians are reported (the slowest rank of each
 * repetition counts), and the fastest repetitions' ratio too, which moves
 * less with the load of other work on a shared machine.
 *
 * A plan with train.zero 1 or 2 times the sharded sync instead: the
 * reduce-scatter of every bucket (rt_sync_run) plus the all-gather of the
 * updated weights (rt_sync_step with an SGD step of lr 0), against the same
 * one MPI_Allreduce of the sync bytes.
 */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_dist.h"

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The baseline: one MPI_Allreduce of BYTES over all ranks after a
 * barrier; returns the start time, the end time in *end. */
static double time_allreduce(float *big, long bytes, double *end)
{
	double t;

	MPI_Barrier(MPI_COMM_WORLD);
	t = MPI_Wtime();
	MPI_Allreduce(MPI_IN_PLACE, big, (int)(bytes / (long)sizeof(float)),
		      MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	*end = MPI_Wtime();
	return t;
}

/* Elements of rank r's shard k of tensor t. */
static size_t shard_count(const hexi_tensor_layout *t, int k)
{
	size_t cols = t->ndim == 2 ? (size_t)t->shape[1] : 1;

	return (size_t)(t->shards[k].row_end - t->shards[k].row_begin) * cols;
}

/* Gradients of this rank's shards in layout order in one array, as the
 * model keeps them (rt_model.h). */
static int make_refs(hexi_rt *rt, rt_param_ref **out, float **mem, float **wmem)
{
	const hexi_layout *l = hexi_rt_layout(rt);
	rt_param_ref *r = calloc((size_t)l->ntensors, sizeof(*r));
	size_t total = 0, off = 0;
	int n = 0, me = hexi_rt_rank(rt);

	for (int t = 0; t < l->ntensors; t++)
		for (int k = 0; k < l->tensors[t].nshards; k++)
			if (l->tensors[t].shards[k].rank == me)
				total += shard_count(&l->tensors[t], k);
	*mem = malloc(sizeof(float) * (total ? total : 1));
	*wmem = calloc(total ? total : 1, sizeof(float));
	for (size_t i = 0; i < total; i++)
		(*mem)[i] = (float)((i % 17) * 1e-3);
	for (int t = 0; t < l->ntensors; t++)
		for (int k = 0; k < l->tensors[t].nshards; k++) {
			const hexi_tensor_layout *tl = &l->tensors[t];
			if (tl->shards[k].rank != me)
				continue;
			r[n].name = tl->name;
			r[n].row_begin = tl->shards[k].row_begin;
			r[n].row_end = tl->shards[k].row_end;
			r[n].cols = tl->ndim == 2 ? tl->shape[1] : 1;
			r[n].grad = *mem + off;
			r[n].w = *wmem + off;
			r[n].decay = tl->ndim == 2;
			off += shard_count(tl, k);
			n++;
		}
	*out = r;
	return n;
}

/* One sync as the trainer runs it: under zero 2 every micro-batch's
 * backward reduce-scatters its gradients (here every layer at once per
 * micro-batch), then the rounds of zeros and the norm; sharded, the
 * optimizer step's all-gather of the weights. */
static hexi_rc sync_once(hexi_rt *rt, rt_sync *s, double *sumsq)
{
	hexi_rc rc = HEXI_OK;

	for (int r = 0; rt_sync_zero(s) == 2 && rc == HEXI_OK &&
			r < rt->role.micro_batches;
	     r++)
		rc = rt_sync_grad_ready(s, r, -1);
	if (rc == HEXI_OK)
		rc = rt_sync_run(s, sumsq);
	if (rc == HEXI_OK && rt_sync_zero(s) > 0)
		rc = rt_sync_step(s, 1.0f, 0.0f, NULL, 0);
	return rc;
}

int main(int argc, char **argv)
{
	hexi_rt_opts o;
	hexi_rt *rt = NULL;
	rt_sync *s = NULL;
	rt_param_ref *refs = NULL;
	float *mem = NULL, *big = NULL, *wmem = NULL;
	int iters = argc > 2 && argv[2][0] != '-' ? atoi(argv[2]) : 20;
	int json = strcmp(argv[argc - 1], "--json") == 0, n;
	long bytes, maxbytes;
	double *tc, *ta, *tn, sumsq;
	hexi_rc rc;

	if (argc < 2 || iters < 1) {
		fprintf(stderr, "usage: bench_sync PLAN [ITERS] [--json]\n");
		return 2;
	}
	hexi_rt_opts_defaults(&o);
	o.plan_path = argv[1];
	rc = hexi_rt_init(&argc, &argv, &o, &rt);
	if (rc != HEXI_OK) {
		fprintf(stderr, "bench_sync: %s\n", hexi_errmsg(rc));
		return (int)rc;
	}
	n = make_refs(rt, &refs, &mem, &wmem);
	rc = rt_sync_create(rt, rt->comm, NULL, refs, n, &s);
	if (rc == HEXI_OK && rt->role.zero > 0)
		rc = rt_sync_shard(s, rt->role.zero, (size_t)1 << 20);
	if (rc != HEXI_OK) {
		fprintf(stderr, "bench_sync: %s\n", hexi_errmsg(rc));
		hexi_rt_abort(rt, rc);
	}
	bytes = (long)rt_sync_bytes(s);
	MPI_Allreduce(&bytes, &maxbytes, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
	big = calloc((size_t)maxbytes / sizeof(float) + 1, sizeof(float));
	tc = calloc((size_t)iters, sizeof(double));
	ta = calloc((size_t)iters, sizeof(double));
	tn = calloc((size_t)iters, sizeof(double));
	for (int i = -3; i < iters; i++) {
		/* the baseline and the chunked sync without and with the
		 * norm, each after a barrier; the baseline goes first on even
		 * repetitions and last on odd ones, so that neither side
		 * always runs right after the other */
		double t0, t1, t2 = 0, t3 = 0, t4, t5;
		if ((i & 1) == 0)
			t2 = time_allreduce(big, maxbytes, &t3);
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		rc = sync_once(rt, s, NULL);
		t1 = MPI_Wtime();
		MPI_Barrier(MPI_COMM_WORLD);
		t4 = MPI_Wtime();
		if (rc == HEXI_OK)
			rc = sync_once(rt, s, &sumsq);
		t5 = MPI_Wtime();
		if (rc != HEXI_OK) {
			fprintf(stderr, "bench_sync: %s\n", hexi_errmsg(rc));
			hexi_rt_abort(rt, rc);
		}
		if ((i & 1) != 0)
			t2 = time_allreduce(big, maxbytes, &t3);
		double loc[3] = {t1 - t0, t3 - t2, t5 - t4}, mx[3];
		/* the slowest rank decides */
		MPI_Allreduce(loc, mx, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		if (i >= 0) {
			tc[i] = mx[0];
			ta[i] = mx[1];
			tn[i] = mx[2];
		}
	}
	qsort(tc, (size_t)iters, sizeof(double), cmp_d);
	qsort(ta, (size_t)iters, sizeof(double), cmp_d);
	qsort(tn, (size_t)iters, sizeof(double), cmp_d);
	if (hexi_rt_rank(rt) == 0) {
		double c = tc[iters / 2], a = ta[iters / 2], cn = tn[iters / 2];
		if (json)
			printf(
			    "{\"bench\":\"sync\",\"plan\":\"%s\",\"ranks\":%d,"
			    "\"zero\":%d,"
			    "\"bytes\":%ld,\"groups\":%d,\"chunked_s\":%.6g,"
			    "\"allreduce_s\":%.6g,\"ratio\":%.4f,"
			    "\"min_ratio\":%.4f}\n",
			    argv[1], hexi_rt_world_size(rt), rt_sync_zero(s),
			    maxbytes, rt_sync_ngroups(s), c, a, c / a,
			    tc[0] / ta[0]);
		else
			printf("sync %s: %d ranks, %ld bytes, %d groups on "
			       "rank 0: %s %.3f ms (%.3f ms with the "
			       "global norm), one MPI_Allreduce %.3f ms; ratio "
			       "%.3f (goal <= 1.1), with norm %.3f; fastest "
			       "%.3f / %.3f ms: ratio %.3f\n",
			       argv[1], hexi_rt_world_size(rt), maxbytes,
			       rt_sync_ngroups(s),
			       rt_sync_zero(s) > 0
				   ? "sharded (reduce-scatter + all-gather)"
				   : "chunked",
			       c * 1e3, cn * 1e3, a * 1e3, c / a, cn / a,
			       tc[0] * 1e3, ta[0] * 1e3, tc[0] / ta[0]);
	}
	free(mem);
	free(wmem);
	free(refs);
	free(big);
	free(tc);
	free(ta);
	free(tn);
	rt_sync_destroy(s);
	hexi_rt_destroy(rt);
	return 0;
}
