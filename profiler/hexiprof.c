/*
 * hexiprof.c - measure a machine (GPU or CPU mode) and write a
 * hexiscale-profile file for the planner; see hexiprof(1).
 */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hexi_prof.h"

typedef struct cli {
	hexi_prof_opts o;
	const char *mode;   /* "auto", "cpu", "gpu" */
	const char *output; /* -o FILE or NULL */
	const char *host;   /* --host or NULL */
	int json, no_mpi, verbose, concurrent;
} cli;

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: hexiprof [OPTIONS]\n"
		"Measure this machine and write a HexiScale profile.\n\n"
		"  -m, --mode=MODE      auto (default), cpu or gpu\n"
		"      --cpu, --gpu     --mode=cpu, --mode=gpu\n"
		"  -o, --output=FILE    write the profile JSON (%%h: host; -: "
		"standard\n"
		"                       output, the report then goes to "
		"standard error)\n"
		"      --json           print the full report as JSON\n"
		"      --host=NAME      host name in the profile\n"
		"      --gpu-type=NAME  catalog type of the GPUs\n"
		"  -g, --gemm=MxNxK     add a GEMM shape (up to %d)\n"
		"      --only-gemm      time only the --gemm shapes\n"
		"      --rate=best|mean GEMM rate in the profile: best shape "
		"(default)\n"
		"                       or all FLOPs over all time\n"
		"  -s, --max-msg=SIZE   largest message (default 64M)\n"
		"      --membw-size=SIZE  CPU memory-bandwidth working set "
		"(default 64M)\n"
		"      --concurrent     CPU: every rank of a node measures at "
		"once\n"
		"  -r, --repeats=N      timed runs (default 10)\n"
		"  -w, --warmup=N       untimed runs first (default 2)\n"
		"  -q, --quick          small sizes, for tests\n"
		"      --no-mpi         do not initialise MPI\n"
		"  -v, --verbose        more messages\n"
		"  -h, --help           this help\n"
		"  -V, --version        print the version\n",
		HEXI_PROF_MAX_SHAPES);
}

#define usage_error(...) hexi_cli_usage_error("hexiprof", __VA_ARGS__)

/* 0: go on; -1: exit 0 (help/version); >0: exit with that status. */
static int parse_args(int argc, char **argv, cli *c)
{
	enum {
		OPT_JSON = 256,
		OPT_HOST,
		OPT_GPU_TYPE,
		OPT_NO_MPI,
		OPT_CPU,
		OPT_GPU,
		OPT_ONLY_GEMM,
		OPT_RATE,
		OPT_MEMBW_SIZE,
		OPT_CONCURRENT
	};
	static const struct option lo[] = {
	    {"mode", required_argument, NULL, 'm'},
	    {"output", required_argument, NULL, 'o'},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"host", required_argument, NULL, OPT_HOST},
	    {"gpu-type", required_argument, NULL, OPT_GPU_TYPE},
	    {"gemm", required_argument, NULL, 'g'},
	    {"max-msg", required_argument, NULL, 's'},
	    {"repeats", required_argument, NULL, 'r'},
	    {"warmup", required_argument, NULL, 'w'},
	    {"quick", no_argument, NULL, 'q'},
	    {"no-mpi", no_argument, NULL, OPT_NO_MPI},
	    {"cpu", no_argument, NULL, OPT_CPU},
	    {"gpu", no_argument, NULL, OPT_GPU},
	    {"only-gemm", no_argument, NULL, OPT_ONLY_GEMM},
	    {"rate", required_argument, NULL, OPT_RATE},
	    {"membw-size", required_argument, NULL, OPT_MEMBW_SIZE},
	    {"concurrent", no_argument, NULL, OPT_CONCURRENT},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0}};
	int ch, max_msg_set = 0, membw_set = 0;
	long v;

	hexi_prof_opts_defaults(&c->o);
	c->mode = "auto";
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":m:o:g:s:r:w:qvhV", lo, NULL)) !=
	       -1) {
		switch (ch) {
		case 'm':
			if (strcmp(optarg, "auto") && strcmp(optarg, "cpu") &&
			    strcmp(optarg, "gpu"))
				return usage_error("--mode '%s': want auto, "
						   "cpu or gpu",
						   optarg);
			c->mode = optarg;
			break;
		case 'o':
			if (optarg[0] == '\0')
				return usage_error("--output: empty");
			/* "-": standard output, as the writer writes there */
			c->output =
			    strcmp(optarg, "-") ? optarg : "/dev/stdout";
			break;
		case OPT_JSON:
			c->json = 1;
			break;
		case OPT_HOST:
			if (strlen(optarg) >= 64 || !hexi_is_host_name(optarg))
				return usage_error("--host '%s': want a host "
						   "name of 1..63 characters "
						   "[A-Za-z0-9._-], as in a "
						   "cluster description",
						   optarg);
			c->host = optarg;
			break;
		case OPT_GPU_TYPE:
			if (optarg[0] == '\0' ||
			    hexi_strlcpy(c->o.gpu_type, optarg,
					 sizeof(c->o.gpu_type)) != HEXI_OK ||
			    !hexi_is_printable(optarg))
				return usage_error("--gpu-type '%s': want "
						   "1..63 printable characters",
						   optarg);
			break;
		case 'g':
			if (c->o.nshapes >= HEXI_PROF_MAX_SHAPES)
				return usage_error("--gemm '%s': too many "
						   "shapes",
						   optarg);
			if (hexi_prof_parse_shape(
				optarg, &c->o.shapes[c->o.nshapes]) != HEXI_OK)
				return usage_error(
				    "--gemm '%s': want "
				    "MxNxK[:XY[a]] (XY: n or t), "
				    "each 1..65536",
				    optarg);
			c->o.nshapes++;
			break;
		case 's':
			if (hexi_prof_parse_bytes(
				optarg, &c->o.max_msg_bytes) != HEXI_OK ||
			    c->o.max_msg_bytes < 64 ||
			    c->o.max_msg_bytes > (size_t)1 << 30)
				return usage_error("--max-msg '%s': want 64 .. "
						   "1G (suffix K, M or G)",
						   optarg);
			max_msg_set = 1;
			break;
		case 'r':
			if (hexi_parse_long(optarg, 1, 1000, &v) != HEXI_OK)
				return usage_error("--repeats '%s': want "
						   "1..1000",
						   optarg);
			c->o.repeats = (int)v;
			break;
		case 'w':
			if (hexi_parse_long(optarg, 0, 100, &v) != HEXI_OK)
				return usage_error("--warmup '%s': want 0..100",
						   optarg);
			c->o.warmup = (int)v;
			break;
		case 'q':
			c->o.quick = 1;
			break;
		case OPT_NO_MPI:
			c->no_mpi = 1;
			break;
		case OPT_CPU:
			c->mode = "cpu";
			break;
		case OPT_GPU:
			c->mode = "gpu";
			break;
		case OPT_ONLY_GEMM:
			c->o.only_given = 1;
			break;
		case OPT_RATE:
			if (strcmp(optarg, "best") && strcmp(optarg, "mean"))
				return usage_error("--rate '%s': want best or "
						   "mean",
						   optarg);
			c->o.rate_mean = strcmp(optarg, "mean") == 0;
			break;
		case OPT_CONCURRENT:
			c->concurrent = 1;
			break;
		case OPT_MEMBW_SIZE:
			if (hexi_prof_parse_bytes(optarg, &c->o.membw_bytes) !=
				HEXI_OK ||
			    c->o.membw_bytes < 4096 ||
			    c->o.membw_bytes > (size_t)1 << 32)
				return usage_error("--membw-size '%s': want "
						   "4K .. 4G (suffix K, M or "
						   "G)",
						   optarg);
			membw_set = 1;
			break;
		case 'v':
			c->verbose = 1;
			break;
		case 'h':
			usage(stdout);
			return -1;
		case 'V':
			printf("hexiprof (%s) %s\n", PACKAGE_NAME,
			       PACKAGE_VERSION);
			return -1;
		case ':':
			return usage_error("option '%s' needs a value",
					   argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (c->o.only_given && c->o.nshapes == 0)
		return usage_error("--only-gemm needs at least one --gemm");
	if (c->o.quick)
		c->o.min_sample_s = 0.002;
	if (c->o.quick && !max_msg_set)
		c->o.max_msg_bytes = 1u << 20;
	if (c->o.quick && !membw_set)
		c->o.membw_bytes = (size_t)4 << 20;
	return 0;
}

static hexi_rc host_name(const cli *c, char *buf, size_t cap)
{
	char *dot;

	if (c->host != NULL)
		return hexi_strlcpy(buf, c->host, cap);
	if (gethostname(buf, cap) != 0)
		return hexi_error(HEXI_ERR_IO, "gethostname failed");
	buf[cap - 1] = '\0';
	if ((dot = strchr(buf, '.')) != NULL)
		*dot = '\0';
	if (!hexi_is_host_name(buf))
		return hexi_error(HEXI_ERR_INVAL,
				  "host name '%.64s' has characters outside "
				  "[A-Za-z0-9._-]: give --host",
				  buf);
	return HEXI_OK;
}

static void print_table(FILE *f, const hexi_profile *p,
			const hexi_prof_report *r, const char *mode, int ranks)
{
	fprintf(f, "hexiprof %s: host %s, mode %s, %d rank%s\n",
		PACKAGE_VERSION, p->host, mode, ranks, ranks == 1 ? "" : "s");
	fprintf(f, "%-22s %-20s %12s %-8s %8s %7s %9s\n", "measurement",
		"shape", "median", "unit", "spread", "repeats", "check");
	for (int i = 0; i < r->nmeas; i++) {
		const hexi_prof_meas *m = &r->meas[i];
		char name[HEXI_PROF_NAME_MAX + 8];

		if (m->device >= 0)
			snprintf(name, sizeof(name), "%s[%d]", m->name,
				 m->device);
		else
			snprintf(name, sizeof(name), "%s", m->name);
		fprintf(f, "%-22s %-20s %12.4g %-8s %7.1f%% %7d %9.2g\n", name,
			m->shape, m->value, m->unit, m->stat.spread_pct,
			m->stat.repeats, m->check_err);
	}
}

/* FILE with each "%h" replaced by the host name. */
static hexi_rc output_path(const char *tmpl, const char *host, char *buf,
			   size_t cap)
{
	size_t n = 0;

	for (const char *s = tmpl; *s; s++) {
		const char *add = s;
		size_t len = 1;

		if (s[0] == '%' && s[1] == 'h') {
			add = host;
			len = strlen(host);
			s++;
		}
		if (n + len >= cap)
			return hexi_error(HEXI_ERR_RANGE,
					  "output path '%.80s' too long", tmpl);
		memcpy(buf + n, add, len);
		n += len;
	}
	buf[n] = '\0';
	return HEXI_OK;
}

/* Does this rank write a profile?  Each node's leader writes its host's
 * file when the name has %h; otherwise rank 0 writes the one file. */
static int writes_profile(const cli *c, const hexi_prof_mpi *m)
{
	return c->output != NULL && hexi_prof_mpi_local_rank(m) == 0 &&
	       (hexi_prof_mpi_rank(m) == 0 || strstr(c->output, "%h"));
}

/*
 * Fail before the measurements (minutes) where the profile could not be
 * written after them: a temporary file is made beside path, as the atomic
 * writer will make one, and removed again; the target itself is not
 * touched, so a run that fails later leaves nothing behind.  A name of a
 * descriptor, a character device or a FIFO is written in place, with no
 * new directory entry: nothing to check here.
 */
static hexi_rc output_check(const char *path)
{
	hexi_rc rv = hexi_check_writable(path);

	if (rv != HEXI_OK && rv != HEXI_ERR_RANGE && errno != 0 &&
	    errno != EEXIST) /* a create that failed: say why, once */
		return hexi_error(rv,
				  "%s: the profile cannot be written there "
				  "(checked before measuring): %s",
				  path, strerror(errno));
	return rv;
}

static hexi_rc write_profile(const cli *c, const hexi_profile *p)
{
	char path[4096], *json = NULL;
	hexi_rc rv;
	size_t len;

	if ((rv = output_path(c->output, p->host, path, sizeof(path))) !=
	    HEXI_OK)
		return rv;
	if ((rv = hexi_profile_to_json(p, &json)) != HEXI_OK)
		return rv;
	len = strlen(json);
	json[len] = '\n'; /* replaces the NUL: write len + 1 bytes */
	rv = hexi_write_file_atomic(path, json, len + 1, 0644);
	free(json);
	if (rv == HEXI_OK && c->verbose)
		hexi_log(HEXI_LOG_INFO, "wrote %s", path);
	return rv;
}

/* Which mode "auto" means here. */
static const char *pick_mode(const char *mode)
{
	int n = 0;

	if (strcmp(mode, "auto") != 0)
		return mode;
	if (hexi_prof_gpu_count(&n) == HEXI_OK && n > 0)
		return "gpu";
	hexi_error_clear();
	return "cpu";
}

static hexi_rc run_gpu(const cli *c, hexi_prof_mpi *m, hexi_profile *p,
		       hexi_prof_report *r)
{
	int n = 0, dev[HEXI_PROF_MAX_GPUS], ndev = 0;
	hexi_prof_gpu mine[8];
	int nmine;
	hexi_rc rv;

	if ((rv = hexi_prof_gpu_count(&n)) != HEXI_OK)
		return rv;
	if (n < 1)
		return hexi_error(HEXI_ERR_NODEV, "GPU mode: no CUDA device");
	if (m != NULL && hexi_prof_mpi_size(m) > 1) {
		/* one GPU per rank: the local rank's */
		dev[ndev++] = hexi_prof_mpi_local_rank(m) % n;
	} else {
		for (int i = 0; i < n && i < HEXI_PROF_MAX_GPUS; i++)
			dev[ndev++] = i;
	}
	if ((rv = hexi_prof_gpu_run(&c->o, dev, ndev, p, r)) != HEXI_OK)
		return rv;
	if (m == NULL || hexi_prof_mpi_size(m) < 2)
		return HEXI_OK;
	nmine = p->ngpus < 8 ? p->ngpus : 8;
	memcpy(mine, p->gpus, (size_t)nmine * sizeof(mine[0]));
	if ((rv = hexi_prof_mpi_gather_gpus(m, mine, nmine, p)) != HEXI_OK)
		return rv;
	return hexi_prof_nccl(m, &c->o, dev[0], p, r);
}

static hexi_rc run_cpu(const cli *c, hexi_prof_mpi *m, hexi_profile *p,
		       hexi_prof_report *r)
{
	hexi_rc rv = HEXI_OK;

	/* One GEMM run per node at a time: ranks on a node share its cores;
	 * or (--concurrent) every rank at once, as they run when they all
	 * train: then each rank's figures are what one rank sustains while
	 * the others load the node. */
	if (c->concurrent && (rv = hexi_prof_mpi_barrier(m)) != HEXI_OK)
		return rv;
	if (c->concurrent || hexi_prof_mpi_local_rank(m) == 0)
		rv = hexi_prof_cpu(&c->o, p, r);
	if (rv != HEXI_OK)
		return rv;
	if ((rv = hexi_prof_mpi_barrier(m)) != HEXI_OK)
		return rv;
	return hexi_prof_mpi_links(m, &c->o, p, r);
}

/* The report goes to standard output, or to standard error where the
 * profile does (-o -): standard output is then one JSON document, the
 * profile, whatever --json says. */
static FILE *report_stream(const cli *c, const hexi_profile *p)
{
	char path[4096];

	if (c->output == NULL ||
	    output_path(c->output, p->host, path, sizeof(path)) != HEXI_OK)
		return stdout;
	return hexi_path_fd(path) == 1 ? stderr : stdout;
}

static int finish(const cli *c, hexi_prof_mpi *m, const char *mode,
		  hexi_profile *p, hexi_prof_report *r)
{
	int rank = hexi_prof_mpi_rank(m);
	char *json = NULL;
	hexi_rc rv = HEXI_OK;

	/* Links were measured from rank 0: other leaders leave them out. */
	if (rank != 0)
		p->intra_bw_gbps = p->intra_lat_s = p->inter_bw_gbps =
		    p->inter_lat_s = NAN;
	if (writes_profile(c, m))
		rv = write_profile(c, p);
	if (rv == HEXI_OK && rank == 0) {
		FILE *f = report_stream(c, p);
		if (c->json) {
			rv = hexi_prof_report_to_json(p, r, mode, &json);
			if (rv == HEXI_OK)
				fprintf(f, "%s\n", json);
			free(json);
		} else {
			print_table(f, p, r, mode, hexi_prof_mpi_size(m));
		}
	}
	return rv;
}

static int run(int argc, char **argv)
{
	static cli c;
	static hexi_profile p;
	static hexi_prof_report r;
	hexi_prof_mpi *m = NULL;
	const char *mode;
	char host[HEXI_PROF_NAME_MAX];
	hexi_rc rv;
	int st = parse_args(argc, argv, &c);

	if (st != 0)
		return st < 0 ? 0 : st;
	if (c.verbose)
		hexi_log_set_level(HEXI_LOG_VERBOSE);
	if (!c.no_mpi && hexi_prof_mpi_launched() &&
	    (rv = hexi_prof_mpi_init(&argc, &argv, &m)) != HEXI_OK)
		goto out;
	if ((rv = host_name(&c, host, sizeof(host))) != HEXI_OK ||
	    (rv = hexi_profile_init(&p, host)) != HEXI_OK)
		goto out;
	if (writes_profile(&c, m)) {
		char path[4096];
		if ((rv = output_path(c.output, p.host, path, sizeof(path))) !=
			HEXI_OK ||
		    (rv = output_check(path)) != HEXI_OK)
			goto out;
	}
	mode = pick_mode(c.mode);
	if (strcmp(mode, "gpu") == 0)
		rv = run_gpu(&c, m, &p, &r);
	else
		rv = run_cpu(&c, m, &p, &r);
	if (rv == HEXI_OK)
		rv = finish(&c, m, mode, &p, &r);
out:
	if (rv != HEXI_OK) {
		fprintf(stderr, "hexiprof: rank %d: %s\n",
			hexi_prof_mpi_rank(m), hexi_errmsg(rv));
		fflush(stderr);
		hexi_prof_mpi_abort(m, (int)rv);
	}
	hexi_prof_mpi_fini(m);
	return (int)rv;
}

int main(int argc, char **argv)
{
	return hexi_cli_close_stdout("hexiprof", run(argc, argv));
}
