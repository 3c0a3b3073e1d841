/* test_parse.c - plugstack keys, option values, GRES strings, the
 * hand-off codec and the task ranks of hexiscale.so, each with a table of
 * bad inputs. */
#include "config.h"

#include "hexiscale_int.h"
#include "tap.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_conf(void)
{
	hx_conf c;
	char *good[] = {"catalog=/etc/hexi/cat.json",
			"model=llama2-13b",
			"inter_bw_gbps=0.7",
			"inter_lat_s=0.0001",
			"plan_dir=/scratch/plans",
			"default_mode=on",
			"time_budget_s=5",
			"global_batch=128",
			"libsched=/opt/lib/libhexisched.so.0",
			"use_all_gpus=yes"};
	static const char *bad[][2] = {
	    {"bogus=1", "'bogus' is unknown"},
	    {"catalog", "not key=value"},
	    {"=x", "not key=value"},
	    {"catalog=relative/cat.json", "'catalog'"},
	    {"inter_bw_gbps=fast", "'inter_bw_gbps'"},
	    {"inter_bw_gbps=-1", "'inter_bw_gbps'"},
	    {"inter_bw_gbps=nan", "'inter_bw_gbps'"},
	    {"global_batch=0", "'global_batch'"},
	    {"global_batch=12x", "'global_batch'"},
	    {"default_mode=maybe", "'default_mode'"},
	    {"time_budget_s=1e9", "'time_budget_s'"},
	    {"model=a;b", "'model'"},
	    {"plan_dir=/tmp/\x01x", "'plan_dir'"},
	    {"plan_dir=/tmp/\xc3", "not UTF-8"},	 /* cut sequence */
	    {"plan_dir=/tmp/\xc2\x85x", "not UTF-8"}, /* C1 NEL */
	    {"plan_dir=/tmp/\xc0\xafx", "not UTF-8"}, /* overlong '/' */
	    {"catalog=/etc/\xc3\xa9/c.json", "'catalog': value"},
	    {"model=ll\xc3\xa9", "not ASCII"},
	    {"port_base=80", "'port_base'"},
	    {"use_all_gpus=1", "'use_all_gpus': '1' is not one of yes, no"},
	    {"use_all_gpus=", "'use_all_gpus'"},
	};

	hx_conf_defaults(&c);
	is_int(c.default_on, 0, "default mode is opt-in");
	is_str(c.model, "llama2-7b", "default model");
	is_int(c.use_all_gpus, 0, "default: the planner may leave GPUs idle");
	is_int(hx_conf_parse(&c, 10, good), HEXI_OK, "good plugstack args");
	is_int(c.use_all_gpus, 1, "use_all_gpus=yes");
	is_near(c.inter_bw_gbps, 0.7, 1e-12, "inter_bw_gbps parsed");
	is_int(c.default_on, 1, "default_mode=on");
	is_int(c.global_batch, 128, "global_batch parsed");
	is_str(c.plan_dir, "/scratch/plans", "plan_dir parsed");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *av[1] = {(char *)bad[i][0]};
		hexi_rc rc = hx_conf_parse(&c, 1, av);

		ok(rc != HEXI_OK && strstr(hexi_errmsg(rc), bad[i][1]) != NULL,
		   "plugstack '%s' refused naming %s", bad[i][0], bad[i][1]);
	}
	{
		/* the plan path travels as UTF-8 (pf=), so plan_dir= takes it */
		char *av[1] = {"plan_dir=/scratch/\xc3\xa9quipe/plans"};

		is_int(hx_conf_parse(&c, 1, av), HEXI_OK,
		       "plan_dir= takes UTF-8 letters");
		is_str(c.plan_dir, "/scratch/\xc3\xa9quipe/plans",
		       "UTF-8 plan_dir kept byte for byte");
	}
	{
		char *dup[] = {"model=llama2-13b", "inter_bw_gbps=1",
			       "model=llama2-7b"};
		hexi_rc rc = hx_conf_parse(&c, 3, dup);

		ok(rc == HEXI_ERR_INVAL &&
		       strstr(hexi_errmsg(rc), "'model' is given twice"),
		   "duplicate plugstack key refused, named");
	}
	{
		char longv[2100] = "catalog=/";
		char *av[1] = {longv};

		memset(longv + 9, 'a', 2000);
		ok(hx_conf_parse(&c, 1, av) == HEXI_ERR_RANGE,
		   "over-long path refused");
	}
}

static void test_options(void)
{
	hx_conf c;
	hx_settings s;
	const char *cmd[HX_OPT_COUNT] = {NULL};
	static const struct {
		hx_opt_id id;
		const char *v;
	} bad[] = {
	    {HX_OPT_MODE, ""},
	    {HX_OPT_MODE, "plan\n.json"},
	    {HX_OPT_MODE, "a\tb"},
	    {HX_OPT_MODE, "x;y"},
	    {HX_OPT_MODEL, "llama|7b"},
	    {HX_OPT_GLOBAL_BATCH, "0"},
	    {HX_OPT_GLOBAL_BATCH, "-5"},
	    {HX_OPT_GLOBAL_BATCH, "16x"},
	    {HX_OPT_GLOBAL_BATCH, "99999999999"},
	    {HX_OPT_MICRO_BATCH, "1.5"},
	    {HX_OPT_SEQ_LEN, "-1"},
	    {HX_OPT_PLAN_DIR, "/tmp/\x1b[31m"},
	    {HX_OPT_USE_ALL_GPUS, ""},
	    {HX_OPT_USE_ALL_GPUS, "maybe"},
	    {HX_OPT_USE_ALL_GPUS, "2"},
	    {HX_OPT_USE_ALL_GPUS, "yes "},
	};
	char *longv = malloc(5000);

	hx_conf_defaults(&c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(hx_opt_check(bad[i].id, bad[i].v, "option --x") != HEXI_OK,
		   "option %s value #%zu refused", hx_opt_table[bad[i].id].name,
		   i);
	memset(longv, 'a', 4999);
	longv[4999] = '\0';
	is_int(hx_opt_check(HX_OPT_MODE, longv, "option --hexiscale"),
	       HEXI_ERR_RANGE, "over-long option refused");
	ok(strstr(hexi_errmsg(HEXI_ERR_RANGE), "--hexiscale") != NULL,
	   "message names the option");
	free(longv);

	unsetenv("HEXISCALE_MODE");
	unsetenv("HEXISCALE_MODEL");
	is_int(hx_settings_resolve(&s, &c, cmd), HEXI_OK, "defaults resolve");
	is_int(s.mode, HX_MODE_OFF, "opt-in: off by default");
	is_int(s.mode_from_default, 1, "mode from the plugstack default");
	setenv("HEXISCALE_MODE", "auto", 1);
	setenv("HEXISCALE_MODEL", "llama2-13b", 1);
	hx_settings_resolve(&s, &c, cmd);
	is_int(s.mode, HX_MODE_AUTO, "env twin turns it on");
	is_int(s.mode_from_default, 0, "mode from the env twin");
	is_str(s.model, "llama2-13b", "env twin sets the model");
	cmd[HX_OPT_MODE] = "/tmp/p.json";
	hx_settings_resolve(&s, &c, cmd);
	is_int(s.mode, HX_MODE_FILE, "command line beats env");
	is_str(s.plan_file, "/tmp/p.json", "plan file kept");
	is_str(s.source[HX_OPT_MODE], "command line", "source recorded");
	setenv("HEXISCALE_GLOBAL_BATCH", "zero", 1);
	ok(hx_settings_resolve(&s, &c, cmd) != HEXI_OK &&
	       strstr(hexi_errmsg(HEXI_ERR_INVAL), "HEXISCALE_GLOBAL_BATCH") !=
		   NULL,
	   "bad env twin refused, named");
	unsetenv("HEXISCALE_GLOBAL_BATCH");
	unsetenv("HEXISCALE_MODE");
	unsetenv("HEXISCALE_MODEL");
}

/* --hexiscale-use-all-gpus is a flag; its twin and the plugstack key set
 * the default it overrides. */
static void test_use_all_gpus(void)
{
	hx_conf c;
	hx_settings s;
	const char *cmd[HX_OPT_COUNT] = {NULL};

	hx_conf_defaults(&c);
	ok(hx_opt_table[HX_OPT_USE_ALL_GPUS].arginfo == NULL,
	   "--%s takes no value", hx_opt_table[HX_OPT_USE_ALL_GPUS].name);
	unsetenv("HEXISCALE_USE_ALL_GPUS");
	hx_settings_resolve(&s, &c, cmd);
	is_int(s.use_all_gpus, 0, "default: GPUs may be left idle");
	cmd[HX_OPT_USE_ALL_GPUS] = HX_FLAG_ON;
	hx_settings_resolve(&s, &c, cmd);
	is_int(s.use_all_gpus, 1, "the flag: every GPU");
	cmd[HX_OPT_USE_ALL_GPUS] = NULL;
	setenv("HEXISCALE_USE_ALL_GPUS", "1", 1);
	hx_settings_resolve(&s, &c, cmd);
	is_int(s.use_all_gpus, 1, "HEXISCALE_USE_ALL_GPUS=1");
	c.use_all_gpus = 1;
	setenv("HEXISCALE_USE_ALL_GPUS", "no", 1);
	hx_settings_resolve(&s, &c, cmd);
	is_int(s.use_all_gpus, 0, "twin 'no' beats plugstack use_all_gpus=yes");
	unsetenv("HEXISCALE_USE_ALL_GPUS");
	hx_settings_resolve(&s, &c, cmd);
	is_int(s.use_all_gpus, 1, "plugstack use_all_gpus=yes is the default");
	setenv("HEXISCALE_USE_ALL_GPUS", "always", 1);
	ok(hx_settings_resolve(&s, &c, cmd) != HEXI_OK &&
	       strstr(hexi_errmsg(HEXI_ERR_INVAL),
		      "HEXISCALE_USE_ALL_GPUS: 'always' is not one of") != NULL,
	   "bad twin value refused, named");
	unsetenv("HEXISCALE_USE_ALL_GPUS");
}

static void test_gres(void)
{
	hx_gres g;
	static const char *bad[] = {
	    "gpu:a800:3(IDX:0-1)",   "gpu:a800:3",
	    "gpu:a800:x(IDX:0-2)",   "gpu:a800:2(IDX:1,0)",
	    "gpu:a800:2(IDX:0,0)",   "gpu:a800:1(IDX:0),gpu:v100:1(IDX:1)",
	    "gpu:a800:2(IDX:0-1",    "gpu:a800:2(IDX:a-b)",
	    "gpu:a800:1(IDX:0)\x01", "gpu:a800:1(IDX:0),",
	    "gpu:a800:2(CNT:2)",
	};

	is_int(hx_gres_parse("gpu:a800:3(IDX:0-2)", &g), HEXI_OK, "typed");
	is_str(g.type, "a800", "type");
	is_int(g.ngpus, 3, "count");
	is_int(g.idx[2], 2, "last index");
	is_int(hx_gres_parse("gpu:rtx4090:3(IDX:0,2-3)", &g), HEXI_OK, "list");
	is_int(g.idx[1], 2, "list index 1");
	is_int(g.idx[2], 3, "list index 2");
	is_int(hx_gres_parse("gpu:2(IDX:0-1)", &g), HEXI_OK, "untyped");
	is_str(g.type, "", "untyped has no type");
	is_int(hx_gres_parse("mps:100(IDX:0),gpu:h100:1(IDX:1)", &g), HEXI_OK,
	       "other GRES skipped");
	is_str(g.type, "h100", "gpu found after mps");
	is_int(hx_gres_parse("", &g), HEXI_OK, "empty");
	is_int(g.ngpus, 0, "empty has no GPUs");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(hx_gres_parse(bad[i], &g) != HEXI_OK,
		   "GRES bad #%zu refused", i);
}

static void fill(hx_handoff *h)
{
	hx_handoff_alloc(h, 2, 3);
	h->job_id = 42;
	h->step_id = 1;
	strcpy(h->plan_hash, "0123456789abcdef");
	strcpy(h->plan_path, "/home/u/hexiscale-plan.42.1.json");
	strcpy(h->master_addr, "10.0.0.1");
	h->master_port = 29617;
	h->world_size = 3;
	h->npipelines = 1;
	strcpy(h->gpu_type[0], "a800");
	strcpy(h->gpu_type[1], "rtx3090");
	for (int t = 0; t < 3; t++)
		h->roles[t] = (hx_task_role){2 - t,
					     t < 2 ? 0 : 1,
					     t % 2,
					     0,
					     t < 2 ? 0 : 1,
					     2,
					     t % 2,
					     t < 2 ? 2 : 1,
					     t < 2 ? 0 : 20,
					     t < 2 ? 20 : 32,
					     16,
					     4,
					     t % 2,
					     t < 2 ? 2 : 1,
					     0};
}

static void test_handoff(void)
{
	hx_handoff h, d;
	char *s = NULL, *bad;

	hx_handoff_init(&h);
	fill(&h);
	is_int(hx_handoff_encode(&h, &s), HEXI_OK, "encode");
	is_int(hx_handoff_decode(s, &d), HEXI_OK, "decode");
	is_int(d.ntasks, 3, "tasks");
	is_int(d.roles[2].layer_begin, 20, "role row survives");
	is_int(d.roles[0].rank, 2, "rank survives");
	is_str(d.gpu_type[1], "rtx3090", "GPU type survives");
	is_str(d.plan_path, h.plan_path, "plan path survives");
	is_int(d.master_port, 29617, "port survives");
	hx_handoff_fini(&d);

	bad = strdup(s);
	bad[strlen(bad) / 2] ^= 1;
	is_int(hx_handoff_decode(bad, &d), HEXI_ERR_CHECKSUM,
	       "flipped byte: checksum mismatch");
	strcpy(bad, s);
	bad[strlen(bad) - 1] = bad[strlen(bad) - 1] == '0' ? '1' : '0';
	is_int(hx_handoff_decode(bad, &d), HEXI_ERR_CHECKSUM,
	       "altered checksum refused");
	ok(strncmp(s, "hx1;", 4) == 0, "no idle task: version 1");
	ok(hx_handoff_decode("hx4;j=1", &d) != HEXI_OK, "wrong version");
	ok(hx_handoff_decode("", &d) != HEXI_OK, "empty");
	{
		char shortbody[32] = "hx1;c=";

		hx_fnv1a_hex("hx1", 3, shortbody + 6);
		ok(hx_handoff_decode(shortbody, &d) != HEXI_OK,
		   "checksummed but empty body (fuzz find)");
	}
	ok(hx_handoff_decode("hx1;j=1;c=0000000000000000", &d) != HEXI_OK,
	   "truncated");
	free(bad);
	free(s);

	h.roles[1].tp_rank = 5; /* >= tp_size: the decoder must refuse */
	hx_handoff_encode(&h, &s);
	is_int(hx_handoff_decode(s, &d), HEXI_ERR_RANGE, "inconsistent row");
	free(s);
	hx_handoff_fini(&h);

	hx_handoff_alloc(&h, 1, 16000);
	h.world_size = 16000;
	h.npipelines = 1;
	for (int t = 0; t < 16000; t++)
		h.roles[t] =
		    (hx_task_role){t, 0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 1, 0, 1, 0};
	is_int(hx_handoff_encode(&h, &s), HEXI_ERR_RANGE,
	       "over-size hand-off refused at encode");
	hx_handoff_fini(&h);
}

/* A plan directory with non-ASCII letters (/home/josé/run) travels in the
 * hand-off's pf= field as UTF-8; control bytes (C0 and C1, raw or
 * encoded), malformed UTF-8, and non-ASCII in any other field are still
 * refused.  Each bad hand-off is re-checksummed, so the field check and
 * not the checksum refuses it. */
static char *resigned(const char *body)
{
	size_t n = strlen(body);
	char *s = malloc(n + 21);

	if (s == NULL)
		return NULL;
	memcpy(s, body, n);
	memcpy(s + n, ";c=", 3);
	hx_fnv1a_hex(s, n, s + n + 3);
	return s;
}

static void test_handoff_utf8(void)
{
	static const struct {
		const char *path; /* pf= value */
		int ok;
	} paths[] = {
	    {"/home/jos\xc3\xa9/run/hexiscale-plan.42.1.json", 1},
	    {"/data/\xe5\xae\x9f\xe9\xa8\x93/p.json", 1}, /* CJK */
	    {"/data/\xf0\x9f\x9a\x80/p.json", 1},	  /* U+1F680 */
	    {"/data/\xc2\xa0x/p.json", 1},		  /* U+00A0 */
	    {"/data/\x9b"
	     "31m/p.json",
	     0}, /* raw C1 CSI */
	    {"/data/\xc2\x9b"
	     "31m/p.json",
	     0},				  /* C1 CSI as UTF-8 */
	    {"/data/\x1b[31m/p.json", 0},	  /* ESC */
	    {"/data/\x7f/p.json", 0},		  /* DEL */
	    {"/data/\xc0\xaf/p.json", 0},	  /* overlong '/' */
	    {"/data/\xed\xa0\x80/p.json", 0},	  /* surrogate */
	    {"/data/\xf4\x90\x80\x80/p.json", 0}, /* > U+10FFFF */
	    {"/data/\xc3/p.json", 0},		  /* cut short */
	    {"/data/jos\xe9/p.json", 0},	  /* Latin-1 */
	};
	hx_handoff h, d;
	char *s = NULL;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		is_int(hx_is_utf8_text(paths[i].path), paths[i].ok,
		       "path #%zu %s as UTF-8 text", i,
		       paths[i].ok ? "passes" : "refused");
	hx_handoff_init(&h);
	fill(&h);
	strcpy(h.plan_path, paths[0].path);
	is_int(hx_handoff_encode(&h, &s), HEXI_OK, "encode a UTF-8 plan path");
	is_int(hx_handoff_decode(s, &d), HEXI_OK,
	       "decode a UTF-8 plan path (/home/jos\\xc3\\xa9/run)");
	is_str(d.plan_path, paths[0].path, "UTF-8 plan path survives");
	hx_handoff_fini(&d);
	for (size_t i = 1; i < sizeof(paths) / sizeof(paths[0]); i++) {
		char *body, *bad, *pf, *g;

		free(s);
		s = NULL;
		strcpy(h.plan_path, "/x");
		hx_handoff_encode(&h, &s);
		pf = strstr(s, ";pf=/x;");
		g = strstr(s, ";c=");
		if (pf == NULL || g == NULL)
			break;
		*g = '\0';
		body = malloc(strlen(s) + strlen(paths[i].path) + 1);
		if (body == NULL)
			break;
		memcpy(body, s, (size_t)(pf - s) + 4);
		strcpy(body + (pf - s) + 4, paths[i].path);
		strcat(body, pf + 6);
		bad = resigned(body);
		is_int(bad != NULL && hx_handoff_decode(bad, &d) == HEXI_OK,
		       paths[i].ok, "hand-off with pf= path #%zu %s", i,
		       paths[i].ok ? "decodes" : "refused");
		if (bad != NULL && paths[i].ok)
			hx_handoff_fini(&d);
		free(bad);
		free(body);
	}
	free(s);
	s = NULL;
	strcpy(h.plan_path, "/x");
	strcpy(h.master_addr, "n\xc3\xa9");
	hx_handoff_encode(&h, &s);
	is_int(hx_handoff_decode(s, &d), HEXI_ERR_PARSE,
	       "non-ASCII outside pf= refused");
	free(s);
	hx_handoff_fini(&h);
}

/* MASTER_ADDR travels in ma=: a NodeAddr of up to 255 bytes (a full DNS
 * name) round-trips whole (it was cut at 63, and srun then used the node
 * name); a longer ma= is refused, never cut. */
static void test_handoff_master_addr(void)
{
	char ma[HX_HOST_MAX + 1], *s = NULL, *body = NULL, *bad = NULL;
	const char *at;
	hx_handoff h, d;

	memset(ma, 'a', sizeof(ma));
	for (size_t i = 63; i < sizeof(ma); i += 64)
		ma[i] = '.';
	ma[HX_HOST_MAX - 1] = '\0'; /* 255 bytes */
	hx_handoff_init(&h);
	fill(&h);
	strcpy(h.master_addr, ma);
	is_int(hx_handoff_encode(&h, &s), HEXI_OK, "encode ma= of 255 bytes");
	is_int(s != NULL ? hx_handoff_decode(s, &d) : HEXI_ERR_INTERNAL,
	       HEXI_OK, "decode ma= of 255 bytes");
	if (s != NULL && d.roles != NULL) {
		is_str(d.master_addr, ma, "ma= of 255 bytes survives whole");
		hx_handoff_fini(&d);
	}
	/* one byte more, re-checksummed: the field check refuses it */
	at = s != NULL ? strstr(s, ";mp=") : NULL;
	body = at != NULL ? malloc(strlen(s) + 2) : NULL;
	if (body != NULL) {
		memcpy(body, s, (size_t)(at - s));
		strcpy(body + (at - s), "a");
		strcat(body, at);
		*strstr(body, ";c=") = '\0';
		bad = resigned(body);
	}
	is_int(bad != NULL ? hx_handoff_decode(bad, &d) : HEXI_ERR_INTERNAL,
	       HEXI_ERR_RANGE, "ma= of 256 bytes refused");
	ok(strstr(hexi_errmsg(HEXI_ERR_RANGE), "'ma' too long") != NULL,
	   "... naming the field: %s", hexi_errmsg(HEXI_ERR_RANGE));
	free(bad);
	free(body);
	free(s);
	hx_handoff_fini(&h);
}

/* --hexiscale-plan-dir takes UTF-8 letters (the hand-off carries them),
 * not control bytes or bytes that are not UTF-8; other options stay ASCII. */
static void test_plan_dir_option(void)
{
	const char *o = "option --hexiscale-plan-dir";

	is_int(hx_opt_check(HX_OPT_PLAN_DIR, "/home/jos\xc3\xa9/run", o),
	       HEXI_OK, "--hexiscale-plan-dir=/home/jos\\xc3\\xa9/run");
	is_int(hx_opt_check(HX_OPT_PLAN_DIR, "/home/jos\xe9/run", o),
	       HEXI_ERR_INVAL, "--hexiscale-plan-dir in Latin-1 refused");
	ok(strstr(hexi_errmsg(HEXI_ERR_INVAL), "not UTF-8") != NULL,
	   "message says not UTF-8: %s", hexi_errmsg(HEXI_ERR_INVAL));
	is_int(hx_opt_check(HX_OPT_PLAN_DIR,
			    "/tmp/\xc2\x9b"
			    "31m",
			    o),
	       HEXI_ERR_INVAL,
	       "--hexiscale-plan-dir with a C1 control refused");
	is_int(hx_opt_check(HX_OPT_MODEL, "llama\xc3\xa9", "option --m"),
	       HEXI_ERR_INVAL, "--hexiscale-model stays ASCII");
}

/* The default plan directory: StdOut's directory only where plan files
 * can go (not /dev, not a device or FIFO), a relative StdOut under the
 * work directory, else the work directory. */
static void test_default_plan_dir(void)
{
	char tmp[] = "/tmp/hx_planXXXXXX", fifo[64], file[64], d[HX_PATH_MAX];
	char rel_fifo[64];
	struct {
		const char *out, *work, *want;
		hexi_rc rc;
	} rows[] = {
	    {"/dev/null", "/home/u/run", "/home/u/run", HEXI_OK},
	    {"/dev/shm/j.out", "/home/u/run", "/home/u/run", HEXI_OK},
	    {"/dev/pts/0", "/home/u/run", "/home/u/run", HEXI_OK},
	    {"/scratch/u/slurm-%j.out", "/home/u/run", "/scratch/u", HEXI_OK},
	    {"/scratch/%u/slurm.out", "/home/u/run", "/home/u/run", HEXI_OK},
	    {"logs/%j.out", "/home/u/run", "/home/u/run/logs", HEXI_OK},
	    {"slurm-%j.out", "/home/u/run", "/home/u/run", HEXI_OK},
	    {"../out/%j.log", "/home/u/run", "/home/u/run/../out", HEXI_OK},
	    {NULL, "/home/u/run", "/home/u/run", HEXI_OK},
	    {"", "/home/u/run", "/home/u/run", HEXI_OK},
	    {"/tmp", "/home/u/run", "/home/u/run", HEXI_OK}, /* a directory */
	    {"logs/%j.out", NULL, "", HEXI_ERR_NOTFOUND},
	    {"logs/%j.out", "run", "", HEXI_ERR_NOTFOUND},
	    {NULL, NULL, "", HEXI_ERR_NOTFOUND},
	    {fifo, "/home/u/run", "/home/u/run", HEXI_OK},
	    {rel_fifo, "/", "/", HEXI_OK}, /* relative, to a FIFO */
	    {file, "/home/u/run", tmp, HEXI_OK},
	};
	FILE *f;

	if (mkdtemp(tmp) == NULL) {
		ok(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(fifo, sizeof(fifo), "%s/fifo.out", tmp);
	snprintf(rel_fifo, sizeof(rel_fifo), "%s", fifo + 1);
	snprintf(file, sizeof(file), "%s/job.out", tmp);
	if (mkfifo(fifo, 0600) != 0 || (f = fopen(file, "w")) == NULL) {
		ok(0, "test files in %s: %s", tmp, strerror(errno));
		return;
	}
	fclose(f);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		hexi_rc rc = hx_default_plan_dir(rows[i].out, rows[i].work, d,
						 sizeof(d));

		ok(rc == rows[i].rc && strcmp(d, rows[i].want) == 0,
		   "StdOut %s, work dir %s -> '%s' (got rc %d, '%s')",
		   rows[i].out ? rows[i].out : "(none)",
		   rows[i].work ? rows[i].work : "(none)", rows[i].want,
		   (int)rc, d);
	}
	unlink(fifo);
	unlink(file);
	rmdir(tmp);
}

/* --hexiscale-seq-len and seq_len= stop at the model's own limit
 * (scheduler/model.c: 1048576), so a longer one is refused naming the
 * option, not blamed on the model. */
static void test_seq_len_cap(void)
{
	hx_conf c;
	char *ok_key[] = {"seq_len=1048576"}, *bad_key[] = {"seq_len=1048577"};
	hexi_rc rc;

	is_int(hx_opt_check(HX_OPT_SEQ_LEN, "1048576",
			    "option --hexiscale-seq-len"),
	       HEXI_OK, "--hexiscale-seq-len=1048576 (the model's limit)");
	rc = hx_opt_check(HX_OPT_SEQ_LEN, "1048577",
			  "option --hexiscale-seq-len");
	ok(rc != HEXI_OK &&
	       strstr(hexi_errmsg(rc), "--hexiscale-seq-len") != NULL &&
	       strstr(hexi_errmsg(rc), "1048576") != NULL,
	   "--hexiscale-seq-len=1048577 refused naming the option and the "
	   "limit: %s",
	   hexi_errmsg(rc));
	ok(hx_opt_check(HX_OPT_SEQ_LEN, "4194304",
			"option --hexiscale-seq-len") != HEXI_OK,
	   "--hexiscale-seq-len=4194304 refused");
	hx_conf_defaults(&c);
	is_int(hx_conf_parse(&c, 1, ok_key), HEXI_OK, "seq_len=1048576");
	rc = hx_conf_parse(&c, 1, bad_key);
	ok(rc != HEXI_OK && strstr(hexi_errmsg(rc), "'seq_len'") != NULL &&
	       strstr(hexi_errmsg(rc), "1048576]") != NULL,
	   "seq_len=1048577 refused naming the key: %s", hexi_errmsg(rc));
}

/* Hand-off version 2: idle rows (rank W.., nothing of a stage). */
static void test_handoff_idle(void)
{
	hx_handoff h, d;
	char *s = NULL;

	hx_handoff_init(&h);
	fill(&h); /* ranks 2, 1, 0 */
	h.world_size = 2;
	h.roles[1] = (hx_task_role){.rank = 2,
				    .node = 0,
				    .gpu = 1,
				    .local_rank = 1,
				    .local_world_size = 2,
				    .idle = 1};
	h.roles[0].rank = 1;
	h.roles[2].rank = 0;
	is_int(hx_handoff_encode(&h, &s), HEXI_OK, "encode with an idle task");
	ok(s != NULL && strncmp(s, "hx2;", 4) == 0, "idle task: version 2");
	is_int(hx_handoff_decode(s, &d), HEXI_OK, "decode version 2");
	is_int(d.roles[1].idle, 1, "idle flag survives");
	is_int(d.roles[0].idle + d.roles[2].idle, 0, "training rows not idle");
	is_int(d.roles[1].rank, 2, "idle rank W survives");
	is_int(d.roles[2].layer_end, 32, "training row survives");
	hx_handoff_fini(&d);
	free(s);

	h.roles[1].rank = 1; /* idle rank below W */
	h.roles[0].rank = 2;
	hx_handoff_encode(&h, &s);
	is_int(hx_handoff_decode(s, &d), HEXI_ERR_RANGE,
	       "idle row with a training rank refused");
	free(s);
	h.roles[1].rank = 2;
	h.roles[0].rank = 1;
	h.roles[1].stage = 1; /* an idle task has no stage */
	hx_handoff_encode(&h, &s);
	is_int(hx_handoff_decode(s, &d), HEXI_ERR_RANGE,
	       "idle row with a stage refused");
	free(s);
	h.roles[1].stage = 0;
	h.world_size = 1; /* 1 training rank + 1 idle for 3 tasks */
	h.roles[0].rank = 0;
	h.roles[2].rank = 0;
	hx_handoff_encode(&h, &s);
	ok(hx_handoff_decode(s, &d) != HEXI_OK,
	   "W + idle rows != tasks refused");
	free(s);
	hx_handoff_fini(&h);
}

/* Hand-off version 3: a step over two components (task 0-1 on node 0 in
 * job 42, task 2 on node 1 in job 43). */
static void test_handoff_het(void)
{
	hx_handoff h, d;
	char *s = NULL;
	static const struct {
		hx_handoff_comp c[2];
		const char *why;
	} bad[] = {
	    {{{42, 0, 2, 0, 1}, {43, 1, 1, 1, 1}}, "task ranges overlap"},
	    {{{42, 0, 1, 0, 1}, {43, 1, 1, 1, 1}}, "a task left out"},
	    {{{42, 0, 2, 0, 1}, {42, 2, 1, 1, 1}}, "one job twice"},
	    {{{42, 0, 2, 0, 2}, {43, 2, 1, 2, 1}}, "more nodes than the step"},
	    {{{42, 0, 2, 0, 1}, {43, 2, 1, 0, 1}}, "node ranges overlap"},
	    {{{42, 0, 3, 0, 1}, {43, 3, 0, 1, 1}}, "an empty component"},
	};

	hx_handoff_init(&h);
	fill(&h); /* tasks 0,1 on node 0; task 2 on node 1 */
	is_int(hx_handoff_alloc_comps(&h, 1), HEXI_ERR_RANGE,
	       "one component is no heterogeneous step");
	is_int(hx_handoff_alloc_comps(&h, 2), HEXI_OK, "two components");
	h.comps[0] = (hx_handoff_comp){42, 0, 2, 0, 1};
	h.comps[1] = (hx_handoff_comp){43, 2, 1, 1, 1};
	is_int(hx_handoff_encode(&h, &s), HEXI_OK, "encode version 3");
	ok(s != NULL &&
	       strncmp(s, "hx3;j=42;hc=42.0.2.0.1/43.2.1.1.1;h=", 36) == 0,
	   "version 3 names the components, no step: %.40s", s ? s : "");
	is_int(hx_handoff_decode(s, &d), HEXI_OK, "decode version 3");
	is_int(d.ncomps, 2, "components survive");
	is_int((int)d.comps[1].job_id, 43, "component job survives");
	is_int(d.comps[1].task_off, 2, "component task offset survives");
	is_int(d.comps[1].node_off, 1, "component node offset survives");
	is_int(d.roles[2].layer_begin, 20, "rows survive");
	is_int((int)d.job_id, 42, "leader survives");
	hx_handoff_fini(&d);
	free(s);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		h.comps[0] = bad[i].c[0];
		h.comps[1] = bad[i].c[1];
		hx_handoff_encode(&h, &s);
		ok(s != NULL && hx_handoff_decode(s, &d) != HEXI_OK,
		   "version 3 refused: %s", bad[i].why);
		free(s);
		s = NULL;
	}
	h.comps[0] = (hx_handoff_comp){42, 0, 2, 0, 1};
	h.comps[1] = (hx_handoff_comp){43, 2, 1, 1, 1};
	h.roles[2].node = 0; /* component 1's task on component 0's node */
	h.roles[2].local_rank = 0;
	hx_handoff_encode(&h, &s);
	is_int(hx_handoff_decode(s, &d), HEXI_ERR_RANGE,
	       "a task on another component's node refused");
	free(s);
	hx_handoff_fini(&h);
	ok(hx_handoff_decode("hx3;j=1;s=0;c=0000000000000000", &d) != HEXI_OK,
	   "version 3 without components refused");
}

/* srun's command line as components. */
static void test_het_request(void)
{
#define ARGS(lit) lit, sizeof(lit)
	static const struct {
		const char *args;
		size_t len;
		int ncomps, ncalls, want0, want1, want2;
	} good[] = {
	    {ARGS("srun\0-n2\0true"), 1, 1, 1, 0, 0},
	    {ARGS("srun\0--het-group=0,1\0true"), 2, 2, 1, 1, 0},
	    {ARGS("srun\0--het-group\0"
		  "0-2\0true"),
	     3, 3, 1, 1, 1},
	    {ARGS("srun\0--het=1,2\0true"), 2, 2, 0, 1, 1},
	    {ARGS("srun\0-n1\0a\0:\0-n2\0b"), 2, 2, 1, 1, 0},
	    {ARGS("srun\0a\0:\0--het-group=2\0b"), 2, 2, 1, 0, 1},
	    {ARGS("srun\0--het-group=1\0true"), 1, 1, 0, 1, 0},
	    {ARGS("srun\0sh\0-c\0a : b"), 1, 1, 1, 0, 0},
	    {ARGS("srun\0--hexiscale=auto\0--het-g=0,1\0x"), 2, 2, 1, 1, 0},
	};
	static const struct {
		const char *args;
		size_t len;
	} bad[] = {
	    {ARGS("srun\0--het-group=0,0\0x")},
	    {ARGS("srun\0--het-group=x\0x")},
	    {ARGS("srun\0--het-group=\0x")},
	    {ARGS("srun\0--het-group=128\0x")},
	    {ARGS("srun\0a\0:\0--het-group=0\0b")},
	    {ARGS("srun\0--het-group")},
	};
#undef ARGS
	hx_het_request r;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		is_int(hx_het_request_parse(good[i].args, good[i].len, &r),
		       HEXI_OK, "command line #%zu", i);
		is_int(r.ncomps, good[i].ncomps, "#%zu: components", i);
		is_int(r.ncalls, good[i].ncalls, "#%zu: init_post_opt calls",
		       i);
		ok(r.want[0] == good[i].want0 && r.want[1] == good[i].want1 &&
		       r.want[2] == good[i].want2,
		   "#%zu: which components", i);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(hx_het_request_parse(bad[i].args, bad[i].len, &r) != HEXI_OK,
		   "bad command line #%zu refused", i);
	is_int(hx_het_request_parse(
		   "srun\0--jobid=42\0--het-group=0,1\0x",
		   sizeof("srun\0--jobid=42\0--het-group=0,1\0x"), &r),
	       HEXI_OK, "--jobid=N");
	is_int((int)r.jobid, 42, "--jobid=N read");
	is_int(hx_het_request_parse("srun\0--jobid\0"
				    "43\0x",
				    sizeof("srun\0--jobid\0"
					   "43\0x"),
				    &r),
	       HEXI_OK, "--jobid N");
	is_int((int)r.jobid, 43, "--jobid N read");
	ok(hx_het_request_parse("srun\0--jobid=x\0x",
				sizeof("srun\0--jobid=x\0x"), &r) != HEXI_OK,
	   "--jobid=x refused");
	ok(hx_het_request_parse("srun", 4, &r) != HEXI_OK,
	   "not NUL-terminated refused");
}

/* Training tasks get 0..W-1, idle ones W.., each in task order. */
static void test_rank_tasks(void)
{
	hx_task_role r[5];
	int map[5], idle[5] = {0, 1, 0, 1, 0}, old[5] = {4, 0, 2, 1, 3};
	int want[5] = {0, 3, 1, 4, 2};
	char buf[64];

	for (int t = 0; t < 5; t++)
		r[t] = (hx_task_role){.rank = old[t], .idle = idle[t]};
	is_int(hx_rank_tasks(r, 5, 3, map), HEXI_OK, "rank 5 tasks, 2 idle");
	for (int t = 0; t < 5; t++) {
		is_int(r[t].rank, want[t], "task %d gets rank %d", t, want[t]);
		is_int(map[old[t]], want[t], "map: old rank %d -> %d", old[t],
		       want[t]);
	}
	for (int t = 0; t < 5; t++)
		r[t] = (hx_task_role){.rank = 4 - t};
	is_int(hx_rank_tasks(r, 5, 5, map), HEXI_OK, "no idle task");
	is_int(r[0].rank + 10 * r[4].rank, 40, "rank = task id without idle");
	for (int t = 0; t < 5; t++)
		r[t] = (hx_task_role){.rank = t % 4, .idle = idle[t]};
	is_int(hx_rank_tasks(r, 5, 3, map), HEXI_ERR_INVAL,
	       "a plan rank given twice refused");
	for (int t = 0; t < 5; t++)
		r[t] = (hx_task_role){.rank = t, .idle = idle[t]};
	is_int(hx_rank_tasks(r, 5, 4, map), HEXI_ERR_MISMATCH,
	       "3 training tasks for 4 ranks refused");

	hx_format_ranges((const int[]){3, 4, 5, 7, 9, 10}, 6, buf, sizeof(buf));
	is_str(buf, "3-5,7,9-10", "ranges");
	hx_format_ranges(NULL, 0, buf, sizeof(buf));
	is_str(buf, "", "no ranges");
	hx_format_ranges((const int[]){1, 3, 5, 7, 9, 11}, 6, buf, 9);
	is_str(buf, "1,3,...", "cut to fit");
	hx_format_ranges((const int[]){10000, 10002}, 2, buf, 4);
	is_str(buf, "...", "nothing fits");
}

/* The shipped example plugstack line (made by make from its template with
 * the configured plugin directory) must parse and name the plugin by an
 * absolute path, with no template variable left. */
static void test_example_conf(void)
{
	const char *top = getenv("top_builddir");
	char path[4096], line[4096], whole[16384], *av[32], *save = NULL, *tok;
	size_t used = 0;
	int ac = 0, found = 0;
	hx_conf c;
	FILE *f;

	snprintf(path, sizeof(path),
		 "%s/examples/plugstack.conf.d/hexiscale.conf",
		 top != NULL ? top : "../..");
	f = fopen(path, "r");
	ok(f != NULL, "example plugstack file %s", path);
	whole[0] = '\0';
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (used + strlen(line) < sizeof(whole)) {
			memcpy(whole + used, line, strlen(line) + 1);
			used += strlen(line);
		}
		if (found || line[0] == '#' || line[0] == '\n')
			continue;
		found = 1;
		for (tok = strtok_r(line, " \t\n", &save);
		     tok != NULL && ac < 32;
		     tok = strtok_r(NULL, " \t\n", &save))
			av[ac++] = tok;
	}
	if (f != NULL)
		fclose(f);
	ok(found && ac >= 2 && !strcmp(av[0], "required"),
	   "example has a 'required PATH ...' line");
	ok(ac >= 2 && av[1][0] == '/' && strlen(av[1]) > 13 &&
	       !strcmp(av[1] + strlen(av[1]) - 13, "/hexiscale.so"),
	   "example names the plugin by an absolute path: %s",
	   ac >= 2 ? av[1] : "(none)");
	ok(strchr(whole, '@') == NULL && strstr(whole, "${") == NULL,
	   "example has no template variable left");
	is_int(ac >= 2 ? hx_conf_parse(&c, ac - 2, av + 2) : HEXI_ERR_PARSE,
	       HEXI_OK, "example plugstack arguments parse");
}

/* Issue 18 finding 8: GRES types match NVML names by whole words, not by
 * substring (GRES a10 took an A100). */
static void test_gpu_names(void)
{
	static const struct {
		const char *nvml, *gres;
		int want;
	} rows[] = {
	    {"NVIDIA A100-SXM4-80GB", "a100", 1},
	    {"NVIDIA A100-SXM4-80GB", "a10", 0},
	    {"NVIDIA A100-SXM4-80GB", "A100-SXM4", 1},
	    {"NVIDIA A100-SXM4-80GB", "100", 0},
	    {"NVIDIA A10", "a10", 1},
	    {"NVIDIA A10G", "a10", 0},
	    {"NVIDIA GeForce RTX 4090", "rtx4090", 1},
	    {"NVIDIA GeForce RTX 4090", "4090", 1},
	    {"NVIDIA GeForce RTX 4090", "rtx409", 0},
	    {"NVIDIA GeForce RTX 4090", "tx4090", 0},
	    {"NVIDIA H100 80GB HBM3", "h100", 1},
	    {"NVIDIA H100 80GB HBM3", "h10", 0},
	    {"NVIDIA A800-SXM4-80GB", "a800", 1},
	    {"NVIDIA A800-SXM4-80GB", "", 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		is_int(hx_gpu_name_matches(rows[i].nvml, rows[i].gres),
		       rows[i].want, "GRES '%s' %s NVML '%s'", rows[i].gres,
		       rows[i].want ? "matches" : "does not match",
		       rows[i].nvml);
}

/* Every GPU name and alias of the scheduler's built-in catalog
 * (scheduler/catalog.c; the cpu entry has no NVML name) against the NVML
 * names of the GPUs it describes, and of its neighbours: the model, the
 * memory size and the form factor a type states must agree with the name
 * where the name states them.  Before, the type had to be whole words of
 * the name, so "a100-80g" refused an "NVIDIA A100-SXM4-80GB". */
static void test_catalog_gpu_names(void)
{
	static const struct {
		const char *type, *nvml;
		int want;
	} rows[] = {
	    {"a100-80g", "NVIDIA A100-SXM4-80GB", 1},
	    {"a100-80g", "NVIDIA A100 80GB PCIe", 1},
	    {"a100-80g", "NVIDIA A100-SXM4-40GB", 0},
	    {"a100-80g", "NVIDIA H100 80GB HBM3", 0},
	    {"a100-80g", "NVIDIA A800-SXM4-80GB", 0},
	    {"a100", "NVIDIA A100-SXM4-80GB", 1},
	    {"a100-80gb", "NVIDIA A100-SXM4-80GB", 1},
	    {"a100-sxm4-80gb", "NVIDIA A100-SXM4-80GB", 1},
	    {"a100-sxm4-80gb", "NVIDIA A100 80GB PCIe", 0},
	    {"a100-sxm-80gb", "NVIDIA A100-SXM-80GB", 1},
	    {"a100-pcie-80gb", "NVIDIA A100 80GB PCIe", 1},
	    {"a100-pcie-80gb", "NVIDIA A100-SXM4-80GB", 0},
	    {"a100-80gb-pcie", "NVIDIA A100 80GB PCIe", 1},
	    {"a800-80g", "NVIDIA A800-SXM4-80GB", 1},
	    {"a800-80g", "NVIDIA A800 80GB PCIe", 1},
	    {"a800-80g", "NVIDIA A100-SXM4-80GB", 0},
	    {"a800", "NVIDIA A800-SXM4-80GB", 1},
	    {"a800-80gb", "NVIDIA A800-SXM4-80GB", 1},
	    {"a800-sxm4-80gb", "NVIDIA A800-SXM4-80GB", 1},
	    {"a800-pcie-80gb", "NVIDIA A800 80GB PCIe", 1},
	    {"a800-pcie-80gb", "NVIDIA A800-SXM4-80GB", 0},
	    {"h100-sxm", "NVIDIA H100 80GB HBM3", 1},
	    {"h100-sxm", "NVIDIA H100 PCIe", 0},
	    {"h100-sxm", "NVIDIA H100 NVL", 0},
	    {"h100-sxm", "NVIDIA A100-SXM4-80GB", 0},
	    {"h100", "NVIDIA H100 80GB HBM3", 1},
	    {"h100-80gb", "NVIDIA H100 80GB HBM3", 1},
	    {"h100-sxm5-80gb", "NVIDIA H100 80GB HBM3", 1},
	    {"h100-80gb-hbm3", "NVIDIA H100 80GB HBM3", 1},
	    {"h100sxm", "NVIDIA H100 80GB HBM3", 1},
	    {"h100sxm", "NVIDIA H100 PCIe", 0},
	    {"h100-pcie", "NVIDIA H100 PCIe", 1},
	    {"h100-pcie", "NVIDIA H100 80GB HBM3", 0},
	    {"h100-pcie", "NVIDIA H100 NVL", 0},
	    {"h100pcie", "NVIDIA H100 PCIe", 1},
	    {"h100-pcie-80gb", "NVIDIA H100 PCIe", 1},
	    {"h100-nvl", "NVIDIA H100 NVL", 1},
	    {"h100-nvl", "NVIDIA H100 PCIe", 0},
	    {"h100-nvl", "NVIDIA H100 80GB HBM3", 0},
	    {"h100nvl", "NVIDIA H100 NVL", 1},
	    {"h100-nvl-94gb", "NVIDIA H100 NVL", 1},
	    {"h200", "NVIDIA H200", 1},
	    {"h200", "NVIDIA H100 80GB HBM3", 0},
	    {"h200-sxm", "NVIDIA H200", 1},
	    {"h200-sxm", "NVIDIA H200 NVL", 0},
	    {"h200-141gb", "NVIDIA H200", 1},
	    {"h200-nvl", "NVIDIA H200 NVL", 1},
	    {"h200-nvl", "NVIDIA H200", 0},
	    {"h200nvl", "NVIDIA H200 NVL", 1},
	    {"a100-40g", "NVIDIA A100-SXM4-40GB", 1},
	    {"a100-40g", "NVIDIA A100-PCIE-40GB", 1},
	    {"a100-40g", "NVIDIA A100-SXM4-80GB", 0},
	    {"a100-40gb", "NVIDIA A100-PCIE-40GB", 1},
	    {"a100-sxm4-40gb", "NVIDIA A100-SXM4-40GB", 1},
	    {"a100-sxm4-40gb", "NVIDIA A100-PCIE-40GB", 0},
	    {"a100-pcie-40gb", "NVIDIA A100-PCIE-40GB", 1},
	    {"a100-pcie-40gb", "NVIDIA A100-SXM4-40GB", 0},
	    {"l40", "NVIDIA L40", 1},
	    {"l40", "NVIDIA L40S", 0},
	    {"l40-48gb", "NVIDIA L40", 1},
	    {"l40s", "NVIDIA L40S", 1},
	    {"l40s", "NVIDIA L40", 0},
	    {"l40s-48gb", "NVIDIA L40S", 1},
	    {"rtx4090", "NVIDIA GeForce RTX 4090", 1},
	    {"rtx4090", "NVIDIA GeForce RTX 3090", 0},
	    {"rtx4090", "NVIDIA GeForce RTX 4090 D", 0},
	    {"4090", "NVIDIA GeForce RTX 4090", 1},
	    {"rtx-4090", "NVIDIA GeForce RTX 4090", 1},
	    {"geforce-rtx-4090", "NVIDIA GeForce RTX 4090", 1},
	    {"rtx3090", "NVIDIA GeForce RTX 3090", 1},
	    {"rtx3090", "NVIDIA GeForce RTX 3090 Ti", 0},
	    {"3090", "NVIDIA GeForce RTX 3090", 1},
	    {"rtx-3090", "NVIDIA GeForce RTX 3090", 1},
	    {"geforce-rtx-3090", "NVIDIA GeForce RTX 3090", 1},
	    {"rtx3080", "NVIDIA GeForce RTX 3080", 1},
	    {"rtx3080", "NVIDIA GeForce RTX 3080 Ti", 0},
	    {"3080", "NVIDIA GeForce RTX 3080", 1},
	    {"3080", "NVIDIA GeForce RTX 3080 Ti", 0},
	    {"rtx-3080", "NVIDIA GeForce RTX 3080", 1},
	    {"geforce-rtx-3080", "NVIDIA GeForce RTX 3080", 1},
	    {"rtx3080ti", "NVIDIA GeForce RTX 3080 Ti", 1},
	    {"rtx3080ti", "NVIDIA GeForce RTX 3080", 0},
	    {"3080ti", "NVIDIA GeForce RTX 3080 Ti", 1},
	    {"3080-ti", "NVIDIA GeForce RTX 3080 Ti", 1},
	    {"rtx-3080-ti", "NVIDIA GeForce RTX 3080 Ti", 1},
	    {"geforce-rtx-3080-ti", "NVIDIA GeForce RTX 3080 Ti", 1},
	    {"v100", "Tesla V100-SXM2-32GB", 1},
	    {"v100", "Tesla V100-SXM2-16GB", 1},
	    {"v100", "Tesla V100-PCIE-32GB", 1},
	    {"v100", "NVIDIA A100-SXM4-40GB", 0},
	    {"v100-32gb", "Tesla V100-SXM2-32GB", 1},
	    {"v100-32gb", "Tesla V100-SXM2-16GB", 0},
	    {"v100-sxm2-32gb", "Tesla V100-SXM2-32GB", 1},
	    {"v100-sxm2-32gb", "Tesla V100-PCIE-32GB", 0},
	    {"v100-sxm2-16gb", "Tesla V100-SXM2-16GB", 1},
	    {"v100-pcie-32gb", "Tesla V100-PCIE-32GB", 1},
	    {"v100-pcie-32gb", "Tesla V100-SXM2-32GB", 0},
	    {"t4", "Tesla T4", 1},
	    {"t4", "NVIDIA A10", 0},
	    {"tesla-t4", "Tesla T4", 1},
	    {"80gb", "NVIDIA A100-SXM4-80GB", 0},
	    {"sxm4", "NVIDIA A100-SXM4-80GB", 0},
	    {"nvidia", "NVIDIA A100-SXM4-80GB", 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		is_int(hx_gpu_name_matches(rows[i].nvml, rows[i].type),
		       rows[i].want, "catalog type '%s' %s NVML '%s'",
		       rows[i].type, rows[i].want ? "matches" : "refuses",
		       rows[i].nvml);
}

/* Each string key is copied with its own field's size (finding 8). */
static void test_conf_key_sizes(void)
{
	hx_conf c;
	char *v = malloc(HX_VALUE_MAX + 16);
	char *av[1] = {v};

	if (v == NULL)
		return;
	hx_conf_defaults(&c);
	snprintf(v, HX_VALUE_MAX + 16, "model=");
	memset(v + 6, 'm', HX_VALUE_MAX - 1);
	v[6 + HX_VALUE_MAX - 1] = '\0';
	is_int(hx_conf_parse(&c, 1, av), HEXI_OK, "model= of %d bytes fits",
	       HX_VALUE_MAX - 1);
	is_int((int)strlen(c.model), HX_VALUE_MAX - 1, "model= copied whole");
	strcat(v, "m");
	is_int(hx_conf_parse(&c, 1, av), HEXI_ERR_RANGE,
	       "model= of %d bytes refused", HX_VALUE_MAX);
	free(v);
}

int main(void)
{
	test_conf();
	test_conf_key_sizes();
	test_gpu_names();
	test_catalog_gpu_names();
	test_example_conf();
	test_options();
	test_use_all_gpus();
	test_gres();
	test_handoff();
	test_handoff_utf8();
	test_handoff_master_addr();
	test_default_plan_dir();
	test_plan_dir_option();
	test_seq_len_cap();
	test_handoff_idle();
	test_handoff_het();
	test_het_request();
	test_rank_tasks();
	return tap_done();
}
