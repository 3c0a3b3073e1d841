/*
 * train_stage.c - what one rank's stage of the plan is made of and fed:
 * the shard configuration of its role (both trainers, CPU model and GPU
 * shard), its allocations counted, and the samples of a micro-batch.
 * Below train.c and train_gpu.c, which both use it.
 *
 * Data: global batch k (0-based step) consists of samples k*G .. k*G+G-1
 * of the corpus; pipeline p takes the G_p samples starting at the sum of
 * the batches of pipelines 0..p-1, micro-batch i of it the next mbs.  So
 * every plan sees the same samples in every step, and a resumed run
 * continues at the saved position.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_model.h"
#include "rt_pipe.h"
#include "rt_train.h"

/* ---- data ---------------------------------------------------------------- */

/* Sample `sample` as T+1 tokens: synthetic, or a window of the data file
 * (rt_data.h: shuffled per epoch for training, in order for validation).
 * A token outside the vocabulary stops the step (t->data_rc). */
static void data_sample(hexi_trainer *t, int64_t sample, int *seq)
{
	rt_data *d = t->cur;
	uint64_t w;
	hexi_rc rc;

	if (d == NULL) {
		hexi_rt_data_sample(t->o.seed, t->V, t->T, sample, seq);
		return;
	}
	w = t->eval ? (uint64_t)sample % d->nwindows
		    : rt_data_window(d, sample);
	rc = rt_data_read(d, w, seq);
	if (rc != HEXI_OK) {
		memset(seq, 0, sizeof(int) * (size_t)(t->T + 1));
		if (t->data_rc == HEXI_OK)
			t->data_rc = rc;
	}
}

/* Inputs and targets (mbs,T) of micro-batch mb of this pipeline. */
void rt_train_micro_batch(hexi_trainer *t, int mb)
{
	const int T = t->T;
	int64_t base = t->batch_base + t->sample_offset + (int64_t)mb * t->mbs;

	for (int j = 0; j < t->mbs; j++) {
		data_sample(t, base + j, t->seq);
		memcpy(t->tok + (size_t)j * T, t->seq, sizeof(int) * T);
		memcpy(t->tgt + (size_t)j * T, t->seq + 1, sizeof(int) * T);
	}
}

/* Test hook HEXI_RT_TEST_KILL=RANK:STEP: that rank dies by SIGKILL in the
 * middle of that step (the failure test of hexitrain(1)). */
static void test_kill_hook(const hexi_trainer *t, int mb)
{
	const char *s = getenv("HEXI_RT_TEST_KILL");
	int r = -1, st = -1;

	if (s == NULL || mb != 0 || sscanf(s, "%d:%d", &r, &st) != 2)
		return;
	if (r == t->rt->rank && st == t->step + 1) {
		fprintf(stderr,
			"hexitrain: rank %d: HEXI_RT_TEST_KILL: "
			"killing myself in step %d\n",
			r, st);
		fflush(stderr);
		raise(SIGKILL);
	}
}

void rt_train_stage_data(hexi_trainer *t, int mb, int *first, int *last)
{
	const hexi_role *r = &t->rt->role;

	*first = r->stage == 0;
	*last = r->stage == r->nstages - 1;
	if (!t->eval)
		test_kill_hook(t, mb);
	if (*first || *last)
		rt_train_micro_batch(t, mb);
}

/* ---- the shard of a role ------------------------------------------------ */

void rt_train_stage_config(const hexi_trainer *t, rt_model_config *cfg)
{
	const hexi_role *r = &t->rt->role;

	memset(cfg, 0, sizeof(*cfg));
	cfg->model = t->rt->plan->model;
	cfg->layer_begin = r->layer_begin;
	cfg->layer_end = r->layer_end;
	cfg->tp_rank = r->tp_rank;
	cfg->tp_size = r->tp_size;
	cfg->has_embed = r->stage == 0;
	cfg->has_head = r->stage == r->nstages - 1;
	cfg->max_slots = rt_pipe_slots(r->nstages, r->stage, r->micro_batches);
	cfg->max_batch = t->mbs;
	cfg->seq = t->T;
	cfg->seed = t->o.seed;
	cfg->recompute = r->recompute;
	/* sharded optimizer state: the owners' slices live in the sync */
	cfg->no_moments = r->zero > 0 && t->rt->plan->npipelines > 1;
	/* and zero 2 the gradients: one layer's at a time (sync.c) */
	cfg->grad_window = r->zero == 2 && t->rt->plan->npipelines > 1;
}

void rt_train_count_model(hexi_rt *rt, const rt_model_mem *mm)
{
	rt_mem_count(rt, HEXI_MEM_PARAMS, (double)mm->params);
	rt_mem_count(rt, HEXI_MEM_GRADS, (double)mm->grads);
	rt_mem_count(rt, HEXI_MEM_OPTIM, (double)mm->optim);
	rt_mem_count(rt, HEXI_MEM_ACTS, (double)mm->acts);
	rt_mem_count(rt, HEXI_MEM_WORK, (double)mm->work);
}

/* HEXI_RT_SYNC_BUCKET: elements per bucket of the sync's staging. */
static hexi_rc sync_bucket_env(size_t *cap)
{
	const char *e = getenv("HEXI_RT_SYNC_BUCKET");
	long v = 1L << 20;

	if (e != NULL && *e != '\0' &&
	    hexi_parse_long(e, 1, 1L << 30, &v) != HEXI_OK)
		return hexi_error(HEXI_ERR_USAGE,
				  "HEXI_RT_SYNC_BUCKET='%.40s': elements per "
				  "bucket must be a whole number in 1..%ld",
				  e, 1L << 30);
	*cap = (size_t)v;
	return HEXI_OK;
}

/* train.zero of the plan: sharded optimizer state (1) and gradients (2)
 * over the DP replicas (sync.c); with one pipeline there is nothing to
 * shard, said once (rank 0), and the run is a zero-0 run. */
hexi_rc rt_train_shard(hexi_trainer *t, rt_sync *sync, size_t held)
{
	const hexi_rt *rt = t->rt;
	int zero = rt->role.zero;
	size_t cap;
	hexi_rc rc;

	if (zero == 0)
		return HEXI_OK;
	if (rt->plan->npipelines < 2) {
		if (rt->rank == 0)
			hexi_log(HEXI_LOG_INFO,
				 "train.zero %d: the plan has one pipeline, "
				 "no data-parallel replica to shard over; "
				 "running unsharded (zero 0)",
				 zero);
		return HEXI_OK;
	}
	if ((rc = sync_bucket_env(&cap)) != HEXI_OK ||
	    (rc = rt_sync_shard(sync, zero, cap)) != HEXI_OK)
		return rc;
	if (t->o.verbose)
		hexi_log(
		    HEXI_LOG_INFO,
		    "rank %d: zero %d: owns %zu of the %zu parameter elements "
		    "it holds; sharded state %zu bytes; %d of %d buckets in "
		    "place",
		    rt->rank, zero, rt_sync_owned(sync), held,
		    rt_sync_shard_bytes(sync), rt_sync_flat(sync),
		    rt_sync_ngroups(sync));
	if (t->o.verbose)
		hexi_log(HEXI_LOG_INFO, "rank %d: zero %d: %d buckets as rings",
			 rt->rank, zero, rt_sync_rings(sync));
	return HEXI_OK;
}

/* rt_grad_hook: the last backward finished layers >= layer: start their
 * gradient sync.  Not under validation: its gradients are dropped, and
 * collectives started on them would be left in flight for the next
 * step's sync to wait on and apply (the validation batch's gradients
 * summed into training). */
hexi_rc rt_train_grad_ready(hexi_trainer *t, rt_sync *sync, int layer)
{
	return t->bwd_last && !t->eval ? rt_sync_ready(sync, layer) : HEXI_OK;
}

hexi_rc rt_train_overlap(hexi_trainer *t, rt_sync *sync, int *on)
{
	size_t cap;
	hexi_rc rc;

	*on = 0;
	if ((rc = sync_bucket_env(&cap)) != HEXI_OK)
		return rc;
	if (t->o.no_overlap)
		return HEXI_OK;
	rc = rt_sync_overlap(sync, cap);
	*on = rc == HEXI_OK && rt_sync_overlapped(sync) > 0;
	if (*on && t->o.verbose) {
		size_t bytes;
		int packed, slots = rt_sync_overlap_slots(sync, &packed, &bytes);
		hexi_log(HEXI_LOG_INFO,
			 "rank %d: gradient sync overlapped with the backward: "
			 "%d sub-buckets of at most %zu elements; %d packed, "
			 "staged in %zu bytes (%d slots taken in turn; 0: "
			 "each its own part)",
			 t->rt->rank, rt_sync_overlapped(sync), cap, packed,
			 bytes, slots);
	}
	return rc;
}
