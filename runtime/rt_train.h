/*
 * rt_train.h - internal: the trainer object (train.c, train_ckpt.c).
 */
#ifndef HEXI_RT_TRAIN_H
#define HEXI_RT_TRAIN_H

#include "rt_data.h"
#include "rt_dist.h"
#include "rt_model.h"
#include "rt_pipe.h"

#include <stdio.h>

typedef struct rt_gtrain rt_gtrain; /* GPU model and state (train_gpu.c) */

/* What a training step needs from whatever holds this rank's stage: the
 * CPU model (train.c) or the GPU shard (train_gpu.c).  bind gives the
 * pipeline's buffers and communicator, the stage callbacks and the sync. */
typedef struct rt_stage_ops {
	hexi_rc (*zero_grad)(hexi_trainer *t);
	void (*bind)(hexi_trainer *t, rt_pipe_io *io, rt_stage_cb *cb,
		     rt_sync **sync);
	hexi_rc (*grad_scale)(hexi_trainer *t, float f);
	hexi_rc (*sgd)(hexi_trainer *t, float lr);
	hexi_rc (*adamw)(hexi_trainer *t, const rt_adamw_opts *o, int step);
	/* after the sharded sync's optimizer step (rt_sync_step) changed the
	 * weights behind the stage's back; NULL: nothing to do */
	hexi_rc (*after_sharded)(hexi_trainer *t);
} rt_stage_ops;

struct hexi_trainer {
	hexi_rt *rt;
	const rt_stage_ops *ops;
	hexi_train_opts o; /* data_path and ckpt_dir not kept */
	char *ckpt_dir;
	rt_model *model;
	rt_sync *sync;
	int step;	     /* optimizer steps done */
	int64_t opt_step;    /* AdamW step counter (bias correction) */
	int T, V, C;	     /* sequence length, vocabulary, hidden */
	int mbs;	     /* micro-batch size of this pipeline */
	int global_batch;    /* samples per step, all pipelines */
	int sample_offset;   /* first sample of this pipeline in a batch */
	int *tok, *tgt;	     /* (mbs,T) inputs and targets */
	int *seq;	     /* (T+1) one sample */
	rt_data train_data, val_data; /* token files; path NULL: none */
	rt_data *cur; /* source of the batch being built, NULL:
			       the synthetic corpus */
	int eval;	    /* 1 while validating: windows in order */
	int64_t batch_base; /* first sample of the current global batch */
	int64_t data_pos;   /* samples consumed by the steps done */
	hexi_rc data_rc;    /* first data error of the current step */
	int saved_step;	    /* last step saved or resumed from, -1 none */
	int resumed_step;   /* step resumed from, -1 none (never rotated) */
	hexi_ckpt_event ev; /* last save or load, for the CLI */
	int ev_pending;
	double tp_s;	/* TP all-reduce time of the current step */
	void *pin, *pout; /* CPU path: pipeline activation buffers */
	size_t act_bytes;
	int bwd_last;	  /* the backward running is the step's last */
	int bwd_mb;	  /* micro-batch of the backward running */
	rt_gtrain *gpu; /* nccl backend: the model on this rank's GPU; model
			   and sync are then NULL */
};

/* train.c: learning rate of 0-based step `step` under the schedule. */
double rt_train_lr(const hexi_trainer *t, int step);
/* train_keep.c: after a commit, rank 0 fills t->ev (size of the step
 * directory) and removes committed checkpoints beyond the last o.keep. */
void rt_train_after_save(hexi_trainer *t, const char *dir, double seconds);
/* Bytes of the regular files directly in DIR (0 if unreadable). */
uint64_t rt_train_dir_bytes(const char *dir);

/* train.c: inputs and targets of micro-batch mb into t->tok, t->tgt; the
 * global mean loss from this pipeline's sum over its samples. */
void rt_train_micro_batch(hexi_trainer *t, int mb);
hexi_rc rt_train_global_loss(hexi_trainer *t, double loss_sum, double *loss);
/* Forward of micro-batch mb starts: the failure-test hook, and the tokens
 * (first stage) and targets (last stage) into t->tok, t->tgt. */
void rt_train_stage_data(hexi_trainer *t, int mb, int *first, int *last);
/* This rank's stage shard from its role (layers, TP rank, end stages,
 * 1F1B slots, micro-batch size, seed): the CPU model's configuration,
 * which the GPU shard's is made from. */
void rt_train_stage_config(const hexi_trainer *t, rt_model_config *cfg);
/* Parameter i as a host rt_param: the CPU model's own, or staged copies of
 * the GPU shard's (fetch 0: nothing downloaded, 1: the weights, 2: the
 * weights and the AdamW moments); store uploads a
 * staged parameter's weights (and moments) back (no-op on the CPU). */
int rt_train_nparams(const hexi_trainer *t);
/* Count a stage shard's allocations (rt_model_mem) on rt (memacct). */
void rt_train_count_model(hexi_rt *rt, const rt_model_mem *mm);
/* Overlap of the gradient sync with the backward (unless --no-overlap):
 * rt_sync_overlap of sync in bounded buckets of HEXI_RT_SYNC_BUCKET
 * elements (default 2^20, 4 MiB); 1 in *on when it is overlapped (then
 * the caller's model hook must call rt_train_grad_ready).  Collective. */
hexi_rc rt_train_overlap(hexi_trainer *t, rt_sync *sync, int *on);
/* A model's grad hook under overlap: layers >= layer of the step's last
 * backward are final; start their sync (no-op in other backwards). */
hexi_rc rt_train_grad_ready(hexi_trainer *t, rt_sync *sync, int layer);
/* train.zero: shard sync, the sync of a stage holding `held` parameter
 * elements (after it is created; collective).  A no-op for zero 0 and
 * for one pipeline (said once). */
hexi_rc rt_train_shard(hexi_trainer *t, rt_sync *sync, size_t held);
/* The gradient sync of whatever holds the stage (train_params.c). */
rt_sync *rt_train_sync(const hexi_trainer *t);
/* Owned range sg's AdamW moments as host arrays (the sync's own on the
 * CPU; staged copies of the device ones on the GPU, downloaded when
 * fetch), and their upload back after a read into them (no-op on the
 * CPU): checkpoints of sharded moments. */
hexi_rc rt_train_seg_host(hexi_trainer *t, const rt_sync_seg *sg, int fetch,
			  float **m, float **v);
hexi_rc rt_train_seg_store(hexi_trainer *t, const rt_sync_seg *sg);
hexi_rc rt_train_param_host(hexi_trainer *t, int i, int fetch, rt_param **p);
hexi_rc rt_train_param_store(hexi_trainer *t, int i, int moments);

#ifdef RT_GPU
/* train_gpu.c (the nccl backend; CUDA builds and the host emulation). */
hexi_rc rt_gtrain_create(hexi_trainer *t);
hexi_rc rt_gtrain_connect(hexi_trainer *t);
extern const rt_stage_ops rt_gtrain_ops;
void rt_gtrain_destroy(rt_gtrain *g);
/* Checkpoints: parameter i as a host rt_param whose w, m, v are staging
 * buffers of the trainer (fetch as rt_train_param_host), and the upload
 * of its w (and m, v when moments) back to the device. */
int rt_gtrain_nparams(const hexi_trainer *t);
hexi_rc rt_gtrain_param_host(hexi_trainer *t, int i, int fetch,
			     rt_param **out);
hexi_rc rt_gtrain_param_store(hexi_trainer *t, int i, int moments);
rt_sync *rt_gtrain_sync(const hexi_trainer *t);
hexi_rc rt_gtrain_seg_host(hexi_trainer *t, const rt_sync_seg *sg, int fetch,
			   float **m, float **v);
hexi_rc rt_gtrain_seg_store(hexi_trainer *t, const rt_sync_seg *sg);
#endif

#endif /* HEXI_RT_TRAIN_H */
