/*
 * train_gpu.c - the trainer on the nccl backend: every rank holds the whole
 * model on its GPU (rt_cuda_model: one stage, TP 1), pipelines are data
 * parallel.  Per step: forward and backward of each micro-batch of this
 * pipeline's share of the global batch (gradients accumulated in fp32),
 * weighting by micro-batch size / global batch, one NCCL all-reduce per
 * parameter over all ranks (with one stage of TP 1 every rank holds every
 * chunk, so the chunked sync of doc/LAYOUT.md is one group: the world),
 * the global L2 norm on the device, clipping and AdamW on the device.
 *
 * Not supported yet on this backend (HEXI_ERR_UNSUPPORTED with the reason):
 * plans with more than one stage or TP > 1, SGD, checkpoints.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "rt_cuda.h"
#include "rt_train.h"

struct rt_gtrain {
	rt_cuda_model *m;
	rt_cuda_dtype dt;
	rt_group *world; /* NCCL group of all ranks; NULL with one rank */
	float *acc;	 /* fp32 gradient sum of micro-batches, or NULL */
	size_t *off;	 /* [np] offsets of each parameter in acc */
	double *dsumsq;	 /* one device double */
	int np;
};

hexi_rc rt_gtrain_check(const hexi_rt *rt, const hexi_train_opts *o)
{
	const hexi_plan *p = rt->plan;

	for (int i = 0; i < p->npipelines; i++) {
		const hexi_pipeline *pl = &p->pipelines[i];
		if (pl->nstages > 1)
			return hexi_error(HEXI_ERR_UNSUPPORTED,
					  "not supported yet: pipeline "
					  "parallelism on the nccl backend "
					  "(pipeline %d has %d stages); use "
					  "--backend mpi or a plan of "
					  "one-stage pipelines",
					  i, pl->nstages);
		for (int s = 0; s < pl->nstages; s++)
			if (pl->stages[s].tp > 1)
				return hexi_error(
				    HEXI_ERR_UNSUPPORTED,
				    "not supported yet: tensor parallelism "
				    "on the nccl backend (pipeline %d stage "
				    "%d has TP %d); use --backend mpi",
				    i, s, pl->stages[s].tp);
	}
	if (o->optimizer != HEXI_OPT_ADAMW)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "not supported yet: --optimizer sgd on the "
				  "nccl backend (AdamW only)");
	if (o->save_every > 0)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "not supported yet: checkpoints "
				  "(--save-every) on the nccl backend");
	return HEXI_OK;
}

static hexi_rc cuda_rc(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return HEXI_OK;
	return hexi_error(HEXI_ERR_CUDA, "GPU trainer: %s: %s", what,
			  cudaGetErrorString(e));
}

hexi_rc rt_gtrain_create(hexi_trainer *t)
{
	hexi_rt *rt = t->rt;
	rt_gtrain *g = calloc(1, sizeof(*g));
	const char *name;
	int64_t rows, cols;
	size_t n, total = 0;
	float *grad;
	hexi_rc rc;

	if (g == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU trainer");
	t->gpu = g;
	g->dt = (t->o.dtype != NULL && strcmp(t->o.dtype, "bf16") == 0)
		    ? RT_CUDA_BF16
		    : RT_CUDA_F32;
	rc = rt_cuda_model_create(rt->cuda, &rt->plan->model, g->dt, t->mbs,
				  t->o.seed, &g->m);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "rank %d: GPU model (%s, %d x %d)",
					 rt->rank, rt_cuda_dtype_name(g->dt),
					 t->mbs, t->T);
	g->np = rt_cuda_model_nparams(g->m);
	g->off = calloc((size_t)g->np, sizeof(*g->off));
	if (g->off == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU trainer");
	for (int i = 0; i < g->np; i++) {
		if ((rc = rt_cuda_model_param(g->m, i, &name, &rows, &cols, &n,
					      &grad)) != HEXI_OK)
			return rc;
		g->off[i] = total;
		total += n;
	}
	if (rt->role.micro_batches > 1 &&
	    (rc = rt_cuda_alloc((void **)&g->acc, total * sizeof(float))) !=
		HEXI_OK)
		return hexi_error_prefix(rc, "rank %d: gradient accumulator",
					 rt->rank);
	return rt_cuda_alloc((void **)&g->dsumsq, sizeof(double));
}

/* Collective, after every rank built its model: the NCCL group of the
 * gradient sum. */
hexi_rc rt_gtrain_connect(hexi_trainer *t)
{
	hexi_rt *rt = t->rt;
	rt_gtrain *g = t->gpu;
	int *ranks = NULL;
	hexi_rc rc = HEXI_OK;

	if (rt->world_size > 1) {
		ranks = malloc(sizeof(int) * (size_t)rt->world_size);
		if (ranks == NULL)
			return hexi_error(HEXI_ERR_NOMEM, "GPU trainer");
		for (int i = 0; i < rt->world_size; i++)
			ranks[i] = i;
		rc = rt_comm_group_get(rt->gcomm, ranks, rt->world_size,
				       &g->world);
		free(ranks);
	}
	return rc;
}

void rt_gtrain_destroy(rt_gtrain *g)
{
	if (g == NULL)
		return;
	rt_cuda_model_destroy(g->m);
	rt_cuda_free(g->acc);
	rt_cuda_free(g->dsumsq);
	free(g->off);
	free(g);
}

/* Accumulate micro-batch mb's gradients (of M): acc = g (first), acc += g,
 * and at the last one g += acc. */
static hexi_rc accumulate(hexi_trainer *t, rt_cuda_stream s, int mb, int M)
{
	rt_gtrain *g = t->gpu;
	const char *name;
	int64_t rows, cols;
	size_t n;
	float *grad;
	hexi_rc rc;

	for (int i = 0; i < g->np; i++) {
		float *acc = g->acc + g->off[i];
		if ((rc = rt_cuda_model_param(g->m, i, &name, &rows, &cols, &n,
					      &grad)) != HEXI_OK)
			return rc;
		if (mb == 0)
			rc = cuda_rc(cudaMemcpyAsync(acc, grad,
						     n * sizeof(float),
						     cudaMemcpyDeviceToDevice,
						     (cudaStream_t)s),
				     "gradient copy");
		else if (mb < M - 1)
			rc = rt_cuda_add(s, RT_CUDA_F32, acc, acc, grad, n);
		else
			rc = rt_cuda_add(s, RT_CUDA_F32, grad, grad, acc, n);
		if (rc != HEXI_OK)
			return rc;
	}
	return rt_cuda_sync(s);
}

/* Every gradient *= f on the compute stream. */
static hexi_rc scale_all(rt_gtrain *g, rt_cuda_stream s, float f)
{
	const char *name;
	int64_t rows, cols;
	size_t n;
	float *grad;
	hexi_rc rc;

	for (int i = 0; i < g->np; i++) {
		if ((rc = rt_cuda_model_param(g->m, i, &name, &rows, &cols, &n,
					      &grad)) != HEXI_OK ||
		    (rc = rt_cuda_scale_f32(s, grad, f, n)) != HEXI_OK)
			return rc;
	}
	return rt_cuda_sync(s);
}

/* Sum over all ranks (NCCL), then the squared global norm. */
static hexi_rc sync_grads(hexi_trainer *t, rt_cuda_stream s, double *sumsq)
{
	rt_gtrain *g = t->gpu;
	const char *name;
	int64_t rows, cols;
	size_t n;
	float *grad;
	const double zero = 0.0;
	hexi_rc rc;

	for (int i = 0; g->world != NULL && i < g->np; i++) {
		if ((rc = rt_cuda_model_param(g->m, i, &name, &rows, &cols, &n,
					      &grad)) != HEXI_OK)
			return rc;
		rc = rt_allreduce_f32(g->world, grad, n);
		if (rc != HEXI_OK)
			return hexi_error_prefix(rc, "gradient of %s", name);
	}
	if ((rc = rt_cuda_upload(g->dsumsq, &zero, sizeof(zero))) != HEXI_OK)
		return rc;
	for (int i = 0; i < g->np; i++) {
		if ((rc = rt_cuda_model_param(g->m, i, &name, &rows, &cols, &n,
					      &grad)) != HEXI_OK ||
		    (rc = rt_cuda_sumsq_f32(s, grad, n, g->dsumsq)) != HEXI_OK)
			return rc;
	}
	if ((rc = rt_cuda_sync(s)) != HEXI_OK)
		return rc;
	return rt_cuda_download(sumsq, g->dsumsq, sizeof(*sumsq));
}

hexi_rc rt_gtrain_step(hexi_trainer *t, hexi_step_stats *st)
{
	rt_gtrain *g = t->gpu;
	rt_cuda_stream s = rt_cuda_compute_stream(t->rt->cuda);
	const int M = t->rt->role.micro_batches;
	double loss_sum = 0, sumsq = 0, t0, t1, t2;
	hexi_rc rc;

	t0 = hexi_now_s();
	for (int mb = 0; mb < M; mb++) {
		double loss = 0;
		rt_train_micro_batch(t, mb);
		if ((rc = rt_cuda_model_fwd_bwd(g->m, t->tok, t->tgt, &loss)) !=
		    HEXI_OK)
			return hexi_error_prefix(rc, "micro-batch %d", mb);
		loss_sum += loss * t->mbs;
		if (M > 1 && (rc = accumulate(t, s, mb, M)) != HEXI_OK)
			return rc;
	}
	/* each micro-batch's gradient is its mean over mbs samples */
	if ((rc = scale_all(g, s, (float)((double)t->mbs / t->global_batch))) !=
	    HEXI_OK)
		return rc;
	t1 = hexi_now_s();
	rc = sync_grads(t, s, &sumsq);
	if (rc == HEXI_OK)
		rc = rt_train_global_loss(t, loss_sum, &st->loss);
	if (rc != HEXI_OK)
		return rc;
	t2 = hexi_now_s();
	st->grad_norm = sqrt(sumsq);
	if (t->o.clip > 0 && st->grad_norm > t->o.clip &&
	    (rc = scale_all(
		 g, s, (float)(t->o.clip / (st->grad_norm + 1e-6)))) != HEXI_OK)
		return rc;
	t->opt_step++;
	rc = rt_cuda_model_adamw(g->m, (float)t->o.lr, (float)t->o.beta1,
				 (float)t->o.beta2, (float)t->o.eps,
				 (float)t->o.weight_decay, (int)t->opt_step);
	if (rc != HEXI_OK)
		return rc;
	st->time_s = hexi_now_s() - t0;
	st->dp_sync_s = t2 - t1;
	st->compute_s = st->time_s - st->dp_sync_s;
	st->tokens_per_s = (double)t->global_batch * t->T / st->time_s;
	return HEXI_OK;
}

/* hexi_trainer_dump's format, from the fp32 master weights. */
hexi_rc rt_gtrain_dump(hexi_trainer *t, FILE *f, const char *path)
{
	rt_gtrain *g = t->gpu;
	const char *name;
	int64_t rows, cols;
	size_t n;
	float *grad, *host = NULL;
	hexi_rc rc = HEXI_OK;

	fprintf(f, "hexitrain-dump 1 rank %d pipeline %d nparams %d\n",
		t->rt->rank, t->rt->role.pipeline, g->np);
	for (int i = 0; rc == HEXI_OK && i < g->np; i++) {
		if ((rc = rt_cuda_model_param(g->m, i, &name, &rows, &cols, &n,
					      &grad)) != HEXI_OK)
			break;
		float *q = realloc(host, n * sizeof(float));
		if (q == NULL) {
			rc = hexi_error(HEXI_ERR_NOMEM, "dump of %s", name);
			break;
		}
		host = q;
		if ((rc = rt_cuda_model_read(g->m, name, 0, host, n)) !=
		    HEXI_OK)
			break;
		fprintf(f, "%s %lld %lld %d %d %zu\n", name, (long long)rows,
			(long long)cols, 0, (int)rows, n);
		if (fwrite(host, sizeof(float), n, f) != n)
			rc = hexi_error(HEXI_ERR_IO, "%s: write failed", path);
	}
	free(host);
	return rc;
}
