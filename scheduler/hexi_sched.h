/*
 * hexi_sched.h - HexiScale scheduler: cluster, model and plan formats, GPU
 * catalog, cost models and simulator, the two-phase asymmetric planner, and
 * the tensor layout every other module agrees on.
 *
 * This is the contract the plugin, the runtime and the checkpoint tool code
 * against.  Formats are documented in hexiscale-cluster(5) and
 * hexiscale-plan(5); the tensor names and sharding rule in doc/LAYOUT.md.
 *
 * Ownership: *_create, *_load and *_parse return heap objects freed with the
 * matching *_destroy (NULL is a no-op).  Strings inside objects are owned by
 * the object.  Every fallible call returns hexi_rc and sets a message
 * (hexi_errmsg) naming the file/field and the cause.
 */
#ifndef HEXI_SCHED_H
#define HEXI_SCHED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hexi_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HEXI_NAME_MAX	     64
#define HEXI_PLAN_FORMAT     "hexiscale-plan"
#define HEXI_PLAN_VERSION    1
#define HEXI_HASH_HEX	     17 /* 16 hex digits of a 64-bit hash + NUL */
#define HEXI_CLUSTER_FORMAT  "hexiscale-cluster"
#define HEXI_CLUSTER_VERSION 1
#define HEXI_MODEL_FORMAT    "hexiscale-model"
#define HEXI_MODEL_VERSION   1
#define HEXI_CATALOG_FORMAT  "hexiscale-catalog"
#define HEXI_CATALOG_VERSION 1

/* Hard caps on outside input (parsers reject anything larger). */
#define HEXI_MAX_NODES	       4096
#define HEXI_MAX_GPUS_PER_NODE 64
#define HEXI_MAX_GPUS	       16384
#define HEXI_MAX_LAYERS	       1024
#define HEXI_MAX_GPU_TYPES     256  /* catalog entries */
#define HEXI_MAX_PROFILES      4096 /* profile files in one directory */

/* ---- GPU catalog -------------------------------------------------------- */

typedef struct hexi_gpu_type {
	char name[HEXI_NAME_MAX]; /* canonical, e.g. "a800-80g" */
	double peak_tflops;	  /* dense BF16/FP16 tensor TFLOPS */
	double mem_gib;		  /* device memory, GiB */
	double mem_bw_gbps;	  /* device memory bandwidth, GB/s */
	double intra_bw_gbps;	  /* typical GPU<->GPU link on a node, GB/s */
	double efficiency;	  /* achievable fraction of peak, 0..1 */
	int measured; /* 1 if numbers came from a hexiprof profile */
	/* Attention core (Q K^T, softmax, P V) as fractions of peak_tflops,
	 * over the FLOPs the kernels compute (doc/COSTMODEL.md); 0 = not
	 * given, the cost model's generic default: fused attention (cuDNN,
	 * FlashAttention-class) forward and backward, and the runtime's own
	 * kernel (CUDA cores, one warp per query row). */
	double attn_efficiency;
	double attn_bwd_efficiency;
	double attn_own_efficiency;
	double compute_capability; /* CUDA major.minor, e.g. 8.0; 0 = not
				      given (priced as 8.0 or newer) */
} hexi_gpu_type;

typedef struct hexi_catalog hexi_catalog;

/* The built-in catalog (see hexiscale-cluster(5) for sources). */
hexi_rc hexi_catalog_builtin(hexi_catalog **out);
/* Load a catalog JSON file; entries replace or extend the built-in ones. */
hexi_rc hexi_catalog_load(const char *path, hexi_catalog **out);
/* Merge measured profiles (hexiprof JSON) from a file or a directory. */
hexi_rc hexi_catalog_apply_profiles(hexi_catalog *cat, const char *path);
/* Find a type by canonical name or alias ("a800", "rtx4090", "4090",
 * "NVIDIA GeForce RTX 4090", Slurm GRES "gpu:a800:3"); case, punctuation
 * and the words NVIDIA/GeForce/Tesla are ignored.  NULL if unknown. */
const hexi_gpu_type *hexi_catalog_find(const hexi_catalog *cat,
				       const char *name);
/* The built-in type of a GPU by the name NVML or cudaGetDeviceProperties
 * reports ("NVIDIA H100 80GB HBM3" -> "h100-sxm", "NVIDIA GeForce RTX 3080
 * Ti" -> "rtx3080ti"), matched as hexi_catalog_find matches (the whole
 * name against a type name or alias: "NVIDIA A10" is never an A100):
 * static storage, or NULL for a name the built-in catalog does not know. */
const char *hexi_catalog_builtin_type(const char *device_name);
size_t hexi_catalog_count(const hexi_catalog *cat);
const hexi_gpu_type *hexi_catalog_at(const hexi_catalog *cat, size_t i);
void hexi_catalog_destroy(hexi_catalog *cat);
/* Deep copy. */
hexi_rc hexi_catalog_clone(const hexi_catalog *cat, hexi_catalog **out);
/* Merge a catalog JSON text ({"format":"hexiscale-catalog","version":1,
 * "gpus":[...]}) into cat: known names/aliases are overridden field by
 * field, new names are added. */
hexi_rc hexi_catalog_parse(hexi_catalog *cat, const char *json, size_t len);
/* Add t, or replace the entry that t->name resolves to (aliases kept, and
 * attention fields t leaves 0 kept). */
hexi_rc hexi_catalog_set(hexi_catalog *cat, const hexi_gpu_type *t);
/* Achievable TFLOPS of a type: peak_tflops * efficiency. */
double hexi_gpu_tflops(const hexi_gpu_type *t);

/* ---- cluster description (hexiscale-cluster(5)) -------------------------- */

typedef struct hexi_node {
	char name[HEXI_NAME_MAX];     /* hostname, e.g. "n1" */
	char gpu_type[HEXI_NAME_MAX]; /* canonical catalog name */
	int ngpus;		      /* GPUs of this node in the job */
	int *gpu_index;		      /* [ngpus] local device indices */
	double intra_bw_gbps;	      /* GPU<->GPU on this node */
} hexi_node;

typedef struct hexi_cluster {
	int nnodes;
	hexi_node *nodes;      /* [nnodes] */
	double inter_bw_gbps;  /* default node<->node bandwidth, GB/s */
	double inter_lat_s;    /* node<->node latency, s */
	double intra_lat_s;    /* GPU<->GPU latency on a node, s */
	double *pair_bw_gbps;  /* [nnodes*nnodes] or NULL: per pair */
	hexi_catalog *catalog; /* owned; resolves gpu_type */
} hexi_cluster;

hexi_rc hexi_cluster_load(const char *path, const hexi_catalog *cat,
			  hexi_cluster **out);
hexi_rc hexi_cluster_parse(const char *json, size_t len,
			   const hexi_catalog *cat, hexi_cluster **out);
/* JSON text of the cluster (heap string, caller frees). */
hexi_rc hexi_cluster_to_json(const hexi_cluster *c, char **out);
int hexi_cluster_total_gpus(const hexi_cluster *c);
/* Bandwidth between node a and node b (a == b: intra-node), GB/s. */
double hexi_cluster_bw(const hexi_cluster *c, int a, int b);
/* Deep copy (catalog included). */
hexi_rc hexi_cluster_clone(const hexi_cluster *c, hexi_cluster **out);
void hexi_cluster_destroy(hexi_cluster *c);
/* Catalog entry of node i's GPU type (never NULL for a valid cluster). */
const hexi_gpu_type *hexi_cluster_gpu(const hexi_cluster *c, int node);

/* Build a cluster in code (the plugin does, from a Slurm allocation):
 * create with nnodes empty nodes and a copy of cat (NULL = built-in),
 * fill each node with hexi_cluster_set_node, set inter_bw_gbps (and
 * optionally pair_bw_gbps, latencies), then hexi_cluster_validate. */
hexi_rc hexi_cluster_create(int nnodes, const hexi_catalog *cat,
			    hexi_cluster **out);
/* gpu_index NULL = 0..ngpus-1; intra_bw_gbps <= 0 = the catalog's value. */
hexi_rc hexi_cluster_set_node(hexi_cluster *c, int i, const char *name,
			      const char *gpu_type, int ngpus,
			      const int *gpu_index, double intra_bw_gbps);
hexi_rc hexi_cluster_validate(const hexi_cluster *c);
/* Measured link numbers from hexiprof profiles (file or directory): a
 * profile whose host is a node's name sets that node's intra_bw_gbps; the
 * smallest inter_bw_gbps / largest latencies over all profiles set the
 * cluster's.  GPU numbers go through hexi_catalog_apply_profiles. */
hexi_rc hexi_cluster_apply_profiles(hexi_cluster *c, const char *path);
/* Synthetic mixed cluster for tests and benchmarks: ngpus GPUs,
 * gpus_per_node a node, node k gets types[k % ntypes] (catalog names),
 * intra bandwidth from the catalog, inter_bw_gbps between nodes. */
hexi_rc hexi_cluster_synthetic(int ngpus, int gpus_per_node,
			       const char *const *types, int ntypes,
			       double inter_bw_gbps, hexi_cluster **out);

/* ---- model and training description ------------------------------------ */

typedef struct hexi_model {
	char name[HEXI_NAME_MAX];
	int layers;   /* L transformer blocks */
	int hidden;   /* C */
	int heads;    /* H query heads */
	int kv_heads; /* KV heads (== heads without GQA) */
	int ffn;      /* F, SwiGLU inner size */
	int vocab;    /* V */
	int seq_len;  /* T tokens per sample */
} hexi_model;

typedef struct hexi_train {
	int global_batch; /* samples per iteration, all pipelines */
	int micro_batch;  /* default micro-batch size (planner may vary) */
	int recompute;	  /* 1 = activation recomputation (default of every
			     pipeline; a pipeline may override it) */
	int zero;	  /* sharded data parallelism: 0 none, 1 optimizer
			     state, 2 optimizer state and gradients */
	double bytes_per_param; /* weights+grads+optimizer, mixed-precision
				   Adam: 16 */
	double act_bytes;	/* bytes per activation element (2 = bf16) */
	double reserve_gib;	/* framework reserve per GPU */
} hexi_train;

/* Built-in names: llama2-7b, llama2-13b, llama-30b, llama2-70b, tiny-*. */
hexi_rc hexi_model_builtin(const char *name, hexi_model *out);
/* NAME of a built-in, or a path to a model JSON file. */
hexi_rc hexi_model_load(const char *name_or_path, hexi_model *out);
hexi_rc hexi_model_validate(const hexi_model *m);
/* Model JSON text (hexiscale-cluster(5), "MODEL FILES"). */
hexi_rc hexi_model_parse(const char *json, size_t len, hexi_model *out);
hexi_rc hexi_model_to_json(const hexi_model *m, char **out);
/* Number of built-in models and the name of the i-th. */
int hexi_model_builtin_count(void);
const char *hexi_model_builtin_name(int i);
/* global_batch 64, micro_batch 1, recompute 1, zero 0, bytes_per_param 16,
 * act_bytes 2, reserve_gib 2. */
void hexi_train_defaults(hexi_train *t);
hexi_rc hexi_train_validate(const hexi_train *t);
/* Number of parameters of the whole model. */
double hexi_model_params(const hexi_model *m);

/* ---- plan (hexiscale-plan(5)) ------------------------------------------- */

typedef struct hexi_device {
	int node; /* index into cluster->nodes */
	int gpu;  /* local GPU index on that node (CUDA ordinal) */
	int rank; /* global rank, 0..world_size-1 */
} hexi_device;

typedef struct hexi_stage {
	int layer_begin;      /* first layer held, inclusive */
	int layer_end;	      /* one past the last layer held */
	int tp;		      /* tensor-parallel degree = ndevices */
	hexi_device *devices; /* [tp]; devices[i] is TP rank i; one node */
	/* simulator's prediction */
	double time_s;	/* per micro-batch fwd+bwd */
	double mem_gib; /* peak per GPU */
} hexi_stage;

/* A pipeline's activation recomputation: as train.recompute, or its own. */
typedef enum hexi_recompute_mode {
	HEXI_RECOMPUTE_INHERIT = 0, /* calloc'ed pipelines: train.recompute */
	HEXI_RECOMPUTE_ON = 1,
	HEXI_RECOMPUTE_OFF = 2,
} hexi_recompute_mode;

typedef struct hexi_pipeline {
	int nstages;
	hexi_stage *stages; /* [nstages] in pipeline order */
	int batch;	    /* samples per iteration of this pipeline */
	int micro_batches;  /* m_p; micro-batch size = batch/micro_batches */
	int recompute;	    /* hexi_recompute_mode */
	double time_s;	    /* predicted pipeline time per iteration */
} hexi_pipeline;

typedef struct hexi_prediction {
	double iter_s;
	double dp_sync_s;
	double tokens_per_s;
	double mfu; /* 0..1 over all GPUs of the plan */
} hexi_prediction;

/* Why a search stopped (hexiscale-plan(5), "search"). */
typedef enum hexi_search_stop {
	HEXI_SEARCH_DONE = 0, /* converged or ran through its space */
	HEXI_SEARCH_WORK = 1, /* reached max_evals: deterministic */
	HEXI_SEARCH_TIME = 2, /* the wall-clock safety stop: the plan may
				 differ between an idle and a loaded machine */
} hexi_search_stop;

typedef struct hexi_search {
	long evaluations; /* candidates evaluated; 0: not planned here */
	long max_evals;
	double time_budget_s;
	int stop; /* hexi_search_stop */
} hexi_search;

typedef struct hexi_plan {
	int version;
	char hash[HEXI_HASH_HEX]; /* content hash, see hexi_plan_hash() */
	char strategy[HEXI_NAME_MAX];
	char cost_model[HEXI_NAME_MAX];
	hexi_model model;
	hexi_train train;
	hexi_cluster *cluster; /* owned */
	int world_size;
	int npipelines;
	hexi_pipeline *pipelines; /* [npipelines] */
	hexi_prediction pred;
	hexi_search search; /* how the planner got it; not hashed */
	/* GPUs of the cluster the plan leaves idle (hexiscale-plan(5),
	 * "idle"): every GPU of the cluster is in exactly one stage or here.
	 * Their ranks continue the training ranks: W .. W+nidle-1 as the
	 * planner writes them (any permutation of 0 .. W+nidle-1 over the
	 * stages' and idle devices is valid, so a launcher may renumber). */
	int nidle;
	hexi_device *idle; /* [nidle], malloc'ed, freed by hexi_plan_destroy */
} hexi_plan;

/* A plan to fill in code: copies of c (cloned), m and t, npipelines zeroed
 * pipelines (their stages/devices arrays are the caller's to calloc; every
 * array in a plan is freed with free() by hexi_plan_destroy). */
hexi_rc hexi_plan_new(const hexi_cluster *c, const hexi_model *m,
		      const hexi_train *t, int npipelines, hexi_plan **out);
/* Read, parse, validate and verify the hash (cat NULL = built-in; GPU
 * types written inside the plan's cluster override cat). */
hexi_rc hexi_plan_load(const char *path, const hexi_catalog *cat,
		       hexi_plan **out);
hexi_rc hexi_plan_parse(const char *json, size_t len, const hexi_catalog *cat,
			hexi_plan **out);
/* Pretty JSON with hash, chunk groups and prediction (caller frees). */
hexi_rc hexi_plan_to_json(const hexi_plan *p, char **out);
/* Full structural check: ranks 0..W-1 once each, every layer once per
 * pipeline, TP devices on one node, batch sums, tp <= kv_heads ... */
hexi_rc hexi_plan_validate(const hexi_plan *p);
/* Recompute p->hash over the canonical content (excludes prediction). */
hexi_rc hexi_plan_hash(hexi_plan *p);
hexi_rc hexi_plan_clone(const hexi_plan *p, hexi_plan **out);
void hexi_plan_destroy(hexi_plan *p);

/* Text picture (pipelines as rows, stages as boxes) and SVG of a plan. */
hexi_rc hexi_plan_render_text(const hexi_plan *p, FILE *out);
hexi_rc hexi_plan_render_svg(const hexi_plan *p, const char *path);

/* Role of one global rank. */
typedef struct hexi_role {
	int rank, world_size;
	int pipeline, stage, nstages;
	int tp_rank, tp_size;
	int layer_begin, layer_end;
	int batch, micro_batches, micro_batch_size;
	int node, gpu;
	int local_rank, local_world_size; /* among ranks on the same node */
	int recompute; /* 0/1: this rank's pipeline recomputes activations */
	int zero;      /* the plan's train.zero */
	/* 1: the rank is one of the plan's idle GPUs; it trains nothing.
	 * Then pipeline, stage, tp_rank are -1, nstages, tp_size, layers,
	 * batch and micro-batches 0, recompute 0; rank, world_size (the
	 * training ranks W), node, gpu, local_rank and local_world_size (over
	 * every task of the node, idle ones included) are set. */
	int idle;
} hexi_role;

/* 0 or 1: whether pipeline pi of p recomputes activations (its own
 * setting, else train.recompute). */
int hexi_plan_recompute(const hexi_plan *p, int pi);

/* Role of rank 0 .. hexi_plan_tasks(p)-1: a training rank or an idle GPU
 * (out->idle); HEXI_ERR_NOTFOUND for any other rank. */
hexi_rc hexi_plan_role(const hexi_plan *p, int rank, hexi_role *out);
/* Tasks the plan needs, one per GPU: world_size + nidle. */
int hexi_plan_tasks(const hexi_plan *p);
/* The idle GPUs by type in first-seen order, " a800 x64, rtx4090 x32",
 * into BUF (truncated to CAP; "" when none); returns BUF. */
char *hexi_plan_idle_types(const hexi_plan *p, char *buf, size_t cap);
/* Index in p->idle of the idle GPU with this rank, or -1. */
int hexi_plan_find_idle(const hexi_plan *p, int rank);
/* Stage holding a global rank: pipeline/stage/tp_rank, or HEXI_ERR_NOTFOUND. */
hexi_rc hexi_plan_find_rank(const hexi_plan *p, int rank, int *pipeline,
			    int *stage, int *tp_rank);

/* ---- tensor layout (doc/LAYOUT.md) -------------------------------------- */

/* A contiguous row range [row_begin, row_end) of a tensor held by one rank.
 * Every sharded tensor is sharded along dimension 0 of its stored shape. */
typedef struct hexi_shard {
	int rank;
	int pipeline;
	int row_begin, row_end;
} hexi_shard;

typedef struct hexi_tensor_layout {
	char name[HEXI_NAME_MAX]; /* e.g. "layers.3.attn.wq" */
	int ndim;
	int64_t shape[2]; /* global shape; ndim 1 or 2 */
	int nshards;
	hexi_shard *shards; /* every holder in every pipeline */
} hexi_tensor_layout;

/* A chunk of the gradient sync: rows [row_begin,row_end) of one tensor,
 * all-reduced among ranks[]; weight per pipeline is handled by the runtime. */
typedef struct hexi_chunk {
	int tensor; /* index into layout tensors */
	int row_begin, row_end;
	int nranks;
	int *ranks; /* ascending */
} hexi_chunk;

typedef struct hexi_layout {
	int ntensors;
	hexi_tensor_layout *tensors;
	int nchunks;
	hexi_chunk *chunks;
} hexi_layout;

/* Tensors in model order (embed, layers 0..L-1 in table order of
 * doc/LAYOUT.md, final_norm, lm_head); shards in pipeline order, then TP
 * rank order; chunks in tensor order, then row order. */
hexi_rc hexi_layout_create(const hexi_plan *p, hexi_layout **out);
/* Index of a tensor by name, or -1. */
int hexi_layout_find(const hexi_layout *l, const char *name);
/* Rows of a sharded dimension held by TP rank r of t (0 <= r < t). */
void hexi_layout_split(int n, int t, int r, int *begin, int *end);
void hexi_layout_destroy(hexi_layout *l);

/* ---- cost models and simulator ------------------------------------------ */

typedef enum hexi_cost_kind {
	HEXI_COST_HEXISCALE = 0, /* default: ours */
	HEXI_COST_REFERENCE = 1, /* transcription of the authors' formulas */
} hexi_cost_kind;

typedef struct hexi_stage_report {
	double compute_s, tp_comm_s, pp_comm_s, bubble_s, mem_gib, mem_cap_gib;
} hexi_stage_report;

/* Fill p->pred and every stage/pipeline time; optional per-stage report
 * array [sum of nstages] in pipeline-major order (caller allocates). */
hexi_rc hexi_simulate(hexi_plan *p, hexi_cost_kind kind,
		      hexi_stage_report *report);

/* ---- planner ------------------------------------------------------------ */

typedef enum hexi_strategy {
	HEXI_STRATEGY_HEXISCALE = 0,
	HEXI_STRATEGY_MEGATRON,
	HEXI_STRATEGY_RANDOM,
	HEXI_STRATEGY_EXHAUSTIVE,
} hexi_strategy;

typedef struct hexi_plan_opts {
	hexi_strategy strategy;
	hexi_cost_kind cost_model;
	uint64_t seed;
	/* The search is bounded by work, so the same inputs and seed give the
	 * same plan on any machine; the time budget is only a safety stop,
	 * recorded in the plan (hexi_plan.search) when it cuts the search. */
	long max_evals;	      /* candidates evaluated; 0 = default */
	double time_budget_s; /* wall-clock safety stop; 0 = default */
	int no_asymmetric_tp; /* ablation */
	int uniform_batch;    /* ablation */
	int verbose;	      /* search trace through hexi_log */
	int max_pipelines;    /* 0 = no limit */
	/* 1: every GPU of the cluster in the plan (no idle GPUs), as before
	 * subsets were searched; the hexiscale strategy otherwise also plans
	 * on the fastest GPU types and nodes alone, and on fewer GPUs of a
	 * node, and keeps what is faster */
	int use_all_gpus;
	/* Micro-batch sizes.  Default (micro_batch_exact 0): the planner
	 * chooses each pipeline's micro-batch size among the divisors of its
	 * batch up to micro_batch_max (0 = no bound); train.micro_batch is
	 * then not used.  micro_batch_exact 1: micro-batches of
	 * train.micro_batch samples, or a power-of-two multiple of it when
	 * that is faster (the meaning before bounds existed). */
	int micro_batch_max;
	int micro_batch_exact;
	/* Memory options searched with the rest of the plan: -1 (default)
	 * = searched (zero 0, 1, 2; recompute on and off), else fixed to
	 * that value (train.zero / train.recompute are then not used).
	 * Clusters of more than HEXI_PLAN_MEMSEARCH_GPUS GPUs search only
	 * what train says, to keep planning time in bounds. */
	int zero;
	int recompute;
} hexi_plan_opts;

#define HEXI_PLAN_MEMSEARCH_GPUS 512

/* Defaults of max_evals and time_budget_s. */
#define HEXI_PLAN_MAX_EVALS 20000
#define HEXI_PLAN_BUDGET_S  600.0

void hexi_plan_opts_defaults(hexi_plan_opts *o);
/* Find the best plan; the cluster is copied into the plan. */
hexi_rc hexi_plan_create(const hexi_cluster *c, const hexi_model *m,
			 const hexi_train *t, const hexi_plan_opts *o,
			 hexi_plan **out);

#ifdef __cplusplus
}
#endif
#endif /* HEXI_SCHED_H */
