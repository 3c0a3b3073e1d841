/*
 * sched_int.h - internals shared by the cost models (cost_ref.c,
 * cost_hexi.c), the simulator (sim.c), the planner (planner*.c) and the
 * hexiplan CLI.  Not installed; not part of the library's contract.
 *
 * Every formula used here is written out, with units, in doc/COSTMODEL.md.
 */
#ifndef HEXI_SCHED_INT_H
#define HEXI_SCHED_INT_H

#include "hexi_sched.h"

#define SCHED_TWO40 1099511627776.0 /* reference model: 1 TFLOPS = 2^40 */
#define SCHED_TWO30 1073741824.0    /* reference model: 1 GB/s = 2^30 B/s */
#define SCHED_GIB   1073741824.0    /* bytes per GiB */

/* Reference model constants, as in the authors' code (doc/COSTMODEL.md). */
#define SCHED_REF_SEQ	4096
#define SCHED_REF_VOCAB 32000
#define SCHED_REF_BYTES 2

/* One GPU of the cluster, in the order node 0's GPUs, node 1's GPUs ... */
typedef struct sched_dev {
	int node;	    /* index into cluster->nodes */
	int gpu;	    /* local device index on that node */
	int type;	    /* index of its distinct GPU type in the context */
	double peak_tflops; /* catalog dense BF16 TFLOPS, as written */
	double eff;	    /* achievable fraction of peak, 0..1 */
	double mem_gib;	    /* capacity, GiB */
	double mem_bw_gbps; /* memory bandwidth, GB/s (catalog or measured) */
	int cpu;	    /* the "cpu" type: fp32 runtime, T x T scores */
	/* attention core as fractions of peak (defaults resolved): fused
	 * forward, fused backward, own kernel; CUDA compute capability */
	double attn_eff, attn_bwd_eff, attn_own_eff, cc;
} sched_dev;

/* Generic attention figures of a type whose catalog entry gives none
 * (hexiscale-cluster(5)), and the backward/forward FLOP ratios of the two
 * GPU paths (doc/COSTMODEL.md "Attention"). */
#define SCHED_ATTN_EFF	     0.5
#define SCHED_ATTN_BWD_EFF   0.4
#define SCHED_ATTN_OWN_EFF   0.01
#define SCHED_ATTN_BWD_FUSED 2.5 /* recompute S; dV, dP, dQ, dK: 5 of 2 */
#define SCHED_ATTN_BWD_OWN   3.5 /* dq kernel 3, dk/dv kernel 4: 7 of 2 */
#define SCHED_ATTN_OWN_HS    128 /* the own kernel's unrolled head size */

/* Which GPU attention the hexiscale model prices: the runtime's automatic
 * choice (fused for 16-bit activations on compute capability >= 8.0 with
 * a head size of 8..128 in steps of 8, else own), or one of them. */
typedef enum sched_attn_mode {
	SCHED_ATTN_AUTO = 0,
	SCHED_ATTN_FUSED,
	SCHED_ATTN_OWN,
} sched_attn_mode;

/* Everything the cost models need, resolved once (types, capacities). */
typedef struct sched_ctx {
	const hexi_cluster *c;
	hexi_model m;
	hexi_train t;
	hexi_cost_kind kind;
	int overlap_dp;	      /* hexiscale: overlap DP sync with backward */
	sched_attn_mode attn; /* hexiscale: GPU attention path priced */
	int ndev;
	sched_dev *dev;		/* [ndev] */
	int *node_first;	/* [nnodes + 1] first dev index of each node */
	int ntypes;		/* distinct GPU types present */
	double peak_sum_tflops; /* sum of peak_tflops over every GPU */
} sched_ctx;

/* Resolve every node's GPU type; HEXI_ERR_NOTFOUND names an unknown type. */
hexi_rc sched_ctx_init(sched_ctx *x, const hexi_cluster *c, const hexi_model *m,
		       const hexi_train *t, hexi_cost_kind kind);
void sched_ctx_fini(sched_ctx *x);
/* Context index of (node, local gpu), or -1. */
int sched_dev_index(const sched_ctx *x, int node, int gpu);
/* GPU<->GPU bandwidth between nodes a and b (a == b: intra-node), GB/s. */
double sched_bw_gbps(const sched_ctx *x, int a, int b);
/* Latency between nodes a and b, s. */
double sched_lat_s(const sched_ctx *x, int a, int b);

/* Per-micro-batch cost of one stage; time is linear in its layer count n:
 *   time_s = n * (comp_layer_s + tp_layer_s) + fixed_s + pp_s
 *   mem    = n * mem_layer_b + mem_fixed_b
 *            + min(n * stage_layer_b + stage_fixed_b, stage_cap_b)
 * bytes per GPU (sched_stage_mem_b): the last term is the gradient
 * sync's staging, packed copies of the gradients up to a budget each: the
 * overlap's and, on a GPU at zero 1, the sharded sync's windows while the
 * stage's chunk groups are not known (runtime/sync.c, DECISIONS 180, 183,
 * 184; once they are, the windows' staging is a part of mem_fixed_b). */
typedef struct sched_scost {
	double comp_layer_s; /* compute per layer, fwd+bwd (+recompute) */
	double tp_layer_s;   /* TP all-reduces per layer */
	double fixed_s;	     /* embedding / LM head compute */
	double pp_s;	     /* activation send + gradient return, next stage */
	double opt_layer_s;  /* optimizer step per layer held, per iteration */
	double opt_fixed_s;  /* optimizer step of embedding/head, per iter. */
	double mem_layer_b;  /* bytes per GPU per layer held */
	double mem_fixed_b;  /* bytes per GPU independent of layers */
	double cap_b;	     /* smallest capacity in the TP group, bytes */
	double stage_layer_b; /* sync staging per layer held, below the cap */
	double stage_fixed_b; /* sync staging of embedding / head */
	double stage_cap_b;   /* the staging budget (0: no staging) */
} sched_scost;

/* Bytes per GPU of a stage of k holding n layers. */
double sched_stage_mem_b(const sched_scost *k, double n);
/* The most layers (fractional, may be negative) a stage of k holds
 * within k->cap_b. */
double sched_stage_room(const sched_scost *k);

/* A stage as the cost models see it (dev[] are context indices). */
/* Elements of one segment of the CPU runtime's sharded sync ring
 * (runtime/sync.c SYNC_SEG): its staging is two of them per rank. */
#define SCHED_CPU_SYNC_SEG 65536.0
/* The gradient sync's staging budget, bytes: SYNC_SLOTS (8) buckets of
 * HEXI_RT_SYNC_BUCKET's default 2^20 fp32 elements (runtime/sync.c); the
 * overlap's staging and, on a GPU, the sharded sync's windows each hold
 * at most this much. */
#define SCHED_SYNC_STAGE_B (8.0 * 1048576.0 * 4.0)

/* A run of a stage's layers held by the same ranks: its layers and the
 * largest TP degree among its holders (the stage's own included). */
typedef struct sched_run {
	int layers, tp;
} sched_run;

typedef struct sched_sdesc {
	const int *dev;
	int tp;
	const int *next; /* next stage's devices, NULL for the last stage */
	int next_tp;
	int first, last; /* holds embedding / LM head */
	int inflight;	 /* micro-batches whose activations it keeps */
	int mb;		 /* micro-batch size, samples */
	int recompute;	 /* 0/1: its pipeline recomputes activations */
	int dp;		 /* pipelines (DP replicas) holding each of its
			    layers: the ZeRO shard count, 0 counts as 1 */
	int dp_tp1;	 /* 1: it and every stage of the other pipelines
			    holding one of its layers have TP 1 (the CPU
			    runtime's sync reduces those in place); 0: not
			    known or not so */
	/* Its layers cut at the other pipelines' stage boundaries: runs
	 * of layers with the same holders (the sync's chunk groups are
	 * these, cut further by the holders' TP shares; runtime/sync.c
	 * buckets), in layer order; the embedding and head tables go with
	 * the first and last.  runs 0: not known, as while the planner
	 * splits layers (the stage counts as one group). */
	int runs;
	const sched_run *run;
	/* Ranks holding the embedding and the head table over all
	 * pipelines: every TP rank holds them whole, and ZeRO shards them
	 * over all their holders (0: not known, d->dp). */
	int emb_holders, head_holders;
} sched_sdesc;

/* Bytes per parameter of weights, gradients and optimizer state on one GPU
 * of a stage under train.zero with dp replicas (doc/COSTMODEL.md "ZeRO"):
 * bytes_per_param (b) split as the runtime holds it.  The fp32 CPU
 * runtime: weights b/4, gradients b/4, moments b/2 (4, 4, 8 of 16); the
 * optimizer state (zero >= 1) and the gradients (zero 2) divided over the
 * dp replicas.  The GPU trainer: bf16 weights b/8, fp32 master b/4, fp32
 * gradients b/4, moments b/2 (2, 4, 4, 8: 18 B at the default 16); zero
 * shards the moments only, zero 1 adds the owned sums (g/D), zero 2 keeps
 * only them (DECISIONS 182). */
double sched_param_bytes(const sched_ctx *x, int cpu, int dp);
/* 0/1: whether pipeline pl recomputes (its own mode, else train's). */
int sched_pipe_recompute(const sched_ctx *x, const hexi_pipeline *pl);
/* The optimizer step's share of bytes_per_param a GPU touches: what
 * sched_param_bytes holds over bytes_per_param (1 on the CPU without
 * ZeRO, 9/8 on the GPU trainer; ZeRO's shards less). */
double sched_opt_share(const sched_ctx *x, int cpu, int dp);

/* ---- evaluation of a set of pipelines ------------------------------------ */

typedef struct sched_eval {
	double iter_s, dp_sync_s, tokens_per_s, mfu;
	double max_pipe_s;
	double opt_s;		/* slowest stage's optimizer step (hexiscale) */
	double worst_mem_ratio; /* max over GPUs of need / capacity */
	int fits;		/* 1 if worst_mem_ratio <= 1 */
} sched_eval;

/* Devices of every stage as context indices (filled by sched_pipes_map). */
typedef struct sched_map {
	int nstages_total;
	int **dev; /* [nstages_total] pointers into buf */
	int *buf;
} sched_map;

/* ---- cost models (cost_models.c holds the table) ------------------------ */

/* What one cost model provides.  A new model is a file defining one of
 * these and a row in cost_models.c (its hexi_cost_kind is the row). */
typedef struct sched_cost_model {
	const char *name; /* as in --cost-model and the plan's cost_model */
	/* Per-micro-batch cost of one stage (out is zeroed by the caller). */
	void (*stage)(const sched_ctx *x, const sched_sdesc *d,
		      sched_scost *out);
	/* Pipeline time from stage times c[S] and m micro-batches. */
	double (*pipe_s)(const double *c, int S, int m);
	/* The m from which pipe_s grows by max_s c[s] per micro-batch (the
	 * planner's batch split relies on it). */
	int (*linear_from)(int S);
	/* Gradient sync: returns when it ends (after the pipelines; < 0 on
	 * out of memory), *total_s its total time.  stage_s[] are the stage
	 * times of every pipeline, pipeline-major. */
	double (*dp)(const sched_ctx *x, const hexi_pipeline *pp, int np,
		     const sched_map *map, const double *stage_s,
		     double *total_s);
	/* iter_s, dp_sync_s, tokens_per_s, mfu of ev from the rest. */
	void (*finish)(const sched_ctx *x, const hexi_pipeline *pp, int np,
		       double dp_end, double dp_total, sched_eval *ev);
} sched_cost_model;

extern const sched_cost_model sched_cost_hexiscale;
extern const sched_cost_model sched_cost_reference;

/* The model of kind k (unknown kinds: hexiscale). */
const sched_cost_model *sched_cost_get(hexi_cost_kind k);
/* Rows in the table (kinds 0 .. count-1). */
int sched_cost_count(void);

void sched_ref_stage(const sched_ctx *x, const sched_sdesc *d,
		     sched_scost *out);
void sched_hexi_stage(const sched_ctx *x, const sched_sdesc *d,
		      sched_scost *out);
void sched_stage_cost(const sched_ctx *x, const sched_sdesc *d,
		      sched_scost *out);

/* Pipeline time from per-micro-batch stage times c[S] and m micro-batches:
 * reference = GPipe slot sum, hexiscale = 1F1B. */
double sched_ref_pipe_s(const double *c, int S, int m);
double sched_hexi_pipe_s(const double *c, int S, int m);
double sched_pipe_s(const sched_ctx *x, const double *c, int S, int m);

/* Model FLOPs of one sample (fwd+bwd, no recompute), FLOP. */
double sched_model_flops(const hexi_model *m);

hexi_rc sched_pipes_map(const sched_ctx *x, const hexi_pipeline *pp, int np,
			sched_map *map);
void sched_map_fini(sched_map *map);

/* Simulate: fills stage time_s/mem_gib, pipeline time_s, *ev and the
 * optional report [sum of nstages]. */
hexi_rc sched_evaluate(const sched_ctx *x, hexi_pipeline *pp, int np,
		       sched_eval *ev, hexi_stage_report *rep);

/* Gradient sync time of the whole iteration (no overlap), s; and with the
 * hexiscale queue model the exposed tail after the pipelines' end. */
double sched_ref_dp_s(const sched_ctx *x, const hexi_pipeline *pp, int np,
		      const sched_map *map);
double sched_hexi_dp(const sched_ctx *x, const hexi_pipeline *pp, int np,
		     const sched_map *map, const double *stage_s,
		     double *total_s);

/* Chunked all-reduce of one layer over the holder groups of each pipeline
 * (holders[p] are context indices, tps[p] their TP degree), s. */
double sched_hexi_layer_sync_s(const sched_ctx *x, int np,
			       const int *const *holders, const int *tps,
			       double *rank_tmp);

/* ---- planner internals ------------------------------------------------- */

/* Optimal contiguous split of L layers over S stages minimising the
 * largest stage time a[s]*n[s] + c[s] subject to 1 <= n[s] <= cap[s].
 * Returns 0 and fills n[] or -1 when infeasible. */
int sched_split_layers(int L, int S, const double *a, const double *c,
		       const int *cap, int *n);

/* Split M micro-batches over np pipelines to minimise the largest
 * pipeline time (per-pipeline costs from their stage times); m[p] >= 1. */
int sched_split_batches(const sched_ctx *x, int np, int M,
			const double *const *stage_s, const int *S, int *m);

/* Simulator options the CLI exposes beyond hexi_simulate(). */
hexi_rc sched_simulate_ex(hexi_plan *p, hexi_cost_kind kind, int overlap_dp,
			  sched_attn_mode attn, hexi_stage_report *rep);

const char *sched_cost_name(hexi_cost_kind k);
int sched_cost_parse(const char *s, hexi_cost_kind *k);
const char *sched_strategy_name(hexi_strategy s);
int sched_strategy_parse(const char *s, hexi_strategy *k);

#endif /* HEXI_SCHED_INT_H */
