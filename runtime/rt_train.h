/*
 * rt_train.h - internal: the trainer object (train.c, train_ckpt.c).
 */
#ifndef HEXI_RT_TRAIN_H
#define HEXI_RT_TRAIN_H

#include "rt_dist.h"
#include "rt_model.h"

struct hexi_trainer {
	hexi_rt *rt;
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
	unsigned char *text; /* --data file, or NULL: synthetic corpus */
	size_t text_len;
	double tp_s; /* TP all-reduce time of the current step */
};

#endif /* HEXI_RT_TRAIN_H */
