/*
 * hf_llama.c - Hugging Face Llama directories <-> HexiScale checkpoints
 * (hexickpt export --format hf, hexickpt import; hexickpt(1)).
 *
 * Mapping (doc/LAYOUT.md for our layouts):
 *   embed.weight (V,C)              model.embed_tokens.weight (V,C)
 *   layers.L.attn_norm.weight       model.layers.L.input_layernorm.weight
 *   layers.L.attn.wq (H*d,C)        ...self_attn.q_proj.weight, rows permuted
 *   layers.L.attn.wk (KV*d,C)       ...self_attn.k_proj.weight, rows permuted
 *   layers.L.attn.wv (KV*d,C)       ...self_attn.v_proj.weight
 *   layers.L.attn.wo (H*d,C) (in,out)  ...self_attn.o_proj.weight (C,H*d)
 *   layers.L.mlp_norm.weight        ...post_attention_layernorm.weight
 *   layers.L.mlp.w_gate/w_up (F,C)  ...mlp.gate_proj/up_proj.weight
 *   layers.L.mlp.w_down (F,C) (in,out) ...mlp.down_proj.weight (C,F)
 *   final_norm.weight               model.norm.weight
 *   lm_head.weight (V,C)            lm_head.weight
 * RoPE: runtime/ops.c rotates interleaved pairs (2i, 2i+1) of each head;
 * HF's rotate_half rotates (i, i + d/2), with the same frequencies.  So
 * within every head, HF row i (i < d/2) is our row 2i and HF row i + d/2
 * is our row 2i+1 (the permutation of HF's convert_llama_weights_to_hf).
 * The runtime's fixed constants are written to / required in config.json:
 * rope_theta 10000, rms_norm_eps 1e-5, silu, no biases, untied lm_head
 * (a tied one is copied on import).
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hexi_ckpt.h"
#include "hexi_sched.h"
#include "ckpt_internal.h"
#include "hf_internal.h"
#include "hf_llama.h"

#define HF_ROPE_THETA 10000.0
#define HF_NORM_EPS   1e-5
#define HF_MAX_FILES  4096
#define HF_CONFIG_MAX (1 << 20)

enum { K_COPY = 0, K_TRANSPOSE = 1, K_ROPE_Q = 2, K_ROPE_K = 3 };

typedef struct map_row {
	char ours[HEXI_CKPT_NAME_MAX];
	char hf[128];
	int kind;
	int ndim;
	int64_t shape[2]; /* our stored shape */
} map_row;

static const struct {
	const char *ours, *hf;
	int kind;
} per_layer[] = {
    {"attn_norm.weight", "input_layernorm.weight", K_COPY},
    {"attn.wq", "self_attn.q_proj.weight", K_ROPE_Q},
    {"attn.wk", "self_attn.k_proj.weight", K_ROPE_K},
    {"attn.wv", "self_attn.v_proj.weight", K_COPY},
    {"attn.wo", "self_attn.o_proj.weight", K_TRANSPOSE},
    {"mlp_norm.weight", "post_attention_layernorm.weight", K_COPY},
    {"mlp.w_gate", "mlp.gate_proj.weight", K_COPY},
    {"mlp.w_up", "mlp.up_proj.weight", K_COPY},
    {"mlp.w_down", "mlp.down_proj.weight", K_TRANSPOSE},
};
#define NPER ((int)(sizeof(per_layer) / sizeof(per_layer[0])))

static void our_shape(const hexi_model *m, const char *suffix, map_row *r)
{
	const int d = m->hidden / m->heads;

	r->ndim = 2;
	r->shape[1] = m->hidden;
	if (strstr(suffix, "norm") != NULL) {
		r->ndim = 1;
		r->shape[0] = m->hidden;
		r->shape[1] = 1;
	} else if (strcmp(suffix, "attn.wq") == 0 ||
		   strcmp(suffix, "attn.wo") == 0) {
		r->shape[0] = (int64_t)m->heads * d;
	} else if (strcmp(suffix, "attn.wk") == 0 ||
		   strcmp(suffix, "attn.wv") == 0) {
		r->shape[0] = (int64_t)m->kv_heads * d;
	} else {
		r->shape[0] = m->ffn;
	}
}

/* The whole table for model m: *out (caller frees), *n rows. */
static hexi_rc make_map(const hexi_model *m, map_row **out, int *n)
{
	int cap = m->layers * NPER + 4, k = 0;
	map_row *v = calloc((size_t)cap, sizeof(*v));

	if (v == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "tensor map");
	snprintf(v[k].ours, sizeof(v[k].ours), "embed.weight");
	snprintf(v[k].hf, sizeof(v[k].hf), "model.embed_tokens.weight");
	v[k].ndim = 2, v[k].shape[0] = m->vocab, v[k++].shape[1] = m->hidden;
	for (int l = 0; l < m->layers; l++)
		for (int j = 0; j < NPER; j++, k++) {
			snprintf(v[k].ours, sizeof(v[k].ours), "layers.%d.%s",
				 l, per_layer[j].ours);
			snprintf(v[k].hf, sizeof(v[k].hf), "model.layers.%d.%s",
				 l, per_layer[j].hf);
			v[k].kind = per_layer[j].kind;
			our_shape(m, per_layer[j].ours, &v[k]);
		}
	snprintf(v[k].ours, sizeof(v[k].ours), "final_norm.weight");
	snprintf(v[k].hf, sizeof(v[k].hf), "model.norm.weight");
	v[k].ndim = 1, v[k].shape[0] = m->hidden, v[k++].shape[1] = 1;
	snprintf(v[k].ours, sizeof(v[k].ours), "lm_head.weight");
	snprintf(v[k].hf, sizeof(v[k].hf), "lm_head.weight");
	v[k].ndim = 2, v[k].shape[0] = m->vocab, v[k++].shape[1] = m->hidden;
	*out = v;
	*n = k;
	return HEXI_OK;
}

/* The most floats one tensor of the map holds (the scratch buffers' size):
 * attn.wq/wo are hidden x hidden, which exceeds hidden x max(vocab, ffn)
 * for a model whose vocabulary and FFN are narrower than it. */
static size_t map_max_elems(const map_row *map, int n)
{
	size_t big = 1;

	for (int i = 0; i < n; i++) {
		size_t e = (size_t)map[i].shape[0] * (size_t)map[i].shape[1];
		if (e > big)
			big = e;
	}
	return big;
}

/* Our row index for HF row i of a q/k tensor (heads of d rows, d even:
 * for an odd d, HF row d-1 of the last head maps one row past the end;
 * hf_config_parse and hexi_hf_export refuse such a model). */
static int64_t rope_row(int64_t i, int d)
{
	int64_t h = i / d, j = i % d;

	return h * d + (j < d / 2 ? 2 * j : 2 * (j - d / 2) + 1);
}

/* HF layout from ours (dir 1) or ours from HF (dir -1); rows x cols of
 * our stored shape. */
static void transform(const map_row *r, int d, const float *src, float *dst,
		      int dir)
{
	const int64_t R = r->shape[0], Cc = r->shape[1];

	if (r->kind == K_TRANSPOSE) { /* ours (R, Cc) <-> HF (Cc, R) */
		for (int64_t i = 0; i < R; i++)
			for (int64_t j = 0; j < Cc; j++) {
				if (dir > 0)
					dst[j * R + i] = src[i * Cc + j];
				else
					dst[i * Cc + j] = src[j * R + i];
			}
	} else if (r->kind == K_ROPE_Q || r->kind == K_ROPE_K) {
		for (int64_t i = 0; i < R; i++) {
			int64_t o = rope_row(i, d);
			if (dir > 0)
				memcpy(dst + i * Cc, src + o * Cc,
				       sizeof(float) * (size_t)Cc);
			else
				memcpy(dst + o * Cc, src + i * Cc,
				       sizeof(float) * (size_t)Cc);
		}
	} else {
		memcpy(dst, src, sizeof(float) * (size_t)(R * Cc));
	}
}

/* ---- export ----------------------------------------------------------- */

typedef struct export_ctx {
	hexi_ckpt_reader *r;
	const map_row *map;
	int d;
	float *tmp;
} export_ctx;

static hexi_rc export_get(void *arg, int i, float *buf)
{
	export_ctx *x = arg;
	const map_row *r = &x->map[i];
	hexi_rc rc = hexi_ckpt_read_rows(x->r, r->ours, 0, r->shape[0], x->tmp);

	if (rc == HEXI_OK)
		transform(r, x->d, x->tmp, buf, 1);
	return rc;
}

static char *config_text(const hexi_model *m, const char *dtype)
{
	json_t *j = json_pack(
	    "{s:[s],s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:s,s:b,s:b,"
	    "s:b,s:n,s:s,s:f,s:s}",
	    "architectures", "LlamaForCausalLM", "model_type", "llama",
	    "hidden_size", m->hidden, "intermediate_size", m->ffn,
	    "num_attention_heads", m->heads, "num_key_value_heads", m->kv_heads,
	    "num_hidden_layers", m->layers, "vocab_size", m->vocab,
	    "max_position_embeddings", m->seq_len, "rms_norm_eps", HF_NORM_EPS,
	    "rope_theta", HF_ROPE_THETA, "hidden_act", "silu",
	    "tie_word_embeddings", 0, "attention_bias", 0, "mlp_bias", 0,
	    "rope_scaling", "torch_dtype", dtype, "initializer_range", 0.02,
	    "hexiscale_model", m->name);
	char *s =
	    j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;

	json_decref(j);
	return s;
}

typedef struct st_fill_arg {
	const hf_st_out *outs;
	int n;
	hf_dtype dt;
	export_ctx *x;
} st_fill_arg;

static hexi_rc fill_st(int fd, const char *what, void *arg)
{
	const st_fill_arg *a = arg;

	return hf_st_write(fd, what, a->outs, a->n, a->dt, export_get, a->x);
}

/* The q/k row permutation needs heads of an even number of rows (the
 * runtime's check_model refuses the rest too); checked before anything
 * is created or read. */
static hexi_rc check_head_size(const hexi_model *m, const char *dir)
{
	if (m->heads < 1 || m->hidden % m->heads != 0 ||
	    (m->hidden / m->heads) % 2 != 0)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "export %s: model %s has hidden %d and heads "
				  "%d: the head size must be an even integer "
				  "(RoPE rotates pairs of a head's dimensions)",
				  dir, m->name, m->hidden, m->heads);
	return HEXI_OK;
}

static int is_symlink_at(int dfd, const char *name)
{
	struct stat st;

	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISLNK(st.st_mode);
}

/* DIR is created, or must be a real directory (not a symlink); *dfd
 * gets it.  Its parent is opened component by component (ck_dir_open:
 * another user's symlink is never followed) and DIR is made and opened
 * below that descriptor, so nothing is created through such a symlink. */
static hexi_rc make_dir(const char *dir, int *dfd)
{
	char parent[CK_PATH_MAX];
	const char *base;
	size_t len = strlen(dir);
	int pfd = -1;
	hexi_rc rc;

	*dfd = -1;
	while (len > 1 && dir[len - 1] == '/')
		len--;
	if (len == 0 || len >= sizeof(parent))
		return hexi_error(HEXI_ERR_RANGE, "%.200s: bad directory path",
				  dir);
	memcpy(parent, dir, len);
	parent[len] = '\0';
	if (strcmp(parent, "/") == 0)
		return ck_dir_open(parent, 0, dfd);
	char *slash = strrchr(parent, '/');
	if (slash == NULL) {
		base = parent;
		rc = ck_dir_open(".", 0, &pfd);
	} else {
		*slash = '\0';
		base = slash + 1;
		rc = ck_dir_open(slash == parent ? "/" : parent, 0, &pfd);
	}
	if (rc != HEXI_OK)
		return rc;
	if (mkdirat(pfd, base, 0755) != 0 && errno != EEXIST)
		rc = hexi_error(HEXI_ERR_IO, "%s: %s", dir, strerror(errno));
	if (rc == HEXI_OK && (*dfd = openat(pfd, base,
					    O_RDONLY | O_DIRECTORY |
						O_NOFOLLOW | O_CLOEXEC)) < 0)
		rc =
		    errno == ELOOP || errno == ENOTDIR
			? hexi_error(HEXI_ERR_INVAL,
				     "%s: exists and is not a directory%s", dir,
				     is_symlink_at(pfd, base)
					 ? " (a symlink: not followed)"
					 : "")
			: hexi_error(HEXI_ERR_IO, "%s: %s", dir,
				     strerror(errno));
	close(pfd);
	return rc;
}

hexi_rc hexi_hf_export(hexi_ckpt_reader *r, const hexi_model *m,
		       const char *dir, const char *dtype_name)
{
	char path[4200], *cfg = NULL;
	map_row *map = NULL;
	hf_st_out *outs = NULL;
	export_ctx x = {.r = r};
	hf_dtype dt;
	int n = 0, dfd = -1;
	hexi_rc rc = hf_dtype_parse(dtype_name, &dt);
	const char *tdt = dt == HF_F32	 ? "float32"
			  : dt == HF_F16 ? "float16"
					 : "bfloat16";

	if (rc == HEXI_OK && (rc = check_head_size(m, dir)) == HEXI_OK)
		x.d = m->hidden / m->heads;
	if (rc == HEXI_OK)
		rc = make_map(m, &map, &n);
	/* everything below DIR through its descriptor: no path re-resolved */
	if (rc == HEXI_OK)
		rc = make_dir(dir, &dfd);
	if (rc == HEXI_OK) {
		outs = calloc((size_t)n, sizeof(*outs));
		x.tmp = malloc(sizeof(float) * map_max_elems(map, n));
		if (outs == NULL || x.tmp == NULL)
			rc = hexi_error(HEXI_ERR_NOMEM, "export buffers");
	}
	for (int i = 0; rc == HEXI_OK && i < n; i++) {
		hexi_ckpt_tensor_info ti;
		rc = hexi_ckpt_tensor_find(r, map[i].ours, &ti, NULL);
		if (rc == HEXI_OK && (ti.shape[0] != map[i].shape[0] ||
				      ti.shape[1] != map[i].shape[1]))
			rc = hexi_error(HEXI_ERR_MISMATCH,
					"%s is (%lld,%lld) in the checkpoint, "
					"(%lld,%lld) for model %s",
					map[i].ours, (long long)ti.shape[0],
					(long long)ti.shape[1],
					(long long)map[i].shape[0],
					(long long)map[i].shape[1], m->name);
		hexi_strlcpy(outs[i].name, map[i].hf, sizeof(outs[i].name));
		outs[i].ndim = map[i].ndim;
		outs[i].shape[0] = map[i].kind == K_TRANSPOSE ? map[i].shape[1]
							      : map[i].shape[0];
		outs[i].shape[1] = map[i].kind == K_TRANSPOSE ? map[i].shape[0]
							      : map[i].shape[1];
	}
	x.map = map;
	if (rc == HEXI_OK) {
		st_fill_arg fa = {outs, n, dt, &x};

		snprintf(path, sizeof(path), "%s/model.safetensors", dir);
		rc = ck_write_at_atomic_fn(dfd, "model.safetensors", path,
					   fill_st, &fa);
	}
	if (rc == HEXI_OK && (cfg = config_text(m, tdt)) == NULL)
		rc = hexi_error(HEXI_ERR_NOMEM, "config.json");
	if (rc == HEXI_OK) {
		snprintf(path, sizeof(path), "%s/config.json", dir);
		rc = ck_write_at_atomic(dfd, "config.json", cfg, strlen(cfg),
					path);
	}
	if (dfd >= 0)
		close(dfd);
	free(cfg);
	free(x.tmp);
	free(outs);
	free(map);
	return rc;
}

/* ---- the model of a checkpoint --------------------------------------- */

hexi_rc hexi_hf_model_of(hexi_ckpt_reader *r, const char *ckpt,
			 const char *model, hexi_model *m)
{
	const char *pj = hexi_ckpt_reader_plan_json(r);
	char path[4200];
	hexi_rc rc;

	if (model != NULL)
		return hexi_model_load(model, m);
	if (pj != NULL && *pj) {
		json_t *root = json_loads(pj, 0, NULL);
		json_t *mo = json_object_get(root, "model");
		char *s = json_is_object(mo) ? json_dumps(mo, 0) : NULL;
		rc = s ? hexi_model_parse(s, strlen(s), m)
		       : hexi_error(HEXI_ERR_PARSE, "stored plan: no model");
		free(s);
		json_decref(root);
		if (rc == HEXI_OK)
			return rc;
		hexi_error_clear();
	}
	if (hexi_model_builtin(hexi_ckpt_reader_meta(r)->model, m) == HEXI_OK)
		return HEXI_OK;
	hexi_error_clear();
	snprintf(path, sizeof(path), "%s/model.json", ckpt);
	rc = hexi_model_load(path, m);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc,
					 "%s: model %s unknown; give --model",
					 ckpt, hexi_ckpt_reader_meta(r)->model);
	return HEXI_OK;
}

/* ---- import ----------------------------------------------------------- */

static int get_int(json_t *o, const char *k, int def, int *v)
{
	json_t *j = json_object_get(o, k);

	if (j == NULL || json_is_null(j)) {
		*v = def;
		return def >= 0;
	}
	if (!json_is_integer(j) || json_integer_value(j) < 1 ||
	    json_integer_value(j) > (1 << 24))
		return 0;
	*v = (int)json_integer_value(j);
	return 1;
}

/* Keys whose value the runtime cannot honour make the import fail. */
static hexi_rc check_fixed(const char *path, json_t *c, int *tied)
{
	json_t *j;
	double th = 10000.0, eps = 1e-6; /* HF LlamaConfig defaults */

	if (!json_is_string(j = json_object_get(c, "model_type")) ||
	    strcmp(json_string_value(j), "llama") != 0)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "%s: model_type is not \"llama\"", path);
	if ((j = json_object_get(c, "hidden_act")) != NULL &&
	    (!json_is_string(j) || strcmp(json_string_value(j), "silu") != 0))
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "%s: hidden_act must be silu", path);
	if ((j = json_object_get(c, "rope_theta")) != NULL)
		th = json_is_number(j) ? json_number_value(j) : -1;
	if ((j = json_object_get(c, "rms_norm_eps")) != NULL)
		eps = json_is_number(j) ? json_number_value(j) : -1;
	if (fabs(th - HF_ROPE_THETA) > 1e-6 || fabs(eps - HF_NORM_EPS) > 1e-12)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "%s: rope_theta %g, rms_norm_eps %g: the "
				  "runtime has rope_theta 10000 and "
				  "rms_norm_eps 1e-05",
				  path, th, eps);
	if (((j = json_object_get(c, "rope_scaling")) != NULL &&
	     !json_is_null(j)) ||
	    json_is_true(json_object_get(c, "attention_bias")) ||
	    json_is_true(json_object_get(c, "mlp_bias")))
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "%s: rope_scaling and biases are not "
				  "supported",
				  path);
	*tied = json_is_true(json_object_get(c, "tie_word_embeddings"));
	return HEXI_OK;
}

hexi_rc hf_config_parse(const char *what, const char *json, size_t len,
			const char *name, hexi_model *m, int *tied)
{
	json_error_t je;
	json_t *c;
	int hd = 0;
	hexi_rc rc = HEXI_OK;

	memset(m, 0, sizeof(*m));
	*tied = 0;
	c = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (c == NULL)
		return hexi_error(HEXI_ERR_PARSE, "%s:%d:%d: %s", what, je.line,
				  je.column, je.text);
	if (!json_is_object(c))
		rc = hexi_error(HEXI_ERR_PARSE, "%s: not a JSON object", what);
	if (rc == HEXI_OK)
		rc = check_fixed(what, c, tied);
	if (rc == HEXI_OK &&
	    !(get_int(c, "hidden_size", -1, &m->hidden) &&
	      get_int(c, "intermediate_size", -1, &m->ffn) &&
	      get_int(c, "num_attention_heads", -1, &m->heads) &&
	      get_int(c, "num_hidden_layers", -1, &m->layers) &&
	      get_int(c, "vocab_size", -1, &m->vocab) &&
	      get_int(c, "num_key_value_heads", m->heads, &m->kv_heads) &&
	      get_int(c, "max_position_embeddings", 2048, &m->seq_len) &&
	      get_int(c, "head_dim", m->hidden / m->heads, &hd)))
		rc = hexi_error(HEXI_ERR_PARSE,
				"%s: hidden_size, intermediate_size, "
				"num_attention_heads, num_hidden_layers, "
				"vocab_size must be integers in [1, 2^24]",
				what);
	/* both up to 2^24: their product needs 64 bits */
	if (rc == HEXI_OK && (int64_t)hd * m->heads != m->hidden)
		rc = hexi_error(HEXI_ERR_UNSUPPORTED,
				"%s: head_dim %d is not hidden_size %d / "
				"num_attention_heads %d",
				what, hd, m->hidden, m->heads);
	/* the RoPE row permutation (rope_row) pairs row i with i + d/2 */
	if (rc == HEXI_OK && hd % 2 != 0)
		rc = hexi_error(HEXI_ERR_UNSUPPORTED,
				"%s: head size %d (hidden_size %d / "
				"num_attention_heads %d) is odd: RoPE rotates "
				"pairs of a head's dimensions, so the runtime "
				"needs an even head size",
				what, hd, m->hidden, m->heads);
	json_decref(c);
	if (rc == HEXI_OK)
		rc = hexi_strlcpy(m->name, name, sizeof(m->name));
	if (rc == HEXI_OK)
		rc = hexi_model_validate(m);
	return rc;
}

static hexi_rc parse_config(int dfd, const char *dir, const char *name,
			    hexi_model *m, int *tied)
{
	char path[4200], *txt = NULL;
	size_t len = 0;
	hexi_rc rc;

	snprintf(path, sizeof(path), "%s/config.json", dir);
	memset(m, 0, sizeof(*m));
	rc = ck_read_in(dfd, "config.json", HF_CONFIG_MAX, path, &txt, &len);
	if (rc == HEXI_OK)
		rc = hf_config_parse(path, txt, len, name, m, tied);
	free(txt);
	return rc != HEXI_OK ? hexi_error_prefix(rc, "import %s", dir) : rc;
}

typedef struct hf_files {
	hf_st *f[HF_MAX_FILES];
	int n;
} hf_files;

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Every *.safetensors entry of the model directory DFD (DIR in
 * messages), opened as ck_open_in does (no FIFO or device, another user's
 * symlink only to that user's own file). */
static hexi_rc open_files(int dfd, const char *dir, hf_files *fs)
{
	int lfd = dup(dfd);
	DIR *d = lfd < 0 ? NULL : fdopendir(lfd);
	struct dirent *de;
	char path[4200];
	hexi_rc rc = HEXI_OK;

	if (d == NULL) {
		int e = errno;
		if (lfd >= 0)
			close(lfd);
		return hexi_error(HEXI_ERR_IO, "import %s: %s", dir,
				  strerror(e));
	}
	while (rc == HEXI_OK && (de = readdir(d)) != NULL) {
		struct stat st;
		int fd;
		if (!ends_with(de->d_name, ".safetensors"))
			continue;
		if (fs->n == HF_MAX_FILES) {
			rc = hexi_error(HEXI_ERR_RANGE,
					"import %s: over %d safetensors files",
					dir, HF_MAX_FILES);
			break;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		rc = ck_open_in(dfd, de->d_name, path, &fd, &st);
		if (rc == HEXI_OK)
			rc = hf_st_open_fd(fd, path, &fs->f[fs->n]);
		if (rc == HEXI_OK)
			fs->n++;
	}
	closedir(d);
	if (rc == HEXI_OK && fs->n == 0)
		rc = hexi_error(HEXI_ERR_NOTFOUND,
				"import %s: no *.safetensors file", dir);
	return rc;
}

/* Every tensor of the files is known (or a RoPE buffer), and appears once. */
/* model.layers.L.self_attn.rotary_emb.inv_freq of a layer L of the model:
 * older exports carry RoPE's frequencies, which the runtime computes.
 * One name per layer, so a file cannot hold more tensors than the model
 * has names (the search below is quadratic in them). */
static int is_inv_freq(const char *nm, int layers)
{
	static const char pre[] = "model.layers.",
			  post[] = ".self_attn.rotary_emb.inv_freq";
	const char *p = nm + sizeof(pre) - 1;
	long l = 0;

	if (strncmp(nm, pre, sizeof(pre) - 1) != 0 ||
	    !isdigit((unsigned char)*p) ||
	    (*p == '0' && isdigit((unsigned char)p[1])))
		return 0;
	for (; isdigit((unsigned char)*p) && l < layers; p++)
		l = l * 10 + (*p - '0');
	return l < layers && strcmp(p, post) == 0;
}

static hexi_rc check_names(const hf_files *fs, const map_row *map, int n,
			   int layers)
{
	for (int a = 0; a < fs->n; a++)
		for (int i = 0; i < fs->f[a]->n; i++) {
			const char *nm = fs->f[a]->t[i].name;
			int known = is_inv_freq(nm, layers);
			for (int k = 0; !known && k < n; k++)
				known = strcmp(map[k].hf, nm) == 0;
			if (!known)
				return hexi_error(HEXI_ERR_MISMATCH,
						  "%s: unknown tensor '%.100s' "
						  "for a Llama of this config",
						  fs->f[a]->path, nm);
			for (int b = a + 1; b < fs->n; b++)
				if (hf_st_find(fs->f[b], nm) >= 0)
					return hexi_error(
					    HEXI_ERR_MISMATCH,
					    "tensor '%.100s' is in both %s "
					    "and %s",
					    nm, fs->f[a]->path, fs->f[b]->path);
		}
	return HEXI_OK;
}

/* Find HF tensor r (or, tied, the embedding for lm_head) with the shape
 * the mapping wants, and read it in our layout into dst. */
static hexi_rc import_one(const hf_files *fs, const map_row *r, int tied, int d,
			  float *tmp, float *dst)
{
	const char *nm = r->hf;
	int64_t want0 = r->kind == K_TRANSPOSE ? r->shape[1] : r->shape[0];
	int64_t want1 = r->kind == K_TRANSPOSE ? r->shape[0] : r->shape[1];

	for (int pass = 0; pass < 2; pass++) {
		for (int a = 0; a < fs->n; a++) {
			int i = hf_st_find(fs->f[a], nm);
			if (i < 0)
				continue;
			const hf_st_tensor *t = &fs->f[a]->t[i];
			int okshape = r->ndim == 1
					  ? t->ndim == 1 && t->shape[0] == want0
					  : t->ndim == 2 &&
						t->shape[0] == want0 &&
						t->shape[1] == want1;
			if (!okshape)
				return hexi_error(
				    HEXI_ERR_MISMATCH,
				    "%s: tensor %s has the wrong shape for "
				    "config.json (want (%lld, %lld))",
				    fs->f[a]->path, nm, (long long)want0,
				    (long long)want1);
			hexi_rc rc = hf_st_read_f32(fs->f[a], i, tmp);
			if (rc == HEXI_OK)
				transform(r, d, tmp, dst, -1);
			return rc;
		}
		if (!(tied && strcmp(r->hf, "lm_head.weight") == 0))
			break;
		nm = "model.embed_tokens.weight";
	}
	return hexi_error(HEXI_ERR_NOTFOUND, "import: tensor %s missing",
			  r->hf);
}

/* CKPT must be new: absent, or a directory with no visible entry.  An
 * import writes step 0 and model.json; into a checkpoint directory that
 * already holds steps it would replace that model.json and hide step 0
 * behind the newer steps that "latest" names. */
static hexi_rc check_new_ckpt(const char *ckpt)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	int dfd;
	hexi_rc rc;

	if (lstat(ckpt, &st) != 0 && errno == ENOENT)
		return HEXI_OK;
	if ((rc = ck_dir_open(ckpt, 0, &dfd)) != HEXI_OK)
		return hexi_error_prefix(rc, "import -o %s", ckpt);
	if ((d = fdopendir(dfd)) == NULL) {
		close(dfd);
		return hexi_error(HEXI_ERR_IO, "import -o %s: %s", ckpt,
				  strerror(errno));
	}
	while (rc == HEXI_OK && (de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			rc = hexi_error(HEXI_ERR_INVAL,
					"import -o %s: the directory is not "
					"empty (it holds '%.100s'); import "
					"writes a new checkpoint: give a new "
					"or empty directory",
					ckpt, de->d_name);
	closedir(d);
	return rc;
}

/* Step 0 of CKPT from the HF tensors, and CKPT/model.json (text JS)
 * written before the commit, so a committed import always has it. */
static hexi_rc write_ckpt(const char *ckpt, const hexi_model *m,
			  const hf_files *fs, const map_row *map, int n,
			  int tied, const char *js)
{
	char path[4200];
	hexi_ckpt_meta meta;
	hexi_ckpt_writer *w = NULL;
	size_t big = map_max_elems(map, n);
	float *tmp = malloc(sizeof(float) * big),
	      *buf = malloc(sizeof(float) * big);
	int dfd = -1, wrote_model = 0;
	hexi_rc rc = HEXI_OK;

	memset(&meta, 0, sizeof(meta));
	hexi_strlcpy(meta.model, m->name, sizeof(meta.model));
	meta.world_size = 1;
	if (tmp == NULL || buf == NULL)
		rc = hexi_error(HEXI_ERR_NOMEM, "import buffers");
	if (rc == HEXI_OK)
		rc = hexi_ckpt_save_begin(ckpt, &meta, 0, &w);
	for (int i = 0; rc == HEXI_OK && i < n; i++) {
		rc = import_one(fs, &map[i], tied, m->hidden / m->heads, tmp,
				buf);
		if (rc == HEXI_OK)
			rc = hexi_ckpt_write_slice(w, map[i].ours, map[i].ndim,
						   map[i].shape, 0,
						   map[i].shape[0], buf);
	}
	if (w != NULL) {
		if (rc == HEXI_OK)
			rc = hexi_ckpt_save_end(w);
		else
			hexi_ckpt_save_abort(w);
	}
	/* below the checkpoint's descriptor: a planted model.json symlink or
	 * FIFO is replaced, never written through */
	snprintf(path, sizeof(path), "%s/model.json", ckpt);
	if (rc == HEXI_OK)
		rc = ck_dir_open(ckpt, 0, &dfd);
	if (rc == HEXI_OK)
		rc =
		    ck_write_at_atomic(dfd, "model.json", js, strlen(js), path);
	wrote_model = rc == HEXI_OK;
	if (rc == HEXI_OK)
		rc = hexi_ckpt_commit(ckpt, &meta, NULL);
	if (rc != HEXI_OK && wrote_model)
		(void)unlinkat(dfd, "model.json", 0);
	if (dfd >= 0)
		close(dfd);
	free(tmp);
	free(buf);
	return rc;
}

static void default_name(const char *dir, char *out, size_t cap)
{
	const char *b = dir + strlen(dir);
	size_t k = 3;

	while (b > dir && b[-1] == '/')
		b--;
	const char *e = b;
	while (b > dir && b[-1] != '/')
		b--;
	snprintf(out, cap, "hf-");
	for (; b < e && k + 1 < cap; b++, k++)
		out[k] = (char)((*b >= 'a' && *b <= 'z') ||
					(*b >= 'A' && *b <= 'Z') ||
					(*b >= '0' && *b <= '9') || *b == '-' ||
					*b == '.'
				    ? *b
				    : '_');
	out[k] = '\0';
}

hexi_rc hexi_hf_import(const char *hf_dir, const char *ckpt, const char *name,
		       hexi_model *m)
{
	char nm[HEXI_NAME_MAX], *js = NULL;
	hf_files *fs = calloc(1, sizeof(*fs));
	map_row *map = NULL;
	int n = 0, tied = 0, dfd = -1;
	hexi_rc rc = fs ? HEXI_OK : hexi_error(HEXI_ERR_NOMEM, "import");

	if (name == NULL) {
		default_name(hf_dir, nm, sizeof(nm));
		name = nm;
	}
	if (rc == HEXI_OK) {
		rc = ck_dir_open(hf_dir, 0, &dfd);
		if (rc != HEXI_OK)
			hexi_error_prefix(rc, "import");
	}
	if (rc == HEXI_OK)
		rc = parse_config(dfd, hf_dir, name, m, &tied);
	if (rc == HEXI_OK)
		rc = make_map(m, &map, &n);
	if (rc == HEXI_OK)
		rc = open_files(dfd, hf_dir, fs);
	if (dfd >= 0)
		close(dfd);
	if (rc == HEXI_OK)
		rc = check_names(fs, map, n, m->layers);
	if (rc == HEXI_OK)
		rc = hexi_model_to_json(m, &js);
	if (rc == HEXI_OK)
		rc = check_new_ckpt(ckpt);
	if (rc == HEXI_OK)
		rc = write_ckpt(ckpt, m, fs, map, n, tied, js);
	free(js);
	for (int i = 0; fs != NULL && i < fs->n; i++)
		hf_st_destroy(fs->f[i]);
	free(fs);
	free(map);
	return rc;
}
