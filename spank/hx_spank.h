/*
 * hx_spank.h - the Slurm-facing parts of hexiscale.so: global plugin state
 * and one entry function per context.  Only the plugin's own files
 * (plugin.c, state.c, allocator.c, local.c, remote.c, discover.c,
 * sched_dl.c, nvml.c) include it.
 */
#ifndef HX_SPANK_H
#define HX_SPANK_H

#include <slurm/spank.h>

#include "hexiscale_int.h"

/* Parsed plugstack arguments of this process (state.c, set by plugin.c;
 * the shared state lives below every context file, see state.c). */
extern hx_conf hx_g_conf;
/* The plugstack line's error ("" if it parsed); hx_g_conf then holds the
 * defaults, and only steps that ask for HexiScale are refused. */
extern char hx_g_conf_error[512];
/* Option values given on the command line (copies, NULL = not given). */
extern char *hx_g_cmdline[HX_OPT_COUNT];
extern struct spank_option hx_g_opts[HX_OPT_COUNT];

/* Log through Slurm with the "hexiscale: " prefix. */
void hx_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* allocator.c: sbatch/salloc after options are parsed. */
int hx_allocator_post_opt(spank_t sp);
/* Resolve and check the settings from hx_g_cmdline, env and plugstack;
 * logs and returns -1 on error. */
int hx_check_settings(hx_settings *s);
/* Where setting id came from, for messages: "option --hexiscale-model",
 * "environment variable HEXISCALE_MODEL" or "plugstack.conf KEY" (no
 * '=': callers add "=VALUE"). */
void hx_setting_origin(const hx_settings *s, hx_opt_id id, const char *key,
		       char *buf, size_t cap);
/* local.c: srun. */
int hx_local_post_opt(spank_t sp);
int hx_local_user_init(spank_t sp);
/* remote.c: slurmstepd, in the task.  task_init_privileged records the
 * step's GPUs of the node before Slurm narrows them to the task's own;
 * task_init (after privileges are dropped) exports the role.
 * conf_error: the plugstack error of this process, or NULL. */
void hx_remote_task_privileged(spank_t sp);
int hx_remote_task_init(spank_t sp, const char *conf_error);

/* ---- allocation discovery (discover.c) ---------------------------------- */

hexi_rc hx_discover(uint32_t job_id, uint32_t step_id, hx_alloc *a);

/* A step over several components of het job `leader` as srun plans it
 * before Slurm creates the step (init_post_opt): every node of the asked
 * components (req) with one task per GPU of the job there, tasks in block
 * order (component by component, node by node, as Slurm numbers a het
 * step's tasks).  Refused: a job that is not heterogeneous, a component it
 * does not have, a node without GPUs, a node in two components. */
hexi_rc hx_discover_het(uint32_t leader, const hx_het_request *req,
			hx_alloc *a);
/* After Slurm created step step_id (local_user_init): the step must run on
 * exactly the components of a (every other component of the het job has
 * no such step) with exactly a's nodes and task ids; the message names
 * the first difference. */
hexi_rc hx_het_verify(const hx_alloc *a, uint32_t step_id);
/* How many components of its het job step job_id.step_id spans (1 for a
 * job that is not heterogeneous); *leader: the het job's leader (0 if
 * none). */
hexi_rc hx_het_step_span(uint32_t job_id, uint32_t step_id, int *ncomps,
			 uint32_t *leader);
/* NodeAddr of a node into addr, or its name when the controller cannot
 * tell (the node cannot be loaded, or has no NodeAddr).  A NodeAddr that
 * does not fit cap, or that the hand-off cannot carry (not printable
 * ASCII, or a ';' '|' ','), is an error naming the node, never replaced
 * by the name. */
hexi_rc hx_node_addr(const char *node, char *addr, size_t cap);

/* ---- NVML check (nvml.c) ------------------------------------------------ */

/* HEXI_OK: the GPU's NVML name matches want_type; HEXI_ERR_NOTFOUND: no
 * NVML here; HEXI_ERR_MISMATCH: another type (found names it). */
hexi_rc hx_nvml_check(const char *lib, int gpu, const char *want_type,
		      char *found, size_t cap);

/* ---- libhexisched, loaded with dlopen in srun, sbatch, salloc ---------- */

#include "hexi_sched.h"

#define HX_SCHED_SYMBOLS(X)                                                    \
	X(hexi_errmsg)                                                         \
	X(hexi_log_set_sink)                                                   \
	X(hexi_catalog_builtin)                                                \
	X(hexi_catalog_load)                                                   \
	X(hexi_catalog_apply_profiles)                                         \
	X(hexi_catalog_find)                                                   \
	X(hexi_catalog_destroy)                                                \
	X(hexi_cluster_load)                                                   \
	X(hexi_cluster_create)                                                 \
	X(hexi_cluster_set_node)                                               \
	X(hexi_cluster_validate)                                               \
	X(hexi_cluster_apply_profiles)                                         \
	X(hexi_cluster_destroy)                                                \
	X(hexi_model_load)                                                     \
	X(hexi_model_validate)                                                 \
	X(hexi_train_defaults)                                                 \
	X(hexi_plan_parse)                                                     \
	X(hexi_plan_validate)                                                  \
	X(hexi_plan_to_json)                                                   \
	X(hexi_plan_hash)                                                      \
	X(hexi_plan_idle_types)                                                \
	X(hexi_plan_destroy)

/* Optional: NULL when the library has no planner (then only user plan
 * files work). */
#define HX_SCHED_OPTIONAL(X)                                                   \
	X(hexi_plan_opts_defaults)                                             \
	X(hexi_plan_create)

typedef struct hx_sched {
	void *handle;
#define HX_SCHED_FIELD(name) __typeof__(&name) name;
	HX_SCHED_SYMBOLS(HX_SCHED_FIELD)
	HX_SCHED_OPTIONAL(HX_SCHED_FIELD)
#undef HX_SCHED_FIELD
} hx_sched;

/* Load the library (RTLD_LOCAL) and every symbol; message names the path
 * and the missing symbol. */
hexi_rc hx_sched_open(const char *path, hx_sched *s);
void hx_sched_close(hx_sched *s);
/* A library error rc as our own message "what: <library's message>". */
hexi_rc hx_sched_err(const hx_sched *s, hexi_rc rc, const char *what);
/* The catalog of plugstack catalog= (or the built-in one) with profiles=
 * applied; on error *out may be set and is the caller's to destroy. */
hexi_rc hx_sched_catalog(const hx_sched *s, hexi_catalog **out);

#endif /* HX_SPANK_H */
