/*
 * hexiscale_int.h - internals of the hexiscale.so SPANK plugin.
 *
 * The plugin has one file per Slurm context (allocator.c: sbatch/salloc,
 * local.c: srun, remote.c: slurmstepd) behind the dispatch in plugin.c.
 * The pure parts (plugstack arguments, option values, GRES strings, the
 * hand-off codec) have no Slurm calls, so the unit tests link them directly.
 *
 * Failure policy (see hexiscale(8)): every error in the allocator and srun
 * contexts stops the submission or the step before anything is launched; in
 * slurmstepd nothing fails before task_init, and task_init fails only the
 * task (never the node), never blocks and never exits.
 */
#ifndef HEXISCALE_INT_H
#define HEXISCALE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "hexi_common.h"

#define HX_PATH_MAX  1024  /* any path we accept from admin or user */
#define HX_VALUE_MAX 1024  /* any option or env value */
#define HX_NAME_MAX  64	   /* node and GPU type names */
#define HX_HOST_MAX  256   /* a host name or address (DNS: 253), NUL incl. */
#define HX_GPUS_MAX  64	   /* GPUs per node we handle */
#define HX_NODES_MAX 4096  /* nodes per step */
#define HX_TASKS_MAX 16384 /* tasks per step */
#define HX_COMPS_MAX 128   /* het job components (MAX_HET_JOB_COMPONENTS) */
/* The hand-off travels in the step environment: values over ~128 KiB break
 * task launch (SLURM-FACTS), so keep a margin. */
#define HX_HANDOFF_MAX 120000
/* The longest sequence a model may have (scheduler/model.c, seq_len): the
 * cap of --hexiscale-seq-len and seq_len=, so a longer one is refused
 * naming the option, not the model. */
#define HX_SEQ_LEN_MAX (1 << 20)
#define HX_HANDOFF_VAR "HEXISCALE_HANDOFF"

/* ---- plugstack.conf arguments (config.c) -------------------------------- */

typedef struct hx_conf {
	char catalog[HX_PATH_MAX];  /* GPU catalog JSON, "" = built-in */
	char profiles[HX_PATH_MAX]; /* hexiprof profiles (file or dir) */
	char topology[HX_PATH_MAX]; /* cluster JSON with inter-node links */
	char model[HX_VALUE_MAX];   /* default model name or file */
	char plan_dir[HX_PATH_MAX]; /* "" = next to the job output */
	char libsched[HX_PATH_MAX]; /* libhexisched.so to dlopen in srun */
	char nvml[HX_PATH_MAX];	    /* NVML library to dlopen in tasks */
	int global_batch;	    /* samples per iteration */
	int micro_batch;	    /* samples per micro-batch */
	int seq_len;		    /* 0 = the model's own */
	int default_on;		    /* 1: auto unless --hexiscale=off */
	int gpu_bind_single;	    /* 1: CUDA_VISIBLE_DEVICES = own GPU only */
	int use_all_gpus;	    /* 1: the planner leaves no GPU idle */
	int port_base;		    /* MASTER_PORT = base + job/step mix */
	double inter_bw_gbps;	    /* node<->node bandwidth, GB/s */
	double inter_lat_s;	    /* node<->node latency, s */
	double time_budget_s;	    /* planner search budget */
} hx_conf;

/* Defaults for every key (the single place they are set). */
void hx_conf_defaults(hx_conf *c);
/* Parse plugstack args "key=value"; unknown keys and bad values fail with a
 * message naming the key. */
hexi_rc hx_conf_parse(hx_conf *c, int ac, char **av);

/* The plan directory when neither --hexiscale-plan-dir nor plan_dir= gives
 * one: the directory of the job's StdOut (under work_dir if StdOut is
 * relative, "logs/%j.out") when StdOut is a file there, else work_dir.
 * Not StdOut's directory when StdOut is a device, a FIFO or a socket, or
 * lies under /dev ("sbatch -o /dev/null"), or the directory has a '%'
 * pattern.  std_out and work_dir may be NULL.  HEXI_ERR_NOTFOUND (dir
 * "") when neither gives an absolute path, HEXI_ERR_RANGE when the path
 * does not fit cap. */
hexi_rc hx_default_plan_dir(const char *std_out, const char *work_dir,
			    char *dir, size_t cap);

/* ---- user options and their environment twins (options.c) --------------- */

typedef enum hx_mode {
	HX_MODE_UNSET = 0,
	HX_MODE_OFF,
	HX_MODE_AUTO,
	HX_MODE_FILE, /* a user plan file */
} hx_mode;

typedef enum hx_opt_id {
	HX_OPT_MODE = 0,
	HX_OPT_MODEL,
	HX_OPT_GLOBAL_BATCH,
	HX_OPT_MICRO_BATCH,
	HX_OPT_SEQ_LEN,
	HX_OPT_PLAN_DIR,
	HX_OPT_USE_ALL_GPUS, /* a flag: no value on the command line */
	HX_OPT_COUNT
} hx_opt_id;

/* Static description of one option: long name and its env twin. */
typedef struct hx_opt_desc {
	const char *name;    /* "hexiscale-model" */
	const char *env;     /* "HEXISCALE_MODEL" */
	const char *arginfo; /* "NAME|FILE"; NULL: a flag (no value) */
	const char *usage;
} hx_opt_desc;

/* The value a flag option stands for when given (its env twin takes
 * yes|no|1|0). */
#define HX_FLAG_ON "yes"

extern const hx_opt_desc hx_opt_table[HX_OPT_COUNT];

/* Resolved settings of one step (command line > env twin > plugstack). */
typedef struct hx_settings {
	hx_mode mode;
	int mode_from_default;	     /* 1: mode is plugstack default_mode */
	char plan_file[HX_PATH_MAX]; /* HX_MODE_FILE */
	char model[HX_VALUE_MAX];
	int global_batch, micro_batch, seq_len;
	char plan_dir[HX_PATH_MAX];
	int use_all_gpus; /* 1: --hexiscale=auto plans with every GPU */
	const char *source[HX_OPT_COUNT]; /* "command line", "env ...", ... */
	/* HX_MODE_FILE: the plan file's bytes, read once (open, fstat, read
	 * on one non-blocking descriptor) by hx_check_settings; owned, freed
	 * by hx_settings_fini.  Everything after the check uses these bytes,
	 * never the name again. */
	char *plan_text;
	size_t plan_len;
} hx_settings;

/* Free what hx_settings owns (plan_text); safe on a zeroed struct. */
void hx_settings_fini(hx_settings *s);

/* Check one option value (from the command line or its env twin): length,
 * printable ASCII, syntax and range.  Message names the option. */
hexi_rc hx_opt_check(hx_opt_id id, const char *value, const char *origin);
/* Resolve settings: cmdline[i] (NULL = not given), then getenv twins, then
 * conf defaults.  Every value is checked. */
hexi_rc hx_settings_resolve(hx_settings *s, const hx_conf *c,
			    const char *const cmdline[HX_OPT_COUNT]);

/* ---- GPU names (nvml.c) ------------------------------------------------ */

/* 1 if the GRES type (a catalog name or alias, or any gres.conf Type=)
 * describes the NVML device name: its model is a run of whole words of the
 * name ("rtx4090" in "NVIDIA GeForce RTX 4090"; "a10" is not in "NVIDIA
 * A100", "rtx3080" not in "... RTX 3080 Ti"), and the memory size and form
 * factor it states agree with the name's where the name states one
 * ("a100-80g" is "NVIDIA A100-SXM4-80GB", not "NVIDIA A100-SXM4-40GB";
 * "h100-sxm" is "NVIDIA H100 80GB HBM3", not "NVIDIA H100 PCIe"). */
int hx_gpu_name_matches(const char *nvml_name, const char *gres_type);

/* ---- GRES strings (gres.c) ---------------------------------------------- */

typedef struct hx_gres {
	char type[HX_NAME_MAX]; /* "a800"; "" if untyped */
	int ngpus;
	int idx[HX_GPUS_MAX]; /* ascending device indices */
} hx_gres;

/* Parse one node's gres_detail_str, e.g. "gpu:a800:3(IDX:0-2)".  A node with
 * GPUs of two types is refused (a plan node has one type). */
hexi_rc hx_gres_parse(const char *s, hx_gres *out);

/* ---- a step's allocation (filled by discover.c, freed by gres.c) -------- */

typedef struct hx_alloc_node {
	char name[HX_NAME_MAX];
	hx_gres gres;	/* the job's GPUs on this node */
	int ntasks;	/* the step's tasks on this node */
	uint32_t *tids; /* [ntasks] global task ids */
} hx_alloc_node;

/* One component of a heterogeneous step: its job, and its nodes and tasks
 * as ranges of the step's. */
typedef struct hx_alloc_comp {
	uint32_t job_id;
	int offset; /* component number in the het job (het_job_offset) */
	int task_off, ntasks, node_off, nnodes;
} hx_alloc_comp;

typedef struct hx_alloc {
	uint32_t job_id, step_id; /* heterogeneous step: the leader's job id,
				     step NO_VAL until Slurm numbers it */
	int nnodes;		  /* nodes of the step */
	hx_alloc_node *nodes;
	int ntasks;
	char out_dir[HX_PATH_MAX]; /* directory of the job's output */
	uint32_t het_leader;	   /* hx_discover: the het job's leader, 0
				      if the job is not heterogeneous */
	int ncomps;		   /* heterogeneous step: >= 2, else 0 */
	hx_alloc_comp *comps;	   /* [ncomps] in task order */
	int njobs;		   /* heterogeneous step: components of the
				      whole het job */
	uint32_t *jobs;		   /* [njobs] their job ids by offset */
} hx_alloc;

/* Free what hx_discover or hx_discover_het filled in; *a is zeroed. */
void hx_alloc_fini(hx_alloc *a);

/* ---- hand-off from srun to slurmstepd (handoff.c) ----------------------- */

/* Role of one task, as the stepd side exports it.  An idle task (its GPU
 * is in the plan's idle list, hexiscale-env(7) HEXISCALE_ROLE=idle) has
 * rank W.. (after the W training ranks), node, gpu and local rank/size,
 * and zeros from pipeline to micro_batches. */
typedef struct hx_task_role {
	int rank, node, gpu; /* node = index in the step; gpu = device index */
	int pipeline, stage, nstages;
	int tp_rank, tp_size;
	int layer_begin, layer_end;
	int batch, micro_batches;
	int local_rank, local_world_size;
	int idle; /* 1: trains nothing (hand-off version 2 only) */
} hx_task_role;

/* One component of a heterogeneous step in the hand-off (version 3): its
 * Slurm job id, and its tasks and nodes as ranges of the step's (global
 * task ids task_off.., step node indices node_off..).  In slurmstepd a
 * task of the component has S_JOB_ID job_id, S_TASK_GLOBAL_ID (counted in
 * the component) + task_off as its global id, S_JOB_NODEID + node_off as
 * its node. */
typedef struct hx_handoff_comp {
	uint32_t job_id;
	int task_off, ntasks;
	int node_off, nnodes;
} hx_handoff_comp;

typedef struct hx_handoff {
	uint32_t job_id, step_id; /* version 3: job_id is the het job's
				     leader, step_id unused (srun hands a
				     heterogeneous step off before Slurm
				     numbers it) */
	int ncomps;		  /* 0, or >= 2 components (version 3) */
	hx_handoff_comp *comps;	  /* [ncomps] in task order */
	char plan_hash[32];
	char plan_path[HX_PATH_MAX];
	char master_addr[HX_HOST_MAX]; /* rank 0's NodeAddr, whole */
	int master_port;
	int world_size, npipelines; /* world_size: training ranks W; the
				       other ntasks - W tasks are idle */
	int nnodes;
	char (*gpu_type)[HX_NAME_MAX]; /* [nnodes] GRES type per step node */
	int ntasks;
	hx_task_role *roles; /* [ntasks] by global task id */
} hx_handoff;

void hx_handoff_init(hx_handoff *h);
void hx_handoff_fini(hx_handoff *h);
hexi_rc hx_handoff_alloc(hx_handoff *h, int nnodes, int ntasks);
/* The components of a heterogeneous step (ncomps >= 2), zeroed. */
hexi_rc hx_handoff_alloc_comps(hx_handoff *h, int ncomps);
/* 1 if s is printable ASCII or well-formed UTF-8 of printable code points
 * (from U+00A0 on): no control byte, C0 or C1.  The hand-off carries such
 * a plan path (pf=); every other field is printable ASCII. */
int hx_is_utf8_text(const char *s);
/* Encode to a heap string (caller frees); fails if over HX_HANDOFF_MAX. */
hexi_rc hx_handoff_encode(const hx_handoff *h, char **out);
/* Decode and verify (checksum, ranges, consistency).  Reads version 1
 * (no idle tasks; what srun without idle support writes), 2 and 3 (a step
 * over several components of a heterogeneous job: the components' task
 * and node ranges must tile the step, and every row's node lie in its
 * component's range). */
hexi_rc hx_handoff_decode(const char *s, hx_handoff *h);
/* Renumber the roles (roles[t] is task t's, its .rank a plan rank, every
 * rank 0..ntasks-1 once): the training tasks get 0..world_size-1 and the
 * idle ones world_size.. , each in task order, so a training rank is its
 * task id whenever no idle task comes before it (hexiscale-env(7)).
 * new_of_old[ntasks] gets the map from the old ranks. */
hexi_rc hx_rank_tasks(hx_task_role *roles, int ntasks, int world_size,
		      int *new_of_old);

/* ---- heterogeneous steps: srun's command line (hetargs.c) --------------- */

/* The components a step of srun asks for.  srun splits its command line
 * at every ":" argument into segments; segment k runs on the components of
 * its --het-group=LIST (or "--het-group LIST"), else on component k, and
 * srun calls the plugin's init_post_opt once per component of every
 * segment (ncalls in all).  A "--het-group" among the arguments of the
 * program is read as srun's too (srun's own option table is not known
 * here): local.c checks what Slurm made of the step. */
typedef struct hx_het_request {
	unsigned char want[HX_COMPS_MAX]; /* 1: component asked for */
	int ncomps;			  /* components asked for */
	int ncalls;			  /* init_post_opt calls to expect */
	int colon, het_group;		  /* ':' or --het-group given */
	uint32_t jobid;			  /* --jobid=N, else 0 */
} hx_het_request;

/* args[len]: NUL-separated argv as in /proc/self/cmdline (args[0] is
 * srun).  Errors: HEXI_ERR_INVAL (a bad list, a component named twice),
 * HEXI_ERR_PARSE (not NUL-terminated). */
hexi_rc hx_het_request_parse(const char *args, size_t len, hx_het_request *r);

/* ---- small helpers (gres.c; hx_shown: options.c) ------------------------ */

/* Parse "0,2-3" into ascending unique ints in [0, max); *n on return. */
hexi_rc hx_parse_idx_list(const char *s, int *out, int cap, int *n);
/* The inverse for messages: ascending ints v[n] as "0,2-3" in buf (always
 * NUL-terminated; cut with "..." when it does not fit). */
void hx_format_ranges(const int *v, int n, char *buf, size_t cap);
/* 64-bit FNV-1a, as 16 lower-case hex digits (buf >= 17). */
void hx_fnv1a_hex(const char *s, size_t len, char *buf);
/* Copy of the value for a message: printable, at most 64 chars. */
const char *hx_shown(const char *s, char *buf, size_t cap);

#endif /* HEXISCALE_INT_H */
