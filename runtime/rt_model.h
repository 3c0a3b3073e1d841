/*
 * rt_model.h - one stage shard of the Llama-style reference model, its
 * optimizers, deterministic initialisation and synthetic data (internal to
 * libhexirt; the public API is hexi_rt.h).
 *
 * A shard holds layers [layer_begin, layer_end) of the model for tensor-
 * parallel rank tp_rank of tp_size, plus the embedding on the first stage
 * and the final norm + LM head on the last.  Tensor names, stored shapes and
 * row ranges follow doc/LAYOUT.md exactly, so parameters map 1:1 onto
 * checkpoint slices and gradient-sync chunks.
 *
 * Inside a block (Megatron-style TP):
 *   x -> rmsnorm -> q,k,v (local heads) -> RoPE -> attention -> wo partial
 *     -> allreduce_sum -> + x -> rmsnorm -> gate,up (local rows) -> SwiGLU
 *     -> w_down partial -> allreduce_sum -> + residual
 * Backward all-reduces the partial input gradients of the column-parallel
 * projections before each rmsnorm backward.  Embedding, norms and LM head
 * are replicated in the TP group: every TP rank computes identical values
 * and identical gradients for them.
 *
 * Everything is fp32 on the CPU; no global state; errors are hexi_rc with a
 * message (hexi_errmsg) naming the stage/slot/tensor and the cause.
 * A model is used by one thread at a time.
 */
#ifndef HEXI_RT_MODEL_H
#define HEXI_RT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "hexi_common.h"
#include "hexi_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RT_PARAM_NAME_MAX 64

/* Tensor-parallel all-reduce used inside a block.  allreduce_sum must sum
 * buf (n floats) in place over the TP group, give every rank bit-identical
 * results, and be called by every TP rank in the same order.  A NULL
 * allreduce_sum is the identity (only valid for tp_size 1). */
typedef struct rt_tp_comm {
	hexi_rc (*allreduce_sum)(void *ctx, float *buf, size_t n);
	void *ctx;
} rt_tp_comm;

typedef struct rt_model_config {
	hexi_model model; /* whole-model shape */
	int layer_begin,
	    layer_end;	      /* layers held, [begin, end); may be empty */
	int tp_rank, tp_size; /* 0 <= tp_rank < tp_size <= kv_heads */
	int has_embed;	      /* first stage: embed.weight, tokens in */
	int has_head;	      /* last stage: final_norm, lm_head, loss */
	int max_slots;	      /* activation slots = micro-batches in flight */
	int max_batch;	      /* micro-batch size B (upper bound) */
	int seq;	      /* T; 0 means model.seq_len */
	uint64_t seed;	      /* initialisation seed (rt_init_tensor) */
	int recompute;	      /* 1: a slot keeps only each layer's input;
				 the backward recomputes the layer's
				 forward, one layer at a time */
	int no_moments;	      /* 1: no AdamW moments here (train.zero > 0:
				 the sync's owners keep them) */
	int grad_window;      /* 1 (train.zero 2): the gradients of ONE
				 backward unit (a layer, the head, the
				 embedding) at a time, in one reused
				 buffer: every layer's g points into it,
				 each unit's backward first zeroes its
				 part, and the grad hook must take the
				 unit's values before the next unit
				 overwrites them; g then does not
				 accumulate over micro-batches */
} rt_model_config;

/* One parameter tensor (or its TP shard) of the shard. */
typedef struct rt_param {
	char name[RT_PARAM_NAME_MAX]; /* doc/LAYOUT.md name */
	int ndim;		      /* 1 or 2 */
	int64_t shape[2];	/* global stored shape; shape[1] = 1 if 1-D */
	int row_begin, row_end; /* rows of dim 0 held (full if replicated) */
	int replicated_in_tp;	/* 1: identical on every TP rank */
	float *w;		/* (rows, shape[1]) weights, owned by model */
	float *g;		/* same shape: gradient, accumulates (with
				   cfg.grad_window: this backward unit's) */
	float *m, *v;		/* AdamW moments (zero until first step) */
	size_t n;		/* local elements = rows * shape[1] */
} rt_param;

typedef struct rt_model rt_model;

/* Validate cfg (model shape, layer range, TP rank and degree, sizes), build
 * the shard and initialise it deterministically from cfg->seed.  tp may be
 * NULL for tp_size 1; it is copied.  *out is freed with rt_model_destroy. */
hexi_rc rt_model_create(const rt_model_config *cfg, const rt_tp_comm *tp,
			rt_model **out);
void rt_model_destroy(rt_model *m);
const rt_model_config *rt_model_get_config(const rt_model *m);

/*
 * Forward one micro-batch of B <= max_batch samples into activation slot
 * slot (0 <= slot < max_slots; the slot must be free).
 *   first stage:   tokens (B,T) in [0,V); x_in unused (NULL)
 *   other stages:  x_in (B,T,C) from the previous stage; tokens NULL
 *   non-last:      x_out (B,T,C) receives the stage output
 *   last stage:    targets (B,T) in [0,V); *loss_sum is SET to the sum over
 *                  the B samples of each sample's mean token cross-entropy;
 *                  grad_scale (e.g. 1/global_batch) is kept for backward,
 *                  which then differentiates grad_scale * loss_sum.
 * Inputs are copied; the slot stays busy until rt_model_backward(slot) or
 * rt_model_release(slot).  Calls tp->allreduce_sum twice per layer.
 * With cfg.recompute the slot keeps only each layer's input (and the
 * head's activations); the numbers are bit-identical to a run without.
 */
hexi_rc rt_model_forward(rt_model *m, int slot, int B, const int *tokens,
			 const float *x_in, float *x_out, const int *targets,
			 float grad_scale, double *loss_sum);

/*
 * Backward of the micro-batch in slot; frees the slot.
 *   non-last stage:  dy (B,T,C) gradient of the stage output; last: NULL
 *   non-first stage: dx (B,T,C) receives the gradient of x_in; first: NULL
 * Parameter gradients ACCUMULATE into every param's g across micro-batches
 * until rt_model_zero_grad().  Calls tp->allreduce_sum twice per layer;
 * with cfg.recompute it first recomputes each layer's forward up to the
 * SwiGLU output (one more all-reduce per layer, the attention output's;
 * the w_down projection's output is not needed by the backward).
 */
hexi_rc rt_model_backward(rt_model *m, int slot, const float *dy, float *dx);

/* Drop a slot's activations without a backward (e.g. evaluation). */
hexi_rc rt_model_release(rt_model *m, int slot);

void rt_model_zero_grad(rt_model *m);

/* Parameters in a fixed order: embed.weight (first stage); per layer
 * attn_norm.weight, attn.wq, attn.wk, attn.wv, attn.wo, mlp_norm.weight,
 * mlp.w_gate, mlp.w_up, mlp.w_down; final_norm.weight, lm_head.weight
 * (last stage).  Pointers stay valid for the model's lifetime. */
int rt_model_nparams(const rt_model *m);
rt_param *rt_model_param(rt_model *m, int i);
/* By LAYOUT name; NULL if this shard does not hold it. */
rt_param *rt_model_find_param(rt_model *m, const char *name);
/* Sum of local parameter elements. */
size_t rt_model_numel(const rt_model *m);

/* Floating-point operations of one forward+backward of a micro-batch of B
 * samples on this shard (GEMMs 6*M*N*K, attention scores and mixing, not
 * counting elementwise ops); for throughput and MFU reports. */
double rt_model_flops(const rt_model *m, int B);

/* Bytes the shard allocated, by what they hold (the memory report of
 * hexitrain(1)).  acts: the slots (with recompute: each layer's input per
 * slot) plus the one layer's activations a recomputed backward rebuilds;
 * work: backward scratch, logits, token buffers. */
typedef struct rt_model_mem {
	size_t params, grads, optim, acts, work;
} rt_model_mem;
void rt_model_mem_bytes(const rt_model *m, rt_model_mem *out);

/* Re-initialise all weights from seed (as at create); zero g, m, v. */
void rt_model_init_weights(rt_model *m, uint64_t seed);

/* ---- optimizers (optim.c) ------------------------------------------------ */

typedef struct rt_adamw_opts {
	float lr, beta1, beta2, eps, weight_decay;
} rt_adamw_opts;

/* Called by rt_model_backward as the gradients of a backward become
 * complete: with the model's layer count L after the head (final_norm,
 * lm_head), with global layer index l after layer l, with -1 after the
 * embedding; so after a call with k every tensor of layers >= k (head = L,
 * embedding = -1) has this backward's contribution.  An error ends the
 * backward.  The trainer uses it to start the gradient sync of finished
 * chunks during the last micro-batch's backward (overlap, sync.c). */
typedef hexi_rc (*rt_grad_hook)(void *ctx, int layer);
void rt_model_set_grad_hook(rt_model *m, rt_grad_hook fn, void *ctx);
/* Called by rt_model_backward between the GEMMs of a layer (nothing new is
 * final): the trainer lets the collectives it started progress (overlap,
 * rt_sync_poll).  An error ends the backward. */
typedef hexi_rc (*rt_poll_hook)(void *ctx);
void rt_model_set_poll_hook(rt_model *m, rt_poll_hook fn, void *ctx);

/* Free the AdamW moments of every parameter (m, v become NULL): the
 * sharded optimizer (train.zero > 0, sync.c) keeps its own. */
void rt_model_drop_moments(rt_model *m);

/* lr 1e-3, betas 0.9/0.95, eps 1e-8, weight_decay 0.0 */
void rt_adamw_defaults(rt_adamw_opts *o);

/* One AdamW update of one tensor (fp32 master weights = p->w on CPU):
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   w -= lr * (mhat / (sqrt(vhat) + eps) + decay * wd * w)
 * with bias correction for step (1-based) and decay 0 or 1. */
void rt_param_adamw(rt_param *p, const rt_adamw_opts *o, int step, int decay);
/* The same update over n elements of separate arrays (the sharded
 * optimizer of sync.c), and the option check of rt_model_adamw. */
void rt_adamw_span(float *w, const float *g, float *m, float *v, size_t n,
		   const rt_adamw_opts *o, int step, int decay);
hexi_rc rt_adamw_check(const rt_adamw_opts *o, int step);
/* AdamW over every parameter of the shard; weight decay on 2-D tensors only
 * (norm weights are not decayed).  HEXI_ERR_INVAL on bad step/opts. */
hexi_rc rt_model_adamw(rt_model *m, const rt_adamw_opts *o, int step);
/* w -= lr * g over every parameter. */
void rt_model_sgd(rt_model *m, float lr);

/* Local sum of g^2 over the params with select[i] != 0 (select has
 * rt_model_nparams entries; NULL selects all), in double.  For a global
 * norm, the caller selects replicated params on one TP rank only. */
double rt_model_grad_sumsq(rt_model *m, const unsigned char *select);
/* g *= s over every parameter (gradient clipping). */
void rt_model_grad_scale(rt_model *m, float s);

/* ---- deterministic initialisation (init.c) --------------------------------
 */

/*
 * Fill w (row_end-row_begin, ncols) with rows [row_begin,row_end) of tensor
 * name: element (r, c) is uniform in [-a, a], a = sqrt(3)*std, from a
 * counter-based hash of (seed, name, r*ncols + c) only, so every layout
 * produces the same global tensor.  std <= 0 fills with 1.0 (norm weights).
 */
void rt_init_tensor(float *w, const char *name, int64_t row_begin,
		    int64_t row_end, int64_t ncols, float std, uint64_t seed);
/* Initial std of a LAYOUT tensor of model md (0 for norm weights). */
float rt_init_std(const hexi_model *md, const char *name);

/* ---- synthetic data (data.c) --------------------------------------------- */

/*
 * Sample `sample` (global index, >= 0) of the synthetic corpus: tokens
 * (T+1) in [0,vocab) from a seeded hash of (seed, sample, position); inputs
 * are tokens[0..T-1], targets tokens[1..T].  Learnable: mostly an
 * arithmetic progression with a per-sample stride, plus 1/8 random tokens.
 */
void hexi_rt_data_sample(uint64_t seed, int vocab, int T, int64_t sample,
			 int *tokens);

#ifdef __cplusplus
}
#endif
#endif /* HEXI_RT_MODEL_H */
