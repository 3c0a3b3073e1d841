/*
 * train.c - the training step on a plan: 1F1B, chunked gradient sync,
 * global-norm clipping, AdamW or SGD, checkpoints.  What a stage holds and
 * which samples it reads: train_stage.c; parameters as host arrays:
 * train_params.c.
 */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_model.h"
#include "rt_pipe.h"
#include "rt_train.h"

void hexi_train_opts_defaults(hexi_train_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->steps = 10;
	o->lr = 1e-3;
	o->seed = 1234;
	o->optimizer = HEXI_OPT_ADAMW;
	o->beta1 = 0.9;
	o->beta2 = 0.95;
	o->eps = 1e-8;
	o->weight_decay = 0.0;
	o->clip = 1.0;
}

/* ---- data (the samples themselves: train_stage.c) ----------------------- */

static hexi_rc open_data(hexi_trainer *t, const hexi_train_opts *o)
{
	rt_data_format f = o->data_format == 1 ? RT_DATA_BYTES : RT_DATA_TOKENS;
	hexi_rc rc = HEXI_OK;

	if (o->data_path != NULL)
		rc = rt_data_open(&t->train_data, o->data_path, f, t->T, t->V,
				  t->o.seed);
	if (rc == HEXI_OK && o->val_path != NULL)
		rc = rt_data_open_opt(&t->val_data, "--val-data", o->val_path,
				      f, t->T, t->V, t->o.seed);
	/* validation reads windows 0, 1, 2, ... once each: a file with fewer
	 * would count some twice (the loss of another text, silently).
	 * Checked whenever there is a --val-data, --eval-every or not:
	 * hexitrain validates at the end without it (hexitrain(1)), and
	 * refusing then would waste the run. */
	if (rc == HEXI_OK && o->val_path != NULL &&
	    (uint64_t)t->o.eval_batches * (uint64_t)t->global_batch >
		t->val_data.nwindows)
		rc = hexi_error(HEXI_ERR_USAGE,
				"--val-data %s: %llu windows of %d tokens, "
				"but --eval-batches %d x global batch %d "
				"reads %llu (each once): lower "
				"--eval-batches or give a longer file",
				o->val_path,
				(unsigned long long)t->val_data.nwindows,
				t->T + 1, t->o.eval_batches, t->global_batch,
				(unsigned long long)t->o.eval_batches *
				    (unsigned long long)t->global_batch);
	return rc;
}

/* ---- learning-rate schedule --------------------------------------------- */

double rt_train_lr(const hexi_trainer *t, int step)
{
	const hexi_train_opts *o = &t->o;
	double span, pr;

	if (o->warmup > 0 && step < o->warmup)
		return o->lr * (double)(step + 1) / o->warmup;
	if (o->lr_schedule != 1)
		return o->lr;
	if (step >= o->decay_steps)
		return o->min_lr;
	span = (double)(o->decay_steps - o->warmup);
	pr = span > 0 ? (step - o->warmup) / span : 1.0;
	return o->min_lr + 0.5 * (o->lr - o->min_lr) * (1.0 + cos(M_PI * pr));
}

/* ---- stage callbacks ----------------------------------------------------- */

static hexi_rc tp_allreduce(void *ctx, float *buf, size_t n)
{
	hexi_trainer *t = ctx;
	double t0 = hexi_now_s();
	hexi_rc rc = rt_allreduce_f32(t->rt->groups.tp, buf, n);

	t->tp_s += hexi_now_s() - t0;
	return rc;
}

static hexi_rc stage_forward(void *arg, int mb, int slot, const void *in,
			     void *out, double *loss_sum)
{
	hexi_trainer *t = arg;
	int first, last;

	rt_train_stage_data(t, mb, &first, &last);
	*loss_sum = 0;
	if (t->data_rc != HEXI_OK)
		return t->data_rc;
	return rt_model_forward(t->model, slot, t->mbs, first ? t->tok : NULL,
				in, out, last ? t->tgt : NULL,
				(float)(1.0 / t->global_batch), loss_sum);
}

static hexi_rc stage_backward(void *arg, int mb, int slot, const void *dout,
			      void *din)
{
	hexi_trainer *t = arg;

	/* 1F1B runs the backwards in micro-batch order: the last one
	 * finishes the gradients, layer by layer (overlap_hook) */
	t->bwd_last = mb == t->rt->role.micro_batches - 1;
	t->bwd_mb = mb;
	return rt_model_backward(t->model, slot, dout, din);
}

/* rt_grad_hook under zero 2: every backward of a step hands each
 * finished layer to the sync (reduce-scatter into the owned sums); the
 * model's window is reused by the next layer.  Validation drops its
 * gradients: nothing is sent (every rank validates alike). */
static hexi_rc zero2_hook(void *ctx, int layer)
{
	hexi_trainer *t = ctx;

	return t->eval ? HEXI_OK
		       : rt_sync_grad_ready(t->sync, t->bwd_mb, layer);
}

static hexi_rc overlap_hook(void *ctx, int layer)
{
	hexi_trainer *t = ctx;

	return rt_train_grad_ready(t, t->sync, layer);
}

/* rt_poll_hook: between GEMMs, the sub-buckets in flight progress. */
static hexi_rc overlap_poll(void *ctx)
{
	hexi_trainer *t = ctx;

	return t->bwd_last && !t->eval ? rt_sync_poll(t->sync) : HEXI_OK;
}

static hexi_rc setup_overlap(hexi_trainer *t)
{
	const char *e = getenv("HEXI_RT_SYNC_POLL");
	int on;
	hexi_rc rc = rt_train_overlap(t, t->sync, &on);

	if (on)
		rt_model_set_grad_hook(t->model, overlap_hook, t);
	/* HEXI_RT_SYNC_POLL=0: poll at layer ends only (bench_overlap.sh) */
	if (on && (e == NULL || strcmp(e, "0") != 0))
		rt_model_set_poll_hook(t->model, overlap_poll, t);
	return rc;
}

/* ---- create -------------------------------------------------------------- */

static hexi_rc make_model(hexi_trainer *t)
{
	rt_model_config cfg;
	rt_tp_comm tp = {.allreduce_sum = tp_allreduce, .ctx = t};
	rt_model_mem mm;
	hexi_rc rc;

	rt_train_stage_config(t, &cfg);
	rc = rt_model_create(&cfg, &tp, &t->model);
	if (rc == HEXI_OK) {
		rt_model_mem_bytes(t->model, &mm);
		rt_train_count_model(t->rt, &mm);
	}
	return rc;
}

static hexi_rc make_sync(hexi_trainer *t)
{
	int n = rt_model_nparams(t->model);
	rt_param_ref *refs = calloc((size_t)n + 1, sizeof(*refs));
	hexi_rc rc;

	if (refs == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "trainer: %d params", n);
	for (int i = 0; i < n; i++) {
		rt_param *p = rt_model_param(t->model, i);
		refs[i].name = p->name;
		refs[i].row_begin = p->row_begin;
		refs[i].row_end = p->row_end;
		refs[i].cols = p->shape[1] > 0 ? p->shape[1] : 1;
		refs[i].grad = p->g;
		refs[i].w = p->w;
		refs[i].decay = p->ndim == 2;
	}
	rc = rt_sync_create(t->rt, t->rt->comm, NULL, refs, n, &t->sync);
	free(refs);
	if (rc == HEXI_OK)
		rc = rt_train_shard(t, t->sync, rt_model_numel(t->model));
	if (rc == HEXI_OK && rt_sync_zero(t->sync) > 0)
		rt_model_drop_moments(t->model); /* none were allocated
						    (no_moments) */
	if (rc == HEXI_OK && rt_sync_zero(t->sync) == 2)
		rt_model_set_grad_hook(t->model, zero2_hook, t);
	else if (rc == HEXI_OK)
		rc = setup_overlap(t);
	if (rc != HEXI_OK)
		return rc;
	/* the activation buffers of the pipeline (one micro-batch) */
	t->act_bytes = sizeof(float) * (size_t)t->mbs * t->T * t->C;
	t->pin = malloc(t->act_bytes);
	t->pout = malloc(t->act_bytes);
	if (t->pin == NULL || t->pout == NULL)
		return hexi_error(HEXI_ERR_NOMEM,
				  "rank %d: pipeline buffers of %zu bytes",
				  t->rt->rank, t->act_bytes);
	rt_mem_count(t->rt, HEXI_MEM_COMM, 2.0 * (double)t->act_bytes);
	return HEXI_OK;
}

static const rt_stage_ops cpu_ops; /* below, with the step */

static hexi_rc check_opts(const hexi_rt *rt, const hexi_train_opts *o)
{
	if (o->dtype != NULL && strcmp(o->dtype, "fp32") != 0 &&
	    strcmp(o->dtype, "bf16") != 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "dtype '%.32s': want fp32 or bf16", o->dtype);
	if (rt->backend->device == RT_DEVICE_HOST && o->dtype != NULL &&
	    strcmp(o->dtype, "bf16") == 0)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "dtype bf16 needs the nccl backend (the CPU "
				  "path trains in fp32)");
	if (o->steps < 0 || !(o->lr > 0) || !(o->eps > 0) || o->clip < 0 ||
	    o->save_every < 0 || o->beta1 < 0 || o->beta1 >= 1 ||
	    o->beta2 < 0 || o->beta2 >= 1 || o->weight_decay < 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "training options: steps >= 0, lr > 0, eps "
				  "> 0, clip >= 0, betas in [0,1) required");
	if (o->save_every > 0 && (o->ckpt_dir == NULL || !*o->ckpt_dir))
		return hexi_error(HEXI_ERR_USAGE,
				  "--save-every needs --ckpt-dir");
	if (o->keep > 0 && (o->ckpt_dir == NULL || !*o->ckpt_dir))
		return hexi_error(HEXI_ERR_USAGE, "--keep needs --ckpt-dir");
	if (o->eval_every > 0 && o->val_path == NULL)
		return hexi_error(HEXI_ERR_USAGE, "--eval-every needs --val-data");
	if (o->min_lr > o->lr)
		return hexi_error(HEXI_ERR_USAGE,
				  "--min-lr %g is above --lr %g (the cosine "
				  "schedule decays from lr down to min-lr)",
				  o->min_lr, o->lr);
	if (o->warmup < 0 || o->min_lr < 0 || o->decay_steps < 0 ||
	    o->eval_every < 0 || o->eval_batches < 0 || o->keep < 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "schedule: warmup >= 0 and 0 <= min-lr <= lr "
				  "required");
	return HEXI_OK;
}

static hexi_rc trainer_fill(hexi_trainer *t)
{
	const hexi_plan *p = t->rt->plan;
	const hexi_role *r = &t->rt->role;

	t->T = p->model.seq_len;
	t->V = p->model.vocab;
	t->C = p->model.hidden;
	t->global_batch = 0;
	for (int i = 0; i < p->npipelines; i++) {
		if (i == r->pipeline)
			t->sample_offset = t->global_batch;
		t->global_batch += p->pipelines[i].batch;
	}
	t->mbs = r->micro_batch_size;
	if (t->mbs < 1 || t->mbs * r->micro_batches != r->batch)
		return hexi_error(HEXI_ERR_INVAL,
				  "rank %d: pipeline %d batch %d is not %d "
				  "micro-batches of equal size",
				  t->rt->rank, r->pipeline, r->batch,
				  r->micro_batches);
	t->tok = malloc(sizeof(int) * (size_t)t->mbs * t->T);
	t->tgt = malloc(sizeof(int) * (size_t)t->mbs * t->T);
	t->seq = malloc(sizeof(int) * (size_t)(t->T + 1));
	if (t->tok == NULL || t->tgt == NULL || t->seq == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "trainer: token buffers");
	return HEXI_OK;
}

hexi_rc hexi_trainer_create(hexi_rt *rt, const hexi_train_opts *o,
			    hexi_trainer **out)
{
	hexi_trainer *t = NULL;
	hexi_rc rc;
	int ok;

	*out = NULL;
	if (rt->idle) /* no communicator; the training ranks go on alone */
		return hexi_error(HEXI_ERR_USAGE,
				  "rank %d is idle in plan %s: it trains "
				  "nothing (hexi_rt_is_idle)",
				  rt->rank, rt->plan->hash);
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "trainer");
	t->rt = rt;
	t->ops = &cpu_ops;
	memset(&rt->mem, 0, sizeof(rt->mem)); /* peaks of this trainer */
	t->o = *o;
	t->o.data_path = NULL; /* not kept */
	t->o.val_path = NULL;
	t->o.ckpt_dir = NULL;
	if (t->o.decay_steps == 0)
		t->o.decay_steps = t->o.steps;
	if (t->o.eval_batches == 0)
		t->o.eval_batches = 1;
	t->saved_step = t->resumed_step = -1;
	rc = check_opts(rt, o);
	if (rc == HEXI_OK && o->ckpt_dir != NULL) {
		t->ckpt_dir = strdup(o->ckpt_dir);
		if (t->ckpt_dir == NULL)
			rc = hexi_error(HEXI_ERR_NOMEM, "trainer");
	}
	if (rc == HEXI_OK)
		rc = trainer_fill(t);
	if (rc == HEXI_OK)
		rc = open_data(t, o);
#ifdef RT_GPU
	if (rc == HEXI_OK && rt->backend->device == RT_DEVICE_CUDA) {
		rc = rt_gtrain_create(t);
		ok = hexi_rt_all_ok(rt, rc == HEXI_OK);
		if (rc == HEXI_OK && !ok)
			rc = hexi_error(HEXI_ERR_PEER,
					"rank %d: another rank failed to build "
					"its GPU model",
					rt->rank);
		if (rc == HEXI_OK) {
			rc = rt_gtrain_connect(t);
			ok = hexi_rt_all_ok(rt, rc == HEXI_OK);
			if (rc == HEXI_OK && !ok)
				rc = hexi_error(
				    HEXI_ERR_PEER,
				    "rank %d: another rank failed to "
				    "join the NCCL gradient group",
				    rt->rank);
		}
		if (rc != HEXI_OK) {
			hexi_trainer_destroy(t);
			return rc;
		}
		*out = t;
		return HEXI_OK;
	}
#endif
	if (rc == HEXI_OK)
		rc = make_model(t);
	ok = hexi_rt_all_ok(rt, rc == HEXI_OK);
	if (rc == HEXI_OK && !ok)
		rc = hexi_error(HEXI_ERR_PEER,
				"rank %d: another rank failed to build its "
				"stage",
				rt->rank);
	if (rc == HEXI_OK)
		rc = make_sync(t);
	ok = hexi_rt_all_ok(rt, rc == HEXI_OK);
	if (rc == HEXI_OK && !ok)
		rc = hexi_error(HEXI_ERR_PEER,
				"rank %d: another rank failed to set up the "
				"gradient sync",
				rt->rank);
	if (rc != HEXI_OK) {
		hexi_trainer_destroy(t);
		return rc;
	}
	*out = t;
	return HEXI_OK;
}

void hexi_trainer_destroy(hexi_trainer *t)
{
	if (t == NULL)
		return;
#ifdef RT_GPU
	rt_gtrain_destroy(t->gpu);
#endif
	/* everything counted was this trainer's: nothing is held now */
	memset(t->rt->mem.bytes, 0, sizeof(t->rt->mem.bytes));
	t->rt->mem.total_bytes = 0;
	rt_sync_destroy(t->sync);
	rt_model_destroy(t->model);
	free(t->pin);
	free(t->pout);
	rt_data_fini(&t->train_data);
	rt_data_fini(&t->val_data);
	free(t->tok);
	free(t->tgt);
	free(t->seq);
	free(t->ckpt_dir);
	free(t);
}

int hexi_trainer_steps_done(const hexi_trainer *t)
{
	return t->step;
}

/* ---- step ---------------------------------------------------------------- */

/* ---- the CPU stage (rt_model) as rt_stage_ops -------------------------- */

static hexi_rc cpu_zero_grad(hexi_trainer *t)
{
	rt_model_zero_grad(t->model);
	rt_sync_zero_grad(t->sync);
	return HEXI_OK;
}

static void cpu_bind(hexi_trainer *t, rt_pipe_io *io, rt_stage_cb *cb,
		     rt_sync **sync)
{
	*io = (rt_pipe_io){.comm = t->rt->comm,
			   .tp = t->rt->groups.tp,
			   .in = t->pin,
			   .out = t->pout,
			   .bytes = t->act_bytes};
	*cb = (rt_stage_cb){
	    .arg = t, .forward = stage_forward, .backward = stage_backward};
	*sync = t->sync;
}

static hexi_rc cpu_grad_scale(hexi_trainer *t, float f)
{
	rt_model_grad_scale(t->model, f);
	return HEXI_OK;
}

static hexi_rc cpu_sgd(hexi_trainer *t, float lr)
{
	rt_model_sgd(t->model, lr);
	return HEXI_OK;
}

static hexi_rc cpu_adamw(hexi_trainer *t, const rt_adamw_opts *o, int step)
{
	return rt_model_adamw(t->model, o, step);
}

static const rt_stage_ops cpu_ops = {.zero_grad = cpu_zero_grad,
				     .bind = cpu_bind,
				     .grad_scale = cpu_grad_scale,
				     .sgd = cpu_sgd,
				     .adamw = cpu_adamw};

/* The trainer's AdamW settings at learning rate lr; counts the step. */
static void adamw_opts(hexi_trainer *t, double lr, rt_adamw_opts *ao)
{
	rt_adamw_defaults(ao);
	ao->lr = (float)lr;
	ao->beta1 = (float)t->o.beta1;
	ao->beta2 = (float)t->o.beta2;
	ao->eps = (float)t->o.eps;
	ao->weight_decay = (float)t->o.weight_decay;
	t->opt_step++;
}

static hexi_rc optimizer_step(hexi_trainer *t, double lr)
{
	rt_adamw_opts ao;

	if (t->o.optimizer == HEXI_OPT_SGD)
		return t->ops->sgd(t, (float)lr);
	adamw_opts(t, lr, &ao);
	return t->ops->adamw(t, &ao, (int)t->opt_step);
}

/* Clipping (scale to the global norm) and the optimizer, every holder
 * alike. */
static hexi_rc unsharded_step(hexi_trainer *t, double norm, double lr)
{
	hexi_rc rc;

	if (t->o.clip > 0 && norm > t->o.clip &&
	    (rc = t->ops->grad_scale(t, (float)(t->o.clip / (norm + 1e-6)))) !=
		HEXI_OK)
		return rc;
	return optimizer_step(t, lr);
}

/* Clipping and the optimizer on the owned ranges (zero > 0), then the
 * all-gather of the weights: the same arithmetic as grad_scale + the
 * optimizer of an unsharded run. */
static hexi_rc sharded_step(hexi_trainer *t, rt_sync *sync, double norm,
			    double lr)
{
	float scale = 1.0f;
	rt_adamw_opts ao;
	hexi_rc rc;

	if (t->o.clip > 0 && norm > t->o.clip)
		scale = (float)(t->o.clip / (norm + 1e-6));
	if (t->o.optimizer == HEXI_OPT_SGD) {
		rc = rt_sync_step(sync, scale, (float)lr, NULL, 0);
	} else {
		adamw_opts(t, lr, &ao);
		rc = rt_sync_step(sync, scale, 0, &ao, (int)t->opt_step);
	}
	if (rc == HEXI_OK && t->ops->after_sharded != NULL)
		rc = t->ops->after_sharded(t);
	return rc;
}

/* Global mean loss: last-stage leaders hold their pipeline's sum. */
hexi_rc rt_train_global_loss(hexi_trainer *t, double loss_sum, double *loss)
{
	const hexi_rt *rt = t->rt;
	double v = (rt->groups.next_leader < 0 && rt->rank == rt->groups.leader)
		       ? loss_sum
		       : 0.0;
	hexi_rc rc =
	    rt->comm->ops->allreduce_sum(rt->groups.world, &v, 1, RT_F64);

	*loss = v / t->global_batch;
	return rc;
}

/* One step on whatever holds the stage (t->ops): 1F1B, chunked sync and
 * norm, global loss, clipping, optimizer. */
static hexi_rc step_body(hexi_trainer *t, hexi_step_stats *st)
{
	rt_stage_cb cb;
	rt_pipe_io io;
	rt_sync *sync = NULL;
	rt_pipe_times pt = {0};
	double loss_sum = 0, sumsq = 0, t0, t1, t2;
	hexi_rc rc;

	t->ops->bind(t, &io, &cb, &sync);
	t0 = hexi_now_s();
	if ((rc = t->ops->zero_grad(t)) != HEXI_OK)
		return rc;
	t->cur = t->train_data.path != NULL ? &t->train_data : NULL;
	t->batch_base = t->data_pos;
	t->data_rc = HEXI_OK;
	rc = rt_pipe_run(t->rt, &io, &cb, &loss_sum, &pt);
	if (rc == HEXI_OK)
		rc = t->data_rc;
	if (rc != HEXI_OK)
		return rc;
	t1 = hexi_now_s();
	rc = rt_sync_run(sync, &sumsq);
	if (rc == HEXI_OK)
		rc = rt_train_global_loss(t, loss_sum, &st->loss);
	if (rc != HEXI_OK)
		return rc;
	t2 = hexi_now_s();
	st->grad_norm = sqrt(sumsq);
	/* A diverged step (NaN or inf loss or gradients) is not applied: the
	 * parameters stay those of the last finite step, and no checkpoint
	 * of NaNs is saved (nor, with --keep, are good ones rotated out).
	 * Every rank decides alike with no collective of its own: both
	 * figures are sums over the world (rt_train_global_loss, the norm's
	 * all-reduce), a non-finite term makes such a sum non-finite in any
	 * order, and finite terms cannot overflow it (squares of floats in
	 * a double need over 1e230 of them; the loss sums per-token floats).
	 * So each rank fails with the same cause at the same step
	 * (DECISIONS 177; mpi_fail.sh's diverging plan checks it). */
	if (!(isfinite(st->loss) && isfinite(st->grad_norm)))
		return hexi_error(HEXI_ERR_RANGE,
				  "loss %g, gradient norm %g: not finite, the "
				  "run diverged (lower --lr, or --clip); the "
				  "step was neither applied nor saved",
				  st->loss, st->grad_norm);
	st->lr = rt_train_lr(t, t->step);
	if (rt_sync_zero(sync) > 0)
		rc = sharded_step(t, sync, st->grad_norm, st->lr);
	else
		rc = unsharded_step(t, st->grad_norm, st->lr);
	if (rc != HEXI_OK)
		return rc;
	st->time_s = hexi_now_s() - t0;
	st->dp_sync_s = t2 - t1;
	st->pp_wait_s = pt.pp_wait_s;
	st->tp_s = t->tp_s;
	st->compute_s = st->time_s - st->dp_sync_s - st->pp_wait_s - st->tp_s;
	st->tokens_per_s = (double)t->global_batch * t->T / st->time_s;
	return HEXI_OK;
}

hexi_rc hexi_trainer_step(hexi_trainer *t, hexi_step_stats *st)
{
	hexi_rc rc;

	memset(st, 0, sizeof(*st));
	t->tp_s = 0;
	/* armed over the step and its save: by the caller's loop
	 * (hexitrain), else here for this call alone */
	const int armed = rt_watchdog_armed(t->rt);
	if (armed)
		rt_watchdog_feed(t->rt);
	else
		rt_watchdog_arm(t->rt, 1);
	rc = step_body(t, st);
	if (rc == HEXI_OK) {
		t->step++;
		t->data_pos += t->global_batch;
		st->step = t->step;
	} else
		rc = hexi_error_prefix(rc, "rank %d: step %d", t->rt->rank,
				       t->step + 1);
	if (rc == HEXI_OK && t->o.save_every > 0 &&
	    t->step % t->o.save_every == 0) {
		rt_watchdog_save(t->rt);
		rc = hexi_trainer_save(t, t->ckpt_dir);
	}
	if (armed)
		rt_watchdog_feed(t->rt);
	else
		rt_watchdog_arm(t->rt, 0);
	return rc;
}

/* Validation: forward and backward of whole global batches (the pipeline
 * has no forward-only schedule); the gradients are dropped by the next
 * step's zero_grad and the optimizer is not run. */
hexi_rc hexi_trainer_eval(hexi_trainer *t, double *loss)
{
	rt_stage_cb cb;
	rt_pipe_io io;
	rt_sync *sync = NULL;
	rt_pipe_times pt = {0};
	double sum = 0;
	hexi_rc rc = HEXI_OK;

	*loss = 0;
	if (t->val_data.path == NULL)
		return hexi_error(HEXI_ERR_USAGE, "validation needs --val-data");
	t->ops->bind(t, &io, &cb, &sync);
	t->cur = &t->val_data;
	t->eval = 1;
	const int armed = rt_watchdog_armed(t->rt); /* see hexi_trainer_step */
	for (int b = 0; rc == HEXI_OK && b < t->o.eval_batches; b++) {
		double ls = 0, l = 0;
		t->batch_base = (int64_t)b * t->global_batch;
		t->data_rc = HEXI_OK;
		rt_watchdog_arm(t->rt, 1);
		rc = t->ops->zero_grad(t);
		if (rc == HEXI_OK)
			rc = rt_pipe_run(t->rt, &io, &cb, &ls, &pt);
		if (rc == HEXI_OK)
			rc = t->data_rc;
		if (rc == HEXI_OK)
			rc = rt_train_global_loss(t, ls, &l);
		sum += l;
	}
	rt_watchdog_arm(t->rt, armed);
	t->eval = 0;
	t->cur = NULL;
	if (rc == HEXI_OK)
		rc = t->ops->zero_grad(t);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "rank %d: validation after step %d",
					 t->rt->rank, t->step);
	*loss = sum / t->o.eval_batches;
	return HEXI_OK;
}

int hexi_trainer_take_event(hexi_trainer *t, hexi_ckpt_event *ev)
{
	if (!t->ev_pending)
		return 0;
	*ev = t->ev;
	t->ev_pending = 0;
	return 1;
}

int hexi_trainer_saved_step(const hexi_trainer *t)
{
	return t->saved_step;
}

/* Every field of hexi_step_stats, as the gather packs it (one double per
 * field, in this order): adding a field is one row, and the assertion
 * below fails to compile when a field is added to the struct without one. */
#define STAT_D(f) {#f, offsetof(hexi_step_stats, f), 0}
static const struct {
	const char *name;
	size_t off;
	int is_int;
} stat_fields[] = {
    {"step", offsetof(hexi_step_stats, step), 1},
    STAT_D(loss),
    STAT_D(grad_norm),
    STAT_D(time_s),
    STAT_D(tokens_per_s),
    STAT_D(compute_s),
    STAT_D(tp_s),
    STAT_D(pp_wait_s),
    STAT_D(dp_sync_s),
    STAT_D(lr),
};
#undef STAT_D
#define NSTATS ((int)(sizeof(stat_fields) / sizeof(stat_fields[0])))
/* the int step is padded to a double's size */
_Static_assert(sizeof(hexi_step_stats) == NSTATS * sizeof(double),
	       "hexi_step_stats: a field without a row in stat_fields");

static void stats_pack(const hexi_step_stats *s, double *out)
{
	const char *base = (const char *)s;

	for (int i = 0; i < NSTATS; i++)
		if (stat_fields[i].is_int)
			out[i] = (double)*(const int *)(const void *)(
			    base + stat_fields[i].off);
		else
			memcpy(&out[i], base + stat_fields[i].off,
			       sizeof(double));
}

static void stats_unpack(const double *in, hexi_step_stats *s)
{
	char *base = (char *)s;

	memset(s, 0, sizeof(*s));
	for (int i = 0; i < NSTATS; i++)
		if (stat_fields[i].is_int) {
			int v = (int)in[i];
			memcpy(base + stat_fields[i].off, &v, sizeof(v));
		} else
			memcpy(base + stat_fields[i].off, &in[i],
			       sizeof(double));
}

hexi_rc hexi_trainer_gather_stats(hexi_trainer *t, const hexi_step_stats *mine,
				  hexi_step_stats *all)
{
	hexi_rt *rt = t->rt;
	double *buf = calloc((size_t)rt->world_size * NSTATS, sizeof(double));
	hexi_rc rc;

	if (buf == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "gather stats");
	stats_pack(mine, buf + (size_t)rt->rank * NSTATS);
	rc = rt->comm->ops->allreduce_sum(rt->groups.world, buf,
					  (size_t)rt->world_size * NSTATS,
					  RT_F64);
	if (rc == HEXI_OK && all != NULL && rt->rank == 0)
		for (int i = 0; i < rt->world_size; i++)
			stats_unpack(buf + (size_t)i * NSTATS, &all[i]);
	free(buf);
	return rc;
}
