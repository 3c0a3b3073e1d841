/*
 * rt_dist.h - internal: the bootstrapped runtime object, process groups,
 * pipeline schedule and chunked gradient sync (boot.c, groups.c,
 * pipeline.c, sync.c).  Not installed.
 */
#ifndef HEXI_RT_DIST_H
#define HEXI_RT_DIST_H

#include <pthread.h>
#include <stdatomic.h>

#include "hexi_rt.h"
#include "rt_comm.h"

/* Process groups of one rank, built from the plan (groups.c). */
typedef struct rt_groups {
	rt_group *world; /* every rank */
	rt_group *tp;	 /* ranks of my stage, TP rank order */
	int leader;	 /* my stage's TP rank 0 (global rank) */
	int prev_leader; /* previous stage's leader, -1 on the first stage */
	int next_leader; /* next stage's leader, -1 on the last stage */
} rt_groups;

/* ---- backends (backend.c: the registry) --------------------------------- */

/* Where a rank's tensors live; "runs on a GPU" is a property of the
 * backend row, never a string compare. */
typedef enum rt_device_kind {
	RT_DEVICE_HOST = 0, /* host memory: CPU ranks */
	RT_DEVICE_CUDA = 1, /* one CUDA device per rank, device buffers */
} rt_device_kind;

/* Number of usable devices (0: none, why says what the driver said). */
typedef int (*rt_device_probe)(void *ctx, char *why, size_t cap);

/* One row of the registry.  setup (NULL: nothing to do) runs collectively
 * on every rank once the host communicator exists, and sets up what the
 * backend needs (rt->cuda, rt->gcomm). */
typedef struct rt_backend {
	const char *name; /* --backend NAME, HEXISCALE_BACKEND */
	rt_device_kind device;
	const char *what; /* one line for messages */
	rt_device_probe probe;
	hexi_rc (*setup)(hexi_rt *rt);
} rt_backend;

int rt_backend_count(void);
const rt_backend *rt_backend_at(int i);		     /* NULL out of range */
const rt_backend *rt_backend_default(void);	     /* the first row: mpi */
const rt_backend *rt_backend_find(const char *name); /* NULL: unknown */
const char *rt_backend_name(const rt_backend *b);
/* opt: --backend (NULL/"": not given), env: $HEXISCALE_BACKEND.  The first
 * one given wins, else the default.  A device backend fails with
 * HEXI_ERR_UNSUPPORTED when built_devices is 0 and HEXI_ERR_NODEV when the
 * probe (probe, else the row's own) finds no device; "auto" takes the first
 * usable device backend, else the default.  An unknown name is
 * HEXI_ERR_USAGE (option) or HEXI_ERR_INVAL (environment).  The probe runs
 * only when a device backend is asked for and built. */
hexi_rc rt_backend_choose(const char *opt, const char *env, int built_devices,
			  rt_device_probe probe, void *probe_ctx,
			  const rt_backend **out);

/* The "nccl" row (backend_nccl.c). */
int rt_nccl_probe(void *ctx, char *why, size_t cap);
hexi_rc rt_nccl_setup(hexi_rt *rt);

/* Collective: every rank ran a phase; fail together when any rank failed
 * (rc, or HEXI_ERR_PEER naming the phase). */
hexi_rc rt_together(hexi_rt *rt, hexi_rc rc, const char *phase);

struct hexi_rt {
	int rank, world_size; /* plan rank (HEXISCALE_RANK) and training
				 ranks W (the plan's world_size) */
	int launch_rank;      /* rank given by the launcher */
	/* Tasks the launcher started: W, or W + the plan's idle GPUs (one task
	 * per GPU under Slurm).  The bootstrap runs over all of them. */
	int ntasks;
	/* 1: this task's GPU is idle in the plan (hexiscale-env(7)): it took
	 * part in the bootstrap and trains nothing (hexi_rt_is_idle). */
	int idle;
	/* 1 once the idle tasks have left the bootstrap: the agreements of
	 * agree.c are over the training ranks' communicator from then on. */
	int trainers_only;
	hexi_rt_launcher launcher;
	int local_rank, local_size, node;
	int mpi_started;  /* 1 if we called MPI_Init */
	int pmix_started; /* 1 if we called PMIx_Init */
	hexi_plan *plan;
	hexi_role role;
	hexi_layout *layout;
	rt_comm *comm;
	rt_groups groups;
	/* GPU backend: rt->comm stays the host (MPI/self) communicator for
	 * control values (loss, stats, flags); gcomm carries device buffers. */
	const rt_backend *backend; /* a registry row, never NULL */
	struct rt_cuda *cuda;	   /* this rank's device context (nccl only) */
	rt_comm *gcomm;		   /* NCCL communicator (nccl only) */
	/* watchdog (boot.c): exits the job when no progress is made for
	 * timeout_s while armed */
	double timeout_s;
	pthread_t wd_thread;
	int wd_running;
	pthread_mutex_t wd_lock; /* wd_stop and wd_cond only */
	pthread_cond_t wd_cond;
	/* CLOCK_MONOTONIC ms (hexi_now_s), 0 = disarmed; an atomic so that
	 * feeding it (per micro-batch, per sync bucket) takes no lock */
	atomic_llong wd_deadline_ms;
	atomic_llong wd_budget_ms; /* the deadline's distance when set */
	int wd_stop;
	hexi_mem_stats mem; /* this rank's allocations (memacct.c) */
};

/* Count bytes allocated (> 0) or freed (< 0) of a kind on this rank (the
 * memory report of hexitrain(1); any code that allocates for the trainer
 * calls it).  memacct.c. */
void rt_mem_count(hexi_rt *rt, hexi_mem_kind kind, double bytes);

/* The watchdog (all no-ops when --timeout is 0; main thread only).
 * rt_watchdog_arm: arm (deadline timeout_s from now) or disarm (0).
 * rt_watchdog_armed: 1 while armed (callers restore what they found).
 * rt_watchdog_feed: progress was made (a micro-batch's forward or
 *   backward, a gradient-sync bucket, a phase of the loop): when armed,
 *   the deadline moves to timeout_s from now.  One clock read and two
 *   relaxed atomic accesses: cheap enough for every micro-batch.
 * rt_watchdog_save: a checkpoint save starts: when armed, the deadline
 *   moves to rt_watchdog_save_budget_s from now (nothing in a save feeds;
 *   the caller feeds when it returns). */
void rt_watchdog_arm(hexi_rt *rt, int on);
int rt_watchdog_armed(const hexi_rt *rt);
void rt_watchdog_feed(hexi_rt *rt);
void rt_watchdog_save(hexi_rt *rt);
/* A save's budget: timeout_s plus one second per RT_WD_SAVE_BPS bytes of
 * parameters and optimizer state on this rank (a slow disk's rate), so
 * never shorter than the step timeout (hexitrain(1), --timeout). */
#define RT_WD_SAVE_BPS (16.0 * 1048576.0)
double rt_watchdog_save_budget_s(const hexi_rt *rt);

/* Build a one-pipeline, one-stage, TP-1 plan for a single process. */
hexi_rc rt_plan_single(const hexi_model *m, int global_batch, int micro_batches,
		       hexi_plan **out);

/* groups.c: collective; creates TP, world and neighbour info. */
hexi_rc rt_groups_build(hexi_rt *rt);

/* ---- chunked gradient sync (sync.c) -------------------------------------
 * The model describes its local parameter shards; the sync plan packs every
 * chunk this rank holds into one buffer per distinct rank set, so a plan
 * whose pipelines agree needs one all-reduce, and an asymmetric plan a few.
 */
typedef struct rt_param_ref {
	const char *name;	/* layout tensor name */
	int row_begin, row_end; /* rows of the global tensor held here */
	int64_t cols;		/* elements per row (1 for vectors) */
	float *grad;		/* [(row_end-row_begin)*cols] */
	float *w;		/* weights, same shape (sharded sync only) */
	int decay;		/* AdamW weight decay applies (2-D tensors) */
} rt_param_ref;

typedef struct rt_sync rt_sync;

/* The memory the gradients live in, for the sync's packing, zeroing and
 * norm: NULL means host memory (plain memcpy/memset, norm on the CPU); the
 * GPU trainer passes device operations (train_gpu.c).  copy and zero may
 * be asynchronous; fence() completes them before a collective reads the
 * buffers.  sumsq_add adds the sum of squares of x[0..n) to an accumulator
 * of ctx; sumsq_take returns it (as a host double) and resets it.
 * The sharded sync (zero > 0) needs three more, asynchronous like copy:
 * add (dst[0..n) += src[0..n)), scale (x[0..n) *= f) and optim, one
 * optimizer update of an owned range: AdamW (ao, step; weight decay only
 * when decay) of w, g, m, v [n], or SGD (ao NULL: w -= lr * g). */
struct rt_adamw_opts;
typedef struct rt_mem_ops {
	void *ctx;
	hexi_rc (*alloc)(void *ctx, void **p, size_t bytes);
	void (*free)(void *ctx, void *p);
	hexi_rc (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
	hexi_rc (*zero)(void *ctx, void *p, size_t bytes);
	hexi_rc (*fence)(void *ctx);
	hexi_rc (*sumsq_add)(void *ctx, const float *x, size_t n);
	hexi_rc (*sumsq_take)(void *ctx, double *out);
	hexi_rc (*add)(void *ctx, float *dst, const float *src, size_t n);
	hexi_rc (*scale)(void *ctx, float *x, float f, size_t n);
	hexi_rc (*optim)(void *ctx, float *w, float *g, float *m, float *v,
			 size_t n, float lr, const struct rt_adamw_opts *ao,
			 int step, int decay);
} rt_mem_ops;

/* Collective: match params[] against the layout (every local shard must be
 * exactly this rank's shard of the plan) and create the chunk groups on
 * comm (rt->comm for host gradients, rt->gcomm for device ones). */
hexi_rc rt_sync_create(hexi_rt *rt, rt_comm *comm, const rt_mem_ops *mem,
		       const rt_param_ref *params, int nparams, rt_sync **out);
/* Sum every chunk over its holders (replicated tensors weighted 1/t so each
 * pipeline counts once).  Gradients must already be scaled by 1/global
 * batch.  Then *sumsq = squared global L2 norm, each element once (not
 * computed when sumsq is NULL). */
hexi_rc rt_sync_run(rt_sync *s, double *sumsq);

/* ---- sharded data parallelism (train.zero 1 and 2) ----------------------
 * Collective over the sync's groups, after rt_sync_create (host memory, or
 * device memory through mem's add/scale/optim: the owned sums, moments and
 * staging are then allocated with mem->alloc): every chunk held by more than
 * one rank gets owners: the chunks of a bucket (one holder set), in bucket
 * order, are cut at row boundaries into one contiguous range per member of
 * about total/n elements.  rt_sync_run then reduce-scatters each bucket (each
 * owner gets the sum of its range, same weighting as the all-reduce) and
 * computes the norm from the owned ranges; rt_sync_step scales the owned
 * gradient, updates the owned weights with the optimizer state that lives only
 * there, and all-gathers the updated weights to every holder.  Chunks held by
 * this rank alone are owned by it (doc/DECISIONS.md 75).
 *
 * zero 2 (DECISIONS 125) keeps no full gradient: the model writes each
 * backward unit into one reused window (rt_model_config.grad_window), the
 * buckets are cut per (holder set, layer), and rt_sync_grad_ready(s, mb,
 * k), called by the backward of micro-batch mb as layers >= k are done,
 * reduce-scatters them at once into the owned sums (one round per
 * micro-batch, in backward order: every member of a bucket runs the same
 * rounds; a member whose pipeline has fewer micro-batches adds rounds of
 * zeros in rt_sync_run); chunks held here alone are summed into an array
 * of their own.  Every backward of a step must call it (the trainer's
 * grad hook); rt_sync_zero_grad starts a step's rounds (rt_sync_step does
 * too). */
struct rt_adamw_opts;
/* bucket: HEXI_RT_SYNC_BUCKET (elements, default 2^20); a bucket that is
 * not back to back in memory (always on a device) is staged a window at a
 * time, 8 x bucket elements over its members, not whole (DECISIONS
 * 183). */
hexi_rc rt_sync_shard(rt_sync *s, int zero, size_t bucket);
int rt_sync_zero(const rt_sync *s); /* 0 when not sharded */
hexi_rc rt_sync_grad_ready(rt_sync *s, int mb, int layer);
void rt_sync_zero_grad(rt_sync *s);
/* After rt_sync_run: g *= scale on the owned ranges, then AdamW (ao, step)
 * or SGD (ao NULL, lr) there, then the all-gather of the weights. */
hexi_rc rt_sync_step(rt_sync *s, float scale, float lr,
		     const struct rt_adamw_opts *ao, int step);
/* The owned ranges (checkpoints): param index into the params[] given to
 * rt_sync_create, global rows [row_begin, row_end) of it, and the AdamW
 * moments of those rows ((row_end-row_begin)*cols floats each, n; in
 * the sync's memory: device memory on the nccl backend). */
typedef struct rt_sync_seg {
	int param;
	int row_begin, row_end;
	float *m, *v;
	size_t n;
} rt_sync_seg;
int rt_sync_nsegs(const rt_sync *s);
void rt_sync_seg_get(const rt_sync *s, int i, rt_sync_seg *out);
/* Bytes of the sharded state of this rank: moments, owned gradients and
 * the staging buffer (rt_sync_shard counts them: optim, grads, comm). */
size_t rt_sync_shard_bytes(const rt_sync *s);
/* Elements this rank owns (0 when not sharded). */
size_t rt_sync_owned(const rt_sync *s);
/* Buckets reduce-scattered and gathered in place (no staging copy). */
int rt_sync_flat(const rt_sync *s);
/* Buckets reduce-scattered and gathered as a ring of segments (no staging
 * of whole blocks, doc/DECISIONS.md 150). */
int rt_sync_rings(const rt_sync *s);

/* ---- overlap of the sync with the backward (zero 0 and 1) ----------------
 * Collective setup (after rt_sync_shard): every bucket is cut into
 * sub-buckets of at most cap elements (bounded buckets), ordered as the
 * backward finishes them.  rt_sync_ready(s, k) -- the backward has
 * finished every tensor of layers >= k (rt_grad_hook) -- starts the
 * non-blocking all-reduce (zero 1: reduce-scatter into the owned sums) of
 * every sub-bucket it completed and polls those in flight; rt_sync_run
 * then waits for them (starting any not started), unpacks and takes the
 * norm.  A sub-bucket not back to back in memory is packed into a
 * staging part of its own, or where those would exceed 8 x cap elements,
 * into one of the slots that fit that budget, taken in turn: starting one
 * more waits for the oldest (and unpacks it), so the staging stays
 * bounded.
 * A device sync packs with mem's asynchronous copies and never fences
 * before a start: the backend must order its non-blocking collective after
 * the work queued on the compute stream (nccl: rt_comm_nccl_order_after).
 * rt_sync_poll(s) only lets the collectives in flight progress (MPI moves
 * non-blocking collectives only inside MPI calls): the CPU model calls it
 * between the GEMMs of a layer.  No-op under zero 2 or with a backend
 * without the non-blocking collective. */
hexi_rc rt_sync_overlap(rt_sync *s, size_t cap);
int rt_sync_overlapped(const rt_sync *s); /* sub-buckets, 0: not overlapped */
/* The overlap's staging: its slots (0: each packed sub-bucket has its
 * own part), the packed sub-buckets, the staging's bytes. */
int rt_sync_overlap_slots(const rt_sync *s, int *packed, size_t *bytes);
hexi_rc rt_sync_ready(rt_sync *s, int layer);
hexi_rc rt_sync_poll(rt_sync *s);

/* Bytes this rank all-reduces per step, and the number of groups used. */
size_t rt_sync_bytes(const rt_sync *s);
int rt_sync_ngroups(const rt_sync *s);
void rt_sync_destroy(rt_sync *s);

#endif /* HEXI_RT_DIST_H */
