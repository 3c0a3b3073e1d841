/*
 * hexiplan - plan, simulate, show, validate and compare asymmetric
 * parallel plans for heterogeneous GPU clusters (hexiplan(1)).
 *
 * Exit status: 0, or the hexi_rc code of the failure (2 = usage).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched_int.h"

#define PROG "hexiplan"

typedef struct cli {
	const char *cmd;
	const char *input; /* CLUSTER or PLAN */
	const char *model, *catalog, *profiles, *out, *svg;
	long global_batch, micro_batch, seq, recompute;
	int mb_exact; /* --micro-batch-exact given */
	int json, verbose, no_overlap;
	sched_attn_mode attn; /* simulate --attention */
	hexi_plan_opts o;
	int have_cost;
	int seen[32], nseen; /* the options given, for applies() */
} cli;

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: " PROG " COMMAND [OPTIONS] ARG\n"
	       "  plan CLUSTER --model M [-o PLAN.json] [--svg FILE]  find a "
	       "plan\n"
	       "  simulate PLAN                             predict its "
	       "timing and memory\n"
	       "  show PLAN [--svg FILE]                    draw it\n"
	       "  validate PLAN                             check it\n"
	       "  compare CLUSTER --model M                 strategies side by "
	       "side\n"
	       "options:\n"
	       "  --model NAME|FILE  --global-batch N  --micro-batch N | "
	       "--micro-batch-exact N  "
	       "--seq N\n"
	       "  --recompute | --no-recompute  --zero 0|1|2  --catalog FILE  "
	       "--profiles "
	       "PATH\n"
	       "  --strategy hexiscale|megatron|random|exhaustive  "
	       "--cost-model hexiscale|reference\n"
	       "  --seed N  --max-evals N  --time-budget S  --max-pipelines N  "
	       "--no-asymmetric-tp  --uniform-batch  --use-all-gpus\n"
	       "  --no-overlap  --attention auto|fused|own  -o, --output FILE  "
	       "--svg FILE\n"
	       "  --json  -v, --verbose\n"
	       "  -h, --help  -V, --version\n"
	       "See hexiplan(1).\n");
}

#define fail(rc)	 hexi_cli_fail(PROG, rc)
#define usage_error(...) hexi_cli_usage_error(PROG, __VA_ARGS__)

enum {
	OPT_MODEL = 256,
	OPT_GB,
	OPT_MB,
	OPT_MBEXACT,
	OPT_ZERO,
	OPT_SEQ,
	OPT_RECOMPUTE,
	OPT_NO_RECOMPUTE,
	OPT_CATALOG,
	OPT_PROFILES,
	OPT_STRATEGY,
	OPT_COST,
	OPT_SEED,
	OPT_BUDGET,
	OPT_MAXEVALS,
	OPT_MAXP,
	OPT_NOASYM,
	OPT_UNIFORM,
	OPT_NOOVERLAP,
	OPT_ATTN,
	OPT_ALLGPUS,
	OPT_SVG,
	OPT_JSON,
};

static const struct option longopts[] = {
    {"model", required_argument, NULL, OPT_MODEL},
    {"global-batch", required_argument, NULL, OPT_GB},
    {"micro-batch", required_argument, NULL, OPT_MB},
    {"micro-batch-exact", required_argument, NULL, OPT_MBEXACT},
    {"zero", required_argument, NULL, OPT_ZERO},
    {"seq", required_argument, NULL, OPT_SEQ},
    {"recompute", no_argument, NULL, OPT_RECOMPUTE},
    {"no-recompute", no_argument, NULL, OPT_NO_RECOMPUTE},
    {"catalog", required_argument, NULL, OPT_CATALOG},
    {"profiles", required_argument, NULL, OPT_PROFILES},
    {"strategy", required_argument, NULL, OPT_STRATEGY},
    {"cost-model", required_argument, NULL, OPT_COST},
    {"seed", required_argument, NULL, OPT_SEED},
    {"time-budget", required_argument, NULL, OPT_BUDGET},
    {"max-evals", required_argument, NULL, OPT_MAXEVALS},
    {"max-pipelines", required_argument, NULL, OPT_MAXP},
    {"no-asymmetric-tp", no_argument, NULL, OPT_NOASYM},
    {"uniform-batch", no_argument, NULL, OPT_UNIFORM},
    {"no-overlap", no_argument, NULL, OPT_NOOVERLAP},
    {"attention", required_argument, NULL, OPT_ATTN},
    {"use-all-gpus", no_argument, NULL, OPT_ALLGPUS},
    {"output", required_argument, NULL, 'o'},
    {"svg", required_argument, NULL, OPT_SVG},
    {"json", no_argument, NULL, OPT_JSON},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static int num_opt(const char *name, const char *s, long min, long max,
		   long *out)
{
	if (hexi_parse_long(s, min, max, out) != HEXI_OK) {
		fprintf(stderr,
			PROG ": %s: '%s' is not an integer in %ld..%ld\n", name,
			s, min, max);
		return HEXI_ERR_USAGE;
	}
	return 0;
}

/* The options each command reads (0-terminated); -v, --json, -h and -V
 * go with every command.  Any other option given is refused by name: it
 * was silently ignored (simulate --zero 2, show -o x.json). */
static const int plan_opts[] = {OPT_MODEL,	  OPT_GB,
				OPT_MB,		  OPT_MBEXACT,
				OPT_SEQ,	  OPT_RECOMPUTE,
				OPT_NO_RECOMPUTE, OPT_ZERO,
				OPT_CATALOG,	  OPT_PROFILES,
				OPT_STRATEGY,	  OPT_COST,
				OPT_SEED,	  OPT_BUDGET,
				OPT_MAXEVALS,	  OPT_MAXP,
				OPT_NOASYM,	  OPT_UNIFORM,
				OPT_ALLGPUS,	  'o',
				OPT_SVG,	  0};
/* compare runs its own strategies and ablations, and writes no file */
static const int compare_opts[] = {OPT_MODEL,
				   OPT_GB,
				   OPT_MB,
				   OPT_MBEXACT,
				   OPT_SEQ,
				   OPT_RECOMPUTE,
				   OPT_NO_RECOMPUTE,
				   OPT_ZERO,
				   OPT_CATALOG,
				   OPT_PROFILES,
				   OPT_COST,
				   OPT_SEED,
				   OPT_BUDGET,
				   OPT_MAXEVALS,
				   OPT_MAXP,
				   OPT_ALLGPUS,
				   0};
/* a plan's GPU types come from its own cluster object; the catalog and
 * profiles resolve what that object does not say */
static const int simulate_opts[] = {OPT_COST,	 OPT_NOOVERLAP, OPT_ATTN,
				    OPT_CATALOG, OPT_PROFILES,	0};
static const int show_opts[] = {OPT_SVG, OPT_CATALOG, OPT_PROFILES, 0};
static const int validate_opts[] = {OPT_CATALOG, OPT_PROFILES, 0};

static int applies(const cli *a)
{
	const int *ok = !strcmp(a->cmd, "plan")	      ? plan_opts
			: !strcmp(a->cmd, "compare")  ? compare_opts
			: !strcmp(a->cmd, "simulate") ? simulate_opts
			: !strcmp(a->cmd, "show")     ? show_opts
						      : validate_opts;

	for (int i = 0; i < a->nseen; i++) {
		int c = a->seen[i], k = 0;
		const char *name = NULL;
		if (c == 'v' || c == OPT_JSON || c == 'h' || c == 'V')
			continue;
		while (ok[k] != 0 && ok[k] != c)
			k++;
		if (ok[k] == c)
			continue;
		for (int j = 0; longopts[j].name != NULL && name == NULL; j++)
			if (longopts[j].val == c)
				name = longopts[j].name;
		return usage_error("--%s does not apply to %s",
				   name ? name : "?", a->cmd);
	}
	return 0;
}

/* Returns 0, -1 (help/version printed: exit 0) or an exit code. */
static int parse_opts(cli *a, int argc, char **argv)
{
	int c, rc = 0;
	long v;
	double d;

	opterr = 0; /* one-line errors of our own */
	while ((c = getopt_long(argc, argv, ":o:vhV", longopts, NULL)) != -1) {
		if (c != ':' && c != '?' &&
		    a->nseen < (int)(sizeof(a->seen) / sizeof(a->seen[0])))
			a->seen[a->nseen++] = c;
		switch (c) {
		case OPT_MODEL:
			a->model = optarg;
			break;
		case OPT_GB:
			rc = num_opt("--global-batch", optarg, 1, 10000000,
				     &a->global_batch);
			break;
		case OPT_MB:
		case OPT_MBEXACT:
			if (a->micro_batch > 0 &&
			    a->mb_exact != (c == OPT_MBEXACT))
				return usage_error(
				    "--micro-batch and --micro-batch-exact "
				    "exclude each other (a largest size, or "
				    "exactly this size)");
			rc = num_opt(c == OPT_MB ? "--micro-batch"
						 : "--micro-batch-exact",
				     optarg, 1, 65536, &a->micro_batch);
			a->mb_exact = c == OPT_MBEXACT;
			a->o.micro_batch_exact = a->mb_exact;
			a->o.micro_batch_max =
			    a->mb_exact ? 0 : (int)a->micro_batch;
			break;
		case OPT_SEQ:
			rc = num_opt("--seq", optarg, 1, 1048576, &a->seq);
			break;
		case OPT_RECOMPUTE:
		case OPT_NO_RECOMPUTE:
			a->recompute = c == OPT_RECOMPUTE;
			a->o.recompute = (int)a->recompute;
			break;
		case OPT_ZERO:
			rc = num_opt("--zero", optarg, 0, 2, &v);
			a->o.zero = (int)v;
			break;
		case OPT_CATALOG:
			a->catalog = optarg;
			break;
		case OPT_PROFILES:
			a->profiles = optarg;
			break;
		case OPT_STRATEGY:
			if (sched_strategy_parse(optarg, &a->o.strategy))
				return usage_error("--strategy: unknown "
						   "strategy '%s'",
						   optarg);
			break;
		case OPT_COST:
			if (sched_cost_parse(optarg, &a->o.cost_model))
				return usage_error("--cost-model: unknown cost "
						   "model '%s'",
						   optarg);
			a->have_cost = 1;
			break;
		case OPT_SEED:
			rc = num_opt("--seed", optarg, 0, 2147483647L, &v);
			a->o.seed = (uint64_t)v;
			break;
		case OPT_BUDGET:
			if (hexi_parse_double(optarg, 0.001, 3600, &d)) {
				fprintf(stderr,
					PROG
					": --time-budget: '%s' is not a "
					"number of seconds in 0.001..3600\n",
					optarg);
				return HEXI_ERR_USAGE;
			}
			a->o.time_budget_s = d;
			break;
		case OPT_MAXEVALS:
			rc = num_opt("--max-evals", optarg, 1, 100000000L, &v);
			a->o.max_evals = v;
			break;
		case OPT_MAXP:
			rc = num_opt("--max-pipelines", optarg, 1,
				     HEXI_MAX_GPUS, &v);
			a->o.max_pipelines = (int)v;
			break;
		case OPT_NOASYM:
			a->o.no_asymmetric_tp = 1;
			break;
		case OPT_UNIFORM:
			a->o.uniform_batch = 1;
			break;
		case OPT_NOOVERLAP:
			a->no_overlap = 1;
			break;
		case OPT_ATTN:
			if (!strcmp(optarg, "auto"))
				a->attn = SCHED_ATTN_AUTO;
			else if (!strcmp(optarg, "fused"))
				a->attn = SCHED_ATTN_FUSED;
			else if (!strcmp(optarg, "own"))
				a->attn = SCHED_ATTN_OWN;
			else
				return usage_error("--attention: '%s' is not "
						   "auto, fused or own",
						   optarg);
			break;
		case OPT_ALLGPUS:
			a->o.use_all_gpus = 1;
			break;
		case 'o':
			if (optarg[0] == '\0')
				return usage_error("--output: empty file name");
			/* "-": standard output (hexi_write_file_atomic writes
			 * to the descriptor /dev/stdout names) */
			a->out = strcmp(optarg, "-") ? optarg : "/dev/stdout";
			break;
		case OPT_SVG:
			if (optarg[0] == '\0')
				return usage_error("--svg: empty file name");
			a->svg = optarg;
			break;
		case OPT_JSON:
			a->json = 1;
			break;
		case 'v':
			a->verbose = 1;
			a->o.verbose = 1;
			break;
		case 'h':
			usage(stdout);
			return -1;
		case 'V':
			printf(PROG " (" PACKAGE_NAME ") " PACKAGE_VERSION
				    "\n");
			return -1;
		case ':':
			return usage_error("%s: option '%s' needs a value",
					   a->cmd, argv[optind - 1]);
		default: /* optopt: an unknown letter, maybe inside "-zv",
			  * where optind has not moved past its word yet */
			if (optopt > 0 && optopt < 128)
				return usage_error("%s: unknown option '-%c'",
						   a->cmd, optopt);
			return usage_error("%s: unknown option '%s'", a->cmd,
					   argv[optind - 1]);
		}
		if (rc)
			return rc;
	}
	if (optind != argc - 1)
		return usage_error("%s: expects exactly one input file",
				   a->cmd);
	a->input = argv[optind];
	return applies(a);
}

/* ---- loading ---------------------------------------------------------------
 */

static hexi_rc load_catalog(const cli *a, hexi_catalog **cat)
{
	hexi_rc rc = a->catalog ? hexi_catalog_load(a->catalog, cat)
				: hexi_catalog_builtin(cat);

	if (rc == HEXI_OK && a->profiles)
		rc = hexi_catalog_apply_profiles(*cat, a->profiles);
	return rc;
}

static hexi_rc load_inputs(const cli *a, hexi_cluster **c, hexi_model *m,
			   hexi_train *t)
{
	hexi_catalog *cat = NULL;
	hexi_rc rc;

	if (!a->model)
		return hexi_error(HEXI_ERR_USAGE, "%s: --model is required",
				  a->cmd);
	rc = load_catalog(a, &cat);
	if (rc == HEXI_OK)
		rc = hexi_cluster_load(a->input, cat, c);
	if (rc == HEXI_OK && a->profiles)
		rc = hexi_cluster_apply_profiles(*c, a->profiles);
	if (rc == HEXI_OK)
		rc = hexi_model_load(a->model, m);
	hexi_catalog_destroy(cat);
	if (rc != HEXI_OK)
		return rc;
	if (a->seq > 0)
		m->seq_len = (int)a->seq;
	hexi_train_defaults(t);
	if (a->global_batch > 0)
		t->global_batch = (int)a->global_batch;
	if (a->micro_batch > 0 && a->mb_exact)
		t->micro_batch = (int)a->micro_batch;
	if (a->recompute >= 0)
		t->recompute = (int)a->recompute;
	rc = hexi_model_validate(m);
	if (rc == HEXI_OK)
		rc = hexi_train_validate(t);
	if (rc == HEXI_OK && t->global_batch % t->micro_batch)
		rc = hexi_error(HEXI_ERR_INVAL,
				"--global-batch: %d is not divisible by "
				"--micro-batch-exact %d",
				t->global_batch, t->micro_batch);
	return rc;
}

static hexi_rc load_plan(const cli *a, hexi_plan **p)
{
	hexi_catalog *cat = NULL;
	hexi_rc rc = load_catalog(a, &cat);

	if (rc == HEXI_OK)
		rc = hexi_plan_load(a->input, cat, p);
	hexi_catalog_destroy(cat);
	return rc;
}

/* ---- output ----------------------------------------------------------------
 */

/* j is consumed.  NULL j (json_pack refused a NaN, an infinity or a
 * string that is not UTF-8) or a failed dump is an error, not silence. */
static hexi_rc print_json(json_t *j)
{
	char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS |
					JSON_REAL_PRECISION(10))
		    : NULL;

	json_decref(j);
	if (s == NULL)
		return hexi_error(HEXI_ERR_RANGE,
				  "--json: the output cannot be written (a "
				  "number that is not finite, or a string "
				  "that is not UTF-8)");
	printf("%s\n", s);
	free(s);
	return HEXI_OK;
}

static json_t *pred_json(const hexi_plan *p)
{
	return json_pack("{s:s, s:s, s:i, s:i, s:f, s:f, s:f, s:f}", "strategy",
			 p->strategy, "cost_model", p->cost_model, "world_size",
			 p->world_size, "pipelines", p->npipelines,
			 "iteration_s", p->pred.iter_s, "dp_sync_s",
			 p->pred.dp_sync_s, "tokens_per_s",
			 p->pred.tokens_per_s, "mfu", p->pred.mfu);
}

static const char *gpu_name(const hexi_plan *p, const hexi_stage *s)
{
	return p->cluster->nodes[s->devices[0].node].gpu_type;
}

/* " rtx4090 x1024, rtx3090 x1024": idle GPUs per type, in first-seen
 * order. */
static void print_idle_types(const hexi_plan *p)
{
	char buf[1024];

	printf("%s (hexiplan show --json lists them)\n",
	       hexi_plan_idle_types(p, buf, sizeof(buf)));
}

/* "idle: 3 GPUs: n2 (rtx3090) 0,1; n3 (rtx3090) 0" when the plan leaves
 * any out; nothing otherwise. */
static void print_idle(const hexi_plan *p)
{
	int prev = -1, nodes = 0;

	if (p->nidle == 0)
		return;
	for (int i = 0; i < p->nidle; i++)
		nodes += i == 0 || p->idle[i].node != p->idle[i - 1].node;
	printf("  idle: %d GPU%s on %d node%s (ranks %d-%d, train nothing):",
	       p->nidle, p->nidle == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s",
	       p->world_size, p->world_size + p->nidle - 1);
	if (nodes > 8) { /* GPUs per type, not every node */
		print_idle_types(p);
		return;
	}
	for (int i = 0; i < p->nidle; i++) {
		const hexi_node *n = &p->cluster->nodes[p->idle[i].node];
		if (p->idle[i].node != prev)
			printf("%s %s (%s) %d", i ? ";" : "", n->name,
			       n->gpu_type, p->idle[i].gpu);
		else
			printf(",%d", p->idle[i].gpu);
		prev = p->idle[i].node;
	}
	printf("\n");
}

/* The search's work, and a warning when the time budget cut it short
 * (then the plan depends on the machine's load). */
static void print_search(const hexi_plan *p)
{
	const hexi_search *s = &p->search;

	if (s->evaluations == 0)
		return;
	printf("search: %ld candidates evaluated (bound %ld)%s\n",
	       s->evaluations, s->max_evals,
	       s->stop == HEXI_SEARCH_WORK ? ", stopped by the bound" : "");
	if (s->stop == HEXI_SEARCH_TIME)
		fprintf(stderr,
			PROG
			": warning: the search stopped at its time budget "
			"(%g s) after %ld candidates, so this plan may differ "
			"on a machine with another load; raise --time-budget "
			"or lower --max-evals for a reproducible plan\n",
			s->time_budget_s, s->evaluations);
}

static void print_summary(const hexi_plan *p)
{
	printf("plan: %d pipeline(s) on %d GPUs, strategy %s, cost model %s\n",
	       p->npipelines, p->world_size, p->strategy, p->cost_model);
	for (int q = 0; q < p->npipelines; q++) {
		const hexi_pipeline *pl = &p->pipelines[q];
		printf("  pipeline %d: batch %d in %d micro-batches, %.4f s:",
		       q, pl->batch, pl->micro_batches, pl->time_s);
		for (int s = 0; s < pl->nstages; s++)
			printf(" [%s %s x%d L%d-%d]",
			       p->cluster->nodes[pl->stages[s].devices[0].node]
				   .name,
			       gpu_name(p, &pl->stages[s]), pl->stages[s].tp,
			       pl->stages[s].layer_begin,
			       pl->stages[s].layer_end - 1);
		printf("\n");
	}
	print_idle(p);
	printf("iteration %.4f s, DP sync %.4f s, %.1f tokens/s, MFU %.2f%%\n",
	       p->pred.iter_s, p->pred.dp_sync_s, p->pred.tokens_per_s,
	       100.0 * p->pred.mfu);
	print_search(p);
}

/* ---- commands --------------------------------------------------------------
 */

/* Standard error if it can be written, else /dev/null (with 2>&- the
 * runtime leaves a read-only descriptor there: the report that would go
 * there is dropped); -1 if neither. */
static int report_fd(void)
{
	int fl = fcntl(STDERR_FILENO, F_GETFL);

	if (fl >= 0 && (fl & O_ACCMODE) != O_RDONLY)
		return STDERR_FILENO;
	return open("/dev/null", O_WRONLY | O_CLOEXEC);
}

static int cmd_plan(cli *a)
{
	hexi_cluster *c = NULL;
	hexi_plan *p = NULL;
	hexi_model m;
	hexi_train t;
	char *js = NULL;
	hexi_rc rc = load_inputs(a, &c, &m, &t);
	double t0 = hexi_now_s();

	if (rc == HEXI_OK)
		rc = hexi_plan_create(c, &m, &t, &a->o, &p);
	if (rc == HEXI_OK && a->out) {
		rc = hexi_plan_to_json(p, &js);
		if (rc == HEXI_OK)
			rc = hexi_write_file_atomic(a->out, js, strlen(js),
						    0644);
	}
	if (rc == HEXI_OK && a->svg) /* as show --svg draws it */
		rc = hexi_plan_render_svg(p, a->svg);
	if (rc != HEXI_OK)
		goto out;
	/* -o - (or /dev/stdout): the plan owns standard output, so that it
	 * is one JSON document a pipe or a file can take; the summary, or
	 * --json's report, goes to standard error (as hexiprof's does) */
	if (a->out && hexi_path_fd(a->out) == STDOUT_FILENO &&
	    (fflush(stdout) != 0 || dup2(report_fd(), STDOUT_FILENO) < 0)) {
		rc = hexi_error(HEXI_ERR_IO, "standard output: %s",
				strerror(errno));
		goto out;
	}
	if (a->json) {
		json_t *j = pred_json(p);
		json_object_set_new(j, "planning_s",
				    json_real(hexi_now_s() - t0));
		json_object_set_new(j, "hash", json_string(p->hash));
		json_object_set_new(j, "evaluations",
				    json_integer(p->search.evaluations));
		json_object_set_new(
		    j, "stopped_by",
		    json_string(p->search.stop == HEXI_SEARCH_TIME   ? "time"
				: p->search.stop == HEXI_SEARCH_WORK ? "work"
								     : "done"));
		if (a->out && json_object_set_new(j, "output",
						  json_string(a->out)) != 0) {
			json_decref(j); /* a path not UTF-8: print_json says */
			j = NULL;
		}
		rc = print_json(j);
	} else {
		print_summary(p);
		printf("planned in %.3f s%s%s\n", hexi_now_s() - t0,
		       a->out ? ", written to " : "", a->out ? a->out : "");
	}
out:
	free(js);
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
	return rc == HEXI_OK ? 0 : fail(rc);
}

static json_t *stage_json(const hexi_plan *p, int q, int s,
			  const hexi_stage_report *r)
{
	const hexi_stage *st = &p->pipelines[q].stages[s];

	return json_pack("{s:i, s:i, s:s, s:s, s:i, s:i, s:i, s:f, s:f, s:f, "
			 "s:f, s:f, s:f, s:f}",
			 "pipeline", q, "stage", s, "node",
			 p->cluster->nodes[st->devices[0].node].name, "gpu",
			 gpu_name(p, st), "tp", st->tp, "layer_begin",
			 st->layer_begin, "layer_end", st->layer_end,
			 "time_per_microbatch_s", st->time_s, "compute_s",
			 r->compute_s, "tp_comm_s", r->tp_comm_s, "pp_comm_s",
			 r->pp_comm_s, "bubble_s", r->bubble_s, "mem_gib",
			 r->mem_gib, "mem_cap_gib", r->mem_cap_gib);
}

static void print_sim_text(const hexi_plan *p, const hexi_stage_report *r)
{
	int k = 0;

	printf("%-3s %-3s %-10s %-12s %3s %-9s %9s %9s %9s %9s %15s\n", "P",
	       "S", "node", "gpu", "tp", "layers", "compute_s", "tp_s", "pp_s",
	       "bubble_s", "mem/cap GiB");
	for (int q = 0; q < p->npipelines; q++) {
		const hexi_pipeline *pl = &p->pipelines[q];
		for (int s = 0; s < pl->nstages; s++, k++) {
			const hexi_stage *st = &pl->stages[s];
			char lay[32];
			snprintf(lay, sizeof(lay), "%d-%d", st->layer_begin,
				 st->layer_end - 1);
			printf("%-3d %-3d %-10s %-12s %3d %-9s %9.4f %9.4f "
			       "%9.4f %9.4f %6.1f/%-6.1f%s\n",
			       q, s,
			       p->cluster->nodes[st->devices[0].node].name,
			       gpu_name(p, st), st->tp, lay, r[k].compute_s,
			       r[k].tp_comm_s, r[k].pp_comm_s, r[k].bubble_s,
			       r[k].mem_gib, r[k].mem_cap_gib,
			       r[k].mem_gib > r[k].mem_cap_gib ? " OVER" : "");
		}
		printf("pipeline %d: %.4f s (batch %d, %d micro-batches)\n", q,
		       pl->time_s, pl->batch, pl->micro_batches);
	}
	printf("DP sync %.4f s, iteration %.4f s, %.1f tokens/s, MFU %.2f%% "
	       "(cost model %s)\n",
	       p->pred.dp_sync_s, p->pred.iter_s, p->pred.tokens_per_s,
	       100.0 * p->pred.mfu, p->cost_model);
}

static int cmd_simulate(cli *a)
{
	hexi_plan *p = NULL;
	hexi_stage_report *r = NULL;
	int ns = 0, over = 0;
	hexi_rc rc = load_plan(a, &p);

	if (rc != HEXI_OK)
		return fail(rc);
	if (!a->have_cost)
		sched_cost_parse(p->cost_model, &a->o.cost_model);
	for (int q = 0; q < p->npipelines; q++)
		ns += p->pipelines[q].nstages;
	r = calloc((size_t)ns + 1, sizeof(*r));
	rc = r ? sched_simulate_ex(p, a->o.cost_model, !a->no_overlap, a->attn,
				   r)
	       : hexi_error(HEXI_ERR_NOMEM, "simulate: report");
	if (rc != HEXI_OK)
		goto out;
	for (int k = 0; k < ns; k++)
		over += r[k].mem_gib > r[k].mem_cap_gib;
	if (a->json) {
		json_t *j = pred_json(p), *st = json_array();
		for (int q = 0, k = 0; q < p->npipelines; q++)
			for (int s = 0; s < p->pipelines[q].nstages; s++, k++)
				json_array_append_new(
				    st, stage_json(p, q, s, &r[k]));
		json_t *pl = json_array();
		for (int q = 0; q < p->npipelines; q++)
			json_array_append_new(
			    pl, json_pack(
				    "{s:i, s:f, s:i, s:i, s:i}", "pipeline", q,
				    "time_s", p->pipelines[q].time_s, "batch",
				    p->pipelines[q].batch, "micro_batches",
				    p->pipelines[q].micro_batches, "stages",
				    p->pipelines[q].nstages));
		json_object_set_new(j, "pipeline_times", pl);
		json_object_set_new(j, "stages", st);
		json_object_set_new(j, "stages_over_memory",
				    json_integer(over));
		rc = print_json(j);
	} else {
		print_sim_text(p, r);
	}
	if (over)
		rc = hexi_error(HEXI_ERR_NOFIT,
				"%s: %d stage(s) need more memory than their "
				"GPUs have",
				a->input, over);
out:
	free(r);
	hexi_plan_destroy(p);
	return rc == HEXI_OK ? 0 : fail(rc);
}

static int cmd_show(cli *a)
{
	hexi_plan *p = NULL;
	hexi_rc rc = load_plan(a, &p);

	if (rc == HEXI_OK && a->json) {
		char *js = NULL;
		rc = hexi_plan_to_json(p, &js);
		if (rc == HEXI_OK)
			printf("%s\n", js);
		free(js);
	} else if (rc == HEXI_OK) {
		rc = hexi_plan_render_text(p, stdout);
		print_idle(p);
	}
	if (rc == HEXI_OK && a->svg)
		rc = hexi_plan_render_svg(p, a->svg);
	hexi_plan_destroy(p);
	return rc == HEXI_OK ? 0 : fail(rc);
}

static int cmd_validate(cli *a)
{
	hexi_plan *p = NULL;
	hexi_rc rc = load_plan(a, &p);

	if (a->json) {
		json_t *j =
		    json_pack("{s:s, s:b, s:s, s:s}", "file", a->input, "valid",
			      rc == HEXI_OK, "error", hexi_errname(rc),
			      "message", rc == HEXI_OK ? "" : hexi_errmsg(rc));
		if (rc == HEXI_OK)
			json_object_set_new(j, "hash", json_string(p->hash));
		if (print_json(j) != HEXI_OK) {
			hexi_plan_destroy(p);
			return fail(HEXI_ERR_RANGE);
		}
	} else if (rc == HEXI_OK) {
		printf("%s: valid plan, %d pipeline(s), %d GPUs, hash %s\n",
		       a->input, p->npipelines, p->world_size, p->hash);
	}
	hexi_plan_destroy(p);
	if (rc != HEXI_OK && !a->json)
		return fail(rc);
	return (int)rc;
}

/* ---- compare ---------------------------------------------------------------
 */

typedef struct cmp_row {
	const char *name;
	hexi_strategy s;
	int no_asym, uniform;
	hexi_rc rc;
	double iter_s, mfu, tokens, plan_s;
	int np;
	char msg[320]; /* the error, when rc is not HEXI_OK */
} cmp_row;

/* Plan one row of the comparison; on a terminal a progress line on
 * stderr while it runs. */
static void cmp_plan(const cli *a, const hexi_cluster *c, const hexi_model *m,
		     const hexi_train *t, cmp_row *r, int i, int n)
{
	hexi_plan_opts o = a->o;
	hexi_plan *p = NULL;
	double t0 = hexi_now_s();
	int tty = isatty(STDERR_FILENO);

	if (tty) {
		fprintf(stderr, "\r[%d/%d] planning %s ...", i + 1, n, r->name);
		fflush(stderr);
	}
	o.strategy = r->s;
	o.no_asymmetric_tp = r->no_asym;
	o.uniform_batch = r->uniform;
	r->rc = hexi_plan_create(c, m, t, &o, &p);
	r->plan_s = hexi_now_s() - t0;
	if (r->rc == HEXI_OK) {
		r->iter_s = p->pred.iter_s;
		r->mfu = p->pred.mfu;
		r->tokens = p->pred.tokens_per_s;
		r->np = p->npipelines;
	} else {
		snprintf(r->msg, sizeof(r->msg), "%s", hexi_errmsg(r->rc));
	}
	if (tty)
		fprintf(stderr, "\r%*s\r", 60, "");
	hexi_plan_destroy(p);
}

/* Row i as soon as it is planned (row 0, megatron, is the baseline). */
static void cmp_print(const cli *a, const cmp_row *rows, int i, json_t *arr)
{
	double sp = rows[0].rc == HEXI_OK && rows[i].rc == HEXI_OK
			? rows[0].iter_s / rows[i].iter_s
			: 0;

	if (a->json) {
		json_array_append_new(
		    arr, json_pack("{s:s, s:s, s:f, s:f, s:f, s:i, s:o, s:f, "
				   "s:s}",
				   "strategy", rows[i].name, "status",
				   hexi_errname(rows[i].rc), "iteration_s",
				   rows[i].iter_s, "mfu", rows[i].mfu,
				   "tokens_per_s", rows[i].tokens, "pipelines",
				   rows[i].np, "speedup_over_megatron",
				   sp > 0 ? json_real(sp) : json_null(),
				   "planning_s", rows[i].plan_s, "message",
				   rows[i].msg));
		return;
	}
	if (rows[i].rc != HEXI_OK)
		printf("%-17s %s (%s): %s\n", rows[i].name,
		       hexi_strerror(rows[i].rc), hexi_errname(rows[i].rc),
		       rows[i].msg);
	else if (sp > 0)
		printf("%-17s %9.4f %7.2f %6d %12.1f %8.2fx %10.3f\n",
		       rows[i].name, rows[i].iter_s, 100 * rows[i].mfu,
		       rows[i].np, rows[i].tokens, sp, rows[i].plan_s);
	else /* megatron does not fit: no speed-up to print */
		printf("%-17s %9.4f %7.2f %6d %12.1f %9s %10.3f\n",
		       rows[i].name, rows[i].iter_s, 100 * rows[i].mfu,
		       rows[i].np, rows[i].tokens, "n/a", rows[i].plan_s);
	fflush(stdout);
}

static int cmd_compare(cli *a)
{
	cmp_row rows[] = {
	    {.name = "megatron", .s = HEXI_STRATEGY_MEGATRON},
	    {.name = "hexiscale", .s = HEXI_STRATEGY_HEXISCALE},
	    {.name = "no-asymmetric-tp",
	     .s = HEXI_STRATEGY_HEXISCALE,
	     .no_asym = 1},
	    {.name = "uniform-batch",
	     .s = HEXI_STRATEGY_HEXISCALE,
	     .uniform = 1},
	    {.name = "random", .s = HEXI_STRATEGY_RANDOM},
	    {.name = "exhaustive", .s = HEXI_STRATEGY_EXHAUSTIVE},
	};
	int nrows = (int)(sizeof(rows) / sizeof(rows[0]));
	hexi_cluster *c = NULL;
	hexi_model m;
	hexi_train t;
	hexi_rc rc = load_inputs(a, &c, &m, &t);
	json_t *arr = NULL;

	if (rc != HEXI_OK)
		return fail(rc);
	if (hexi_cluster_total_gpus(c) > 8)
		nrows--; /* exhaustive only for <= 8 GPUs */
	arr = json_array();
	if (!a->json) {
		printf("%-17s %9s %7s %6s %12s %9s %10s\n", "strategy",
		       "iter_s", "MFU%", "pipes", "tokens/s", "speedup",
		       "planning_s");
		fflush(stdout);
	}
	for (int i = 0; i < nrows; i++) {
		cmp_plan(a, c, &m, &t, &rows[i], i, nrows);
		cmp_print(a, rows, i, arr);
	}
	if (a->json) {
		hexi_rc prc = print_json(json_pack("{s:o}", "strategies", arr));
		if (prc != HEXI_OK) {
			hexi_cluster_destroy(c);
			return fail(prc);
		}
	} else {
		json_decref(arr);
	}
	hexi_cluster_destroy(c);
	return rows[1].rc == HEXI_OK ? 0 : fail(rows[1].rc);
}

static int run(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(cli *);
	} cmds[] = {{"plan", cmd_plan},
		    {"simulate", cmd_simulate},
		    {"show", cmd_show},
		    {"validate", cmd_validate},
		    {"compare", cmd_compare}};
	cli a;
	int rc;

	memset(&a, 0, sizeof(a));
	a.recompute = -1;
	hexi_plan_opts_defaults(&a.o);
	if (argc < 2)
		return usage_error("%s", "missing COMMAND");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf(PROG " (" PACKAGE_NAME ") " PACKAGE_VERSION "\n");
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name))
			continue;
		a.cmd = cmds[i].name;
		rc = parse_opts(&a, argc - 1, argv + 1);
		if (rc)
			return rc < 0 ? 0 : rc;
		if (a.verbose)
			hexi_log_set_level(HEXI_LOG_INFO);
		return cmds[i].fn(&a);
	}
	return usage_error("unknown command '%s'", argv[1]);
}

int main(int argc, char **argv)
{
	return hexi_cli_close_stdout("hexiplan", run(argc, argv));
}
