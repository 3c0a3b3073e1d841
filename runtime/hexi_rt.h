/*
 * hexi_rt.h - HexiScale runtime (libhexirt): executes an asymmetric plan.
 *
 * A process calls hexi_rt_init() once: it learns its rank from PMIx (srun
 * --mpi=pmix), from mpirun, or runs alone; reads the plan named by --plan,
 * HEXISCALE_PLAN or, alone, builds a one-pipeline one-stage plan; checks
 * that plan, world size and the role in the environment agree; and builds
 * the tensor-parallel groups, the pipeline neighbours and the chunk groups
 * of the asymmetric gradient synchronisation (doc/LAYOUT.md).
 *
 * A trainer (hexi_trainer_*) then runs the reference Llama-style model on
 * the plan: 1F1B pipeline with each pipeline's own micro-batch count,
 * tensor parallelism inside stages, chunked gradient sync weighted so that
 * any batch split trains exactly like one process on the global batch,
 * global-norm clipping, AdamW or SGD, checkpoints (hexiscale-ckpt(5)).
 *
 * Ownership: the _create and _init calls return heap objects freed by the
 * matching
 * *_destroy (NULL is a no-op).  Every fallible call returns hexi_rc with a
 * message (hexi_errmsg) naming the rank, file, tensor or peer.  Calls
 * marked "collective" must be made by every rank of the plan.
 */
#ifndef HEXI_RT_H
#define HEXI_RT_H

#include <stddef.h>
#include <stdint.h>

#include "hexi_common.h"
#include "hexi_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- bootstrap ----------------------------------------------------------- */

typedef struct hexi_rt hexi_rt;

typedef enum hexi_rt_launcher {
	HEXI_LAUNCH_SINGLE = 0, /* one process, no MPI launcher */
	HEXI_LAUNCH_PMIX = 1,	/* srun --mpi=pmix (direct PMIx) */
	HEXI_LAUNCH_MPIRUN = 2, /* mpirun / mpiexec (OpenMPI) */
} hexi_rt_launcher;

typedef struct hexi_rt_opts {
	const char *plan_path; /* NULL: $HEXISCALE_PLAN, else one process */
	/* Only for a run without a plan (one pipeline, one stage, TP 1): */
	const char *model; /* built-in name or model JSON path */
	int global_batch;  /* samples per step (default 8) */
	int micro_batches; /* default 1 */
	double timeout_s;  /* watchdog: no progress limit, 0 = off (default 0;
			      hexi_rt_watchdog) */
	/* "mpi", "nccl" (one GPU per rank; needs a CUDA build) or "auto"
	 * (nccl when built with CUDA and a device is visible, else mpi);
	 * NULL: $HEXISCALE_BACKEND, else "mpi". */
	const char *backend;
	/* Activation recomputation, a hexi_recompute_mode: INHERIT (0, the
	 * default) takes the plan's; ON/OFF set a plan-less run's plan, and
	 * with a plan must agree with every pipeline's setting, else
	 * hexi_rt_init fails with HEXI_ERR_USAGE (the plan decides). */
	int recompute;
} hexi_rt_opts;

void hexi_rt_opts_defaults(hexi_rt_opts *o);

/* Collective.  Initialises MPI when the job has more than one rank. */
hexi_rc hexi_rt_init(int *argc, char ***argv, const hexi_rt_opts *o,
		     hexi_rt **out);
/* Collective; finalises what hexi_rt_init started. */
void hexi_rt_destroy(hexi_rt *rt);

int hexi_rt_rank(const hexi_rt *rt);
/* The plan's training ranks W (an idle task's rank is W or above). */
int hexi_rt_world_size(const hexi_rt *rt);
/* 1 if this task's GPU is idle in the plan (hexiscale-env(7)
 * HEXISCALE_ROLE=idle): hexi_rt_init took it through the job-wide
 * bootstrap and returned without a communicator; it trains nothing, and
 * the caller should hexi_rt_destroy (which, in MPI_Finalize, waits for the
 * training ranks) and exit 0.  The trainer refuses such an rt. */
int hexi_rt_is_idle(const hexi_rt *rt);
hexi_rt_launcher hexi_rt_launcher_kind(const hexi_rt *rt);
const char *hexi_rt_launcher_name(hexi_rt_launcher l);
const hexi_plan *hexi_rt_plan(const hexi_rt *rt);     /* owned by rt */
const hexi_role *hexi_rt_role(const hexi_rt *rt);     /* owned by rt */
const hexi_layout *hexi_rt_layout(const hexi_rt *rt); /* owned by rt */
/* The backend in use: "mpi" or "nccl". */
const char *hexi_rt_backend(const hexi_rt *rt);
/* 1 if name is a backend of the registry or "auto". */
int hexi_rt_backend_known(const char *name);
/* Bring the whole job down with exit status rc (never returns).  A rank
 * whose rc is HEXI_ERR_PEER failed only because another did: it first
 * waits up to HEXI_RT_PEER_GRACE_S seconds, so that the rank holding the
 * cause prints it and ends the job; an abort from the first rank to get
 * there would kill that one before its message. */
#define HEXI_RT_PEER_GRACE_S 3
/* The words hexi_rt_init prints when a task crashes inside MPI_Init_thread
 * (a start-up race below us, not a bug of the program): scripts look for
 * them to run the step once more. */
#define HEXI_RT_INIT_CRASH "crashed inside MPI_Init_thread"
void hexi_rt_abort(hexi_rt *rt, hexi_rc rc) __attribute__((noreturn));
/* Collective: 1 if every rank passed ok != 0, else 0 (keeps error exits
 * together so no rank hangs waiting for one that failed). */
int hexi_rt_all_ok(hexi_rt *rt, int ok);
/* The watchdog of o->timeout_s (not collective; nothing when timeout_s
 * is 0).  While armed, a rank on which no progress is made for timeout_s
 * seconds prints so and exits HEXI_ERR_TIMEOUT, which brings the job down.
 * The trainer feeds it as it makes progress (each micro-batch's forward
 * and backward, each gradient-sync bucket) and arms it itself for a step
 * or a validation when the caller has not.  HEXI_RT_WD_ON arms it (or
 * feeds it: timeout_s from now) -- a training loop arms it at the top of
 * every iteration so that its collectives (hexi_rt_all_ok, the gathers)
 * are covered too; HEXI_RT_WD_SAVE, before hexi_trainer_save while armed,
 * gives the save timeout_s plus one second per 16 MiB of this rank's
 * parameters and optimizer state from now; HEXI_RT_WD_OFF disarms it. */
typedef enum hexi_rt_wd {
	HEXI_RT_WD_OFF = 0,
	HEXI_RT_WD_ON = 1,
	HEXI_RT_WD_SAVE = 2,
} hexi_rt_wd;
void hexi_rt_watchdog(hexi_rt *rt, hexi_rt_wd mode);

/* ---- training ------------------------------------------------------------ */

typedef enum hexi_optimizer {
	HEXI_OPT_ADAMW = 0,
	HEXI_OPT_SGD = 1,
} hexi_optimizer;

typedef struct hexi_train_opts {
	int steps;		  /* steps to run in total (resume counts) */
	double lr;		  /* default 1e-3 */
	uint64_t seed;		  /* init and synthetic data, default 1234 */
	hexi_optimizer optimizer; /* default AdamW */
	double beta1, beta2, eps, weight_decay; /* AdamW: .9 .95 1e-8 0 */
	double clip;	       /* global-norm clip, 0 = off (default 1.0) */
	const char *data_path; /* text file, byte tokens; NULL: synthetic */
	int save_every;	       /* steps between checkpoints, 0 = never */
	const char *ckpt_dir;  /* where to save */
	int verbose;
	/* "fp32" (default, NULL) or "bf16" (bf16 weights and activations,
	 * fp32 master weights; the nccl backend only). */
	const char *dtype;
	/* 1: the gradient sync runs after the backward (--no-overlap);
	 * 0 (default): it starts during the last micro-batch's backward, in
	 * bounded buckets, as each layer's gradients are final (CPU path,
	 * zero 0; doc/DECISIONS.md 78). */
	int no_overlap;
	/* Data (hexiscale-data(5)): --data is a token file, or raw bytes. */
	int data_format;      /* 0: token file (default), 1: raw bytes */
	const char *val_path; /* held-out data (same format), or NULL */
	int eval_every;	      /* validate at step 0 and every N; 0: the library
				 never does (hexitrain then validates once at
				 the end when --val-data is given) */
	int eval_batches;     /* global batches per validation (default 1) */
	/* Learning-rate schedule: linear warmup to lr over `warmup` steps,
	 * then constant or cosine down to min_lr at step decay_steps (0: the
	 * run's steps).  Stored in the checkpoint; a resume continues it. */
	int lr_schedule; /* 0: constant (default), 1: cosine */
	int warmup;
	double min_lr;
	int decay_steps;
	int keep; /* keep the last N committed checkpoints, 0 = all */
} hexi_train_opts;

void hexi_train_opts_defaults(hexi_train_opts *o);

/* Per-step numbers.  Times are this rank's own; loss, grad_norm and
 * tokens_per_s are global (the same on every rank). */
typedef struct hexi_step_stats {
	int step;	     /* 1-based number of the step just done */
	double loss;	     /* mean token loss over the global batch */
	double grad_norm;    /* global L2 norm before clipping */
	double time_s;	     /* wall time of the step */
	double tokens_per_s; /* global batch tokens / time_s */
	double compute_s;    /* forward+backward+optimizer */
	double tp_s;	     /* tensor-parallel all-reduces */
	double pp_wait_s;    /* waiting for pipeline neighbours */
	double dp_sync_s;    /* chunked gradient sync + norm */
	double lr;	     /* learning rate of this step */
} hexi_step_stats;

typedef struct hexi_trainer hexi_trainer;

/* Collective: builds this rank's stage of the model, initialised
 * deterministically from the seed whatever the plan. */
hexi_rc hexi_trainer_create(hexi_rt *rt, const hexi_train_opts *o,
			    hexi_trainer **out);
/* Collective: one optimizer step over one global batch; saves a
 * checkpoint after it when save_every divides the step. */
hexi_rc hexi_trainer_step(hexi_trainer *t, hexi_step_stats *st);
/* Steps done so far (0 after create, the saved step after a resume). */
int hexi_trainer_steps_done(const hexi_trainer *t);
/* Collective: write a checkpoint of parameters, optimizer moments and
 * step under dir (hexiscale-ckpt(5)). */
hexi_rc hexi_trainer_save(hexi_trainer *t, const char *dir);
/* Collective: load the latest checkpoint committed under dir, written by
 * any plan of the same model. */
hexi_rc hexi_trainer_resume(hexi_trainer *t, const char *dir);
/* Collective, before the first step: rank 0 takes the writer lock of an
 * existing --ckpt-dir (o->ckpt_dir; HEXI_ERR_PERM naming the holder when
 * another process writes there) and refuses one that holds committed
 * checkpoints after the step the run starts from (0, or the step
 * resumed): they are another run's (HEXI_ERR_INVAL, naming them).
 * HEXI_OK without a ckpt_dir or when it does not exist yet. */
hexi_rc hexi_trainer_check_ckpt_dir(hexi_trainer *t);
/* Collective: mean token loss over eval_batches global batches of the
 * validation data (windows 0, 1, ... in order; the same for every plan),
 * without changing the model.  HEXI_ERR_USAGE without val_path. */
hexi_rc hexi_trainer_eval(hexi_trainer *t, double *loss);
/* The last checkpoint saved or loaded, once: 1 and *ev filled on rank 0
 * when there is a new one, else 0. */
typedef struct hexi_ckpt_event {
	int loaded;	 /* 1: loaded (resume), 0: saved */
	char path[4096]; /* the step directory */
	int64_t step;
	uint64_t bytes; /* its files on disk */
	double seconds;
} hexi_ckpt_event;
int hexi_trainer_take_event(hexi_trainer *t, hexi_ckpt_event *ev);
/* Steps of the run's checkpoint: the last one saved (-1 none). */
int hexi_trainer_saved_step(const hexi_trainer *t);

/* Collective: every rank's stats gathered on rank 0 into all[world_size]
 * (all may be NULL on other ranks). */
hexi_rc hexi_trainer_gather_stats(hexi_trainer *t, const hexi_step_stats *mine,
				  hexi_step_stats *all);
/* ---- memory accounting ---------------------------------------------------
 * Every buffer the trainer allocates for its model, optimizer and
 * communication is counted by what it holds: current bytes and the peak
 * since hexi_trainer_create, per kind and in total (the total's peak is
 * not the sum of the kinds' peaks).  On the nccl backend these are the
 * device allocations; on mpi the host ones.  Not counted: the CUDA
 * context, cuDNN's attention workspace, NCCL's and MPI's internal
 * buffers, checkpoint staging. */
typedef enum hexi_mem_kind {
	HEXI_MEM_PARAMS = 0, /* weights (fp32 master and bf16 copies) */
	HEXI_MEM_GRADS,	     /* parameter gradients */
	HEXI_MEM_OPTIM,	     /* AdamW moments */
	HEXI_MEM_ACTS,	     /* activations kept for the backward */
	HEXI_MEM_WORK,	     /* scratch of forward/backward, logits */
	HEXI_MEM_COMM,	     /* pipeline and gradient-sync buffers */
	HEXI_MEM_NKINDS
} hexi_mem_kind;

/* "params", "grads", "optim", "acts", "work", "comm"; NULL out of range. */
const char *hexi_mem_kind_name(int kind);

typedef struct hexi_mem_stats {
	double bytes[HEXI_MEM_NKINDS];	    /* now */
	double peak_bytes[HEXI_MEM_NKINDS]; /* highest so far */
	double total_bytes, peak_total_bytes;
	int device; /* 1: GPU device memory, 0: host memory */
} hexi_mem_stats;

/* This rank's counts (not collective). */
void hexi_trainer_memory(const hexi_trainer *t, hexi_mem_stats *out);
/* Collective: every rank's counts on rank 0 in all[world_size] (all may
 * be NULL on other ranks). */
hexi_rc hexi_trainer_gather_memory(hexi_trainer *t, hexi_mem_stats *all);

/* Write this rank's parameter shards to PREFIX.rankN (raw dump for tests;
 * format in hexitrain(1), FILES). */
hexi_rc hexi_trainer_dump(hexi_trainer *t, const char *prefix);
void hexi_trainer_destroy(hexi_trainer *t);

#ifdef __cplusplus
}
#endif
#endif /* HEXI_RT_H */
