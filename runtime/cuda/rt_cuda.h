/*
 * rt_cuda.h - the runtime's GPU path (internal to libhexirt): device
 * selection, streams, cuBLAS GEMMs and the CUDA kernels of the Llama-style
 * model.  Plain C; no CUDA header is needed to include it.
 *
 * Every kernel has the same contract as its CPU reference in rt_ops.h
 * (llm.c style): *_forward OVERWRITES its outputs, *_backward ACCUMULATES
 * (+=) into every d* output.  Shapes are given as in rt_ops.h: (B,T,C),
 * BT = B*T, row-major, densely packed.  Pointers are device memory.
 *
 * Precision: activations and weights are RT_CUDA_F32 or RT_CUDA_BF16 (the
 * "dt" argument); arithmetic is fp32 inside every kernel; parameter
 * gradients (dw) and optimizer state are always fp32, and AdamW keeps fp32
 * master weights and writes the bf16 copy the kernels read.
 *
 * Launch calls are asynchronous on the given stream and return HEXI_OK or
 * HEXI_ERR_INVAL (bad sizes) / HEXI_ERR_CUDA (launch error) with a message
 * naming the kernel.  Errors that happen while a kernel runs surface at the
 * next rt_cuda_sync().
 */
#ifndef HEXI_RT_CUDA_H
#define HEXI_RT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "hexi_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Same type as cudaStream_t, without including the CUDA headers. */
typedef struct CUstream_st *rt_cuda_stream;

typedef enum rt_cuda_dtype {
	RT_CUDA_F32 = 0,  /* float */
	RT_CUDA_BF16 = 1, /* __nv_bfloat16 */
} rt_cuda_dtype;

/* Bytes of one element. */
size_t rt_cuda_dtype_size(rt_cuda_dtype dt);
const char *rt_cuda_dtype_name(rt_cuda_dtype dt);

/* ---- device selection (no CUDA call: testable without a GPU) ------------- */

/*
 * The CUDA ordinal a task uses.  visible is $CUDA_VISIBLE_DEVICES (NULL if
 * unset): CUDA renumbers the visible devices 0..n-1, so the choice is
 * local_rank modulo the number visible (Slurm's --gpus-per-task=1 leaves
 * one, giving 0).  visible must be a comma list of non-negative integers
 * or GPU UUIDs ("GPU-..."/"MIG-..."), at most 64 entries, no empty entries;
 * "" or "-1" or "NoDevFiles" hide every device (HEXI_ERR_NODEV).  ndevices
 * is what cudaGetDeviceCount returned.  One visible device is taken as
 * Slurm's per-task binding (ordinal 0 for every rank); several visible
 * devices but more ranks on the node than devices is refused
 * (HEXI_ERR_NODEV) unless allow_share.
 */
hexi_rc rt_cuda_pick_device(const char *visible, int local_rank, int local_size,
			    int ndevices, int allow_share, int *ordinal);

/* ---- context: device, streams, cuBLAS ------------------------------------ */

typedef struct rt_cuda rt_cuda;

/* Number of devices; HEXI_ERR_NODEV with "no CUDA device: cudaGetDeviceCount
 * returned N (text)" when the driver or device is missing. */
hexi_rc rt_cuda_device_count(int *n);

/* Pick the device (rt_cuda_pick_device with $CUDA_VISIBLE_DEVICES), make it
 * current, create a compute stream and a communication stream (non-blocking,
 * the compute stream at the higher priority) and a cuBLAS handle bound to
 * the compute stream.  Freed with rt_cuda_destroy. */
hexi_rc rt_cuda_create(int local_rank, int local_size, rt_cuda **out);
void rt_cuda_destroy(rt_cuda *c);
int rt_cuda_device(const rt_cuda *c);
/* A 52-bit identity of the device (a hash of its UUID): two ranks see the
 * same value only when they drive the same GPU. */
uint64_t rt_cuda_device_id(const rt_cuda *c);
const char *rt_cuda_device_name(const rt_cuda *c);
/* Compute capability as major*10+minor (80 = A100, 89 = RTX 4090, 90 = H100).
 */
int rt_cuda_cc(const rt_cuda *c);
rt_cuda_stream rt_cuda_compute_stream(const rt_cuda *c);
rt_cuda_stream rt_cuda_comm_stream(const rt_cuda *c);
/* Wait for a stream (NULL: whole device); reports asynchronous errors. */
hexi_rc rt_cuda_sync(rt_cuda_stream s);
/* Make stream `waiter` wait for all work queued so far on `on`. */
hexi_rc rt_cuda_stream_wait(rt_cuda_stream waiter, rt_cuda_stream on);

/* Device memory (zeroed), host<->device copies (synchronous). */
hexi_rc rt_cuda_alloc(void **p, size_t bytes);
void rt_cuda_free(void *p);
hexi_rc rt_cuda_upload(void *dst, const void *src, size_t bytes);
hexi_rc rt_cuda_download(void *dst, const void *src, size_t bytes);
/* Asynchronous on stream s: zero bytes at p; copy bytes device to device. */
hexi_rc rt_cuda_memset0(rt_cuda_stream s, void *p, size_t bytes);
hexi_rc rt_cuda_copy(rt_cuda_stream s, void *dst, const void *src,
		     size_t bytes);

/* ---- GEMM (cuBLAS, fp32 accumulation) ------------------------------------ */

/*
 * Row-major C (M,N) = alpha op(A) op(B) + beta C, the same arguments as
 * rt_sgemm (ta, tb nonzero: transposed; lda, ldb, ldc row strides).  A and
 * B are of type dt; C is of type ct (ct may be RT_CUDA_F32 with dt bf16:
 * weight gradients accumulate in fp32).  On the context's compute stream.
 */
hexi_rc rt_cuda_gemm(rt_cuda *c, rt_cuda_dtype dt, rt_cuda_dtype ct, int ta,
		     int tb, int M, int N, int K, float alpha, const void *A,
		     int lda, const void *B, int ldb, float beta, void *C,
		     int ldc);

/* rt_matmul_forward/backward (weight (OC,C)): out (BT,OC) = inp . w^T;
 * dinp (BT,C) += dout . w (NULL skips); dw (OC,C) fp32 += dout^T . inp. */
hexi_rc rt_cuda_matmul_forward(rt_cuda *c, rt_cuda_dtype dt, void *out,
			       const void *inp, const void *w, int BT, int C,
			       int OC);
hexi_rc rt_cuda_matmul_backward(rt_cuda *c, rt_cuda_dtype dt, void *dinp,
				float *dw, const void *dout, const void *inp,
				const void *w, int BT, int C, int OC);

/* Row-parallel layout, weight stored transposed (C,OC) (rt_matmul_tw_*):
 * out (BT,OC) = inp . w; dinp (BT,C) += dout . w^T; dw (C,OC) += inp^T dout. */
hexi_rc rt_cuda_matmul_tw_forward(rt_cuda *c, rt_cuda_dtype dt, void *out,
				  const void *inp, const void *w, int BT, int C,
				  int OC);
hexi_rc rt_cuda_matmul_tw_backward(rt_cuda *c, rt_cuda_dtype dt, void *dinp,
				   float *dw, const void *dout, const void *inp,
				   const void *w, int BT, int C, int OC);

/* ---- kernels (rt_kernels.cu, rt_attention.cu) ---------------------------- */

/* Embedding: out (BT,C) = wte[tokens], wte (V,C), tokens (BT) device ints;
 * backward dwte (V,C) fp32 += scatter of dout. */
hexi_rc rt_cuda_embed_forward(rt_cuda_stream s, rt_cuda_dtype dt, void *out,
			      const int *tokens, const void *wte, int BT, int C,
			      int V);
hexi_rc rt_cuda_embed_backward(rt_cuda_stream s, rt_cuda_dtype dt, float *dwte,
			       const void *dout, const int *tokens, int BT,
			       int C, int V);
/* out (n) = a + b (out may alias a or b): the residual connection. */
hexi_rc rt_cuda_add(rt_cuda_stream s, rt_cuda_dtype dt, void *out,
		    const void *a, const void *b, size_t n);

/* Element type conversion: out (n) of type to = in (n) of type from. */
hexi_rc rt_cuda_cast(rt_cuda_stream s, void *out, rt_cuda_dtype to,
		     const void *in, rt_cuda_dtype from, size_t n);

/* RMSNorm: out (BT,C) = inp * rstd * w; rstd (BT) fp32 saved. */
hexi_rc rt_cuda_rmsnorm_forward(rt_cuda_stream s, rt_cuda_dtype dt, void *out,
				float *rstd, const void *inp, const void *w,
				int BT, int C, float eps);
/* dinp (BT,C) +=, dw (C) fp32 += from dout, inp, w, rstd. */
hexi_rc rt_cuda_rmsnorm_backward(rt_cuda_stream s, rt_cuda_dtype dt, void *dinp,
				 float *dw, const void *dout, const void *inp,
				 const void *w, const float *rstd, int BT,
				 int C);

/* RoPE table: *tab (T, hs/2, 2) fp32 DEVICE memory, (cos, sin) of the
 * angle t * theta^(-2i/hs), computed once on the host in double exactly as
 * rt_ops' RoPE does (rt_cuda_host.c); the caller frees it with
 * rt_cuda_free.  T >= 1, hs even >= 2, theta > 1. */
hexi_rc rt_cuda_rope_table_create(int T, int hs, float theta, float **tab);
/* RoPE in place on x (B,T,NH,hs) from a table of at least T rows for this
 * hs; backward is the inverse rotation. */
hexi_rc rt_cuda_rope_forward(rt_cuda_stream s, rt_cuda_dtype dt, void *x,
			     const float *tab, int B, int T, int NH, int hs);
hexi_rc rt_cuda_rope_backward(rt_cuda_stream s, rt_cuda_dtype dt, void *dx,
			      const float *tab, int B, int T, int NH, int hs);

/*
 * Causal attention, flash style: q (B,T,NH,hs), k, v (B,T,NKV,hs), NH a
 * multiple of NKV, hs <= 128.  K/V (forward) and Q/dO (backward) tiles go
 * through shared memory and the softmax is computed online, so memory is
 * O(T) per head: no (T,T) matrix exists.  lse (B,NH,T) fp32 keeps the
 * log-sum-exp of every row for the backward pass.
 */
hexi_rc rt_cuda_attention_forward(rt_cuda_stream s, rt_cuda_dtype dt, void *out,
				  float *lse, const void *q, const void *k,
				  const void *v, int B, int T, int NH, int NKV,
				  int hs);
/* dq +=, dk +=, dv += from dout; delta (B,NH,T) fp32 is scratch. */
hexi_rc rt_cuda_attention_backward(rt_cuda_stream s, rt_cuda_dtype dt, void *dq,
				   void *dk, void *dv, const void *dout,
				   const void *out, const void *q,
				   const void *k, const void *v,
				   const float *lse, float *delta, int B, int T,
				   int NH, int NKV, int hs);

/* ---- attention implementation: own kernel or cuDNN's fused SDPA ---------- */

typedef enum rt_cuda_attn_kind {
	RT_CUDA_ATTN_OWN = 0,	/* rt_cuda_attention_* above (any dtype, GPU) */
	RT_CUDA_ATTN_CUDNN = 1, /* rt_cuda_sdpa_* below */
} rt_cuda_attn_kind;

/*
 * Which attention a model uses (rt_cuda_host.c; no CUDA call, so it is
 * tested without a GPU).  mode is $HEXI_ATTENTION: NULL, "" or "auto"
 * take cuDNN when it can run (bf16, compute capability >= 80, head size a
 * multiple of 8 and <= 128, cuDNN >= 9.0 loaded: cudnn_version as
 * cudnnGetVersion(), 0 when absent), else the own kernel; "own" forces
 * the own kernel; "cudnn" forces cuDNN and is HEXI_ERR_UNSUPPORTED with
 * the reason when it cannot run; anything else is HEXI_ERR_INVAL.  why
 * (cap bytes) receives one line saying what was chosen and why.
 */
hexi_rc rt_cuda_attn_pick(const char *mode, rt_cuda_dtype dt, int cc, int hs,
			  long cudnn_version, rt_cuda_attn_kind *kind,
			  char *why, size_t cap);

/* cudnnGetVersion() of libcudnn.so.9, opened with dlopen on the first call
 * (so binaries run where cuDNN is absent); 0 when it cannot be opened or
 * the build has no cuDNN support (configure --with-cudnn). */
long rt_cuda_cudnn_version(void);

/*
 * cuDNN fused scaled-dot-product attention (rt_cudnn_attn.c), causal, the
 * layouts of rt_cuda_attention_*: q, out (B,T,NH,hs), k, v (B,T,NKV,hs),
 * lse (B,NH,T) fp32.  create builds the forward and backward execution
 * plans for these fixed sizes on the context's compute stream (and their
 * workspace); HEXI_ERR_UNSUPPORTED with cuDNN's message when cuDNN has no
 * engine for them.  backward SETS dq, dk, dv (the own kernel adds).
 */
typedef struct rt_cuda_sdpa rt_cuda_sdpa;
hexi_rc rt_cuda_sdpa_create(rt_cuda *c, rt_cuda_dtype dt, int B, int T, int NH,
			    int NKV, int hs, rt_cuda_sdpa **out);
void rt_cuda_sdpa_destroy(rt_cuda_sdpa *a);
/* NULL when cuDNN's fused backward runs; else why the own backward kernel
 * runs instead (on cuDNN's stats): cuDNN refused the backward plan. */
const char *rt_cuda_sdpa_backward_why(const rt_cuda_sdpa *a);
hexi_rc rt_cuda_sdpa_forward(rt_cuda_sdpa *a, void *out, float *lse,
			     const void *q, const void *k, const void *v);
hexi_rc rt_cuda_sdpa_backward(rt_cuda_sdpa *a, void *dq, void *dk, void *dv,
			      const void *dout, const void *out, const void *q,
			      const void *k, const void *v, const float *lse);

/*
 * The plans rt_cuda_sdpa_create would build, built without a GPU for the
 * GPU that devprop_json describes: cuDNN's serialised device properties
 * (CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, cuDNN >= 9.8), as
 * rt_cuda_cudnn_devprop_json writes them on that GPU.  Both graphs go
 * through cuDNN's operation graph, heuristics and plan finalize, i.e. its
 * pattern matcher, support checks and NVRTC compilation of the fused
 * kernel; where no CUDA driver is loaded (a machine without a GPU, with
 * the driver's stub libcuda) the last step, loading the compiled kernel,
 * fails, and the plan reports RT_CUDA_PLAN_COMPILED.  HEXI_OK when the
 * report is filled; an error for bad sizes, unreadable device properties
 * or a cuDNN older than 9.8.  Nothing runs or is allocated on a device.
 */
typedef enum rt_cuda_plan_stage {
	RT_CUDA_PLAN_NONE = 0,	   /* refused: no engine, or not supported */
	RT_CUDA_PLAN_COMPILED = 1, /* kernel compiled; no driver to load it */
	RT_CUDA_PLAN_READY = 2,	   /* execution plan finalized */
} rt_cuda_plan_stage;
typedef struct rt_cuda_sdpa_plans {
	rt_cuda_plan_stage fwd, bwd;
	int fwd_engines, bwd_engines; /* configurations heuristics offered */
	size_t ws_bytes;	      /* the larger workspace (READY plans) */
	char fwd_why[256], bwd_why[256]; /* cuDNN's reason short of READY */
} rt_cuda_sdpa_plans;
hexi_rc rt_cuda_sdpa_plan_offline(const char *devprop_json, rt_cuda_dtype dt,
				  int B, int T, int NH, int NKV, int hs,
				  rt_cuda_sdpa_plans *r);

/* cuDNN's device properties of CUDA device `device` as JSON (*json from
 * malloc, NUL-terminated; the caller frees it): the input of
 * rt_cuda_sdpa_plan_offline.  Needs that GPU and cuDNN >= 9.8. */
hexi_rc rt_cuda_cudnn_devprop_json(int device, char **json);

/* SwiGLU: out (N) = silu(gate) * up; backward accumulates dgate, dup. */
hexi_rc rt_cuda_swiglu_forward(rt_cuda_stream s, rt_cuda_dtype dt, void *out,
			       const void *gate, const void *up, size_t N);
hexi_rc rt_cuda_swiglu_backward(rt_cuda_stream s, rt_cuda_dtype dt, void *dgate,
				void *dup, const void *dout, const void *gate,
				const void *up, size_t N);

/*
 * Softmax cross-entropy: logits (BT,V), targets (BT) int in [0,V):
 * losses (BT) fp32 = logsumexp - logit[target]; lse (BT) fp32 saved.
 * Backward: dlogits (BT,V) += dloss * (softmax - onehot), recomputed from
 * logits and lse (no (BT,V) probability array is kept).
 */
hexi_rc rt_cuda_crossentropy_forward(rt_cuda_stream s, rt_cuda_dtype dt,
				     float *losses, float *lse,
				     const void *logits, const int *targets,
				     int BT, int V);
hexi_rc rt_cuda_crossentropy_backward(rt_cuda_stream s, rt_cuda_dtype dt,
				      void *dlogits, const void *logits,
				      const float *lse, const int *targets,
				      float dloss, int BT, int V);

/*
 * AdamW step (rt_param_adamw's formula; step 1-based, bias-corrected):
 * master (n) fp32 weights, g, m, v fp32; w (n) of type dt receives the
 * updated weights (NULL for fp32 training where w is master).
 */
hexi_rc rt_cuda_adamw(rt_cuda_stream s, rt_cuda_dtype dt, float *master,
		      void *w, const float *g, float *m, float *v, size_t n,
		      float lr, float beta1, float beta2, float eps,
		      float weight_decay, int step);

/* ---- stage shard of the model on one GPU (rt_cuda_model.c) ----------------
 */

/*
 * The reference Llama-style model (rt_model.h's layers, tensor names,
 * stored shapes, TP sharding and initialisation) on one GPU through these
 * kernels: a stage shard holds layers [layer_begin, layer_end) for TP rank
 * tp_rank of tp_size, plus the embedding (first stage) and the final norm
 * and LM head (last stage), exactly like rt_model_create.  Activations and
 * weights are in dt; gradients, fp32 master weights and AdamW moments are
 * fp32, each one contiguous device array carved per parameter in
 * rt_cuda_model_param order (so the gradient sync can all-reduce runs of
 * parameters in place).  Plain C over this header only.
 */
struct hexi_model;
typedef struct rt_cuda_model rt_cuda_model;

/* Tensor-parallel sum inside a block: n fp32 DEVICE elements in place over
 * the stage's TP group, identical on every member (the trainer binds it to
 * the NCCL group).  NULL allreduce_sum: identity (tp_size 1 only). */
typedef struct rt_cuda_tp {
	hexi_rc (*allreduce_sum)(void *ctx, float *buf, size_t n);
	void *ctx;
} rt_cuda_tp;

/* The deterministic initialisation the shard takes its weights from (the
 * CPU model's rt_init_tensor / rt_init_std, handed in by the caller so
 * that runtime/cuda needs nothing from runtime/): tensor fills rows
 * [row_begin, row_end) of a (rows, ncols) tensor with standard deviation
 * std; std gives a parameter's standard deviation (0: all ones). */
typedef struct rt_cuda_init {
	void (*tensor)(float *w, const char *name, int64_t row_begin,
		       int64_t row_end, int64_t ncols, float std,
		       uint64_t seed);
	float (*std)(const struct hexi_model *md, const char *name);
} rt_cuda_init;

typedef struct rt_cuda_shard_cfg {
	const struct hexi_model *model; /* whole-model shape (copied) */
	int layer_begin, layer_end;	/* [begin, end), may be empty */
	int tp_rank, tp_size;		/* 0 <= rank < size <= kv_heads */
	int has_embed, has_head;	/* first / last stage */
	int max_slots;			/* micro-batches in flight (1F1B) */
	int B;				/* samples per micro-batch */
	rt_cuda_dtype dt;
	uint64_t seed;	   /* init.tensor's seed */
	rt_cuda_init init; /* both functions required */
	int recompute;	   /* 1: slots keep each layer's input only; the
			      backward recomputes the layer
			      (rt_model_config.recompute) */
	int no_moments;	   /* 1: no AdamW moments (train.zero > 0: the
			      sharded sync's owners keep theirs; the
			      shard's own AdamW then fails) */
	int grad_window;   /* 1 (train.zero 2): the gradients of ONE
			      backward unit (the embedding, one layer, the
			      head) at a time, in one reused window zeroed
			      as each unit's backward starts; the grad hook
			      hands each unit to the sync before the next
			      (rt_model_config.grad_window).  The shard's
			      own SGD/AdamW then fail */
} rt_cuda_shard_cfg;

/* One parameter (or its TP shard), device pointers. */
typedef struct rt_cuda_param {
	char name[64];		/* doc/LAYOUT.md name */
	int ndim;		/* 1 or 2 */
	int64_t rows, cols;	/* global stored shape (cols 1 for vectors) */
	int row_begin, row_end; /* rows held */
	size_t n;		/* local elements */
	int decay;		/* 2-D: AdamW weight decay applies */
	float *master;		/* fp32 weights */
	void *w;	  /* dt copy the kernels read (== master in fp32) */
	float *g, *m, *v; /* fp32 gradient (accumulates; with
			     cfg.grad_window this backward unit's
			     only), moments (NULL with
			     cfg.no_moments) */
} rt_cuda_param;

/* Validate cfg (as rt_model_create does, plus head size <= 128 for the
 * attention kernel), allocate, initialise from cfg->seed.  tp may be NULL
 * when tp_size is 1; it is copied. */
hexi_rc rt_cuda_shard_create(rt_cuda *c, const rt_cuda_shard_cfg *cfg,
			     const rt_cuda_tp *tp, rt_cuda_model **out);
/* The whole model (all layers, embedding and head, TP 1, one slot). */
hexi_rc rt_cuda_model_create(rt_cuda *c, const struct hexi_model *md,
			     rt_cuda_dtype dt, int B, uint64_t seed,
			     const rt_cuda_init *init, rt_cuda_model **out);
void rt_cuda_model_destroy(rt_cuda_model *m);

/*
 * Forward micro-batch in slot (free): first stage reads tokens (B,T) host
 * ints, others x_in (B,T,C) DEVICE in dt; non-last stages write x_out
 * (B,T,C) DEVICE in dt; the last stage reads targets (B,T) host ints and
 * SETS *loss_sum to the sum over the B samples of each sample's mean token
 * cross-entropy, and backward differentiates grad_scale * loss_sum (the
 * rt_model_forward contract).  Inputs are copied into the slot.
 */
hexi_rc rt_cuda_model_forward(rt_cuda_model *m, int slot, const int *tokens,
			      const void *x_in, void *x_out, const int *targets,
			      float grad_scale, double *loss_sum);
/* Backward of slot (frees it): dy (B,T,C) DEVICE d(stage output) on
 * non-last stages; dx (B,T,C) DEVICE is SET to d(x_in) on non-first stages.
 * Parameter gradients accumulate until rt_cuda_model_zero_grad. */
hexi_rc rt_cuda_model_backward(rt_cuda_model *m, int slot, const void *dy,
			       void *dx);
/* Called by rt_cuda_model_backward as gradients become final, with the
 * rt_grad_hook contract of rt_model.h (the model's layer count after the
 * head, global layer l after layer l, -1 after the embedding): the work
 * that finishes them is QUEUED on the compute stream, not done, so the
 * hook may only hand them to work ordered after that stream (the nccl
 * backend's non-blocking all-reduce, rt_comm_nccl_order_after).  An error
 * ends the backward.  NULL: no hook. */
void rt_cuda_model_set_grad_hook(rt_cuda_model *m,
				 hexi_rc (*fn)(void *ctx, int layer),
				 void *ctx);
hexi_rc rt_cuda_model_zero_grad(rt_cuda_model *m);
/* Zero the gradients, forward and backward one batch of the whole model
 * (tokens, targets (B,T) host); *loss = mean token cross-entropy, the
 * gradients are those of that mean. */
hexi_rc rt_cuda_model_fwd_bwd(rt_cuda_model *m, const int *tokens,
			      const int *targets, double *loss);

/* Every gradient *= f (clipping). */
hexi_rc rt_cuda_model_grad_scale(rt_cuda_model *m, float f);
/* AdamW on every parameter (decay on 2-D tensors only), step >= 1. */
hexi_rc rt_cuda_model_adamw(rt_cuda_model *m, float lr, float beta1,
			    float beta2, float eps, float weight_decay,
			    int step);
/* master -= lr * g (as rt_model_sgd), then the dt copy. */
hexi_rc rt_cuda_model_sgd(rt_cuda_model *m, float lr);
/* The dt copies the kernels read, cast again from the fp32 masters
 * (after something else updated the masters: the sharded optimizer's
 * owned ranges and the all-gather of the others); no-op in fp32. */
hexi_rc rt_cuda_model_refresh(rt_cuda_model *m);

/* Host copies of a parameter's state: what 0 master weights, 1 gradient,
 * 2 AdamW m, 3 AdamW v (HEXI_ERR_INVAL with cfg.no_moments); n must be
 * its local element count.  write of the master weights also refreshes
 * the dt copy. */
hexi_rc rt_cuda_model_read(rt_cuda_model *m, const char *name, int what,
			   float *out, size_t n);
hexi_rc rt_cuda_model_write(rt_cuda_model *m, const char *name, int what,
			    const float *in, size_t n);

int rt_cuda_model_nparams(const rt_cuda_model *m);
const rt_cuda_param *rt_cuda_model_param(const rt_cuda_model *m, int i);
size_t rt_cuda_model_numel(const rt_cuda_model *m);
/* FLOPs of one fwd+bwd of a micro-batch on this shard (rt_model_flops). */
double rt_cuda_model_flops(const rt_cuda_model *m);
/* Bytes of one stage-boundary activation (B,T,C) in dt. */
size_t rt_cuda_model_act_bytes(const rt_cuda_model *m);
/* Device bytes the shard allocated, by what they hold (rt_model_mem of
 * rt_model.h: params = fp32 master + dt copies, grads, optim = AdamW
 * moments, acts = slots + the recompute layer, work = scratch). */
struct rt_model_mem;
void rt_cuda_model_mem_bytes(const rt_cuda_model *m, struct rt_model_mem *out);
/* The attention the shard runs and why (rt_cuda_attn_pick's line, or why
 * cuDNN fell back), e.g. "cudnn (auto: bf16, sm_90, hs 128, cuDNN 91900)". */
const char *rt_cuda_model_attention(const rt_cuda_model *m);
/* Which one: RT_CUDA_ATTN_OWN or RT_CUDA_ATTN_CUDNN. */
rt_cuda_attn_kind rt_cuda_model_attn_kind(const rt_cuda_model *m);

/* ---- trainer helpers (rt_train_ops.cu) ----------------------------------- */

/* x (n) fp32 *= f; *acc (one device double) += sum of x^2. */
hexi_rc rt_cuda_scale_f32(rt_cuda_stream s, float *x, float f, size_t n);
/* SGD on fp32 w (n): w -= lr * g with the product rounded first (no
 * fused multiply-add: the rounding of the CPU's and of
 * rt_cuda_model_sgd's scale-then-add); g is not changed.  With
 * rt_cuda_adamw (element-wise, so any [off, off + n) of a tensor is a
 * pointer and a count) the sharded optimizer's update of an owned range. */
hexi_rc rt_cuda_sgd_f32(rt_cuda_stream s, float *w, const float *g, float lr,
			size_t n);
hexi_rc rt_cuda_sumsq_f32(rt_cuda_stream s, const float *x, size_t n,
			  double *acc);

#ifdef __cplusplus
}
#endif
#endif /* HEXI_RT_CUDA_H */
