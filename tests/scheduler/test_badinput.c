/*
 * test_badinput.c - every parser against a table of bad inputs: each must
 * fail with the right code and a one-line message naming the field.
 */
#include "config.h"

#include "sched_test.h"

#include <jansson.h>
#include <unistd.h>

enum kind { CLUSTER, MODEL, CATALOG, PROFILE, PLAN };

typedef struct bad {
	enum kind kind;
	const char *input; /* JSON text, or for PLAN "path=value" edits */
	hexi_rc rc;
	const char *field; /* must appear in the message */
} bad;

#define N2                                                                     \
	"\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\",\"count\":2},"            \
	"{\"name\":\"b\",\"gpu\":\"4090\",\"count\":2}]"

static const bad cases[] = {
    /* cluster */
    {CLUSTER, "{\"nodes\":[{\"name\":\"a\",\"gpu\":\"mi300x\",\"count\":1}]}",
     HEXI_ERR_NOTFOUND, "nodes[0].gpu"},
    {CLUSTER, "{\"nodes\":[{\"name\":\"a\",", HEXI_ERR_PARSE, "malformed JSON"},
    {CLUSTER, "", HEXI_ERR_PARSE, "malformed JSON"},
    {CLUSTER, "[1,2]", HEXI_ERR_PARSE, "top level"},
    {CLUSTER, "{" N2 ",\"inter_bw_gbps\":0}", HEXI_ERR_RANGE, "inter_bw_gbps"},
    {CLUSTER, "{" N2 ",\"inter_bw_gbps\":-1}", HEXI_ERR_RANGE, "inter_bw_gbps"},
    {CLUSTER, "{" N2 "}", HEXI_ERR_PARSE, "inter_bw_gbps: missing"},
    {CLUSTER, "{" N2 ",\"inter_bw_gbps\":\"fast\"}", HEXI_ERR_PARSE,
     "inter_bw_gbps"},
    {CLUSTER, "{" N2 ",\"inter_bw_gbps\":1e400}", HEXI_ERR_PARSE,
     "malformed JSON"},
    {CLUSTER, "{" N2 ",\"inter_bw_gbps\":1e300}", HEXI_ERR_RANGE,
     "inter_bw_gbps"},
    {CLUSTER, "{" N2 ",\"inter_bw_gbps\":[[0,1],[0,0]]}", HEXI_ERR_RANGE,
     "inter_bw_gbps[1][0]"},
    {CLUSTER, "{" N2 ",\"inter_bw_gbps\":[[0,1]]}", HEXI_ERR_INVAL,
     "inter_bw_gbps"},
    {CLUSTER, "{" N2 ",\"inter_bw_gbps\":[[0,1],[1]]}", HEXI_ERR_PARSE,
     "inter_bw_gbps[1]"},
    {CLUSTER, "{" N2 ",\"inter_bw_gbps\":1,\"inter_lat_s\":-1}", HEXI_ERR_RANGE,
     "inter_lat_s"},
    {CLUSTER,
     "{\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\",\"count\":1,"
     "\"intra_bw_gbps\":-5}]}",
     HEXI_ERR_RANGE, "nodes[0].intra_bw_gbps"},
    {CLUSTER,
     "{\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\",\"count\":1,"
     "\"intra_bw_gbps\":0}]}",
     HEXI_ERR_RANGE, "nodes[0].intra_bw_gbps"},
    {CLUSTER, "{\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\",\"count\":65}]}",
     HEXI_ERR_RANGE, "nodes[0].count"},
    {CLUSTER, "{\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\",\"count\":0}]}",
     HEXI_ERR_RANGE, "nodes[0].count"},
    {CLUSTER, "{\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\",\"count\":1e30}]}",
     HEXI_ERR_PARSE, "nodes[0].count"},
    {CLUSTER,
     "{\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\",\"count\":"
     "99999999999999999999}]}",
     HEXI_ERR_PARSE, "malformed JSON"},
    {CLUSTER, "{\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\"}]}", HEXI_ERR_PARSE,
     "nodes[0]: needs"},
    {CLUSTER, "{\"nodes\":[{\"gpu\":\"a100\",\"count\":1}]}", HEXI_ERR_PARSE,
     "nodes[0].name: missing"},
    {CLUSTER, "{\"nodes\":[{\"name\":5,\"gpu\":\"a100\",\"count\":1}]}",
     HEXI_ERR_PARSE, "nodes[0].name"},
    {CLUSTER, "{\"nodes\":[{\"name\":\"a b\",\"gpu\":\"a100\",\"count\":1}]}",
     HEXI_ERR_INVAL, "nodes[0].name"},
    {CLUSTER,
     "{\"nodes\":[{\"name\":\"a\\u0000b\",\"gpu\":\"a100\",\"count\":1}]}",
     HEXI_ERR_PARSE, "JSON_ALLOW_NUL"},
    {CLUSTER,
     "{\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\",\"count\":1,"
     "\"colour\":\"red\"}]}",
     HEXI_ERR_PARSE, "nodes[0].colour: unknown key"},
    {CLUSTER, "{\"nodes\":[],\"x\":1}", HEXI_ERR_PARSE, "x: unknown key"},
    {CLUSTER, "{\"nodes\":[]}", HEXI_ERR_PARSE, "nodes: must not be empty"},
    {CLUSTER, "{}", HEXI_ERR_PARSE, "nodes: missing"},
    {CLUSTER, "{\"nodes\":{}}", HEXI_ERR_PARSE, "nodes: expected an array"},
    {CLUSTER,
     "{\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\",\"count\":1},"
     "{\"name\":\"a\",\"gpu\":\"a100\",\"count\":1}],"
     "\"inter_bw_gbps\":1}",
     HEXI_ERR_INVAL, "nodes[1].name"},
    {CLUSTER, "{\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\",\"gpus\":[0,0]}]}",
     HEXI_ERR_INVAL, "nodes[0].gpus[1]"},
    {CLUSTER, "{\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\",\"gpus\":[-1]}]}",
     HEXI_ERR_RANGE, "nodes[0].gpus[0]"},
    {CLUSTER,
     "{\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\",\"count\":2,"
     "\"gpus\":[0]}]}",
     HEXI_ERR_INVAL, "nodes[0].count"},
    {CLUSTER, "{\"nodes\":[],\"nodes\":[]}", HEXI_ERR_PARSE, "duplicate"},
    {CLUSTER, "{\"version\":2,\"nodes\":[]}", HEXI_ERR_VERSION, "version"},
    {CLUSTER, "{\"format\":\"hexiscale-plan\",\"nodes\":[]}", HEXI_ERR_PARSE,
     "format"},
    {CLUSTER,
     "{\"gpu_types\":[{\"name\":\"a100\",\"efficiency\":1.5}],"
     "\"nodes\":[{\"name\":\"a\",\"gpu\":\"a100\",\"count\":1}]}",
     HEXI_ERR_RANGE, "gpu_types[0].efficiency"},
    {CLUSTER,
     "{\"gpu_types\":[{\"name\":\"x1\",\"peak_tflops\":5}],"
     "\"nodes\":[{\"name\":\"a\",\"gpu\":\"x1\",\"count\":1}]}",
     HEXI_ERR_PARSE, "gpu_types[0].mem_gib: missing"},
    /* model */
    {MODEL,
     "{\"name\":\"m\",\"layers\":0,\"hidden\":8,\"heads\":2,\"ffn\":8,"
     "\"vocab\":8,\"seq_len\":8}",
     HEXI_ERR_RANGE, "model.layers"},
    {MODEL,
     "{\"name\":\"m\",\"layers\":2,\"hidden\":9,\"heads\":2,\"ffn\":8,"
     "\"vocab\":8,\"seq_len\":8}",
     HEXI_ERR_INVAL, "model.hidden"},
    {MODEL,
     "{\"name\":\"m\",\"layers\":2,\"hidden\":8,\"heads\":4,"
     "\"kv_heads\":3,\"ffn\":8,\"vocab\":8,\"seq_len\":8}",
     HEXI_ERR_INVAL, "model.kv_heads"},
    {MODEL,
     "{\"name\":\"m\",\"layers\":2,\"hidden\":8,\"heads\":2,"
     "\"vocab\":8,\"seq_len\":8}",
     HEXI_ERR_PARSE, "model.ffn: missing"},
    {MODEL,
     "{\"name\":\"m\",\"layers\":2,\"hidden\":8,\"heads\":2,\"ffn\":8,"
     "\"vocab\":8,\"seq_len\":8,\"dropout\":0.1}",
     HEXI_ERR_PARSE, "model.dropout: unknown key"},
    {MODEL,
     "{\"name\":\"m\",\"layers\":\"2\",\"hidden\":8,\"heads\":2,"
     "\"ffn\":8,\"vocab\":8,\"seq_len\":8}",
     HEXI_ERR_PARSE, "model.layers"},
    {MODEL,
     "{\"name\":\"m\",\"layers\":2,\"hidden\":8,\"heads\":2,\"ffn\":8,"
     "\"vocab\":8,\"seq_len\":4000000000}",
     HEXI_ERR_RANGE, "model.seq_len"},
    {MODEL,
     "{\"name\":\"m\",\"layers\":2,\"hidden\":8,\"heads\":2,\"ffn\":8,"
     "\"vocab\":-8,\"seq_len\":8}",
     HEXI_ERR_RANGE, "model.vocab"},
    /* what the runtime refuses is refused here (plans it cannot run) */
    {MODEL,
     "{\"name\":\"m\",\"layers\":2,\"hidden\":6,\"heads\":2,\"ffn\":8,"
     "\"vocab\":8,\"seq_len\":8}",
     HEXI_ERR_INVAL, "model.hidden: head size 3 (hidden 6 / heads 2) is odd"},
    {MODEL,
     "{\"name\":\"m\",\"layers\":2,\"hidden\":8,\"heads\":2,\"ffn\":8,"
     "\"vocab\":1,\"seq_len\":8}",
     HEXI_ERR_RANGE, "model.vocab: 1"},
    {MODEL, "{\"layers\":2}", HEXI_ERR_PARSE, "model.name"},
    {MODEL, "nope", HEXI_ERR_PARSE, "malformed JSON"},
    /* catalog */
    {CATALOG, "{\"gpus\":[]}", HEXI_ERR_PARSE, "format"},
    {CATALOG,
     "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":"
     "[{\"name\":\"new\",\"peak_tflops\":1}]}",
     HEXI_ERR_PARSE, "gpus[0].mem_gib: missing"},
    {CATALOG,
     "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":"
     "[{\"name\":\"t4\",\"efficiency\":0}]}",
     HEXI_ERR_RANGE, "gpus[0].efficiency"},
    {CATALOG,
     "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":"
     "[{\"name\":\"t4\",\"aliases\":[7]}]}",
     HEXI_ERR_PARSE, "gpus[0].aliases[0]"},
    {CATALOG,
     "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":"
     "[{\"name\":\"t4\",\"tdp\":70}]}",
     HEXI_ERR_PARSE, "gpus[0].tdp: unknown key"},
    {CATALOG,
     "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":"
     "[{\"name\":\"t4\",\"attn_efficiency\":1.5}]}",
     HEXI_ERR_RANGE, "gpus[0].attn_efficiency"},
    {CATALOG,
     "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":"
     "[{\"name\":\"t4\",\"attn_bwd_efficiency\":0}]}",
     HEXI_ERR_RANGE, "gpus[0].attn_bwd_efficiency"},
    {CATALOG,
     "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":"
     "[{\"name\":\"t4\",\"attn_own_efficiency\":\"low\"}]}",
     HEXI_ERR_PARSE, "gpus[0].attn_own_efficiency"},
    {CATALOG,
     "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":"
     "[{\"name\":\"t4\",\"compute_capability\":100}]}",
     HEXI_ERR_RANGE, "gpus[0].compute_capability"},
    /* a type named like Slurm's GRES could never be found by its name */
    {CATALOG,
     "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":"
     "[{\"name\":\"gpu:x1\",\"peak_tflops\":1,\"mem_gib\":1,"
     "\"mem_bw_gbps\":1,\"intra_bw_gbps\":1}]}",
     HEXI_ERR_INVAL, "gpus[0]: GPU type name 'gpu:x1' is a Slurm GRES"},
    /* an alias naming another type could never find this one */
    {CATALOG,
     "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":"
     "[{\"name\":\"t4\",\"aliases\":[\"tesla t4\",\"A800\"]}]}",
     HEXI_ERR_INVAL,
     "gpus[0].aliases[1]: 'A800' already names GPU type "
     "a800-80g"},
    /* profile */
    {PROFILE, "{\"format\":\"hexiscale-plan\",\"version\":1}", HEXI_ERR_PARSE,
     "format"},
    {PROFILE, "{\"version\":1}", HEXI_ERR_PARSE, "format: missing"},
    {PROFILE, "{\"format\":\"hexiscale-profile\",\"version\":7}",
     HEXI_ERR_VERSION, "version"},
    {PROFILE,
     "{\"format\":\"hexiscale-profile\",\"version\":1,\"gpus\":[{"
     "\"type\":\"t4\",\"gemm_tflops\":{\"bf16\":-3}}]}",
     HEXI_ERR_RANGE, "gpus[0].gemm_tflops.bf16"},
    {PROFILE,
     "{\"format\":\"hexiscale-profile\",\"version\":1,\"cpu\":{"
     "\"gemm_gflops\":0}}",
     HEXI_ERR_RANGE, "cpu.gemm_gflops"},
    {PROFILE,
     "{\"format\":\"hexiscale-profile\",\"version\":1,\"links\":{"
     "\"inter_bw_gbps\":0}}",
     HEXI_ERR_RANGE, "links.inter_bw_gbps"},
    {PROFILE, "{\"format\":\"hexiscale-profile\",\"version\":1,\"disk\":1}",
     HEXI_ERR_PARSE, "disk: unknown key"},
    {PROFILE,
     "{\"format\":\"hexiscale-profile\",\"version\":1,\"gpus\":[{"
     "\"type\":\"t4\",\"attn_tflops\":{\"fwd\":0}}]}",
     HEXI_ERR_RANGE, "gpus[0].attn_tflops.fwd"},
    {PROFILE,
     "{\"format\":\"hexiscale-profile\",\"version\":1,\"gpus\":[{"
     "\"type\":\"t4\",\"attn_tflops\":{\"causal\":3}}]}",
     HEXI_ERR_PARSE, "gpus[0].attn_tflops.causal: unknown key"},
    {PROFILE,
     "{\"format\":\"hexiscale-profile\",\"version\":1,\"gpus\":[{"
     "\"type\":\"t4\",\"attn_tflops\":7}]}",
     HEXI_ERR_PARSE, "gpus[0].attn_tflops"},
    /* plan: edits of a valid plan (hash removed unless edited) */
    {PLAN, "", HEXI_OK, ""},
    {PLAN, "pipelines.0.stages.0.devices.1.rank=0", HEXI_ERR_INVAL, "rank"},
    {PLAN, "pipelines.0.stages.0.devices.1.rank=50", HEXI_ERR_INVAL,
     "pipelines[0].stages[0].devices[1].rank"},
    {PLAN, "pipelines.0.stages.0.devices.1.rank=-1", HEXI_ERR_RANGE,
     "pipelines[0].stages[0].devices[1].rank"},
    {PLAN, "pipelines.0.stages.1.devices.0.gpu=0", HEXI_ERR_INVAL,
     "used twice"},
    {PLAN, "pipelines.0.stages.1.devices.0.gpu=7", HEXI_ERR_INVAL,
     "has no GPU 7"},
    {PLAN, "pipelines.0.stages.1.devices.0.node=\"zz\"", HEXI_ERR_INVAL,
     "pipelines[0].stages[1].devices[0].node"},
    {PLAN, "pipelines.0.stages.0.devices.1.node=\"c2\"", HEXI_ERR_INVAL,
     "one node"},
    {PLAN, "pipelines.0.stages.1.layer_begin=3", HEXI_ERR_INVAL,
     "pipelines[0].stages[1]"},
    {PLAN, "pipelines.1.stages.0.layer_end=3", HEXI_ERR_INVAL, "pipelines[1]"},
    {PLAN, "pipelines.1.stages.0.tp=2", HEXI_ERR_INVAL,
     "pipelines[1].stages[0].devices"},
    {PLAN, "pipelines.0.micro_batches=3", HEXI_ERR_INVAL,
     "pipelines[0].micro_batches"},
    {PLAN, "pipelines.0.micro_batches=0", HEXI_ERR_RANGE,
     "pipelines[0].micro_batches"},
    {PLAN, "pipelines.0.batch=6", HEXI_ERR_INVAL, "global_batch"},
    {PLAN, "pipelines.0.batch=1e300", HEXI_ERR_PARSE, "pipelines[0].batch"},
    {PLAN, "world_size=5", HEXI_ERR_INVAL, "world_size"},
    {PLAN, "world_size=\"7\"", HEXI_ERR_PARSE, "world_size"},
    {PLAN, "pipelines=[]", HEXI_ERR_PARSE, "pipelines"},
    {PLAN, "pipelines=-", HEXI_ERR_PARSE, "pipelines: missing"},
    {PLAN, "model=-", HEXI_ERR_PARSE, "model: missing"},
    {PLAN, "extra=1", HEXI_ERR_PARSE, "extra: unknown key"},
    {PLAN, "pipelines.0.stages.0.colour=1", HEXI_ERR_PARSE,
     "pipelines[0].stages[0].colour: unknown key"},
    {PLAN, "format=\"hexiscale-ckpt\"", HEXI_ERR_PARSE, "format"},
    {PLAN, "version=2", HEXI_ERR_VERSION, "version"},
    {PLAN, "hash=\"xyz\"", HEXI_ERR_PARSE, "hash"},
    {PLAN, "hash=\"0000000000000000\"", HEXI_ERR_CHECKSUM, "hash"},
    {PLAN, "model.kv_heads=4", HEXI_ERR_INVAL, "model.kv_heads"},
    {PLAN, "model.layers=5", HEXI_ERR_INVAL, "pipelines[0]"},
    {PLAN, "train.global_batch=0", HEXI_ERR_RANGE, "train.global_batch"},
    {PLAN, "cluster.nodes.0.gpu=\"mi300x\"", HEXI_ERR_NOTFOUND,
     "cluster: nodes[0].gpu"},
    {PLAN, "cluster.inter_bw_gbps=0", HEXI_ERR_RANGE, "inter_bw_gbps"},
    {PLAN, "prediction={\"stage_time_s\":[[1],[2]]}", HEXI_ERR_INVAL,
     "prediction.stage_time_s[0]"},
    {PLAN, "prediction={\"mfu\":-1}", HEXI_ERR_RANGE, "prediction.mfu"},
    {PLAN, "pipelines.1.stages.0.tp=4", HEXI_ERR_INVAL, "devices"},
    {PLAN,
     "pipelines.1.stages.0.devices.3={\"node\":\"c2\",\"gpu\":3,"
     "\"rank\":6};pipelines.1.stages.0.tp=4;world_size=7",
     HEXI_ERR_INVAL, "pipelines[1].stages[0].tp: 4 must be in 1..3"},
    {PLAN,
     "pipelines.0.stages.1={\"layer_begin\":2,\"layer_end\":4,"
     "\"tp\":1,\"devices\":[{\"node\":\"c2\",\"gpu\":3,"
     "\"rank\":2}]}",
     HEXI_OK, ""},
    {PLAN, "pipelines.1.stages.0.devices.2.gpu=3", HEXI_OK, ""},
};

/* A valid plan (tiny-gqa, KV 3): p0 = c1 TP2 layers 0-2 + c1 TP1 2-4,
 * p1 = c2 TP3 0-4; ranks 0,1 | 2 | 3,4,5; batches 4/2 and 4/4. */
static json_t *base_plan(void)
{
	hexi_cluster *c = tcluster(
	    "{\"nodes\":[{\"name\":\"c1\",\"gpu\":\"cpu\",\"count\":4},"
	    "{\"name\":\"c2\",\"gpu\":\"cpu\",\"count\":4}],"
	    "\"inter_bw_gbps\":10}");
	tpipe pp[2] = {{4, 2, {{0, 2, 0, 0, 2}, {0, 1, 2, 2, 4}}},
		       {4, 4, {{1, 3, 0, 0, 4}}}};
	hexi_plan *p = tplan(c, "tiny-gqa", 2, pp);
	char *js = NULL;
	json_t *j;

	if (hexi_plan_to_json(p, &js) != HEXI_OK)
		tap_bail("base plan does not write");
	j = json_loads(js, 0, NULL);
	free(js);
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
	return j;
}

/* One edit "a.b.0.c=JSON" (or "=-" to delete) applied to j. */
static void edit_one(json_t *j, const char *edit)
{
	json_t *cur = j, *val;
	char path[256], *key, *save = NULL, *next;
	const char *eq = strchr(edit, '=');

	if (eq == NULL)
		return;
	snprintf(path, sizeof(path), "%.*s", (int)(eq - edit), edit);
	val = strcmp(eq + 1, "-") == 0
		  ? NULL
		  : json_loads(eq + 1, JSON_DECODE_ANY, NULL);
	key = strtok_r(path, ".", &save);
	while ((next = strtok_r(NULL, ".", &save)) != NULL) {
		cur = json_is_array(cur)
			  ? json_array_get(cur, (size_t)atoi(key))
			  : json_object_get(cur, key);
		key = next;
	}
	if (json_is_array(cur) && (size_t)atoi(key) == json_array_size(cur))
		json_array_append_new(cur, val);
	else if (json_is_array(cur))
		json_array_set_new(cur, (size_t)atoi(key), val);
	else if (val == NULL)
		json_object_del(cur, key);
	else
		json_object_set_new(cur, key, val);
}

/* Edits separated by ';' applied to a copy of base, hash dropped unless an
 * edit sets it. */
static char *edit_plan(const json_t *base, const char *edits)
{
	json_t *j = json_deep_copy(base);
	char buf[1024], *e, *save = NULL, *out;

	if (strncmp(edits, "hash=", 5) != 0)
		json_object_del(j, "hash");
	snprintf(buf, sizeof(buf), "%s", edits);
	for (e = strtok_r(buf, ";", &save); e != NULL;
	     e = strtok_r(NULL, ";", &save))
		edit_one(j, e);
	out = json_dumps(j, 0);
	json_decref(j);
	return out;
}

static hexi_rc via_file(const char *text, int profile)
{
	char path[] = "/tmp/hexi-bad-XXXXXX";
	int fd = mkstemp(path);
	hexi_catalog *cat = NULL;
	hexi_rc rv;

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		tap_bail("temp file");
	close(fd);
	if (profile) {
		hexi_catalog_builtin(&cat);
		rv = hexi_catalog_apply_profiles(cat, path);
	} else {
		rv = hexi_catalog_load(path, &cat);
	}
	hexi_catalog_destroy(cat);
	unlink(path);
	return rv;
}

static hexi_rc run_case(const bad *b, const json_t *base)
{
	hexi_cluster *c = NULL;
	hexi_plan *p = NULL;
	hexi_model m;
	hexi_rc rv;
	char *text;

	switch (b->kind) {
	case CLUSTER:
		rv = hexi_cluster_parse(b->input, strlen(b->input), NULL, &c);
		if (rv != HEXI_OK && c != NULL)
			tap_diag("  cluster not NULL on error");
		hexi_cluster_destroy(c);
		return rv;
	case MODEL:
		return hexi_model_parse(b->input, strlen(b->input), &m);
	case CATALOG:
		return via_file(b->input, 0);
	case PROFILE:
		return via_file(b->input, 1);
	default:
		text = edit_plan(base, b->input);
		rv = hexi_plan_parse(text, strlen(text), NULL, &p);
		hexi_plan_destroy(p);
		free(text);
		return rv;
	}
}

/* The cap on GPUs (100k) and on nodes, built as text. */
static void test_caps(void)
{
	size_t cap = 1u << 21, n = 0;
	char *s = malloc(cap);
	hexi_cluster *c = NULL;
	hexi_rc rv;

	n += (size_t)snprintf(s + n, cap - n,
			      "{\"inter_bw_gbps\":1,\"nodes\":[");
	for (int i = 0; i < 1563; i++)
		n += (size_t)snprintf(s + n, cap - n,
				      "%s{\"name\":\"n%d\",\"gpu\":\"a100\","
				      "\"count\":64}",
				      i ? "," : "", i);
	snprintf(s + n, cap - n, "]}");
	rv = hexi_cluster_parse(s, strlen(s), NULL, &c);
	is_int(rv, HEXI_ERR_RANGE, "100032 GPUs refused");
	ok(strstr(hexi_errmsg(rv), "cap of 16384") != NULL, "names the cap: %s",
	   hexi_errmsg(rv));
	n = (size_t)snprintf(s, cap, "{\"inter_bw_gbps\":1,\"nodes\":[");
	for (int i = 0; i < 5000; i++)
		n += (size_t)snprintf(s + n, cap - n,
				      "%s{\"name\":\"n%d\",\"gpu\":\"t4\","
				      "\"count\":1}",
				      i ? "," : "", i);
	snprintf(s + n, cap - n, "]}");
	rv = hexi_cluster_parse(s, strlen(s), NULL, &c);
	is_int(rv, HEXI_ERR_RANGE, "5000 nodes refused");
	ok(strstr(hexi_errmsg(rv), "nodes") != NULL, "names nodes: %s",
	   hexi_errmsg(rv));
	free(s);
}

int main(void)
{
	json_t *base = base_plan();

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const bad *b = &cases[i];
		hexi_rc rv;
		const char *msg;
		hexi_error_clear();
		rv = run_case(b, base);
		msg = hexi_errmsg(rv);
		is_int(rv, b->rc, "case %zu (%s): %s", i, hexi_errname(b->rc),
		       b->kind == PLAN ? b->input : "");
		if (rv != HEXI_OK)
			ok(strstr(msg, b->field) != NULL &&
			       strchr(msg, '\n') == NULL,
			   "case %zu message names '%s': %s", i, b->field, msg);
	}
	test_caps();
	json_decref(base);
	return tap_done();
}
