/*
 * train_gpu.c - the trainer on the nccl backend: the same plan, 1F1B
 * schedule, chunked gradient sync, clipping and optimizers as the CPU path
 * (train.c), with this rank's stage shard on its GPU (rt_cuda_model) and
 * device buffers over the NCCL communicator rt->gcomm:
 *  - the TP all-reduces inside a block go to the NCCL group of the stage;
 *  - activations and their gradients travel between stage leaders as
 *    device buffers (rt_pipe_run with an rt_pipe_io on gcomm);
 *  - the gradient sync (sync.c) packs and all-reduces device chunks, with
 *    device copies and a device sum of squares (rt_mem_ops below); under
 *    train.zero 1 and 2 it reduce-scatters them, updates the owned ranges
 *    with device kernels (their AdamW moments exist only there, in device
 *    memory) and all-gathers the fp32 master weights (doc/DECISIONS.md
 *    140);
 *  - control values (loss, norm, flags, stats) stay on the host
 *    communicator rt->comm.
 * Plain C over rt_cuda.h: it also runs against the host emulation of
 * rt_cuda.h (tests/gpuemu), which is how its host logic is tested on
 * machines without a GPU.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cuda.h"
#include "rt_model.h"
#include "rt_pipe.h"
#include "rt_train.h"

struct rt_gtrain {
	rt_cuda_model *m;
	rt_cuda_dtype dt;
	rt_cuda_stream s;
	rt_group *tp;	/* NCCL group of my stage (TP > 1), else NULL */
	rt_sync *sync;	/* chunked sync over gcomm */
	void *in, *out; /* device activation buffers of the pipeline */
	size_t act_bytes;
	double *dsumsq; /* device accumulator of the norm */
	rt_mem_ops mem;
	rt_param view;	     /* checkpoint staging view */
	float *hw, *hm, *hv; /* [maxn] host staging */
	size_t maxn;
};

/* ---- device memory operations of the gradient sync ----------------------
 */

static hexi_rc dm_alloc(void *ctx, void **p, size_t bytes)
{
	(void)ctx;
	return rt_cuda_alloc(p, bytes);
}

static void dm_free(void *ctx, void *p)
{
	(void)ctx;
	rt_cuda_free(p);
}

static hexi_rc dm_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
	return rt_cuda_copy(((rt_gtrain *)ctx)->s, dst, src, bytes);
}

static hexi_rc dm_zero(void *ctx, void *p, size_t bytes)
{
	return rt_cuda_memset0(((rt_gtrain *)ctx)->s, p, bytes);
}

static hexi_rc dm_fence(void *ctx)
{
	return rt_cuda_sync(((rt_gtrain *)ctx)->s);
}

static hexi_rc dm_sumsq_add(void *ctx, const float *x, size_t n)
{
	rt_gtrain *g = ctx;

	return rt_cuda_sumsq_f32(g->s, x, n, g->dsumsq);
}

static hexi_rc dm_add(void *ctx, float *dst, const float *src, size_t n)
{
	return rt_cuda_add(((rt_gtrain *)ctx)->s, RT_CUDA_F32, dst, dst, src,
			   n);
}

static hexi_rc dm_scale(void *ctx, float *x, float f, size_t n)
{
	return rt_cuda_scale_f32(((rt_gtrain *)ctx)->s, x, f, n);
}

/* One owned range of the sharded optimizer: the fp32 master weights w,
 * the owned gradient sum g and the range's own moments (the dt copies are
 * cast again after the all-gather: gpu_after_sharded). */
static hexi_rc dm_optim(void *ctx, float *w, float *g, float *m, float *v,
			size_t n, float lr, const rt_adamw_opts *ao, int step,
			int decay)
{
	rt_gtrain *gt = ctx;

	if (ao == NULL)
		return rt_cuda_sgd_f32(gt->s, w, g, lr, n);
	return rt_cuda_adamw(gt->s, RT_CUDA_F32, w, NULL, g, m, v, n, ao->lr,
			     ao->beta1, ao->beta2, ao->eps,
			     decay ? ao->weight_decay : 0.0f, step);
}

static hexi_rc dm_sumsq_take(void *ctx, double *out)
{
	rt_gtrain *g = ctx;
	hexi_rc rc = rt_cuda_sync(g->s);

	if (rc == HEXI_OK)
		rc = rt_cuda_download(out, g->dsumsq, sizeof(*out));
	if (rc == HEXI_OK)
		rc = rt_cuda_memset0(g->s, g->dsumsq, sizeof(double));
	return rc;
}

/* ---- create --------------------------------------------------------------
 */

static hexi_rc tp_allreduce(void *ctx, float *buf, size_t n)
{
	hexi_trainer *t = ctx;
	double t0 = hexi_now_s();
	hexi_rc rc;

	if (t->gpu->tp == NULL)
		return hexi_error(HEXI_ERR_INTERNAL,
				  "rank %d: TP all-reduce before the NCCL "
				  "group exists",
				  t->rt->rank);
	rc = rt_allreduce_f32(t->gpu->tp, buf, n);
	t->tp_s += hexi_now_s() - t0;
	return rc;
}

/* Per rank: the stage shard on the device, buffers. */
hexi_rc rt_gtrain_create(hexi_trainer *t)
{
	hexi_rt *rt = t->rt;
	rt_gtrain *g = calloc(1, sizeof(*g));
	rt_cuda_shard_cfg cfg;
	rt_model_config mc;
	rt_cuda_tp tp = {.allreduce_sum = tp_allreduce, .ctx = t};
	rt_model_mem mm;
	hexi_rc rc;

	if (g == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU trainer");
	t->gpu = g;
	t->ops = &rt_gtrain_ops;
	g->dt = (t->o.dtype != NULL && strcmp(t->o.dtype, "bf16") == 0)
		    ? RT_CUDA_BF16
		    : RT_CUDA_F32;
	g->s = rt_cuda_compute_stream(rt->cuda);
	g->mem = (rt_mem_ops){.ctx = g,
			      .alloc = dm_alloc,
			      .free = dm_free,
			      .copy = dm_copy,
			      .zero = dm_zero,
			      .fence = dm_fence,
			      .sumsq_add = dm_sumsq_add,
			      .sumsq_take = dm_sumsq_take,
			      .add = dm_add,
			      .scale = dm_scale,
			      .optim = dm_optim};
	rt_train_stage_config(t, &mc);
	cfg = (rt_cuda_shard_cfg){
	    .model = &rt->plan->model,
	    .layer_begin = mc.layer_begin,
	    .layer_end = mc.layer_end,
	    .tp_rank = mc.tp_rank,
	    .tp_size = mc.tp_size,
	    .has_embed = mc.has_embed,
	    .has_head = mc.has_head,
	    .max_slots = mc.max_slots,
	    .B = mc.max_batch,
	    .dt = g->dt,
	    .seed = mc.seed,
	    .recompute = mc.recompute,
	    .no_moments = mc.no_moments,
	    .grad_window = mc.grad_window,
	    .init = {.tensor = rt_init_tensor, .std = rt_init_std}};
	rc = rt_cuda_shard_create(rt->cuda, &cfg, mc.tp_size > 1 ? &tp : NULL,
				  &g->m);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "rank %d: GPU stage (%s)",
					 rt->rank, rt_cuda_dtype_name(g->dt));
	rt_cuda_model_mem_bytes(g->m, &mm);
	rt_train_count_model(rt, &mm);
	g->act_bytes = rt_cuda_model_act_bytes(g->m);
	if ((rc = rt_cuda_alloc(&g->in, g->act_bytes)) != HEXI_OK ||
	    (rc = rt_cuda_alloc(&g->out, g->act_bytes)) != HEXI_OK ||
	    (rc = rt_cuda_alloc((void **)&g->dsumsq, sizeof(double))) !=
		HEXI_OK)
		return hexi_error_prefix(rc, "rank %d: pipeline buffers",
					 rt->rank);
	rt_mem_count(rt, HEXI_MEM_COMM, 2.0 * (double)g->act_bytes);
	rt_mem_count(rt, HEXI_MEM_WORK, sizeof(double));
	return HEXI_OK;
}

/* NCCL connects two ranks lazily, on their first point-to-point call, and
 * needs both in it: 1F1B's first call on stage 0 is a group of queued
 * sends to stage 1 plus a receive from it, which stage 1 cannot match
 * before it has received, so the first step could hang.  Every leader
 * therefore exchanges one activation-sized message with each neighbouring
 * leader first (the previous one, then the next: a chain, no cycle), with
 * the same size as the step's traffic so the same channels connect. */
#define TAG_PRECONNECT ((1 << 20) - 1)

static hexi_rc preconnect(hexi_trainer *t)
{
	hexi_rt *rt = t->rt;
	rt_gtrain *g = t->gpu;
	rt_comm *c = rt->gcomm;
	const int peers[2] = {rt->groups.prev_leader, rt->groups.next_leader};
	hexi_rc rc = HEXI_OK;

	if (rt->rank != rt->groups.leader)
		return HEXI_OK;
	for (int i = 0; rc == HEXI_OK && i < 2; i++) {
		if (peers[i] < 0)
			continue;
		rc = c->ops->send(c, g->out, g->act_bytes, peers[i],
				  TAG_PRECONNECT);
		if (rc == HEXI_OK)
			rc = c->ops->recv(c, g->in, g->act_bytes, peers[i],
					  TAG_PRECONNECT);
		if (rc != HEXI_OK)
			rc = hexi_error_prefix(rc,
					       "rank %d: first exchange with "
					       "stage leader %d",
					       rt->rank, peers[i]);
	}
	if (rc == HEXI_OK)
		rc = c->ops->flush(c);
	return rc;
}

/* The grad hook under zero 2: every backward hands each finished unit
 * (head, layer, embedding) of the device's gradient window to the sync,
 * which reduce-scatters it into the owned sums before the next unit's
 * backward zeroes the window (rt_cuda_shard_cfg.grad_window; the CPU's
 * zero2_hook).  Validation sends nothing (every rank validates alike). */
static hexi_rc gpu_zero2_hook(void *ctx, int layer)
{
	hexi_trainer *t = ctx;

	return t->eval ? HEXI_OK
		       : rt_sync_grad_ready(t->gpu->sync, t->bwd_mb, layer);
}

/* The overlap hook: the step's last backward queued the gradients of
 * layers >= layer on the compute stream; their sync starts on NCCL's dp
 * stream after an event there (rt_comm_nccl_order_after), no host wait. */
static hexi_rc gpu_grad_hook(void *ctx, int layer)
{
	hexi_trainer *t = ctx;

	return rt_train_grad_ready(t, t->gpu->sync, layer);
}

static hexi_rc gpu_overlap(hexi_trainer *t)
{
	rt_gtrain *g = t->gpu;
	int on;
	hexi_rc rc;

	rt_comm_nccl_order_after(t->rt->gcomm, g->s);
	rc = rt_train_overlap(t, g->sync, &on);
	if (on)
		rt_cuda_model_set_grad_hook(g->m, gpu_grad_hook, t);
	return rc;
}

/* Collective, after every rank built its stage: the NCCL group of the
 * stage (TP > 1), the connections to the neighbouring stages, then the
 * chunk groups of the gradient sync. */
hexi_rc rt_gtrain_connect(hexi_trainer *t)
{
	hexi_rt *rt = t->rt;
	rt_gtrain *g = t->gpu;
	int n = rt_cuda_model_nparams(g->m);
	rt_param_ref *refs;
	hexi_rc rc = HEXI_OK;
	int ok;

	if (rt->role.tp_size > 1)
		rc = rt_comm_group_get(rt->gcomm, rt->groups.tp->ranks,
				       rt->groups.tp->n, &g->tp);
	ok = hexi_rt_all_ok(rt, rc == HEXI_OK);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "rank %d: NCCL TP group",
					 rt->rank);
	if (!ok)
		return hexi_error(HEXI_ERR_PEER,
				  "rank %d: another rank failed to join its "
				  "NCCL TP group",
				  rt->rank);
	rc = preconnect(t);
	ok = hexi_rt_all_ok(rt, rc == HEXI_OK);
	if (rc != HEXI_OK)
		return rc;
	if (!ok)
		return hexi_error(HEXI_ERR_PEER,
				  "rank %d: another stage leader failed its "
				  "first NCCL exchange",
				  rt->rank);
	refs = calloc((size_t)n + 1, sizeof(*refs));
	if (refs == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "GPU trainer: %d params", n);
	for (int i = 0; i < n; i++) {
		const rt_cuda_param *p = rt_cuda_model_param(g->m, i);
		refs[i].name = p->name;
		refs[i].row_begin = p->row_begin;
		refs[i].row_end = p->row_end;
		refs[i].cols = p->cols;
		refs[i].grad = p->g;
		refs[i].w = p->master; /* the sharded sync updates these */
		refs[i].decay = p->decay;
		if (p->n > g->maxn)
			g->maxn = p->n;
	}
	rc = rt_sync_create(rt, rt->gcomm, &g->mem, refs, n, &g->sync);
	free(refs);
	if (rc == HEXI_OK)
		rc = rt_train_shard(t, g->sync, rt_cuda_model_numel(g->m));
	if (rc == HEXI_OK && rt_sync_zero(g->sync) == 2)
		rt_cuda_model_set_grad_hook(g->m, gpu_zero2_hook, t);
	else if (rc == HEXI_OK)
		rc = gpu_overlap(t);
	return rc;
}

void rt_gtrain_destroy(rt_gtrain *g)
{
	if (g == NULL)
		return;
	rt_sync_destroy(g->sync);
	rt_cuda_model_destroy(g->m);
	rt_cuda_free(g->in);
	rt_cuda_free(g->out);
	rt_cuda_free(g->dsumsq);
	free(g->hw);
	free(g->hm);
	free(g->hv);
	free(g);
}

/* ---- step ----------------------------------------------------------------
 */

static hexi_rc gpu_forward(void *arg, int mb, int slot, const void *in,
			   void *out, double *loss_sum)
{
	hexi_trainer *t = arg;
	int first, last;

	rt_train_stage_data(t, mb, &first, &last);
	*loss_sum = 0;
	return rt_cuda_model_forward(t->gpu->m, slot, first ? t->tok : NULL, in,
				     out, last ? t->tgt : NULL,
				     (float)(1.0 / t->global_batch), loss_sum);
}

/* The micro-batch and whether it is the step's last tell the grad hooks
 * what to do (gpu_grad_hook, gpu_zero2_hook). */
static hexi_rc gpu_backward(void *arg, int mb, int slot, const void *dout,
			    void *din)
{
	hexi_trainer *t = arg;
	rt_gtrain *g = t->gpu;

	/* as the CPU path: the last backward of a step finishes the
	 * gradients (gpu_grad_hook) */
	t->bwd_last = mb == t->rt->role.micro_batches - 1;
	t->bwd_mb = mb;
	/* under zero 2 gpu_zero2_hook hands over each unit */
	return rt_cuda_model_backward(g->m, slot, dout, din);
}

static hexi_rc gpu_zero_grad(hexi_trainer *t)
{
	rt_sync_zero_grad(t->gpu->sync);
	return rt_cuda_model_zero_grad(t->gpu->m);
}

static void gpu_bind(hexi_trainer *t, rt_pipe_io *io, rt_stage_cb *cb,
		     rt_sync **sync)
{
	rt_gtrain *g = t->gpu;

	/* with TP 1 the group is never used for traffic (one member) */
	*io = (rt_pipe_io){.comm = t->rt->gcomm,
			   .tp = g->tp != NULL ? g->tp : t->rt->groups.tp,
			   .in = g->in,
			   .out = g->out,
			   .bytes = g->act_bytes};
	*cb = (rt_stage_cb){
	    .arg = t, .forward = gpu_forward, .backward = gpu_backward};
	*sync = g->sync;
}

static hexi_rc gpu_grad_scale(hexi_trainer *t, float f)
{
	return rt_cuda_model_grad_scale(t->gpu->m, f);
}

static hexi_rc gpu_sgd(hexi_trainer *t, float lr)
{
	return rt_cuda_model_sgd(t->gpu->m, lr);
}

static hexi_rc gpu_adamw(hexi_trainer *t, const rt_adamw_opts *o, int step)
{
	return rt_cuda_model_adamw(t->gpu->m, o->lr, o->beta1, o->beta2, o->eps,
				   o->weight_decay, step);
}

/* After rt_sync_step: the masters of every range are the updated ones
 * (own update, all-gather of the others); the bf16 copies follow. */
static hexi_rc gpu_after_sharded(hexi_trainer *t)
{
	hexi_rc rc = rt_cuda_model_refresh(t->gpu->m);

	return rc == HEXI_OK ? rt_cuda_sync(t->gpu->s) : rc;
}

const rt_stage_ops rt_gtrain_ops = {.zero_grad = gpu_zero_grad,
				    .bind = gpu_bind,
				    .grad_scale = gpu_grad_scale,
				    .sgd = gpu_sgd,
				    .adamw = gpu_adamw,
				    .after_sharded = gpu_after_sharded};

rt_sync *rt_gtrain_sync(const hexi_trainer *t)
{
	return t->gpu->sync;
}

/* ---- host copies: dump and checkpoints ------------------------------------
 */

int rt_gtrain_nparams(const hexi_trainer *t)
{
	return rt_cuda_model_nparams(t->gpu->m);
}

static hexi_rc staging(rt_gtrain *g)
{
	size_t n = g->maxn ? g->maxn : 1;

	if (g->hw != NULL)
		return HEXI_OK;
	g->hw = malloc(n * sizeof(float));
	g->hm = malloc(n * sizeof(float));
	g->hv = malloc(n * sizeof(float));
	if (g->hw == NULL || g->hm == NULL || g->hv == NULL)
		return hexi_error(HEXI_ERR_NOMEM,
				  "GPU trainer: staging of %zu floats", n);
	return HEXI_OK;
}

hexi_rc rt_gtrain_param_host(hexi_trainer *t, int i, int fetch, rt_param **out)
{
	rt_gtrain *g = t->gpu;
	const rt_cuda_param *p = rt_cuda_model_param(g->m, i);
	rt_param *v = &g->view;
	hexi_rc rc;

	if (p == NULL)
		return hexi_error(HEXI_ERR_RANGE, "GPU trainer: parameter %d",
				  i);
	if ((rc = staging(g)) != HEXI_OK)
		return rc;
	memset(v, 0, sizeof(*v));
	hexi_strlcpy(v->name, p->name, sizeof(v->name));
	v->ndim = p->ndim;
	v->shape[0] = p->rows;
	v->shape[1] = p->cols;
	v->row_begin = p->row_begin;
	v->row_end = p->row_end;
	v->n = p->n;
	v->w = g->hw;
	v->m = g->hm;
	v->v = g->hv;
	if (fetch >= 1 &&
	    (rc = rt_cuda_model_read(g->m, p->name, 0, g->hw, p->n)) != HEXI_OK)
		return rc;
	if (fetch >= 2 &&
	    ((rc = rt_cuda_model_read(g->m, p->name, 2, g->hm, p->n)) !=
		 HEXI_OK ||
	     (rc = rt_cuda_model_read(g->m, p->name, 3, g->hv, p->n)) !=
		 HEXI_OK))
		return rc;
	*out = v;
	return HEXI_OK;
}

hexi_rc rt_gtrain_param_store(hexi_trainer *t, int i, int moments)
{
	rt_gtrain *g = t->gpu;
	const rt_cuda_param *p = rt_cuda_model_param(g->m, i);
	hexi_rc rc;

	if (p == NULL || g->hw == NULL)
		return hexi_error(HEXI_ERR_INTERNAL,
				  "GPU trainer: store of parameter %d", i);
	rc = rt_cuda_model_write(g->m, p->name, 0, g->hw, p->n);
	if (rc == HEXI_OK && moments)
		rc = rt_cuda_model_write(g->m, p->name, 2, g->hm, p->n);
	if (rc == HEXI_OK && moments)
		rc = rt_cuda_model_write(g->m, p->name, 3, g->hv, p->n);
	return rc;
}

/* Sharded moments of owned range sg (device memory) through the host
 * staging: fetch downloads them into *m, *v; store uploads them back. */
hexi_rc rt_gtrain_seg_host(hexi_trainer *t, const rt_sync_seg *sg, int fetch,
			   float **m, float **v)
{
	rt_gtrain *g = t->gpu;
	hexi_rc rc;

	if ((rc = staging(g)) != HEXI_OK)
		return rc;
	if (sg->n > g->maxn)
		return hexi_error(HEXI_ERR_INTERNAL,
				  "GPU trainer: owned range of %zu elements "
				  "beyond the staging's %zu",
				  sg->n, g->maxn);
	*m = g->hm;
	*v = g->hv;
	if (!fetch)
		return HEXI_OK;
	if ((rc = rt_cuda_sync(g->s)) == HEXI_OK &&
	    (rc = rt_cuda_download(g->hm, sg->m, sg->n * sizeof(float))) ==
		HEXI_OK)
		rc = rt_cuda_download(g->hv, sg->v, sg->n * sizeof(float));
	return rc;
}

hexi_rc rt_gtrain_seg_store(hexi_trainer *t, const rt_sync_seg *sg)
{
	rt_gtrain *g = t->gpu;
	hexi_rc rc = rt_cuda_sync(g->s);

	if (rc == HEXI_OK)
		rc = rt_cuda_upload(sg->m, g->hm, sg->n * sizeof(float));
	if (rc == HEXI_OK)
		rc = rt_cuda_upload(sg->v, g->hv, sg->n * sizeof(float));
	return rc;
}
