/*
 * hexitrain - reference trainer: runs the Llama-style model on a HexiScale
 * plan (hexitrain(1)).  Exit status: the hexi_rc code (usage errors 2);
 * HEXITRAIN_EXIT_PREEMPTED after a SIGTERM/SIGUSR1 stop with a checkpoint.
 */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hexi_rt.h"

/* Stopped by SIGTERM or SIGUSR1 after the step in progress, checkpoint
 * committed (EX_TEMPFAIL: "try again", i.e. resume). */
#define HEXITRAIN_EXIT_PREEMPTED 75
/* ...but there was no --ckpt-dir, or the save failed: nothing to resume. */
#define HEXITRAIN_EXIT_STOPPED_UNSAVED 76

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

typedef struct cli {
	hexi_rt_opts rt;
	hexi_train_opts tr;
	const char *resume;
	const char *dump;
	int json, verbose;
} cli;

static void usage(FILE *f)
{
	fprintf(
	    f, "Usage: hexitrain [OPTIONS]\n"
	       "Train the reference Llama-style model on a HexiScale plan.\n"
	       "\n"
	       "  --plan FILE         plan (default: $HEXISCALE_PLAN; none: "
	       "one process)\n"
	       "  --model NAME|FILE   model of a plan-less run (default "
	       "tiny-4l)\n"
	       "  --batch N           global batch of a plan-less run "
	       "(default 8)\n"
	       "  --micro-batches N   micro-batches of a plan-less run "
	       "(default 1)\n"
	       "  --recompute, --no-recompute\n"
	       "                      activation recomputation of a plan-less "
	       "run (default\n"
	       "                      on); with a plan it must agree with the "
	       "plan\n"
	       "  --steps N           total steps (default 10)\n"
	       "  --lr X              learning rate (default 1e-3)\n"
	       "  --seed N            init and data seed (default 1234)\n"
	       "  --optimizer NAME    adamw (default) or sgd\n"
	       "  --eps X             AdamW epsilon (default 1e-8)\n"
	       "  --weight-decay X    AdamW weight decay (default 0)\n"
	       "  --clip X            global-norm clip, 0 = off (default 1)\n"
	       "  --data FILE         token file, hexiscale-data(5) "
	       "(default: synthetic)\n"
	       "  --data-format F     tokens (default) or bytes (raw text, "
	       "one token a byte)\n"
	       "  --val-data FILE     held-out data, same format: validation "
	       "loss after the\n"
	       "                      last step\n"
	       "  --eval-every N      validation loss at step 0, every N "
	       "steps and at the end\n"
	       "  --eval-batches N    global batches per validation "
	       "(default 1)\n"
	       "  --lr-schedule S     constant (default) or cosine\n"
	       "  --warmup N          linear warmup steps (default 0)\n"
	       "  --min-lr X          cosine floor (default 0)\n"
	       "  --lr-decay-steps N  cosine length (default: --steps)\n"
	       "  --keep N            keep the last N committed checkpoints\n"
	       "  --save-every N      checkpoint every N steps\n"
	       "  --ckpt-dir DIR      checkpoint directory\n"
	       "  --resume DIR        resume from the latest checkpoint in "
	       "DIR\n"
	       "  --backend NAME      mpi (CPU ranks), nccl (one CUDA GPU per "
	       "rank)\n"
	       "                      or auto (default: $HEXISCALE_BACKEND, "
	       "else mpi)\n"
	       "  --dtype NAME        fp32 (default) or bf16 (nccl backend "
	       "only)\n"
	       "  --no-overlap        gradient sync after the backward, not "
	       "during it\n"
	       "  --timeout S         abort the job after S s without progress "
	       "(default 300, 0 = off)\n"
	       "  --dump PREFIX       write parameters to PREFIX.rankN at "
	       "the end\n"
	       "  --json              one JSON object per step on stdout "
	       "(with\n"
	       "                      every rank's peak memory)\n"
	       "  --verbose           per-stage times every step, memory at "
	       "the end\n"
	       "  -h, --help, -V, --version\n");
}

enum {
	OPT_PLAN = 256,
	OPT_MODEL,
	OPT_BATCH,
	OPT_MB,
	OPT_STEPS,
	OPT_LR,
	OPT_SEED,
	OPT_OPTIM,
	OPT_EPS,
	OPT_WD,
	OPT_CLIP,
	OPT_DATA,
	OPT_SAVE,
	OPT_CKPT,
	OPT_RESUME,
	OPT_TIMEOUT,
	OPT_DUMP,
	OPT_JSON,
	OPT_VERBOSE,
	OPT_HELP,
	OPT_VERSION,
	OPT_BACKEND,
	OPT_DTYPE,
	OPT_DATA_FORMAT,
	OPT_VAL,
	OPT_EVAL_EVERY,
	OPT_EVAL_BATCHES,
	OPT_SCHED,
	OPT_WARMUP,
	OPT_MIN_LR,
	OPT_DECAY,
	OPT_KEEP,
	OPT_RECOMPUTE,
	OPT_NO_RECOMPUTE,
	OPT_NO_OVERLAP,
};

static const struct option long_opts[] = {
    {"plan", required_argument, NULL, OPT_PLAN},
    {"model", required_argument, NULL, OPT_MODEL},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"micro-batches", required_argument, NULL, OPT_MB},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"lr", required_argument, NULL, OPT_LR},
    {"seed", required_argument, NULL, OPT_SEED},
    {"optimizer", required_argument, NULL, OPT_OPTIM},
    {"eps", required_argument, NULL, OPT_EPS},
    {"weight-decay", required_argument, NULL, OPT_WD},
    {"clip", required_argument, NULL, OPT_CLIP},
    {"data", required_argument, NULL, OPT_DATA},
    {"save-every", required_argument, NULL, OPT_SAVE},
    {"ckpt-dir", required_argument, NULL, OPT_CKPT},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"dump", required_argument, NULL, OPT_DUMP},
    {"json", no_argument, NULL, OPT_JSON},
    {"verbose", no_argument, NULL, OPT_VERBOSE},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"data-format", required_argument, NULL, OPT_DATA_FORMAT},
    {"val-data", required_argument, NULL, OPT_VAL},
    {"eval-every", required_argument, NULL, OPT_EVAL_EVERY},
    {"eval-batches", required_argument, NULL, OPT_EVAL_BATCHES},
    {"lr-schedule", required_argument, NULL, OPT_SCHED},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"min-lr", required_argument, NULL, OPT_MIN_LR},
    {"lr-decay-steps", required_argument, NULL, OPT_DECAY},
    {"keep", required_argument, NULL, OPT_KEEP},
    {"recompute", no_argument, NULL, OPT_RECOMPUTE},
    {"no-recompute", no_argument, NULL, OPT_NO_RECOMPUTE},
    {"no-overlap", no_argument, NULL, OPT_NO_OVERLAP},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

static hexi_rc opt_long(const char *name, const char *s, long min, long max,
			long *v)
{
	hexi_rc rc = hexi_parse_long(s, min, max, v);

	if (rc != HEXI_OK)
		return hexi_error(HEXI_ERR_USAGE,
				  "--%s '%.40s': expected an integer in "
				  "%ld..%ld",
				  name, s, min, max);
	return HEXI_OK;
}

static hexi_rc opt_double(const char *name, const char *s, double min,
			  double max, double *v)
{
	hexi_rc rc = hexi_parse_double(s, min, max, v);

	if (rc != HEXI_OK)
		return hexi_error(HEXI_ERR_USAGE,
				  "--%s '%.40s': expected a number in "
				  "[%g, %g]",
				  name, s, min, max);
	return HEXI_OK;
}

/* The data and schedule options (0: not one of them). */
static int parse_data_opt(cli *c, int opt, const char *a, hexi_rc *rc)
{
	long v = 0;

	switch (opt) {
	case OPT_DATA_FORMAT:
		if (strcmp(a, "tokens") == 0 || strcmp(a, "bytes") == 0)
			c->tr.data_format = strcmp(a, "bytes") == 0;
		else
			*rc = hexi_error(HEXI_ERR_USAGE,
					 "--data-format '%.40s': tokens or "
					 "bytes",
					 a);
		return 1;
	case OPT_VAL:
		c->tr.val_path = a;
		return 1;
	case OPT_EVAL_EVERY:
		*rc = opt_long("eval-every", a, 0, 100000000, &v);
		c->tr.eval_every = (int)v;
		return 1;
	case OPT_EVAL_BATCHES:
		*rc = opt_long("eval-batches", a, 1, 1000000, &v);
		c->tr.eval_batches = (int)v;
		return 1;
	case OPT_SCHED:
		if (strcmp(a, "constant") == 0 || strcmp(a, "cosine") == 0)
			c->tr.lr_schedule = strcmp(a, "cosine") == 0;
		else
			*rc = hexi_error(HEXI_ERR_USAGE,
					 "--lr-schedule '%.40s': constant or "
					 "cosine",
					 a);
		return 1;
	case OPT_WARMUP:
		*rc = opt_long("warmup", a, 0, 100000000, &v);
		c->tr.warmup = (int)v;
		return 1;
	case OPT_MIN_LR:
		*rc = opt_double("min-lr", a, 0, 100, &c->tr.min_lr);
		return 1;
	case OPT_DECAY:
		*rc = opt_long("lr-decay-steps", a, 1, 100000000, &v);
		c->tr.decay_steps = (int)v;
		return 1;
	case OPT_KEEP:
		*rc = opt_long("keep", a, 1, 1000000, &v);
		c->tr.keep = (int)v;
		return 1;
	}
	return 0;
}

static hexi_rc parse_one(cli *c, int opt, const char *a)
{
	long v = 0;
	hexi_rc rc = HEXI_OK;

	if (parse_data_opt(c, opt, a, &rc))
		return rc;
	switch (opt) {
	case OPT_PLAN:
		c->rt.plan_path = a;
		break;
	case OPT_MODEL:
		c->rt.model = a;
		break;
	case OPT_BATCH:
		rc = opt_long("batch", a, 1, 1 << 20, &v);
		c->rt.global_batch = (int)v;
		break;
	case OPT_MB:
		rc = opt_long("micro-batches", a, 1, 1 << 20, &v);
		c->rt.micro_batches = (int)v;
		break;
	case OPT_STEPS:
		rc = opt_long("steps", a, 0, 100000000, &v);
		c->tr.steps = (int)v;
		break;
	case OPT_LR:
		rc = opt_double("lr", a, 1e-12, 100, &c->tr.lr);
		break;
	case OPT_SEED:
		rc = opt_long("seed", a, 0, 0x7fffffffL, &v);
		c->tr.seed = (uint64_t)v;
		break;
	case OPT_OPTIM:
		if (strcmp(a, "adamw") == 0)
			c->tr.optimizer = HEXI_OPT_ADAMW;
		else if (strcmp(a, "sgd") == 0)
			c->tr.optimizer = HEXI_OPT_SGD;
		else
			rc = hexi_error(HEXI_ERR_USAGE,
					"--optimizer '%.40s': adamw or sgd", a);
		break;
	case OPT_EPS:
		rc = opt_double("eps", a, 1e-30, 1e6, &c->tr.eps);
		break;
	case OPT_WD:
		rc = opt_double("weight-decay", a, 0, 10, &c->tr.weight_decay);
		break;
	case OPT_CLIP:
		rc = opt_double("clip", a, 0, 1e12, &c->tr.clip);
		break;
	case OPT_DATA:
		c->tr.data_path = a;
		break;
	case OPT_SAVE:
		rc = opt_long("save-every", a, 0, 100000000, &v);
		c->tr.save_every = (int)v;
		break;
	case OPT_CKPT:
		c->tr.ckpt_dir = a;
		break;
	case OPT_RESUME:
		c->resume = a;
		break;
	case OPT_TIMEOUT:
		rc = opt_double("timeout", a, 0, 1e7, &c->rt.timeout_s);
		break;
	case OPT_DUMP:
		c->dump = a;
		break;
	case OPT_JSON:
		c->json = 1;
		break;
	case OPT_BACKEND:
		if (!hexi_rt_backend_known(a))
			rc = hexi_error(HEXI_ERR_USAGE,
					"--backend '%.40s': mpi, nccl or auto",
					a);
		c->rt.backend = a;
		break;
	case OPT_DTYPE:
		if (strcmp(a, "fp32") != 0 && strcmp(a, "bf16") != 0)
			rc = hexi_error(HEXI_ERR_USAGE,
					"--dtype '%.40s': fp32 or bf16", a);
		c->tr.dtype = a;
		break;
	case OPT_VERBOSE:
		c->verbose = c->tr.verbose = 1;
		break;
	case OPT_RECOMPUTE:
	case OPT_NO_RECOMPUTE:
		/* the last one given wins */
		c->rt.recompute = opt == OPT_RECOMPUTE ? HEXI_RECOMPUTE_ON
						       : HEXI_RECOMPUTE_OFF;
		break;
	case OPT_NO_OVERLAP:
		c->tr.no_overlap = 1;
		break;
	default:
		rc = hexi_error(HEXI_ERR_USAGE, "unknown option (see --help)");
	}
	return rc;
}

/* 0: go on; 1: --help/--version done; <0 never; >1: exit code. */

_Static_assert(OPT_NO_OVERLAP < OPT_PLAN + 64, "an option past the seen mask");
#define GIVEN(seen, o) (((seen) >> ((o)-OPT_PLAN)) & 1)

/* Options this run would not read are refused, not ignored: a plan fixes
 * the model, the batch and the micro-batches; SGD has no epsilon or
 * weight decay; the constant schedule has no floor or decay length (a
 * resumed run takes the checkpoint's schedule, and says so, so those two
 * stay allowed with --resume). */
static int check_unread(const cli *c, uint64_t seen)
{
	static const struct {
		int opt;
		const char *name;
	} planless[] = {{OPT_MODEL, "--model"},
			{OPT_BATCH, "--batch"},
			{OPT_MB, "--micro-batches"}};
	const struct {
		int unread, a, b; /* options a and b are not read */
		const char *na, *nb, *why;
	} rule[] = {
	    {c->tr.optimizer == HEXI_OPT_SGD, OPT_EPS, OPT_WD, "--eps",
	     "--weight-decay",
	     "is an AdamW option: --optimizer sgd does not read it"},
	    {c->tr.lr_schedule != 1 && c->resume == NULL, OPT_MIN_LR, OPT_DECAY,
	     "--min-lr", "--lr-decay-steps",
	     "is for --lr-schedule cosine: the constant schedule does not "
	     "read it"},
	    {c->tr.val_path == NULL, OPT_EVAL_BATCHES, OPT_EVAL_BATCHES,
	     "--eval-batches", "--eval-batches", "needs --val-data"},
	};
	const char *plan = c->rt.plan_path;

	if (plan == NULL || *plan == '\0')
		plan = getenv("HEXISCALE_PLAN");
	for (size_t i = 0; plan != NULL && *plan != '\0' &&
			   i < sizeof(planless) / sizeof(planless[0]);
	     i++)
		if (GIVEN(seen, planless[i].opt))
			return hexi_cli_usage_error(
			    "hexitrain",
			    "%s is for a run without a plan: the plan '%.200s' "
			    "(%s) fixes the model, the batch and the "
			    "micro-batches",
			    planless[i].name, plan,
			    c->rt.plan_path != NULL && *c->rt.plan_path != '\0'
				? "--plan"
				: "$HEXISCALE_PLAN");
	for (size_t i = 0; i < sizeof(rule) / sizeof(rule[0]); i++)
		if (rule[i].unread &&
		    (GIVEN(seen, rule[i].a) || GIVEN(seen, rule[i].b)))
			return hexi_cli_usage_error(
			    "hexitrain", "%s %s",
			    GIVEN(seen, rule[i].a) ? rule[i].na : rule[i].nb,
			    rule[i].why);
	return 0;
}

static int parse_args(cli *c, int argc, char **argv)
{
	int opt;

	memset(c, 0, sizeof(*c));
	hexi_rt_opts_defaults(&c->rt);
	hexi_train_opts_defaults(&c->tr);
	c->rt.timeout_s = 300;
	uint64_t seen = 0; /* bit OPT_X - OPT_PLAN: option given */

	opterr = 0;
	/* the leading ':' tells a missing argument (':') from an unknown
	 * option ('?') */
	while ((opt = getopt_long(argc, argv, ":hV", long_opts, NULL)) != -1) {
		hexi_rc rc;
		if (opt == 'h' || opt == OPT_HELP) {
			usage(stdout);
			return 1;
		}
		if (opt == 'V' || opt == OPT_VERSION) {
			printf("hexitrain (%s) %s\n", PACKAGE_NAME,
			       PACKAGE_VERSION);
			return 1;
		}
		if (opt == ':')
			return hexi_cli_usage_error("hexitrain",
						    "option '%s' needs a value",
						    argv[optind - 1]);
		if (opt == '?' && optopt > 0 && optopt < 128)
			return hexi_cli_usage_error(
			    "hexitrain", "invalid option '-%c'", optopt);
		if (opt == '?')
			return hexi_cli_usage_error("hexitrain",
						    "invalid option '%s'",
						    argv[optind - 1]);
		rc = parse_one(c, opt, optarg);
		if (rc != HEXI_OK) {
			hexi_cli_fail("hexitrain", rc);
			return HEXI_ERR_USAGE;
		}
		if (opt >= OPT_PLAN && opt < OPT_PLAN + 64)
			seen |= 1ull << (opt - OPT_PLAN);
	}
	if (optind < argc)
		return hexi_cli_usage_error(
		    "hexitrain", "unexpected argument '%s'", argv[optind]);
	return check_unread(c, seen);
}

/* ,"mem_peak_bytes":MAX,"memory":[{"rank":0,"device":0,
 * "peak_bytes":N,"bytes":N,"params":PEAK,...},...] of n ranks. */
static void print_mem_json(const hexi_mem_stats *all, int n)
{
	double mx = 0;

	for (int r = 0; r < n; r++)
		if (all[r].peak_total_bytes > mx)
			mx = all[r].peak_total_bytes;
	printf(",\"mem_peak_bytes\":%.0f,\"memory\":[", mx);
	for (int r = 0; r < n; r++) {
		printf("%s{\"rank\":%d,\"device\":%d,\"peak_bytes\":%.0f,"
		       "\"bytes\":%.0f",
		       r ? "," : "", r, all[r].device, all[r].peak_total_bytes,
		       all[r].total_bytes);
		for (int k = 0; k < HEXI_MEM_NKINDS; k++)
			printf(",\"%s\":%.0f", hexi_mem_kind_name(k),
			       all[r].peak_bytes[k]);
		printf("}");
	}
	printf("]");
}

/* all: every rank's memory (n ranks), or NULL. */
static void print_step(const cli *c, const hexi_step_stats *s,
		       const hexi_mem_stats *all, int n)
{
	if (c->json) {
		printf("{\"step\":%d,\"loss\":%.9g,\"grad_norm\":%.9g,"
		       "\"time_s\":%.6f,\"tokens_per_s\":%.3f,"
		       "\"compute_s\":%.6f,\"tp_s\":%.6f,\"pp_wait_s\":%.6f,"
		       "\"dp_sync_s\":%.6f,\"lr\":%.9g",
		       s->step, s->loss, s->grad_norm, s->time_s,
		       s->tokens_per_s, s->compute_s, s->tp_s, s->pp_wait_s,
		       s->dp_sync_s, s->lr);
		if (all != NULL)
			print_mem_json(all, n);
		printf("}\n");
	} else
		printf("step %4d  loss %.6f  gnorm %.4f  lr %.3e  %8.1f tok/s  "
		       "%.3fs = compute %.3f + tp %.3f + pp-wait %.3f + "
		       "dp-sync %.3f\n",
		       s->step, s->loss, s->grad_norm, s->lr, s->tokens_per_s,
		       s->time_s, s->compute_s, s->tp_s, s->pp_wait_s,
		       s->dp_sync_s);
	fflush(stdout);
}

static void print_stages(const cli *c, const hexi_rt *rt,
			 const hexi_step_stats *all)
{
	const hexi_plan *p = hexi_rt_plan(rt);

	for (int pi = 0; pi < p->npipelines; pi++)
		for (int si = 0; si < p->pipelines[pi].nstages; si++) {
			int r = p->pipelines[pi].stages[si].devices[0].rank;
			const hexi_step_stats *s = &all[r];
			if (c->json)
				printf("{\"step\":%d,\"pipeline\":%d,"
				       "\"stage\":%d,\"rank\":%d,"
				       "\"compute_s\":%.6f,\"tp_s\":%.6f,"
				       "\"pp_wait_s\":%.6f,\"dp_sync_s\":%.6f}"
				       "\n",
				       s->step, pi, si, r, s->compute_s,
				       s->tp_s, s->pp_wait_s, s->dp_sync_s);
			else
				printf("  pipeline %d stage %d (rank %d): "
				       "compute %.3f tp %.3f pp-wait %.3f "
				       "dp-sync %.3f\n",
				       pi, si, r, s->compute_s, s->tp_s,
				       s->pp_wait_s, s->dp_sync_s);
		}
}

/* The save/load line of hexitrain(1) (rank 0, after the event), on
 * stderr so that --json's stdout stays one object per step. */
static void print_event(hexi_rt *rt, hexi_trainer *t)
{
	hexi_ckpt_event ev;

	if (!hexi_trainer_take_event(t, &ev) || hexi_rt_rank(rt) != 0)
		return;
	fprintf(stderr,
		"hexitrain: %s checkpoint %s (step %lld, %llu bytes, %.3f s)\n",
		ev.loaded ? "loaded" : "saved", ev.path, (long long)ev.step,
		(unsigned long long)ev.bytes, ev.seconds);
	fflush(stderr);
}

/* Validation (hexitrain(1)): with --eval-every N at the start (step 0 or
 * the step resumed from), every N steps and after the last; without it,
 * once after the last step (with --steps 0 or nothing left to train: at
 * the start), so a --val-data given is never silently unused.  START: the
 * call before the first step. */
static hexi_rc maybe_eval(const cli *c, hexi_rt *rt, hexi_trainer *t, int start)
{
	int k = hexi_trainer_steps_done(t), every = c->tr.eval_every;
	int last = k >= c->tr.steps;
	double loss = 0;
	hexi_rc rc;

	if (c->tr.val_path == NULL)
		return HEXI_OK;
	if (every > 0 ? !(start || last || k % every == 0) : !last)
		return HEXI_OK;
	rc = hexi_trainer_eval(t, &loss);
	if (rc != HEXI_OK || hexi_rt_rank(rt) != 0)
		return rc;
	if (c->json && !isfinite(loss)) /* JSON has no NaN */
		printf("{\"step\":%d,\"val_loss\":null}\n", k);
	else if (c->json)
		printf("{\"step\":%d,\"val_loss\":%.9g}\n", k, loss);
	else
		printf("step %4d  val loss %.6f\n", k, loss);
	fflush(stdout);
	return HEXI_OK;
}

/* Every rank agrees at each step boundary whether any got a stop signal
 * (one all-reduce), so all finish the same step and save it together. */
static int stop_agreed(hexi_rt *rt)
{
	return !hexi_rt_all_ok(rt, stop_signal == 0);
}

/* Stop after a signal: commit the step done (unless saved already).
 * Returns the exit status. */
static int stop_now(const cli *c, hexi_rt *rt, hexi_trainer *t, hexi_rc *rc)
{
	int k = hexi_trainer_steps_done(t);

	if (hexi_rt_rank(rt) == 0)
		fprintf(stderr,
			"hexitrain: stop signal: stopping after step %d\n", k);
	if (c->tr.ckpt_dir == NULL) {
		if (hexi_rt_rank(rt) == 0)
			fprintf(stderr, "hexitrain: no --ckpt-dir: nothing "
					"saved\n");
		return HEXITRAIN_EXIT_STOPPED_UNSAVED;
	}
	if (hexi_trainer_saved_step(t) != k) {
		hexi_rt_watchdog(rt, HEXI_RT_WD_SAVE);
		*rc = hexi_trainer_save(t, c->tr.ckpt_dir);
	}
	if (*rc != HEXI_OK) {
		/* the save's outcome is agreed by every rank: each says why
		 * and all exit 76 (not the error's code: the job was stopped,
		 * and hexitrain(1) promises 76 for a failed save) */
		hexi_cli_fail("hexitrain", *rc);
		*rc = HEXI_OK;
		return HEXITRAIN_EXIT_STOPPED_UNSAVED;
	}
	print_event(rt, t);
	return HEXITRAIN_EXIT_PREEMPTED;
}

/* Verbose text: every rank's peak bytes by kind, in MiB. */
static void print_mem_table(const hexi_rt *rt, const hexi_mem_stats *all)
{
	const hexi_plan *p = hexi_rt_plan(rt);

	printf("peak memory per rank (MiB, %s allocations):\n  rank pipe "
	       "stage tp ",
	       all[0].device ? "device" : "host");
	for (int k = 0; k < HEXI_MEM_NKINDS; k++)
		printf(" %9s", hexi_mem_kind_name(k));
	printf(" %9s\n", "total");
	for (int r = 0; r < hexi_rt_world_size(rt); r++) {
		hexi_role role;
		if (hexi_plan_role(p, r, &role) != HEXI_OK)
			continue;
		printf("  %4d %4d %5d %2d ", r, role.pipeline, role.stage,
		       role.tp_rank);
		for (int k = 0; k < HEXI_MEM_NKINDS; k++)
			printf(" %9.3f", all[r].peak_bytes[k] / 1048576.0);
		printf(" %9.3f\n", all[r].peak_total_bytes / 1048576.0);
	}
}

/* Collective when json or verbose: every rank's memory on rank 0. */
static hexi_rc gather_mem(const cli *c, hexi_trainer *t, hexi_mem_stats *mem)
{
	return (c->json || c->verbose) ? hexi_trainer_gather_memory(t, mem)
				       : HEXI_OK;
}

static hexi_rc train(cli *c, hexi_rt *rt, int *status)
{
	hexi_trainer *t = NULL;
	hexi_step_stats st, *all = NULL;
	hexi_mem_stats *mem = NULL;
	const int n = hexi_rt_world_size(rt);
	hexi_rc rc = hexi_trainer_create(rt, &c->tr, &t);

	/* Loading a checkpoint is watched like a save (S plus 1 s per 16
	 * MiB this rank holds): a peer that stops there left the others
	 * waiting in resume's agreement for ever.  From its end on, the
	 * plain timer covers the directory check and the first validation
	 * as well. */
	if (rc == HEXI_OK && c->resume != NULL) {
		hexi_rt_watchdog(rt, HEXI_RT_WD_ON);
		hexi_rt_watchdog(rt, HEXI_RT_WD_SAVE);
		rc = hexi_trainer_resume(t, c->resume);
	}
	hexi_rt_watchdog(rt, HEXI_RT_WD_ON);
	if (rc == HEXI_OK)
		rc = hexi_trainer_check_ckpt_dir(t);
	if (rc == HEXI_OK)
		print_event(rt, t);
	if (rc == HEXI_OK && c->resume != NULL && hexi_rt_rank(rt) == 0 &&
	    hexi_trainer_steps_done(t) >= c->tr.steps && c->tr.steps > 0)
		fprintf(stderr,
			"hexitrain: the checkpoint is at step %d, --steps is "
			"%d: no step to train\n",
			hexi_trainer_steps_done(t), c->tr.steps);
	if (rc == HEXI_OK) {
		all = calloc((size_t)n, sizeof(*all));
		mem = calloc((size_t)n, sizeof(*mem));
		if (all == NULL || mem == NULL)
			rc = hexi_error(HEXI_ERR_NOMEM, "stats");
	}
	if (rc == HEXI_OK) /* step 0, or the step resumed from (any step) */
		rc = maybe_eval(c, rt, t, 1);
	/* The watchdog (--timeout) stays armed to the dump: the
	 * stop agreement, the step and its save, the gathers, validation.
	 * Arming it again at each iteration's top is the progress of the
	 * last one's collectives; the trainer feeds it within a step. */
	while (rc == HEXI_OK && hexi_trainer_steps_done(t) < c->tr.steps) {
		hexi_rt_watchdog(rt, HEXI_RT_WD_ON);
		if (stop_agreed(rt)) {
			*status = stop_now(c, rt, t, &rc);
			break;
		}
		rc = hexi_trainer_step(t, &st);
		if (rc == HEXI_OK)
			rc = gather_mem(c, t, mem);
		if (rc != HEXI_OK)
			break;
		if (hexi_rt_rank(rt) == 0)
			print_step(c, &st, c->json ? mem : NULL, n);
		print_event(rt, t);
		if (c->verbose) {
			rc = hexi_trainer_gather_stats(t, &st, all);
			if (rc == HEXI_OK && hexi_rt_rank(rt) == 0)
				print_stages(c, rt, all);
		}
		if (rc == HEXI_OK)
			rc = maybe_eval(c, rt, t, 0);
	}
	hexi_rt_watchdog(rt, HEXI_RT_WD_ON);
	if (rc == HEXI_OK && c->verbose && !c->json &&
	    (rc = gather_mem(c, t, mem)) == HEXI_OK && hexi_rt_rank(rt) == 0)
		print_mem_table(rt, mem);
	hexi_rt_watchdog(rt, HEXI_RT_WD_ON);
	if (rc == HEXI_OK && c->dump != NULL)
		rc = hexi_trainer_dump(t, c->dump);
	/* off before an error's hexi_rt_abort grace, whose exit status
	 * must stay the error's */
	hexi_rt_watchdog(rt, HEXI_RT_WD_OFF);
	free(all);
	free(mem);
	hexi_trainer_destroy(t);
	return rc;
}

/* A task whose GPU the plan leaves idle (hexiscale-env(7)): one line
 * (stderr under --json, whose stdout is for the step records), then exit
 * 0.  hexi_rt_destroy's MPI_Finalize returns once the training ranks
 * finish theirs (Open MPI's is collective over the job). */
static int idle_exit(const cli *c, hexi_rt *rt)
{
	const hexi_plan *p = hexi_rt_plan(rt);
	const hexi_role *r = hexi_rt_role(rt);
	const hexi_node *n = &p->cluster->nodes[r->node];

	fprintf(c->json ? stderr : stdout,
		"hexitrain: rank %d: idle in plan %s (GPU %d of %s, %s): "
		"trains nothing, exits 0 when the %d training ranks finish\n",
		hexi_rt_rank(rt), p->hash, r->gpu, n->name, n->gpu_type,
		hexi_rt_world_size(rt));
	fflush(NULL);
	hexi_rt_destroy(rt);
	return 0;
}

static int run(int argc, char **argv)
{
	cli c;
	hexi_rt *rt = NULL;
	hexi_rc rc;
	int r = parse_args(&c, argc, argv);

	struct sigaction sa;
	int status = 0;

	if (r == 1)
		return 0;
	if (r != 0)
		return r;
	/* Before the bootstrap: a signal from then on stops at a step end. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	rc = hexi_rt_init(&argc, &argv, &c.rt, &rt);
	if (rc != HEXI_OK) {
		hexi_cli_fail("hexitrain", rc);
		return (int)rc;
	}
	if (hexi_rt_is_idle(rt))
		return idle_exit(&c, rt);
	if (hexi_rt_rank(rt) == 0 && !c.json) {
		const hexi_plan *p = hexi_rt_plan(rt);
		int nrc = 0;
		for (int pi = 0; pi < p->npipelines; pi++)
			nrc += hexi_plan_recompute(p, pi);
		printf("hexitrain: %s, %d ranks (%s), %d pipelines, plan %s, "
		       "backend %s, %s, recompute %s\n",
		       p->model.name, hexi_rt_world_size(rt),
		       hexi_rt_launcher_name(hexi_rt_launcher_kind(rt)),
		       p->npipelines, p->hash, hexi_rt_backend(rt),
		       c.tr.dtype ? c.tr.dtype : "fp32",
		       nrc == p->npipelines ? "on"
		       : nrc == 0	    ? "off"
					    : "in some pipelines");
	}
	rc = train(&c, rt, &status);
	if (rc != HEXI_OK) {
		hexi_cli_fail("hexitrain", rc);
		/* A failed rank must not leave the others waiting (a PEER
		 * rank first gives the one with the cause time to end the
		 * job: hexi_rt_abort). */
		hexi_rt_abort(rt, rc);
	}
	hexi_rt_destroy(rt);
	return status;
}

int main(int argc, char **argv)
{
	return hexi_cli_close_stdout("hexitrain", run(argc, argv));
}
