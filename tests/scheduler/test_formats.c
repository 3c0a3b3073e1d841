/* test_formats.c - catalog, cluster, model and plan: read, write, validate,
 * hash, clone, role. */
#include "config.h"

#include "sched_test.h"

#include <unistd.h>

static const char *srcdir(void)
{
	const char *s = getenv("top_srcdir");
	return s ? s : "../..";
}

static void path_of(char *buf, size_t cap, const char *rel)
{
	snprintf(buf, cap, "%s/%s", srcdir(), rel);
}

static void test_catalog_attention(void);
static void test_catalog_nvml(void);

static void test_catalog(void)
{
	hexi_catalog *cat = NULL;
	const hexi_gpu_type *t;
	static const char *const need[] = {
	    "A100-80G", "A800-80G", "H100-SXM", "H200",	     "L40",
	    "L40S",	"RTX 4090", "RTX 3090", "RTX 3080",  "RTX 3080 Ti",
	    "V100",	"T4",	    "H800-SXM", "RTX A6000", "RTX 6000 Ada",
	    "A10",	"L4",	    "cpu"};

	is_int(hexi_catalog_builtin(&cat), HEXI_OK, "built-in catalog");
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		ok(hexi_catalog_find(cat, need[i]) != NULL, "catalog has %s",
		   need[i]);
	t = hexi_catalog_find(cat, "a800");
	ok(t && strcmp(t->name, "a800-80g") == 0, "alias a800");
	is_near(t ? t->peak_tflops : 0, 312.0, 1e-12, "A800 312 TFLOPS");
	t = hexi_catalog_find(cat, "4090");
	ok(t && strcmp(t->name, "rtx4090") == 0, "alias 4090");
	is_near(t ? t->peak_tflops : 0, 165.2, 1e-12, "4090 165.2 TFLOPS");
	t = hexi_catalog_find(cat, "NVIDIA GeForce RTX 3090");
	ok(t && strcmp(t->name, "rtx3090") == 0, "nvidia-smi name of 3090");
	is_near(t ? t->peak_tflops : 0, 80.0, 1e-12, "3090 80 TFLOPS");
	t = hexi_catalog_find(cat, "rtx3080ti");
	ok(t && strcmp(t->name, "rtx3080ti") == 0,
	   "3080 Ti distinct from 3080");
	t = hexi_catalog_find(cat, "NVIDIA A100-SXM4-80GB");
	ok(t && strcmp(t->name, "a100-80g") == 0, "nvidia-smi name of A100");
	ok(hexi_catalog_find(cat, "mi300x") == NULL, "unknown type not found");
	ok(hexi_catalog_find(cat, "") == NULL, "empty name not found");
	t = hexi_catalog_find(cat, "gpu:rtx_3080ti");
	ok(t && strcmp(t->name, "rtx3080ti") == 0, "gres type gpu:rtx_3080ti");
	ok(hexi_catalog_find(cat, "gpu:") == NULL, "empty gres type");
	t = hexi_catalog_find(cat, "h100");
	is_near(t ? hexi_gpu_tflops(t) : 0, 989.4 * 0.7, 1e-9,
		"achievable = peak * efficiency");
	{
		const char *js =
		    "{\"format\":\"hexiscale-catalog\",\"version\":1,"
		    "\"gpus\":[{\"name\":\"a800\",\"efficiency\":0.5},"
		    "{\"name\":\"mi250x\",\"aliases\":[\"mi250\"],"
		    "\"peak_tflops\":383,\"mem_gib\":128,"
		    "\"mem_bw_gbps\":3277,\"intra_bw_gbps\":100}]}";
		size_t n = hexi_catalog_count(cat);
		is_int(hexi_catalog_parse(cat, js, strlen(js)), HEXI_OK,
		       "catalog JSON merges");
		is_int(hexi_catalog_count(cat), n + 1, "one type added");
		t = hexi_catalog_find(cat, "a800-80g");
		is_near(t ? t->efficiency : 0, 0.5, 1e-12,
			"override efficiency");
		is_near(t ? t->peak_tflops : 0, 312, 1e-12,
			"override keeps peak");
		t = hexi_catalog_find(cat, "MI250");
		ok(t && strcmp(t->name, "mi250x") == 0, "new type by alias");
		ok(t && t->attn_efficiency == 0 && t->compute_capability == 0,
		   "new type without attention fields: 0 (the defaults)");
	}
	hexi_catalog_destroy(cat);
	test_catalog_attention();
	test_catalog_nvml();
}

/* Device names exactly as NVML and cudaGetDeviceProperties report them:
 * each resolves to its own entry, with the datasheet figures of the
 * catalog's comments (the type hexiprof writes in a profile is this
 * entry's name, hexi_catalog_builtin_type), and a name that shares only a
 * prefix with a type ("A10" in "A100", "L4" in "L40", "RTX 3080" in "RTX
 * 3080 Ti", "H100" in "H100 PCIe") never resolves to it. */
static void test_catalog_nvml(void)
{
	static const struct {
		const char *nvml, *type;
		double peak, mem, bw, intra, cc, own;
	} t[] = {
	    {"NVIDIA H100 80GB HBM3", "h100-sxm", 989.4, 80, 3350, 450, 9.0,
	     0.009},
	    {"NVIDIA H100 PCIe", "h100-pcie", 756, 80, 2000, 300, 9.0, 0.009},
	    {"NVIDIA H100 NVL", "h100-nvl", 835.5, 94, 3900, 300, 9.0, 0.01},
	    {"NVIDIA H200", "h200", 989.4, 141, 4800, 450, 9.0, 0.009},
	    {"NVIDIA H200 NVL", "h200-nvl", 835.5, 141, 4800, 450, 9.0, 0.01},
	    {"NVIDIA H800", "h800-sxm", 989.4, 80, 3350, 200, 9.0, 0.009},
	    {"NVIDIA A100-SXM4-80GB", "a100-80g", 312, 80, 2039, 300, 8.0,
	     0.017},
	    {"NVIDIA A100-SXM4-40GB", "a100-40g", 312, 40, 1555, 300, 8.0,
	     0.017},
	    {"NVIDIA A800 80GB PCIe", "a800-80g", 312, 80, 2039, 200, 8.0,
	     0.017},
	    {"NVIDIA L40S", "l40s", 362.05, 48, 864, 25, 8.9, 0.035},
	    {"NVIDIA L40", "l40", 181.05, 48, 864, 25, 8.9, 0.068},
	    {"NVIDIA L4", "l4", 121, 24, 300, 25, 8.9, 0.034},
	    {"NVIDIA A10", "a10", 125, 24, 600, 25, 8.6, 0.034},
	    {"NVIDIA RTX A6000", "rtxa6000", 154.8, 48, 768, 56.25, 8.6, 0.034},
	    {"NVIDIA RTX 6000 Ada Generation", "rtx6000ada", 364.2, 48, 960, 25,
	     8.9, 0.034},
	    {"NVIDIA GeForce RTX 3080", "rtx3080", 59.5, 10, 760, 16, 8.6,
	     0.068},
	    {"NVIDIA GeForce RTX 3080 Ti", "rtx3080ti", 68.2, 12, 912, 16, 8.6,
	     0.068},
	    {"Tesla V100-PCIE-16GB", "v100", 125, 32, 900, 150, 7.0, 0.034},
	};
	static const char *const none[] = {
	    "NVIDIA A10G",
	    "NVIDIA H800 PCIe",
	    "NVIDIA A40",
	    "Quadro RTX 6000",
	    "NVIDIA GeForce RTX 3090 Ti",
	    "NVIDIA GeForce RTX 4090 D",
	    "NVIDIA A100-SXM4-80GB MIG 1g.10gb",
	    "",
	};
	hexi_catalog *cat = NULL;

	is_int(hexi_catalog_builtin(&cat), HEXI_OK, "built-in catalog");
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		const hexi_gpu_type *g = hexi_catalog_find(cat, t[i].nvml);
		const char *b = hexi_catalog_builtin_type(t[i].nvml);

		ok(g != NULL && strcmp(g->name, t[i].type) == 0 && b != NULL &&
		       strcmp(b, t[i].type) == 0,
		   "'%s' is %s (found %s, built-in type %s)", t[i].nvml,
		   t[i].type, g ? g->name : "nothing", b ? b : "NULL");
		ok(g != NULL && g->peak_tflops == t[i].peak &&
		       g->mem_gib == t[i].mem && g->mem_bw_gbps == t[i].bw &&
		       g->intra_bw_gbps == t[i].intra &&
		       g->compute_capability == t[i].cc &&
		       g->attn_own_efficiency == t[i].own,
		   "%s: %g TFLOPS, %g GB, %g GB/s, link %g GB/s, sm %.1f, own "
		   "%g",
		   t[i].type, t[i].peak, t[i].mem, t[i].bw, t[i].intra, t[i].cc,
		   t[i].own);
	}
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		const char *b = hexi_catalog_builtin_type(none[i]);

		ok(hexi_catalog_find(cat, none[i]) == NULL && b == NULL,
		   "'%s' is no built-in type (got %s)", none[i],
		   b ? b : "NULL");
	}
	ok(hexi_catalog_builtin_type(NULL) == NULL, "NULL name: NULL");
	ok(hexi_catalog_find(cat, "x86_64") != NULL &&
	       hexi_catalog_builtin_type("x86_64") == NULL,
	   "x86_64 names the cpu type, no GPU type");
	hexi_catalog_destroy(cat);
}

/* Attention fields: built-in values, a catalog's, and the cluster JSON
 * (a plan's gpu_types) writing only what differs from what a reader takes
 * when they are absent (DECISIONS 120). */
static void test_catalog_attention(void)
{
	hexi_catalog *cat = NULL;
	hexi_cluster *c = NULL, *d = NULL;
	const hexi_gpu_type *t;
	char *js = NULL, *js2 = NULL;
	const char *cj =
	    "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":["
	    "{\"name\":\"rtx4090\",\"attn_efficiency\":0.3},"
	    "{\"name\":\"gx1\",\"peak_tflops\":500,\"mem_gib\":96,"
	    "\"mem_bw_gbps\":4000,\"intra_bw_gbps\":400,"
	    "\"compute_capability\":10.0,\"attn_own_efficiency\":0.02}]}";

	hexi_catalog_builtin(&cat);
	t = hexi_catalog_find(cat, "h200");
	ok(t && t->compute_capability == 9.0 && t->attn_efficiency == 0.55 &&
	       t->attn_bwd_efficiency == 0.40 &&
	       t->attn_own_efficiency == 0.009,
	   "h200: sm 9.0, fused 0.55/0.40, own 0.009");
	t = hexi_catalog_find(cat, "a100");
	ok(t && t->compute_capability == 8.0 && t->attn_efficiency == 0.60 &&
	       t->attn_bwd_efficiency == 0.45 &&
	       t->attn_own_efficiency == 0.017,
	   "a100: sm 8.0, fused 0.60/0.45, own 0.017");
	t = hexi_catalog_find(cat, "v100");
	ok(t && t->compute_capability == 7.0, "v100: sm 7.0 (no fused path)");
	for (size_t i = 0; i < hexi_catalog_count(cat); i++) {
		t = hexi_catalog_at(cat, i);
		if (strcmp(t->name, "cpu") == 0)
			ok(t->attn_efficiency == 0 &&
			       t->compute_capability == 0,
			   "cpu: no attention figures (GEMM rate)");
		else
			ok(t->attn_efficiency > t->attn_bwd_efficiency &&
			       t->attn_bwd_efficiency >
				   t->attn_own_efficiency &&
			       t->attn_own_efficiency > 0 &&
			       t->compute_capability >= 7.0,
			   "%s: fused fwd > bwd > own > 0, sm %.1f", t->name,
			   t->compute_capability);
	}
	is_int(hexi_catalog_parse(cat, cj, strlen(cj)), HEXI_OK,
	       "catalog with attention fields");
	t = hexi_catalog_find(cat, "4090");
	ok(t && t->attn_efficiency == 0.3 && t->attn_bwd_efficiency == 0.40,
	   "override of attn_efficiency keeps the rest");
	hexi_cluster_create(3, cat, &c);
	hexi_cluster_set_node(c, 0, "a", "a100", 1, NULL, 0);
	hexi_cluster_set_node(c, 1, "b", "rtx4090", 1, NULL, 0);
	hexi_cluster_set_node(c, 2, "c", "gx1", 1, NULL, 0);
	c->inter_bw_gbps = 10;
	is_int(hexi_cluster_validate(c), HEXI_OK, "cluster a100, 4090, gx1");
	is_int(hexi_cluster_to_json(c, &js), HEXI_OK, "cluster JSON");
	ok(js && strstr(js, "\"attn_efficiency\": 0.3") != NULL &&
	       strstr(js, "\"compute_capability\": 10") != NULL &&
	       strstr(js, "\"attn_own_efficiency\": 0.02") != NULL,
	   "changed and new-type attention fields written");
	ok(js && strstr(js, "attn_bwd_efficiency") == NULL &&
	       strstr(js, "0.45") == NULL,
	   "built-in attention values left out (plans keep their hash)");
	/* read back with the built-in catalog only: the same numbers */
	is_int(hexi_cluster_parse(js, strlen(js), NULL, &d), HEXI_OK,
	       "cluster JSON reads back without the catalog file");
	t = d ? hexi_cluster_gpu(d, 1) : NULL;
	ok(t && t->attn_efficiency == 0.3 && t->attn_bwd_efficiency == 0.40 &&
	       t->compute_capability == 8.9,
	   "4090 read back: 0.3, built-in 0.40 and sm 8.9");
	t = d ? hexi_cluster_gpu(d, 2) : NULL;
	ok(t && t->compute_capability == 10.0 && t->attn_efficiency == 0 &&
	       t->attn_own_efficiency == 0.02,
	   "new type read back: sm 10.0, own 0.02, fused default (0)");
	is_int(d ? hexi_cluster_to_json(d, &js2) : HEXI_ERR_INVAL, HEXI_OK,
	       "written again");
	ok(js && js2 && strcmp(js, js2) == 0, "same JSON the second time");
	free(js);
	free(js2);
	hexi_cluster_destroy(c);
	hexi_cluster_destroy(d);
	hexi_catalog_destroy(cat);
}

static void test_profiles(void)
{
	char dir[] = "/tmp/hexi-prof-XXXXXX", p1[128], p2[128];
	hexi_catalog *cat = NULL;
	hexi_cluster *c = NULL;
	const hexi_gpu_type *t;
	FILE *f;

	if (mkdtemp(dir) == NULL)
		tap_bail("mkdtemp");
	snprintf(p1, sizeof(p1), "%s/n2.json", dir);
	snprintf(p2, sizeof(p2), "%s/n3.json", dir);
	f = fopen(p1, "w");
	fputs("{\"format\":\"hexiscale-profile\",\"version\":1,\"host\":\"n2\","
	      "\"gpus\":[{\"type\":\"rtx4090\",\"index\":0,\"gemm_tflops\":"
	      "{\"bf16\":140,\"fp16\":150,\"fp32\":70},\"mem_bw_gbps\":900,"
	      "\"h2d_gbps\":20},{\"type\":\"rtx4090\",\"index\":1,"
	      "\"gemm_tflops\":{\"bf16\":120},\"attn_tflops\":{\"fwd\":99.12,"
	      "\"own\":8.26}}],\"links\":{\"intra_bw_gbps\":"
	      "15,\"intra_lat_s\":2e-5,\"inter_bw_gbps\":0.5,\"inter_lat_s\":"
	      "3e-4}}",
	      f);
	fclose(f);
	f = fopen(p2, "w");
	fputs("{\"format\":\"hexiscale-profile\",\"version\":1,\"host\":\"n3\","
	      "\"cpu\":{\"gemm_gflops\":250,\"threads\":16}}",
	      f);
	fclose(f);
	hexi_catalog_builtin(&cat);
	is_int(hexi_catalog_apply_profiles(cat, dir), HEXI_OK,
	       "apply a directory of profiles");
	t = hexi_catalog_find(cat, "rtx4090");
	is_near(t ? hexi_gpu_tflops(t) : 0, 130.0, 1e-9,
		"measured bf16 mean sets achievable TFLOPS");
	is_near(t ? t->efficiency : 0, 130.0 / 165.2, 1e-9,
		"efficiency = measured / peak");
	ok(t && t->measured == 1, "marked measured");
	is_near(t ? t->mem_bw_gbps : 0, 900, 1e-9, "measured memory bandwidth");
	is_near(t ? t->intra_bw_gbps : 0, 15, 1e-9, "measured intra link");
	is_near(t ? t->attn_efficiency * t->peak_tflops : 0, 99.12, 1e-9,
		"measured attn_tflops.fwd sets the fused forward rate");
	is_near(t ? t->attn_own_efficiency * t->peak_tflops : 0, 8.26, 1e-9,
		"measured attn_tflops.own sets the own kernel's rate");
	ok(t && t->attn_bwd_efficiency == 0.40,
	   "attn_tflops.bwd absent: built-in backward kept bit for bit");
	t = hexi_catalog_find(cat, "cpu");
	is_near(t ? t->peak_tflops : 0, 0.25, 1e-12, "cpu peak = measured");
	is_near(t ? t->efficiency : 0, 1.0, 1e-12, "cpu efficiency 1");
	t = hexi_catalog_find(cat, "a800");
	ok(t && t->measured == 0, "unmeasured type untouched");
	{
		char path[512];
		path_of(path, sizeof(path), "examples/clusters/paper.json");
		is_int(hexi_cluster_load(path, cat, &c), HEXI_OK,
		       "paper cluster");
		is_int(hexi_cluster_apply_profiles(c, dir), HEXI_OK,
		       "cluster profiles");
		is_near(c ? c->nodes[1].intra_bw_gbps : 0, 15, 1e-12,
			"host n2 intra from its profile");
		is_near(c ? c->inter_bw_gbps : 0, 0.5, 1e-12,
			"slowest measured inter link");
		is_near(c ? c->inter_lat_s : 0, 3e-4, 1e-12, "largest latency");
	}
	hexi_cluster_destroy(c);
	/* a GEMM above the datasheet raises the peak; the attention rates
	 * (TFLOPS) stay */
	f = fopen(p1, "w");
	fputs("{\"format\":\"hexiscale-profile\",\"version\":1,\"gpus\":[{"
	      "\"type\":\"t4\",\"gemm_tflops\":{\"fp16\":80}}]}",
	      f);
	fclose(f);
	is_int(hexi_catalog_apply_profiles(cat, p1), HEXI_OK,
	       "profile above the t4 peak");
	t = hexi_catalog_find(cat, "t4");
	is_near(t ? t->peak_tflops : 0, 80, 1e-12, "t4 peak raised to 80");
	is_near(t ? t->attn_efficiency * t->peak_tflops : 0, 0.5 * 65, 1e-9,
		"t4 fused attention rate kept (32.5 TFLOPS)");
	is_near(t ? t->attn_own_efficiency * t->peak_tflops : 0, 0.034 * 65,
		1e-9, "t4 own attention rate kept");
	f = fopen(p1, "w");
	fputs("{\"format\":\"hexiscale-profile\",\"version\":1,\"gpus\":[{"
	      "\"type\":\"nosuchgpu\"}]}",
	      f);
	fclose(f);
	is_int(hexi_catalog_apply_profiles(cat, p1), HEXI_ERR_NOTFOUND,
	       "profile with unknown type");
	ok(strstr(hexi_errmsg(HEXI_ERR_NOTFOUND), "gpus[0].type") != NULL,
	   "error names gpus[0].type: %s", hexi_errmsg(HEXI_ERR_NOTFOUND));
	is_int(hexi_catalog_apply_profiles(cat, "/nonexistent/x"),
	       HEXI_ERR_NOTFOUND, "missing profile path");
	unlink(p1);
	unlink(p2);
	rmdir(dir);
	hexi_catalog_destroy(cat);
}

/* Merging the same text twice changes nothing: aliases the type already
 * has (by name or alias, as the catalog matches them) are not added
 * again (they filled the 16 slots, and a third merge was refused). */
static void test_catalog_merge_twice(void)
{
	hexi_catalog *cat = NULL;
	const hexi_gpu_type *t;
	hexi_gpu_type once;
	size_t n;
	const char *js =
	    "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":["
	    "{\"name\":\"..l40\",\"aliases\":[\"l40-48g\",\"L40 48GB\","
	    "\"l40\",\"x9\",\"x9\"]},"
	    "{\"name\":\"zz2\",\"aliases\":[\"zz2b\"],\"peak_tflops\":10,"
	    "\"mem_gib\":8,\"mem_bw_gbps\":100,\"intra_bw_gbps\":8}]}";

	if (hexi_catalog_builtin(&cat) != HEXI_OK)
		tap_bail("built-in catalog");
	n = hexi_catalog_count(cat);
	is_int(hexi_catalog_parse(cat, js, strlen(js)), HEXI_OK,
	       "catalog naming l40 as '..l40' with repeated aliases");
	is_int(hexi_catalog_count(cat), n + 1, "one type added (zz2)");
	t = hexi_catalog_find(cat, "x9");
	ok(t != NULL && strcmp(t->name, "l40") == 0, "alias x9 finds l40");
	once = *t;
	for (int i = 0; i < 20; i++)
		if (hexi_catalog_parse(cat, js, strlen(js)) != HEXI_OK)
			break;
	hexi_error_clear();
	is_int(hexi_catalog_parse(cat, js, strlen(js)), HEXI_OK,
	       "the same text merges a 22nd time");
	is_int(hexi_catalog_count(cat), n + 1, "still one type added");
	t = hexi_catalog_find(cat, "l40");
	ok(t != NULL && memcmp(t, &once, sizeof(once)) == 0,
	   "l40 as after the first merge");
	hexi_catalog_destroy(cat);
}

/* The catalog merges are all or nothing: a refused entry or profile leaves
 * the catalog as it was, including the entries merged before it. */
static int same_catalog(const hexi_catalog *a, const hexi_gpu_type *snap,
			size_t n)
{
	if (hexi_catalog_count(a) != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (memcmp(hexi_catalog_at(a, i), &snap[i], sizeof(*snap)) != 0)
			return 0;
	return 1;
}

static void test_catalog_all_or_nothing(void)
{
	char dir[] = "/tmp/hexi-prof-XXXXXX", p1[128], p2[128];
	hexi_catalog *cat = NULL;
	hexi_gpu_type *snap;
	size_t n;
	FILE *f;
	const char *js =
	    "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":["
	    "{\"name\":\"a800\",\"efficiency\":0.5},"
	    "{\"name\":\"zz1\",\"peak_tflops\":100,\"mem_gib\":16,"
	    "\"mem_bw_gbps\":900,\"intra_bw_gbps\":32},"
	    "{\"name\":\"rtx4090\",\"efficiency\":7}]}";

	if (hexi_catalog_builtin(&cat) != HEXI_OK)
		tap_bail("built-in catalog");
	n = hexi_catalog_count(cat);
	snap = calloc(n, sizeof(*snap));
	if (snap == NULL)
		tap_bail("calloc");
	for (size_t i = 0; i < n; i++)
		snap[i] = *hexi_catalog_at(cat, i);
	is_int(hexi_catalog_parse(cat, js, strlen(js)), HEXI_ERR_RANGE,
	       "catalog whose third entry is out of range: refused");
	ok(strstr(hexi_errmsg(HEXI_ERR_RANGE), "gpus[2]") != NULL,
	   "the message names gpus[2]: %s", hexi_errmsg(HEXI_ERR_RANGE));
	ok(same_catalog(cat, snap, n),
	   "the catalog is unchanged: neither the a800 override nor zz1 of "
	   "the entries before it");
	ok(hexi_catalog_find(cat, "zz1") == NULL, "zz1 not added");

	if (mkdtemp(dir) == NULL)
		tap_bail("mkdtemp");
	snprintf(p1, sizeof(p1), "%s/a.json", dir);
	snprintf(p2, sizeof(p2), "%s/b.json", dir);
	/* a100 comes before t4 in the catalog: its figures are computed
	 * first, then t4's measured rate is not one to plan with */
	f = fopen(p1, "w");
	fputs("{\"format\":\"hexiscale-profile\",\"version\":1,\"gpus\":["
	      "{\"type\":\"a100\",\"gemm_tflops\":{\"bf16\":200},"
	      "\"mem_bw_gbps\":1500},"
	      "{\"type\":\"t4\",\"gemm_tflops\":{\"bf16\":1e-5}}]}",
	      f);
	fclose(f);
	is_int(hexi_catalog_apply_profiles(cat, p1), HEXI_ERR_RANGE,
	       "profile giving t4 an efficiency of 1.5e-7: refused");
	ok(strstr(hexi_errmsg(HEXI_ERR_RANGE), "t4") != NULL,
	   "the message names t4: %s", hexi_errmsg(HEXI_ERR_RANGE));
	ok(same_catalog(cat, snap, n),
	   "the catalog is unchanged: a100's measurement not applied either");
	/* a directory: the first file is good, the second names no type
	 * the catalog has */
	f = fopen(p1, "w");
	fputs("{\"format\":\"hexiscale-profile\",\"version\":1,\"gpus\":["
	      "{\"type\":\"a100\",\"gemm_tflops\":{\"bf16\":200}}]}",
	      f);
	fclose(f);
	f = fopen(p2, "w");
	fputs("{\"format\":\"hexiscale-profile\",\"version\":1,\"gpus\":["
	      "{\"type\":\"nosuchgpu\",\"gemm_tflops\":{\"bf16\":50}}]}",
	      f);
	fclose(f);
	is_int(hexi_catalog_apply_profiles(cat, dir), HEXI_ERR_NOTFOUND,
	       "directory whose second profile names an unknown type");
	ok(same_catalog(cat, snap, n), "the catalog is unchanged");
	unlink(p2);
	is_int(hexi_catalog_apply_profiles(cat, dir), HEXI_OK,
	       "the same directory without it");
	ok(!same_catalog(cat, snap, n) &&
	       hexi_catalog_find(cat, "a100")->measured == 1,
	   "a100 measured now");
	unlink(p1);
	rmdir(dir);
	free(snap);
	hexi_catalog_destroy(cat);
	test_catalog_merge_twice();
}

static void test_cluster(void)
{
	hexi_cluster *c = NULL, *d = NULL, *e = NULL;
	char path[512], *js = NULL;

	path_of(path, sizeof(path), "examples/clusters/paper.json");
	is_int(hexi_cluster_load(path, NULL, &c), HEXI_OK, "load paper.json");
	if (c == NULL)
		tap_bail("paper.json");
	is_int(c->nnodes, 3, "3 nodes");
	is_int(hexi_cluster_total_gpus(c), 8, "8 GPUs");
	is_str(c->nodes[0].gpu_type, "a800-80g", "canonical type name");
	is_near(c->nodes[0].intra_bw_gbps, 200, 1e-12, "A800 intra default");
	is_near(hexi_cluster_bw(c, 0, 1), 0.7, 1e-12, "inter 0.7 GB/s");
	is_near(hexi_cluster_bw(c, 2, 2), 20, 1e-12, "3090 intra default");
	is_int(c->nodes[1].gpu_index[2], 2, "count gives indices 0..n-1");
	is_int(hexi_cluster_to_json(c, &js), HEXI_OK, "cluster to JSON");
	is_int(hexi_cluster_parse(js, strlen(js), NULL, &d), HEXI_OK,
	       "written cluster parses");
	ok(d && d->nnodes == 3 && d->nodes[2].ngpus == 2 &&
	       d->inter_bw_gbps == c->inter_bw_gbps,
	   "round trip");
	free(js);
	is_int(hexi_cluster_clone(c, &e), HEXI_OK, "clone");
	ok(e && e->nodes != c->nodes && e->catalog != c->catalog &&
	       strcmp(e->nodes[2].name, "n3") == 0,
	   "clone is deep");
	hexi_cluster_destroy(c);
	hexi_cluster_destroy(d);
	hexi_cluster_destroy(e);

	path_of(path, sizeof(path), "examples/clusters/pair-matrix.json");
	is_int(hexi_cluster_load(path, NULL, &c), HEXI_OK, "pair matrix");
	is_near(hexi_cluster_bw(c, 1, 2), 1.25, 1e-12, "pair bandwidth");
	is_near(hexi_cluster_bw(c, 0, 2), 0.7, 1e-12, "pair bandwidth 2");
	is_int(c ? c->nodes[1].gpu_index[0] : -1, 1, "explicit GPU indices");
	is_int(hexi_cluster_to_json(c, &js), HEXI_OK, "matrix to JSON");
	is_int(hexi_cluster_parse(js, strlen(js), NULL, &d), HEXI_OK,
	       "matrix round trip");
	is_near(hexi_cluster_bw(d, 2, 1), 1.25, 1e-12, "matrix kept");
	free(js);
	hexi_cluster_destroy(c);
	hexi_cluster_destroy(d);

	{
		static const char *const types[] = {"a100-80g", "rtx4090",
						    "rtx3090", "l40s"};
		is_int(hexi_cluster_synthetic(1024, 8, types, 4, 10, &c),
		       HEXI_OK, "synthetic 1024 GPUs");
		is_int(hexi_cluster_total_gpus(c), 1024, "1024 GPUs");
		is_int(c ? c->nnodes : 0, 128, "128 nodes");
		is_str(c ? c->nodes[5].gpu_type : "", "rtx4090", "type cycle");
		path_of(path, sizeof(path),
			"examples/clusters/mixed-1024.json");
		is_int(hexi_cluster_load(path, NULL, &d), HEXI_OK,
		       "mixed-1024.json");
		is_str(d ? d->nodes[127].name : "", "node0127",
		       "generator names nodes like synthetic");
		is_str(d ? d->nodes[127].gpu_type : "",
		       c ? c->nodes[127].gpu_type : "?", "same types");
		hexi_cluster_destroy(c);
		hexi_cluster_destroy(d);
	}
}

/* The builder API the plugin uses. */
static void test_cluster_builder(void)
{
	hexi_cluster *c = NULL;
	hexi_catalog *cat = NULL;
	hexi_gpu_type t;
	char *js = NULL;
	int idx[2] = {3, 5};

	is_int(hexi_cluster_create(0, NULL, &c), HEXI_ERR_RANGE, "0 nodes");
	is_int(hexi_cluster_create(2, NULL, &c), HEXI_OK, "create 2 nodes");
	is_int(hexi_cluster_validate(c), HEXI_ERR_INVAL, "empty nodes invalid");
	is_int(hexi_cluster_to_json(c, &js), HEXI_ERR_INVAL,
	       "invalid cluster not written");
	is_int(hexi_cluster_set_node(c, 0, "gpu01", "gpu:3", 3, NULL, 0),
	       HEXI_ERR_NOTFOUND, "gres without a type is not a type");
	is_int(hexi_cluster_set_node(c, 0, "gpu01", "gpu:a800:3", 3, NULL, 0),
	       HEXI_OK, "gres gpu:a800:3 names a800");
	is_str(c->nodes[0].gpu_type, "a800-80g", "gres resolved");
	is_int(hexi_cluster_set_node(c, 0, "gpu01", "a800", 3, NULL, 0),
	       HEXI_OK, "node 0");
	is_int(hexi_cluster_set_node(c, 1, "gpu02", "NVIDIA GeForce RTX 4090",
				     2, idx, 7.5),
	       HEXI_OK, "node 1 with indices and bandwidth");
	is_int(hexi_cluster_set_node(c, 1, "bad name", "t4", 1, NULL, 0),
	       HEXI_ERR_INVAL, "bad host name");
	is_int(hexi_cluster_set_node(c, 2, "x", "t4", 1, NULL, 0),
	       HEXI_ERR_INVAL, "node index out of range");
	is_int(hexi_cluster_set_node(c, 1, "gpu02", "t4", 65, NULL, 0),
	       HEXI_ERR_RANGE, "65 GPUs on a node");
	is_int(hexi_cluster_validate(c), HEXI_ERR_RANGE, "inter bw not set");
	c->inter_bw_gbps = 3;
	is_int(hexi_cluster_validate(c), HEXI_OK, "valid once inter bw set");
	is_str(c->nodes[1].gpu_type, "rtx4090", "type canonical");
	is_int(c->nodes[1].gpu_index[1], 5, "indices copied");
	is_near(hexi_cluster_bw(c, 1, 1), 7.5, 1e-12, "given intra bw");
	is_near(hexi_cluster_bw(c, 0, 0), 200, 1e-12, "catalog intra bw");
	is_near(hexi_cluster_bw(c, 0, 9), 0, 1e-12, "bad node index: 0");
	ok(hexi_cluster_gpu(c, 0) && hexi_cluster_gpu(c, 0)->mem_gib == 80,
	   "hexi_cluster_gpu");
	is_int(hexi_cluster_to_json(c, &js), HEXI_OK, "write built cluster");
	ok(js && strstr(js, "\"gpus\": [3, 5]") != NULL, "indices written: %s",
	   js ? js : "");
	free(js);
	hexi_cluster_destroy(c);

	hexi_catalog_builtin(&cat);
	memset(&t, 0, sizeof(t));
	snprintf(t.name, sizeof(t.name), "gaudi2");
	t.peak_tflops = 432;
	t.mem_gib = 96;
	t.mem_bw_gbps = 2450;
	t.intra_bw_gbps = 300;
	t.efficiency = 0.6;
	is_int(hexi_catalog_set(cat, &t), HEXI_OK, "catalog_set adds");
	t.efficiency = 0;
	is_int(hexi_catalog_set(cat, &t), HEXI_ERR_RANGE,
	       "efficiency 0 refused");
	t.efficiency = 0.5;
	snprintf(t.name, sizeof(t.name), "A800");
	is_int(hexi_catalog_set(cat, &t), HEXI_OK, "catalog_set replaces");
	ok(hexi_catalog_find(cat, "a800-80g")->peak_tflops == 432 &&
	       strcmp(hexi_catalog_find(cat, "a800")->name, "a800-80g") == 0,
	   "replacement keeps name and aliases");
	ok(hexi_catalog_find(cat, "a800")->attn_efficiency == 0.60 &&
	       hexi_catalog_find(cat, "a800")->compute_capability == 8.0,
	   "replacement without attention fields keeps the type's");
	{
		hexi_catalog *d = NULL;
		is_int(hexi_catalog_clone(cat, &d), HEXI_OK, "catalog clone");
		is_int(hexi_catalog_count(d), hexi_catalog_count(cat),
		       "clone has every type");
		ok(hexi_catalog_find(d, "gaudi2") != NULL,
		   "clone has added type");
		ok(hexi_catalog_at(d, 1000) == NULL,
		   "at() out of range is NULL");
		hexi_catalog_destroy(d);
	}
	hexi_catalog_destroy(cat);
	hexi_catalog_destroy(NULL);
	hexi_cluster_destroy(NULL);
	hexi_plan_destroy(NULL);
	hexi_layout_destroy(NULL);
}

static void test_models(void)
{
	hexi_model m;
	char path[512];
	static const struct {
		const char *name;
		int L, h, H, kv, F;
	} want[] = {{"llama2-7b", 32, 4096, 32, 32, 11008},
		    {"llama2-13b", 40, 5120, 40, 40, 13824},
		    {"llama-30b", 60, 6656, 52, 52, 17920},
		    {"llama2-70b", 80, 8192, 64, 8, 28672},
		    {"tiny-4l", 4, 48, 6, 6, 128},
		    {"tiny-8l", 8, 48, 6, 6, 128},
		    {"tiny-gqa", 4, 48, 6, 3, 128}};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		hexi_model f;
		is_int(hexi_model_load(want[i].name, &m), HEXI_OK,
		       "built-in %s", want[i].name);
		ok(m.layers == want[i].L && m.hidden == want[i].h &&
		       m.heads == want[i].H && m.kv_heads == want[i].kv &&
		       m.ffn == want[i].F,
		   "%s shape", want[i].name);
		snprintf(path, sizeof(path), "%s/examples/models/%s.json",
			 srcdir(), want[i].name);
		is_int(hexi_model_load(path, &f), HEXI_OK, "%s.json",
		       want[i].name);
		ok(memcmp(&f, &m, sizeof(m)) == 0, "%s.json equals built-in",
		   want[i].name);
	}
	hexi_model_builtin("llama2-7b", &m);
	is_near(hexi_model_params(&m), 6738415616.0, 1e-12,
		"llama2-7b has 6738415616 parameters");
	hexi_model_builtin("llama2-70b", &m);
	is_near(hexi_model_params(&m), 68976648192.0, 1e-12,
		"llama2-70b has 68976648192 parameters");
	is_int(hexi_model_load("gpt-9", &m), HEXI_ERR_NOTFOUND,
	       "unknown model");
	{
		char *js = NULL;
		hexi_model n;
		hexi_model_builtin("tiny-gqa", &m);
		is_int(hexi_model_to_json(&m, &js), HEXI_OK, "model to JSON");
		is_int(hexi_model_parse(js, strlen(js), &n), HEXI_OK,
		       "model round trip");
		ok(memcmp(&m, &n, sizeof(m)) == 0,
		   "model equal after round trip");
		free(js);
	}
}

static void test_plan(void)
{
	hexi_cluster *c = tcluster(
	    "{\"nodes\":[{\"name\":\"n1\",\"gpu\":\"a800\",\"count\":3},"
	    "{\"name\":\"n2\",\"gpu\":\"rtx4090\",\"gpus\":[0,2,3]},"
	    "{\"name\":\"n3\",\"gpu\":\"rtx3090\",\"count\":2}],"
	    "\"inter_bw_gbps\":0.7}");
	/* p0: n1 TP2 layers 0-29, n2 TP1 layers 30-39 (gpu 3)
	 * p1: n2 TP2 (gpus 0,2) 0-19, n3 TP2 20-39, n1 gpu 2 unused */
	tpipe pp[2] = {{8, 4, {{0, 2, 0, 0, 30}, {1, 1, 2, 30, 40}}},
		       {4, 2, {{1, 2, 0, 0, 20}, {2, 2, 0, 20, 40}}}};
	hexi_plan *p = tplan(c, "llama2-13b", 2, pp), *q = NULL, *r = NULL;
	hexi_role role;
	char *js = NULL, *js2 = NULL;

	is_int(hexi_plan_validate(p), HEXI_OK, "hand-built plan is valid");
	is_int(hexi_plan_hash(p), HEXI_OK, "hash");
	is_int((int)strlen(p->hash), 16, "16 hex digits");
	p->pred.iter_s = 12.5;
	p->pred.mfu = 0.4;
	p->pipelines[1].stages[1].mem_gib = 17.25;
	p->pipelines[0].time_s = 11;
	is_int(hexi_plan_to_json(p, &js), HEXI_OK, "plan to JSON");
	ok(js && strstr(js, "\"hexiscale-plan\"") && strstr(js, p->hash) &&
	       strstr(js, "\"sync\"") && strstr(js, "\"prediction\""),
	   "JSON has format, hash, sync, prediction");
	is_int(hexi_plan_parse(js, strlen(js), NULL, &q), HEXI_OK,
	       "written plan parses: %s", hexi_errmsg(HEXI_ERR_INTERNAL));
	if (q == NULL)
		tap_bail("plan parse");
	is_str(q->hash, p->hash, "hash verified and equal");
	is_near(q->pred.iter_s, 12.5, 1e-12, "prediction read");
	is_near(q->pipelines[1].stages[1].mem_gib, 17.25, 1e-12,
		"stage memory read");
	is_near(q->pipelines[0].time_s, 11, 1e-12, "pipeline time read");
	is_int(q->pipelines[1].stages[0].devices[1].gpu, 2, "GPU index kept");
	is_str(q->strategy, "manual", "strategy kept");
	is_int(hexi_plan_to_json(q, &js2), HEXI_OK, "re-write");
	is_str(js2, js, "write(parse(write(p))) == write(p)");
	free(js2);
	/* prediction is not hashed */
	q->pred.iter_s = 99;
	is_int(hexi_plan_hash(q), HEXI_OK, "rehash");
	is_str(q->hash, p->hash, "prediction does not change the hash");
	q->pipelines[0].micro_batches = 8;
	hexi_plan_hash(q);
	ok(strcmp(q->hash, p->hash) != 0, "micro-batches change the hash");
	/* tampering */
	{
		char *t = strdup(js), *at = strstr(t, "\"micro_batches\": 4");
		ok(at != NULL, "found micro_batches in JSON");
		if (at)
			at[17] = '2';
		is_int(hexi_plan_parse(t, strlen(t), NULL, &r),
		       HEXI_ERR_CHECKSUM, "edited plan: hash mismatch");
		ok(strstr(hexi_errmsg(HEXI_ERR_CHECKSUM), "hash") != NULL,
		   "message names hash: %s", hexi_errmsg(HEXI_ERR_CHECKSUM));
		free(t);
	}
	is_int(hexi_plan_clone(p, &r), HEXI_OK, "clone");
	ok(r && r->pipelines != p->pipelines &&
	       r->pipelines[1].stages[1].devices !=
		   p->pipelines[1].stages[1].devices &&
	       r->pipelines[1].stages[1].devices[1].rank == 6,
	   "clone is deep");
	is_int(hexi_plan_validate(r), HEXI_OK, "clone valid");
	hexi_plan_destroy(r);

	is_int(hexi_plan_role(p, 3, &role), HEXI_OK, "role of rank 3");
	ok(role.pipeline == 1 && role.stage == 0 && role.tp_rank == 0 &&
	       role.tp_size == 2 && role.node == 1 && role.gpu == 0,
	   "rank 3: pipeline 1 stage 0 tp 0/2 on n2 gpu 0");
	is_int(role.local_rank, 1, "rank 3 is local rank 1 on n2 (2,3,4)");
	is_int(role.local_world_size, 3, "3 ranks on n2");
	is_int(role.micro_batch_size, 2, "micro-batch size 4/2");
	ok(role.layer_begin == 0 && role.layer_end == 20, "layers 0-20");
	is_int(hexi_plan_role(p, 2, &role), HEXI_OK, "role of rank 2");
	ok(role.local_rank == 0 && role.gpu == 3 && role.stage == 1,
	   "rank 2: local 0, gpu 3, stage 1");
	is_int(hexi_plan_role(p, 7, &role), HEXI_ERR_NOTFOUND, "no rank 7");
	{
		int pi = -1, si = -1, ti = -1;
		is_int(hexi_plan_find_rank(p, 6, &pi, &si, &ti), HEXI_OK,
		       "find rank 6");
		ok(pi == 1 && si == 1 && ti == 1, "rank 6 is p1 s1 tp1");
	}

	free(js);
	hexi_plan_destroy(q);
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
}

/* Idle GPUs: the plan of test_plan with n1's GPU 2 listed idle (rank 7):
 * hashed and written only when present, round trip, its role, bad lists. */
static void test_plan_idle(void)
{
	hexi_cluster *c = tcluster(
	    "{\"nodes\":[{\"name\":\"n1\",\"gpu\":\"a800\",\"count\":3},"
	    "{\"name\":\"n2\",\"gpu\":\"rtx4090\",\"gpus\":[0,2,3]},"
	    "{\"name\":\"n3\",\"gpu\":\"rtx3090\",\"count\":2}],"
	    "\"inter_bw_gbps\":0.7}");
	tpipe pp[2] = {{8, 4, {{0, 2, 0, 0, 30}, {1, 1, 2, 30, 40}}},
		       {4, 2, {{1, 2, 0, 0, 20}, {2, 2, 0, 20, 40}}}};
	hexi_plan *p = tplan(c, "llama2-13b", 2, pp), *q = NULL;
	hexi_device idle = {.node = 0, .gpu = 2, .rank = 7};
	char h0[HEXI_HASH_HEX], *js = NULL, *js2 = NULL;
	hexi_role role;

	hexi_plan_hash(p);
	snprintf(h0, sizeof(h0), "%s", p->hash);
	is_int(hexi_plan_to_json(p, &js), HEXI_OK, "write without idle");
	ok(js && strstr(js, "\"idle\"") == NULL,
	   "no idle key when no GPU is listed (old hashes stay)");
	free(js);
	p->idle = malloc(sizeof(hexi_device));
	*p->idle = idle;
	p->nidle = 1;
	is_int(hexi_plan_tasks(p), 8, "7 ranks + 1 idle = 8 tasks");
	is_int(hexi_plan_validate(p), HEXI_OK,
	       "plan with an idle GPU valid: %s", hexi_errmsg(HEXI_ERR_INVAL));
	hexi_plan_hash(p);
	ok(strcmp(p->hash, h0) != 0, "the idle list is hashed");
	is_int(hexi_plan_to_json(p, &js), HEXI_OK, "write with idle");
	ok(js && strstr(js, "\"idle\": [{\"node\": \"n1\", \"gpu\": 2, "
			    "\"rank\": 7}]"),
	   "idle written as {node, gpu, rank}");
	is_int(hexi_plan_parse(js, strlen(js), NULL, &q), HEXI_OK,
	       "re-read: %s", hexi_errmsg(HEXI_ERR_INTERNAL));
	if (q == NULL)
		tap_bail("idle plan re-read");
	is_str(q->hash, p->hash, "hash verified after re-read");
	is_int(hexi_plan_to_json(q, &js2), HEXI_OK, "re-write");
	is_str(js2, js, "round trip identical");
	is_int(hexi_plan_find_idle(q, 7), 0, "rank 7 is idle[0]");
	is_int(hexi_plan_find_idle(q, 3), -1, "rank 3 is not idle");
	is_int(hexi_plan_role(q, 7, &role), HEXI_OK, "role of the idle rank");
	ok(role.idle == 1 && role.pipeline == -1 && role.stage == -1 &&
	       role.tp_rank == -1 && role.nstages == 0 && role.batch == 0 &&
	       role.node == 0 && role.gpu == 2 && role.world_size == 7,
	   "idle role: no pipeline, node n1 GPU 2, world_size 7");
	ok(role.local_rank == 2 && role.local_world_size == 3,
	   "idle rank is local 2 of 3 on n1 (ranks 0, 1, 7)");
	is_int(hexi_plan_role(q, 1, &role), HEXI_OK, "role of rank 1");
	ok(role.idle == 0 && role.local_rank == 1 && role.local_world_size == 3,
	   "training rank: not idle, local 1 of 3 tasks on n1");
	is_int(hexi_plan_role(q, 8, &role), HEXI_ERR_NOTFOUND, "no rank 8");
	{
		hexi_plan *r = NULL;
		is_int(hexi_plan_clone(q, &r), HEXI_OK, "clone");
		ok(r && r->idle != q->idle && r->nidle == 1 &&
		       r->idle[0].rank == 7,
		   "clone copies the idle list");
		hexi_plan_destroy(r);
	}
	/* bad lists: each one clear line naming idle[0] */
	{
		static const struct {
			hexi_device d;
			const char *what;
		} bad[] = {
		    {{0, 1, 7}, "used twice"}, /* GPU of stage 0 */
		    {{0, 2, 3}, "rank 3 is used twice"},
		    {{0, 2, 9}, "idle[0].rank: 9 is not in 0..7"},
		    {{0, 5, 7}, "node 'n1' has no GPU 5"},
		};
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			hexi_rc rv;
			q->idle[0] = bad[i].d;
			rv = hexi_plan_validate(q);
			is_int(rv, HEXI_ERR_INVAL, "bad idle %zu refused", i);
			ok(strstr(hexi_errmsg(rv), "idle[0]") &&
			       strstr(hexi_errmsg(rv), bad[i].what),
			   "names idle[0] and '%s': %s", bad[i].what,
			   hexi_errmsg(rv));
		}
	}
	free(js);
	free(js2);
	hexi_plan_destroy(q);
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
}

/* train.zero and a pipeline's own recompute: defaults, round trip, the
 * hash of plans without them unchanged, role fields, bad values. */
static void test_plan_memory_fields(void)
{
	char path[512], *js = NULL, *js2 = NULL, old_hash[HEXI_HASH_HEX];
	hexi_plan *p = NULL, *q = NULL, *r = NULL;
	hexi_role role;
	hexi_rc rv;

	path_of(path, sizeof(path), "tests/scheduler/corpus/plan/minimal.json");
	rv = hexi_plan_load(path, NULL, &p);
	if (rv != HEXI_OK)
		tap_bail("minimal plan does not load");
	is_int(p->train.zero, 0, "zero defaults to 0");
	is_int(p->pipelines[0].recompute, HEXI_RECOMPUTE_INHERIT,
	       "pipeline recompute defaults to inherit");
	is_int(hexi_plan_recompute(p, 0), 1, "inherits train.recompute");
	is_int(hexi_plan_to_json(p, &js), HEXI_OK, "write");
	ok(js && strstr(js, "\"zero\"") == NULL,
	   "zero 0 is not written (hash of old plans unchanged)");
	snprintf(old_hash, sizeof(old_hash), "%s", p->hash);
	free(js);
	js = NULL;

	p->train.zero = 2;
	p->pipelines[0].recompute = HEXI_RECOMPUTE_OFF;
	is_int(hexi_plan_validate(p), HEXI_OK, "zero 2, recompute off valid");
	is_int(hexi_plan_hash(p), HEXI_OK, "rehash");
	ok(strcmp(p->hash, old_hash) != 0, "zero and recompute are hashed");
	is_int(hexi_plan_to_json(p, &js), HEXI_OK, "write with fields");
	ok(js && strstr(js, "\"zero\": 2") &&
	       strstr(js, "\"recompute\": false"),
	   "zero and the pipeline's recompute written");
	is_int(hexi_plan_parse(js, strlen(js), NULL, &q), HEXI_OK,
	       "re-read: %s", hexi_errmsg(HEXI_ERR_INTERNAL));
	if (q == NULL)
		tap_bail("re-read");
	is_int(q->train.zero, 2, "zero read back");
	is_int(hexi_plan_recompute(q, 0), 0, "pipeline's own recompute read");
	is_int(hexi_plan_to_json(q, &js2), HEXI_OK, "re-write");
	is_str(js2, js, "round trip identical");
	is_int(hexi_plan_role(q, 0, &role), HEXI_OK, "role");
	ok(role.zero == 2 && role.recompute == 0,
	   "role carries zero/recompute");
	q->train.zero = 3;
	is_int(hexi_plan_validate(q), HEXI_ERR_RANGE, "zero 3 refused");
	ok(strstr(hexi_errmsg(HEXI_ERR_RANGE), "train.zero") != NULL,
	   "message names train.zero: %s", hexi_errmsg(HEXI_ERR_RANGE));
	{
		char *t = strdup(js), *at = strstr(t, "\"zero\": 2");
		if (at)
			at[8] = '7';
		rv = hexi_plan_parse(t, strlen(t), NULL, &r);
		is_int(rv, HEXI_ERR_RANGE, "zero 7 in JSON refused");
		hexi_plan_destroy(r);
		free(t);
	}
	free(js);
	free(js2);
	hexi_plan_destroy(q);
	hexi_plan_destroy(p);
}

/* The example of hexiscale-plan(5): no hash, no world_size, defaults. */
static void test_minimal_plan(void)
{
	char path[512];
	hexi_plan *p = NULL;
	hexi_rc rv;

	path_of(path, sizeof(path), "tests/scheduler/corpus/plan/minimal.json");
	rv = hexi_plan_load(path, NULL, &p);
	is_int(rv, HEXI_OK, "minimal plan of the man page: %s",
	       rv ? hexi_errmsg(rv) : "ok");
	is_int(p ? p->world_size : 0, 2, "world_size computed");
	is_int(p ? p->model.kv_heads : 0, 6, "kv_heads defaults to heads");
	is_int(p ? p->train.recompute : 0, 1, "train defaults");
	ok(p && strlen(p->hash) == 16, "hash computed");
	hexi_plan_destroy(p);
}

static void test_examples(void)
{
	static const char *const plans[] = {"paper-7b", "tiny-4l-cpu4",
					    "tiny-gqa-cpu2x2", "tiny-8l-tp123"};
	static const char *const clusters[] = {"paper",
					       "reference-known-answer",
					       "homo-a100-8",
					       "homo-a100-16",
					       "hetero-a100-4090-12",
					       "hetero-a100-4090-24",
					       "pair-matrix",
					       "cpu-1x4",
					       "cpu-2x2",
					       "mixed-8",
					       "mixed-64",
					       "mixed-320",
					       "mixed-1024"};
	char path[512];

	for (size_t i = 0; i < sizeof(plans) / sizeof(plans[0]); i++) {
		hexi_plan *p = NULL;
		hexi_rc rv;
		snprintf(path, sizeof(path), "%s/examples/plans/%s.json",
			 srcdir(), plans[i]);
		rv = hexi_plan_load(path, NULL, &p);
		is_int(rv, HEXI_OK, "example plan %s: %s", plans[i],
		       rv ? hexi_errmsg(rv) : "ok");
		hexi_plan_destroy(p);
	}
	for (size_t i = 0; i < sizeof(clusters) / sizeof(clusters[0]); i++) {
		hexi_cluster *c = NULL;
		hexi_rc rv;
		snprintf(path, sizeof(path), "%s/examples/clusters/%s.json",
			 srcdir(), clusters[i]);
		rv = hexi_cluster_load(path, NULL, &c);
		is_int(rv, HEXI_OK, "example cluster %s: %s", clusters[i],
		       rv ? hexi_errmsg(rv) : "ok");
		hexi_cluster_destroy(c);
	}
}

int main(void)
{
	test_catalog();
	test_profiles();
	test_catalog_all_or_nothing();
	test_cluster();
	test_cluster_builder();
	test_models();
	test_plan();
	test_examples();
	test_minimal_plan();
	test_plan_memory_fields();
	test_plan_idle();
	return tap_done();
}
