/*
 * test_prof.c - unit tests of libhexiprof: statistics, timing loop, strict
 * parsers (tables of bad inputs), the exact profile JSON, GPU type guesses
 * and the validated CPU GEMM.
 */
#include "config.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_prof.h"
#include "hexi_sched.h"
#include "tap.h"

static void test_stats(void)
{
	double odd[] = {3, 1, 2, 10, 4};
	double even[] = {4, 1, 3, 2};
	double one[] = {0.5};
	hexi_prof_stat st;

	is_int(hexi_prof_stat_of(odd, 5, &st), HEXI_OK, "stat of 5");
	is_near(st.median_s, 3, 1e-12, "median of odd count");
	is_near(st.min_s, 1, 1e-12, "min");
	is_near(st.max_s, 10, 1e-12, "max");
	is_near(st.spread_pct, 300, 1e-9, "spread = (max-min)/median");
	is_int(st.repeats, 5, "repeats");
	is_int(hexi_prof_stat_of(even, 4, &st), HEXI_OK, "stat of 4");
	is_near(st.median_s, 2.5, 1e-12, "median of even count");
	is_int(hexi_prof_stat_of(one, 1, &st), HEXI_OK, "stat of 1");
	is_near(st.spread_pct, 0, 1e-12, "no spread for one sample");
	is_int(hexi_prof_stat_of(one, 0, &st), HEXI_ERR_INVAL, "0 samples");
}

static int calls;

static hexi_rc count_fn(void *arg)
{
	calls++;
	return HEXI_OK;
}

static hexi_rc fail_third(void *arg)
{
	return ++calls == 3 ? hexi_error(HEXI_ERR_IO, "third call") : HEXI_OK;
}

static void test_time(void)
{
	hexi_prof_stat st;

	calls = 0;
	is_int(hexi_prof_time(count_fn, NULL, 2, 5, &st), HEXI_OK, "time");
	is_int(calls, 7, "warm-up + repeats calls");
	is_int(st.repeats, 5, "timed repeats");
	ok(st.min_s >= 0 && st.min_s <= st.median_s && st.median_s <= st.max_s,
	   "min <= median <= max");
	calls = 0;
	is_int(hexi_prof_time(fail_third, NULL, 1, 5, &st), HEXI_ERR_IO,
	       "error of the timed function stops the loop");
	is_int(calls, 3, "no call after the failure");
	calls = 0;
	is_int(hexi_prof_time_min(count_fn, NULL, 1, 3, 0.01, &st), HEXI_OK,
	       "batched timing");
	is_int(st.calls_per_sample, 1000,
	       "a call of nanoseconds is batched to the cap of 1000");
	is_int(calls, 1 + 1 + 3 * 1000, "warm-up + calibration + samples");
	is_int(hexi_prof_time_min(count_fn, NULL, 1, 3, -1, &st),
	       HEXI_ERR_INVAL, "negative minimum sample time rejected");
	is_int(hexi_prof_time(count_fn, NULL, 0, 0, &st), HEXI_ERR_INVAL,
	       "0 repeats rejected");
	is_int(hexi_prof_time(count_fn, NULL, -1, 1, &st), HEXI_ERR_INVAL,
	       "negative warm-up rejected");
}

static void test_parse(void)
{
	static const char *bad_shapes[] = {
	    "",
	    "2x3x4:tnb",
	    "2x3x4:a",
	    "2x3x4:tnaa",
	    "2x3x4:na",
	    "x",
	    "1x2",
	    "1x2x",
	    "x1x2",
	    "1x2x3x4",
	    "0x1x1",
	    "1x1x0",
	    "-1x2x3",
	    "+1x2x3",
	    " 1x2x3",
	    "1x2x3 ",
	    "1X2X3",
	    "65537x1x1",
	    "1x1x65537",
	    "1.5x2x3",
	    "axbxc",
	    "65536x65536x1",
	    "1x65536x65536",
	    "99999999999999999999x1x1",
	};
	static const char *bad_bytes[] = {
	    "",	  "K",	"0",   "-1",   "1T",   "1KK",
	    " 1", "1 ", "17G", "1.5M", "0x10", "99999999999999999999",
	    "1k",
	};
	hexi_prof_shape sh;
	size_t b;

	for (size_t i = 0; i < sizeof(bad_shapes) / sizeof(*bad_shapes); i++)
		ok(hexi_prof_parse_shape(bad_shapes[i], &sh) != HEXI_OK,
		   "bad shape '%s' rejected", bad_shapes[i]);
	is_int(hexi_prof_parse_shape("4096x11008x512", &sh), HEXI_OK,
	       "good shape");
	ok(sh.m == 4096 && sh.n == 11008 && sh.k == 512, "shape values");
	is_int(hexi_prof_parse_shape("65536x32768x1", &sh), HEXI_OK,
	       "2^31 elements allowed");
	is_int(hexi_prof_parse_shape("2x3x4:tna", &sh), HEXI_OK,
	       "accumulating shape");
	ok(sh.ta == 1 && sh.tb == 0 && sh.acc == 1,
	   ":tna: A transposed, beta 1");
	is_int(hexi_prof_parse_shape("2x3x4:nt", &sh), HEXI_OK, ":nt");
	ok(sh.ta == 0 && sh.tb == 1 && sh.acc == 0,
	   ":nt: B transposed, beta 0");
	for (size_t i = 0; i < sizeof(bad_bytes) / sizeof(*bad_bytes); i++)
		ok(hexi_prof_parse_bytes(bad_bytes[i], &b) != HEXI_OK,
		   "bad size '%s' rejected", bad_bytes[i]);
	is_int(hexi_prof_parse_bytes("64M", &b), HEXI_OK, "64M");
	is_int((long long)b, 64LL << 20, "64M in bytes");
	is_int(hexi_prof_parse_bytes("16G", &b), HEXI_OK, "16G");
	is_int((long long)b, 16LL << 30, "16G in bytes");
	is_int(hexi_prof_parse_bytes("4096", &b), HEXI_OK, "plain bytes");
	is_int((long long)b, 4096, "4096 bytes");
}

static void test_json(void)
{
	hexi_profile p;
	char *s = NULL;

	is_int(hexi_profile_init(&p, "n1"), HEXI_OK, "init");
	is_int(hexi_profile_to_json(&p, &s), HEXI_OK, "empty profile");
	is_str(s,
	       "{\"format\":\"hexiscale-profile\",\"version\":1,"
	       "\"host\":\"n1\"}",
	       "unmeasured numbers and empty objects are left out");
	free(s);
	hexi_prof_gpu_init(&p.gpus[0], 0);
	strcpy(p.gpus[0].type, "rtx4090");
	strcpy(p.gpus[0].name, "NVIDIA GeForce RTX 4090");
	p.gpus[0].gemm_tflops_bf16 = 150.5;
	p.gpus[0].gemm_tflops_fp16 = 151;
	p.gpus[0].gemm_tflops_fp32 = 70.25;
	p.gpus[0].mem_bw_gbps = 900;
	p.gpus[0].h2d_gbps = 24.5;
	p.gpus[0].d2h_gbps = 25;
	p.ngpus = 1;
	p.cpu_gemm_gflops = 512.5;
	p.cpu_threads = 16;
	p.intra_bw_gbps = 20;
	p.intra_lat_s = 1e-05;
	p.inter_bw_gbps = 0.7;
	p.inter_lat_s = 5e-05;
	is_int(hexi_profile_to_json(&p, &s), HEXI_OK, "full profile");
	is_str(s,
	       "{\"format\":\"hexiscale-profile\",\"version\":1,\"host\":"
	       "\"n1\",\"gpus\":[{\"type\":\"rtx4090\",\"index\":0,\"name\":"
	       "\"NVIDIA GeForce RTX 4090\",\"gemm_tflops\":{\"bf16\":150.5,"
	       "\"fp16\":151.0,\"fp32\":70.25},\"mem_bw_gbps\":900.0,"
	       "\"h2d_gbps\":24.5,\"d2h_gbps\":25.0}],\"cpu\":{"
	       "\"gemm_gflops\":512.5,\"threads\":16},\"links\":{"
	       "\"intra_bw_gbps\":20.0,\"intra_lat_s\":1e-5,"
	       "\"inter_bw_gbps\":0.7,\"inter_lat_s\":5e-5}}",
	       "exact hexiscale-profile text");
	free(s);
	p.gpus[0].gemm_tflops_fp32 = NAN;
	p.intra_lat_s = NAN;
	is_int(hexi_profile_to_json(&p, &s), HEXI_OK, "partial profile");
	ok(s && !strstr(s, "fp32") && !strstr(s, "intra_lat_s") &&
	       strstr(s, "intra_bw_gbps"),
	   "NAN fields left out, others kept");
	free(s);
	is_int(hexi_profile_init(&p, ""), HEXI_ERR_INVAL, "empty host");
	is_int(hexi_profile_init(&p, "n\x01"), HEXI_ERR_INVAL,
	       "unprintable host");
	is_int(hexi_profile_init(
		   &p, "a-host-name-that-is-far-too-long-to-fit-into-the-"
		       "profile-name-field"),
	       HEXI_ERR_RANGE, "long host");
}

static void test_report(void)
{
	static hexi_prof_report r;
	hexi_prof_meas m;
	hexi_profile p;
	json_t *root;
	json_error_t err;
	char *s = NULL;
	hexi_rc rv = HEXI_OK;

	memset(&m, 0, sizeof(m));
	strcpy(m.name, "cpu.sgemm");
	strcpy(m.shape, "8x8x8");
	strcpy(m.unit, "GFLOP/s");
	m.value = 1.5;
	m.device = -1;
	m.stat.repeats = 3;
	for (int i = 0; i < HEXI_PROF_MAX_MEAS && rv == HEXI_OK; i++)
		rv = hexi_prof_report_add(&r, &m);
	is_int(rv, HEXI_OK, "report holds %d", HEXI_PROF_MAX_MEAS);
	is_int(hexi_prof_report_add(&r, &m), HEXI_ERR_RANGE, "report full");
	r.nmeas = 1;
	hexi_profile_init(&p, "h");
	p.cpu_gemm_gflops = 1.5;
	is_int(hexi_prof_report_to_json(&p, &r, "cpu", &s), HEXI_OK,
	       "report JSON");
	root = s ? json_loads(s, 0, &err) : NULL;
	ok(root != NULL, "report is JSON");
	is_str(json_string_value(json_object_get(root, "mode")), "cpu",
	       "report mode");
	is_int(json_array_size(json_object_get(root, "measurements")), 1,
	       "one measurement");
	is_str(json_string_value(
		   json_object_get(json_object_get(root, "profile"), "format")),
	       "hexiscale-profile", "report embeds the profile");
	json_decref(root);
	free(s);
}

/* The type hexiprof writes for a device name is the built-in catalog's own
 * entry for that name (one table: scheduler/catalog.c), by the exact names
 * NVML and cudaGetDeviceProperties report; a name the catalog does not
 * know is "unknown", never a type the planner would refuse. */
static void test_guess(void)
{
	static const char *t[][2] = {
	    {"NVIDIA GeForce RTX 4090", "rtx4090"},
	    {"NVIDIA GeForce RTX 3090", "rtx3090"},
	    {"NVIDIA GeForce RTX 3080", "rtx3080"},
	    {"NVIDIA GeForce RTX 3080 Ti", "rtx3080ti"},
	    {"NVIDIA A800-SXM4-80GB", "a800-80g"},
	    {"NVIDIA A800 80GB PCIe", "a800-80g"},
	    {"NVIDIA A100-SXM4-40GB", "a100-40g"},
	    {"NVIDIA A100-PCIE-40GB", "a100-40g"},
	    {"NVIDIA A100-SXM4-80GB", "a100-80g"},
	    {"NVIDIA A100 80GB PCIe", "a100-80g"},
	    {"NVIDIA H100 80GB HBM3", "h100-sxm"},
	    {"NVIDIA H100 PCIe", "h100-pcie"},
	    {"NVIDIA H100 NVL", "h100-nvl"},
	    {"NVIDIA H200", "h200"},
	    {"NVIDIA H200 NVL", "h200-nvl"},
	    {"NVIDIA H800", "h800-sxm"},
	    {"NVIDIA L40S", "l40s"},
	    {"NVIDIA L40", "l40"},
	    {"NVIDIA L4", "l4"},
	    {"NVIDIA A10", "a10"},
	    {"NVIDIA RTX A6000", "rtxa6000"},
	    {"NVIDIA RTX 6000 Ada Generation", "rtx6000ada"},
	    {"Tesla V100-SXM2-32GB", "v100"},
	    {"Tesla V100-PCIE-16GB", "v100"},
	    {"Tesla T4", "t4"},
	    /* other GPUs, whatever the words they share with a known one */
	    {"NVIDIA A10G", "unknown"},
	    {"NVIDIA H800 PCIe", "unknown"},
	    {"NVIDIA GeForce RTX 3090 Ti", "unknown"},
	    {"NVIDIA A100-SXM4-80GB MIG 1g.10gb", "unknown"},
	    {"Quadro RTX 6000", "unknown"},
	    {"NVIDIA A40", "unknown"},
	    {"Some Other GPU", "unknown"},
	    {"", "unknown"},
	    {"x86_64", "unknown"}, /* an alias of the cpu type: no GPU */
	};
	hexi_catalog *cat = NULL;

	if (hexi_catalog_builtin(&cat) != HEXI_OK)
		tap_bail("no built-in catalog");
	for (size_t i = 0; i < sizeof(t) / sizeof(*t); i++) {
		const char *g = hexi_prof_gpu_type_guess(t[i][0]);
		const hexi_gpu_type *e = hexi_catalog_find(cat, g);

		is_str(g, t[i][1], "type of '%s'", t[i][0]);
		if (strcmp(t[i][1], "unknown") != 0)
			ok(e != NULL && strcmp(e->name, g) == 0,
			   "'%s': the planner's catalog has type '%s'", t[i][0],
			   g);
	}
	is_str(hexi_prof_gpu_type_guess(NULL), "unknown", "NULL name");
	hexi_catalog_destroy(cat);
}

static void test_cpu(void)
{
#ifdef HAVE_OPENBLAS
	hexi_prof_opts o;
	static hexi_profile p;
	static hexi_prof_report r;
	double err = 1;

	is_int(hexi_prof_cpu_sgemm_check(67, 45, 129, &err), HEXI_OK,
	       "sgemm check runs");
	ok(err < 1e-5, "sgemm matches the double reference (err %.3g)", err);
	hexi_prof_opts_defaults(&o);
	o.quick = 1;
	o.repeats = 2;
	o.warmup = 0;
	o.nshapes = 1;
	o.shapes[0] = (hexi_prof_shape){33, 17, 65, 0, 0, 0};
	hexi_profile_init(&p, "h");
	is_int(hexi_prof_cpu(&o, &p, &r), HEXI_OK, "CPU mode");
	is_int(r.nmeas, 4, "two default quick shapes + one extra + membw");
	is_str(r.meas[2].shape, "33x17x65", "extra shape measured last");
	ok(p.cpu_gemm_gflops > 0 && isfinite(p.cpu_gemm_gflops),
	   "GFLOP/s positive (%g)", p.cpu_gemm_gflops);
	ok(p.cpu_threads >= 1, "threads %d", p.cpu_threads);
	is_str(r.meas[3].name, "cpu.membw", "memory bandwidth measured last");
	ok(p.cpu_mem_bw_gbps > 0 && isfinite(p.cpu_mem_bw_gbps),
	   "memory bandwidth positive (%g GB/s)", p.cpu_mem_bw_gbps);
	for (int i = 0; i < r.nmeas; i++)
		ok(r.meas[i].value <= r.meas[i].best + 1e-9 &&
		       r.meas[i].stat.repeats == 2,
		   "%s: median rate <= best rate", r.meas[i].shape);
#else
	tap_diag("built without OpenBLAS: CPU GEMM tests skipped");
#endif
}

int main(void)
{
	test_stats();
	test_time();
	test_parse();
	test_json();
	test_report();
	test_guess();
	test_cpu();
	return tap_done();
}
