/* model.c - model shapes (built-in and JSON) and training settings. */
#include "config.h"

#include "json_util.h"

#include <stdlib.h>
#include <string.h>

static const hexi_model builtin_models[] = {
    /* name, layers, hidden, heads, kv_heads, ffn, vocab, seq_len
     * Llama 2 (Touvron et al. 2023, Table 1 / HF config.json) and LLaMA-1
     * 30B (Touvron et al. 2023a); sequence 4096 as in the HexiScale paper. */
    {"llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096},
    {"llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096},
    {"llama-30b", 60, 6656, 52, 52, 17920, 32000, 4096},
    {"llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096},
    /* Small models for the CPU runtime and tests. */
    {"tiny-4l", 4, 48, 6, 6, 128, 64, 16},
    {"tiny-8l", 8, 48, 6, 6, 128, 64, 16},
    {"tiny-gqa", 4, 48, 6, 3, 128, 64, 16},
};

#define NBUILTIN ((int)(sizeof(builtin_models) / sizeof(builtin_models[0])))

int hexi_model_builtin_count(void)
{
	return NBUILTIN;
}

const char *hexi_model_builtin_name(int i)
{
	return i >= 0 && i < NBUILTIN ? builtin_models[i].name : NULL;
}

hexi_rc hexi_model_builtin(const char *name, hexi_model *out)
{
	for (int i = 0; name != NULL && i < NBUILTIN; i++)
		if (strcmp(builtin_models[i].name, name) == 0) {
			*out = builtin_models[i];
			return HEXI_OK;
		}
	return hexi_error(HEXI_ERR_NOTFOUND,
			  "model '%.80s': not a built-in model (llama2-7b, "
			  "llama2-13b, llama-30b, llama2-70b, tiny-4l, "
			  "tiny-8l, tiny-gqa) nor a file",
			  name ? name : "(null)");
}

/* Bounds of every shape field; also used by the JSON reader. */
static const struct model_field {
	const char *key;
	size_t off;
	long min, max;
} model_fields[] = {
    {"layers", offsetof(hexi_model, layers), 1, HEXI_MAX_LAYERS},
    {"hidden", offsetof(hexi_model, hidden), 1, 1L << 17},
    {"heads", offsetof(hexi_model, heads), 1, 1024},
    {"kv_heads", offsetof(hexi_model, kv_heads), 1, 1024},
    {"ffn", offsetof(hexi_model, ffn), 1, 1L << 20},
    {"vocab", offsetof(hexi_model, vocab), 1, 1L << 22},
    {"seq_len", offsetof(hexi_model, seq_len), 1, 1L << 20},
};
#define NFIELDS (sizeof(model_fields) / sizeof(model_fields[0]))

hexi_rc hexi_model_validate(const hexi_model *m)
{
	if (m == NULL)
		return hexi_error(HEXI_ERR_INVAL, "model: NULL");
	if (m->name[0] == '\0' || !hexi_is_printable(m->name) ||
	    memchr(m->name, '\0', HEXI_NAME_MAX) == NULL)
		return hexi_error(HEXI_ERR_INVAL, "model.name: missing");
	for (size_t i = 0; i < NFIELDS; i++) {
		const struct model_field *f = &model_fields[i];
		int v = *(const int *)((const char *)m + f->off);
		if (v < f->min || v > f->max)
			return hexi_error(
			    HEXI_ERR_RANGE,
			    "model.%s: %d is out of range %ld..%ld", f->key, v,
			    f->min, f->max);
	}
	if (m->kv_heads > m->heads || m->heads % m->kv_heads != 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "model.kv_heads: %d must divide heads (%d)",
				  m->kv_heads, m->heads);
	if (m->hidden % m->heads != 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "model.hidden: %d is not a multiple of heads "
				  "(%d)",
				  m->hidden, m->heads);
	/* what the runtime can train (runtime/model.c check_model): a plan
	 * it would refuse at start-up is no plan */
	if ((m->hidden / m->heads) % 2 != 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "model.hidden: head size %d (hidden %d / "
				  "heads %d) is odd: RoPE rotates pairs",
				  m->hidden / m->heads, m->hidden, m->heads);
	if (m->vocab < 2)
		return hexi_error(HEXI_ERR_RANGE,
				  "model.vocab: %d: a vocabulary has at least "
				  "2 tokens",
				  m->vocab);
	return HEXI_OK;
}

double hexi_model_params(const hexi_model *m)
{
	double C = m->hidden, d = (double)m->hidden / m->heads;
	double kv = m->kv_heads * d, F = m->ffn, V = m->vocab;
	double layer = 2 * C	    /* two norms */
		       + 2 * C * C  /* wq, wo */
		       + 2 * kv * C /* wk, wv */
		       + 3 * F * C; /* gate, up, down */

	return m->layers * layer + 2 * V * C + C; /* embed, head, final norm */
}

static const char *const model_keys[] = {
    "format",	"version", "name",  "layers",  "hidden", "heads",
    "kv_heads", "ffn",	   "vocab", "seq_len", NULL};

hexi_rc hexi__model_from_json(const json_t *obj, const char *where,
			      hexi_model *out)
{
	hexi_model m;
	hexi_rc rv;

	memset(&m, 0, sizeof(m));
	rv = hsj_check_keys(obj, where, model_keys);
	if (rv == HEXI_OK)
		rv = hsj_check_format(obj, where, HEXI_MODEL_FORMAT,
				      HEXI_MODEL_VERSION, HSJ_OPTIONAL);
	if (rv == HEXI_OK)
		rv = hsj_get_str(obj, where, "name", HSJ_REQUIRED, m.name,
				 sizeof(m.name));
	for (size_t i = 0; rv == HEXI_OK && i < NFIELDS; i++) {
		const struct model_field *f = &model_fields[i];
		long v = 0;
		int opt = strcmp(f->key, "kv_heads") == 0;
		rv = hsj_get_int(obj, where, f->key, !opt, f->min, f->max, &v);
		*(int *)((char *)&m + f->off) = (int)v;
	}
	if (rv == HEXI_OK && m.kv_heads == 0)
		m.kv_heads = m.heads;
	if (rv == HEXI_OK)
		rv = hexi_model_validate(&m);
	if (rv == HEXI_OK)
		*out = m;
	return rv;
}

json_t *hexi__model_to_json(const hexi_model *m)
{
	return json_pack("{s:s,s:i,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "format",
			 HEXI_MODEL_FORMAT, "version", HEXI_MODEL_VERSION,
			 "name", m->name, "layers", m->layers, "hidden",
			 m->hidden, "heads", m->heads, "kv_heads", m->kv_heads,
			 "ffn", m->ffn, "vocab", m->vocab, "seq_len",
			 m->seq_len);
}

hexi_rc hexi_model_parse(const char *json, size_t len, hexi_model *out)
{
	json_t *j = NULL;
	hexi_rc rv = hsj_parse(json, len, "model", &j);

	if (rv == HEXI_OK)
		rv = hexi__model_from_json(j, "model", out);
	json_decref(j);
	return rv;
}

hexi_rc hexi_model_load(const char *name_or_path, hexi_model *out)
{
	json_t *j = NULL;
	hexi_rc rv;

	if (name_or_path == NULL)
		return hexi_error(HEXI_ERR_INVAL, "model: no name");
	if (strchr(name_or_path, '/') == NULL &&
	    strstr(name_or_path, ".json") == NULL)
		return hexi_model_builtin(name_or_path, out);
	rv = hsj_load(name_or_path, &j);
	if (rv == HEXI_OK) {
		rv = hexi__model_from_json(j, "model", out);
		if (rv != HEXI_OK)
			hexi_error_prefix(rv, "%s", name_or_path);
	}
	json_decref(j);
	return rv;
}

hexi_rc hexi_model_to_json(const hexi_model *m, char **out)
{
	json_t *j;
	hexi_rc rv;

	*out = NULL;
	if (m == NULL)
		return hexi_error(HEXI_ERR_INVAL, "model: NULL");
	j = hexi__model_to_json(m);
	if (j == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "model: cannot build JSON");
	rv = hsj_dump(j, 1, out);
	json_decref(j);
	return rv;
}

/* ---- training settings -------------------------------------------------- */

void hexi_train_defaults(hexi_train *t)
{
	t->global_batch = 64;
	t->micro_batch = 1;
	t->recompute = 1;
	t->zero = 0;
	t->bytes_per_param = 16.0;
	t->act_bytes = 2.0;
	t->reserve_gib = 2.0;
}

hexi_rc hexi_train_validate(const hexi_train *t)
{
	if (t == NULL)
		return hexi_error(HEXI_ERR_INVAL, "train: NULL");
	if (t->global_batch < 1 || t->global_batch > (1 << 24))
		return hexi_error(HEXI_ERR_RANGE,
				  "train.global_batch: %d is out of range "
				  "1..%d",
				  t->global_batch, 1 << 24);
	if (t->micro_batch < 1 || t->micro_batch > t->global_batch)
		return hexi_error(HEXI_ERR_RANGE,
				  "train.micro_batch: %d is out of range 1..%d "
				  "(global_batch)",
				  t->micro_batch, t->global_batch);
	if (t->recompute != 0 && t->recompute != 1)
		return hexi_error(HEXI_ERR_RANGE,
				  "train.recompute: must be 0 or 1");
	if (t->zero < 0 || t->zero > 2)
		return hexi_error(HEXI_ERR_RANGE,
				  "train.zero: %d is out of range 0..2 (0 none, "
				  "1 optimizer state, 2 also gradients)",
				  t->zero);
	if (!(t->bytes_per_param > 0 && t->bytes_per_param <= 1000))
		return hexi_error(HEXI_ERR_RANGE,
				  "train.bytes_per_param: %g must be > 0 and "
				  "<= 1000",
				  t->bytes_per_param);
	if (!(t->act_bytes > 0 && t->act_bytes <= 64))
		return hexi_error(HEXI_ERR_RANGE,
				  "train.act_bytes: %g must be > 0 and <= 64",
				  t->act_bytes);
	if (!(t->reserve_gib >= 0 && t->reserve_gib <= 1e4))
		return hexi_error(HEXI_ERR_RANGE,
				  "train.reserve_gib: %g is out of range "
				  "0..10000",
				  t->reserve_gib);
	return HEXI_OK;
}

static const char *const train_keys[] = {
    "global_batch", "micro_batch", "recompute", "zero",
    "bytes_per_param", "act_bytes", "reserve_gib", NULL};

hexi_rc hexi__train_from_json(const json_t *obj, const char *where,
			      hexi_train *out)
{
	hexi_train t;
	long gb = 0, mb = 1, zero = 0;
	hexi_rc rv;

	hexi_train_defaults(&t);
	rv = hsj_check_keys(obj, where, train_keys);
	if (rv == HEXI_OK)
		rv = hsj_get_int(obj, where, "global_batch", HSJ_REQUIRED, 1,
				 1 << 24, &gb);
	if (rv == HEXI_OK)
		rv = hsj_get_int(obj, where, "micro_batch", HSJ_OPTIONAL, 1,
				 1 << 24, &mb);
	if (rv == HEXI_OK)
		rv = hsj_get_bool(obj, where, "recompute", HSJ_OPTIONAL,
				  &t.recompute);
	if (rv == HEXI_OK)
		rv = hsj_get_int(obj, where, "zero", HSJ_OPTIONAL, 0, 2, &zero);
	if (rv == HEXI_OK)
		rv = hsj_get_num(obj, where, "bytes_per_param", HSJ_OPTIONAL, 0,
				 1, 1000, &t.bytes_per_param);
	if (rv == HEXI_OK)
		rv = hsj_get_num(obj, where, "act_bytes", HSJ_OPTIONAL, 0, 1,
				 64, &t.act_bytes);
	if (rv == HEXI_OK)
		rv = hsj_get_num(obj, where, "reserve_gib", HSJ_OPTIONAL, 0, 0,
				 1e4, &t.reserve_gib);
	t.global_batch = (int)gb;
	t.micro_batch = (int)mb;
	t.zero = (int)zero;
	if (rv == HEXI_OK)
		rv = hexi_train_validate(&t);
	if (rv == HEXI_OK)
		*out = t;
	return rv;
}

/* "zero" is written only when it is not 0, so plans without sharding keep
 * the hash they had before the field existed. */
json_t *hexi__train_to_json(const hexi_train *t)
{
	json_t *o = json_pack("{s:i,s:i,s:b,s:f,s:f,s:f}", "global_batch",
			      t->global_batch, "micro_batch", t->micro_batch,
			      "recompute", t->recompute, "bytes_per_param",
			      t->bytes_per_param, "act_bytes", t->act_bytes,
			      "reserve_gib", t->reserve_gib);

	if (o != NULL && t->zero != 0 &&
	    json_object_set_new(o, "zero", json_integer(t->zero)) != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}
