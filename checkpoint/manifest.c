/*
 * manifest.c - the commit record: building it from rank-file indexes,
 * checking it (coverage, overlaps, names, ranges), JSON in and out.
 *
 * The parser is strict: unknown keys rejected, every number range-checked,
 * sizes capped, format and version checked before anything else.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_internal.h"

int ck_name_ok(const char *name)
{
	size_t i, n = strlen(name);

	if (n == 0 || n >= HEXI_CKPT_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return 0;
	}
	return 1;
}

hexi_rc ck_meta_check(const hexi_ckpt_meta *m, const char *where)
{
	size_t i, hl = strnlen(m->plan_hash, sizeof(m->plan_hash));

	if (strnlen(m->model, sizeof(m->model)) == sizeof(m->model) ||
	    m->model[0] == '\0' || !hexi_is_printable(m->model))
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: model name empty, too "
				  "long or not printable",
				  where);
	if (hl == sizeof(m->plan_hash))
		return hexi_error(HEXI_ERR_INVAL, "%s: plan hash too long",
				  where);
	for (i = 0; i < hl; i++)
		if (!((m->plan_hash[i] >= '0' && m->plan_hash[i] <= '9') ||
		      (m->plan_hash[i] >= 'a' && m->plan_hash[i] <= 'f')))
			return hexi_error(
			    HEXI_ERR_INVAL,
			    "%s: plan hash '%s' is not lower-case "
			    "hex",
			    where, m->plan_hash);
	if (m->step < 0 || m->step > HEXI_CKPT_MAX_STEP)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: step %lld outside [0, %d]", where,
				  (long long)m->step, HEXI_CKPT_MAX_STEP);
	if (m->tokens_seen < 0 || m->data_position < 0 || m->opt_step < 0)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: negative tokens_seen, "
				  "data_position or opt_step",
				  where);
	if (m->world_size < 1 || m->world_size > HEXI_CKPT_MAX_RANKS)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: world_size %d outside [1, %d]", where,
				  m->world_size, HEXI_CKPT_MAX_RANKS);
	return HEXI_OK;
}

hexi_rc ck_manifest_init(ck_manifest *m, const hexi_ckpt_meta *meta)
{
	memset(m, 0, sizeof(*m));
	m->version = HEXI_CKPT_VERSION;
	if (meta != NULL)
		m->meta = *meta;
	return HEXI_OK;
}

void ck_manifest_fini(ck_manifest *m)
{
	int i;

	if (m == NULL)
		return;
	for (i = 0; i < m->ntensors; i++)
		free(m->tensors[i].slices);
	free(m->tensors);
	free(m->raw);
	free(m->blobs);
	free(m->file_bytes);
	free(m->file_xxh);
	free(m->plan_json);
	memset(m, 0, sizeof(*m));
}

static hexi_rc shape_check(int ndim, const int64_t shape[2], const char *name,
			   const char *where)
{
	int64_t cols = ndim == 2 ? shape[1] : 1;

	if (ndim != 1 && ndim != 2)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: tensor '%s': ndim %d "
				  "(1 or 2)",
				  where, name, ndim);
	if (shape[0] < 1 || shape[0] > CK_MAX_ROWS || cols < 1 ||
	    cols > CK_MAX_ELEMS || shape[0] > CK_MAX_ELEMS / cols)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: tensor '%s': shape "
				  "out of range",
				  where, name);
	return HEXI_OK;
}

hexi_rc ck_manifest_add_slice(ck_manifest *m, const char *name, int ndim,
			      const int64_t shape[2], int rank, int64_t b,
			      int64_t e, uint64_t xxh, uint64_t off,
			      const char *where)
{
	ck_raw *r;
	hexi_rc rc;

	if (!ck_name_ok(name))
		return hexi_error(HEXI_ERR_INVAL, "%s: bad tensor name '%.*s'",
				  where, HEXI_CKPT_NAME_MAX, name);
	if ((rc = shape_check(ndim, shape, name, where)) != HEXI_OK)
		return rc;
	if (b < 0 || e <= b || e > shape[0])
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: tensor '%s': rows "
				  "[%lld,%lld) outside [0,%lld)",
				  where, name, (long long)b, (long long)e,
				  (long long)shape[0]);
	if (m->nraw >= CK_MAX_SLICES)
		return hexi_error(HEXI_ERR_RANGE, "%s: more than %d slices",
				  where, CK_MAX_SLICES);
	if (m->nraw == m->rawcap) {
		int cap = m->rawcap ? 2 * m->rawcap : 64;
		ck_raw *n = realloc(m->raw, (size_t)cap * sizeof(*n));
		if (n == NULL)
			return hexi_error(HEXI_ERR_NOMEM, "%s: slice list",
					  where);
		m->raw = n;
		m->rawcap = cap;
	}
	r = &m->raw[m->nraw++];
	memset(r, 0, sizeof(*r));
	memcpy(r->name, name, strlen(name) + 1);
	r->ndim = ndim;
	r->shape[0] = shape[0];
	r->shape[1] = ndim == 2 ? shape[1] : 1;
	r->s.rank = rank;
	r->s.b = b;
	r->s.e = e;
	r->s.xxh = xxh;
	r->s.off = off;
	return HEXI_OK;
}

hexi_rc ck_manifest_add_blob(ck_manifest *m, const char *name, int rank,
			     uint64_t bytes, uint64_t xxh, uint64_t off,
			     const char *where)
{
	ck_blob *bl;

	if (!ck_name_ok(name))
		return hexi_error(HEXI_ERR_INVAL, "%s: bad blob name '%.*s'",
				  where, HEXI_CKPT_NAME_MAX, name);
	if (bytes > CK_BLOB_MAX_BYTES)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: blob '%s' larger than "
				  "%zu bytes",
				  where, name, CK_BLOB_MAX_BYTES);
	if (m->nblobs >= CK_MAX_TENSORS)
		return hexi_error(HEXI_ERR_RANGE, "%s: too many blobs", where);
	if (m->nblobs == m->bcap) {
		int cap = m->bcap ? 2 * m->bcap : 8;
		ck_blob *n = realloc(m->blobs, (size_t)cap * sizeof(*n));
		if (n == NULL)
			return hexi_error(HEXI_ERR_NOMEM, "%s: blob list",
					  where);
		m->blobs = n;
		m->bcap = cap;
	}
	bl = &m->blobs[m->nblobs++];
	memset(bl, 0, sizeof(*bl));
	memcpy(bl->name, name, strlen(name) + 1);
	bl->rank = rank;
	bl->bytes = bytes;
	bl->xxh = xxh;
	bl->off = off;
	return HEXI_OK;
}

static int raw_cmp(const void *a, const void *b)
{
	const ck_raw *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c != 0)
		return c;
	return x->s.b < y->s.b ? -1 : x->s.b > y->s.b;
}

static int blob_cmp(const void *a, const void *b)
{
	return strcmp(((const ck_blob *)a)->name, ((const ck_blob *)b)->name);
}

/* Group raw[i0..i1) (same name, sorted by b) into tensor T. */
static hexi_rc make_tensor(ck_manifest *m, int i0, int i1, ck_tensor *t,
			   const char *where)
{
	const ck_raw *f = &m->raw[i0];
	int64_t next = 0;
	int i;

	memset(t, 0, sizeof(*t));
	memcpy(t->name, f->name, sizeof(t->name));
	t->ndim = f->ndim;
	t->shape[0] = f->shape[0];
	t->shape[1] = f->shape[1];
	t->slices = calloc((size_t)(i1 - i0), sizeof(*t->slices));
	if (t->slices == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%s: tensor '%s'", where,
				  t->name);
	for (i = i0; i < i1; i++) {
		const ck_raw *r = &m->raw[i];
		if (r->ndim != t->ndim || r->shape[0] != t->shape[0] ||
		    r->shape[1] != t->shape[1])
			return hexi_error(HEXI_ERR_MISMATCH,
					  "%s: tensor '%s': slices disagree on "
					  "the global shape",
					  where, t->name);
		if (r->s.rank < 0 || r->s.rank >= m->meta.world_size)
			return hexi_error(HEXI_ERR_RANGE,
					  "%s: tensor '%s': rank %d outside "
					  "[0,%d)",
					  where, t->name, r->s.rank,
					  m->meta.world_size);
		if (r->s.b > next)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "%s: tensor '%s': rows [%lld,%lld) "
					  "not covered by any slice",
					  where, t->name, (long long)next,
					  (long long)r->s.b);
		if (r->s.b < next)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "%s: tensor '%s': slices overlap at "
					  "rows [%lld,%lld)",
					  where, t->name, (long long)r->s.b,
					  (long long)next);
		t->slices[t->nslices++] = r->s;
		next = r->s.e;
	}
	if (next != t->shape[0])
		return hexi_error(HEXI_ERR_MISMATCH,
				  "%s: tensor '%s': rows [%lld,%lld) not "
				  "covered by any slice",
				  where, t->name, (long long)next,
				  (long long)t->shape[0]);
	return HEXI_OK;
}

hexi_rc ck_manifest_validate(ck_manifest *m, const char *where)
{
	hexi_rc rc;
	int i, j, n = 0;

	if ((rc = ck_meta_check(&m->meta, where)) != HEXI_OK)
		return rc;
	qsort(m->raw, (size_t)m->nraw, sizeof(*m->raw), raw_cmp);
	for (i = 0; i < m->nraw; i = j) {
		for (j = i + 1; j < m->nraw; j++)
			if (strcmp(m->raw[j].name, m->raw[i].name) != 0)
				break;
		n++;
	}
	m->tensors = calloc((size_t)(n ? n : 1), sizeof(*m->tensors));
	if (m->tensors == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%s: tensor list", where);
	for (i = 0; i < m->nraw; i = j) {
		for (j = i + 1; j < m->nraw; j++)
			if (strcmp(m->raw[j].name, m->raw[i].name) != 0)
				break;
		rc = make_tensor(m, i, j, &m->tensors[m->ntensors++], where);
		if (rc != HEXI_OK)
			return rc;
	}
	free(m->raw);
	m->raw = NULL;
	m->nraw = m->rawcap = 0;
	if (m->nblobs > 1) /* qsort(NULL, 0) is undefined behaviour */
		qsort(m->blobs, (size_t)m->nblobs, sizeof(*m->blobs), blob_cmp);
	for (i = 0; i < m->nblobs; i++) {
		if (i > 0 &&
		    strcmp(m->blobs[i].name, m->blobs[i - 1].name) == 0)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "%s: blob '%s' stored twice", where,
					  m->blobs[i].name);
		if (m->blobs[i].rank < 0 ||
		    m->blobs[i].rank >= m->meta.world_size)
			return hexi_error(HEXI_ERR_RANGE,
					  "%s: blob '%s': rank outside [0,%d)",
					  where, m->blobs[i].name,
					  m->meta.world_size);
	}
	return HEXI_OK;
}

ck_tensor *ck_manifest_find(const ck_manifest *m, const char *name)
{
	int lo = 0, hi = m->ntensors - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		int c = strcmp(m->tensors[mid].name, name);
		if (c == 0)
			return &m->tensors[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

/* ---- JSON helpers ------------------------------------------------------ */

hexi_rc ck_json_keys(json_t *o, const char *const *keys, const char *where)
{
	const char *k;
	json_t *v;
	int i, found;

	if (!json_is_object(o))
		return hexi_error(HEXI_ERR_PARSE, "%s: expected an object",
				  where);
	json_object_foreach(o, k, v)
	{
		(void)v;
		found = 0;
		for (i = 0; keys[i] != NULL; i++)
			if (strcmp(k, keys[i]) == 0)
				found = 1;
		if (!found)
			return hexi_error(HEXI_ERR_PARSE,
					  "%s: unknown key '%.64s'", where, k);
	}
	return HEXI_OK;
}

hexi_rc ck_json_i64(json_t *o, const char *key, int64_t min, int64_t max,
		    int64_t *out, const char *where)
{
	json_t *v = json_object_get(o, key);
	json_int_t x;

	if (!json_is_integer(v))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: '%s' missing or not an "
				  "integer",
				  where, key);
	x = json_integer_value(v);
	if (x < min || x > max)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: '%s' = %lld outside "
				  "[%lld, %lld]",
				  where, key, (long long)x, (long long)min,
				  (long long)max);
	*out = (int64_t)x;
	return HEXI_OK;
}

hexi_rc ck_json_str(json_t *o, const char *key, char *buf, size_t cap,
		    const char *where)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_string(v))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: '%s' missing or not a "
				  "string",
				  where, key);
	if (json_string_length(v) >= cap ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: '%s' too long or has a "
				  "NUL byte",
				  where, key);
	memcpy(buf, json_string_value(v), json_string_length(v) + 1);
	return HEXI_OK;
}

hexi_rc ck_json_hex64(json_t *o, const char *key, uint64_t *out,
		      const char *where)
{
	char s[17], *end = NULL;
	hexi_rc rc = ck_json_str(o, key, s, sizeof(s), where);
	size_t i;

	if (rc != HEXI_OK)
		return rc;
	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			break;
	if (i != 16 || s[i] != '\0')
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: '%s' is not 16 lower-case "
				  "hex digits",
				  where, key);
	*out = strtoull(s, &end, 16);
	return HEXI_OK;
}

static hexi_rc json_pair(json_t *a, int64_t min, int64_t max, int64_t out[2],
			 int need2, const char *key, const char *where)
{
	size_t i, n = json_array_size(a);

	if (!json_is_array(a) || n < 1 || n > 2 || (need2 && n != 2))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: '%s' must be an array of "
				  "%s integers",
				  where, key, need2 ? "2" : "1 or 2");
	out[1] = 1;
	for (i = 0; i < n; i++) {
		json_t *v = json_array_get(a, i);
		if (!json_is_integer(v) || json_integer_value(v) < min ||
		    json_integer_value(v) > max)
			return hexi_error(HEXI_ERR_RANGE,
					  "%s: '%s'[%zu] not an "
					  "integer in [%lld, %lld]",
					  where, key, i, (long long)min,
					  (long long)max);
		out[i] = (int64_t)json_integer_value(v);
	}
	return HEXI_OK;
}

hexi_rc ck_json_shape(json_t *o, int *ndim, int64_t shape[2], const char *where)
{
	json_t *a = json_object_get(o, "shape");
	hexi_rc rc = json_pair(a, 1, CK_MAX_ELEMS, shape, 0, "shape", where);

	if (rc == HEXI_OK)
		*ndim = (int)json_array_size(a);
	return rc;
}

hexi_rc ck_json_rows(json_t *o, int64_t *b, int64_t *e, const char *where)
{
	int64_t r[2] = {0, 0};
	hexi_rc rc = json_pair(json_object_get(o, "rows"), 0, CK_MAX_ROWS, r, 1,
			       "rows", where);

	*b = r[0];
	*e = r[1];
	return rc;
}

json_t *ck_json_shape_new(int ndim, const int64_t shape[2])
{
	return ndim == 2 ? json_pack("[II]", (json_int_t)shape[0],
				     (json_int_t)shape[1])
			 : json_pack("[I]", (json_int_t)shape[0]);
}

json_t *ck_json_hex64_new(uint64_t v)
{
	char s[17];

	snprintf(s, sizeof(s), "%016" PRIx64, v);
	return json_string(s);
}

/* ---- manifest JSON ----------------------------------------------------- */

static const char *const top_keys[] = {
    "format",	   "version",	    "model",	"plan_hash",  "step",
    "tokens_seen", "data_position", "opt_step", "world_size", "files",
    "tensors",	   "blobs",	    "plan",	NULL};
static const char *const file_keys_v1[] = {"rank", "name", "bytes", NULL};
static const char *const file_keys_v2[] = {"rank", "name", "bytes", "xxh64",
					   NULL};
static const char *const tensor_keys[] = {"name", "shape", "dtype", "slices",
					  NULL};
static const char *const slice_keys[] = {"rank", "rows", "xxh64", NULL};
static const char *const blob_keys[] = {"name", "rank", "bytes", "xxh64", NULL};
/* Version 3: each slice and blob also says where its data starts in the
 * rank file ("offset", bytes), so it can be read without libhdf5. */
static const char *const slice_keys_v3[] = {"rank", "rows", "xxh64", "offset",
					    NULL};
static const char *const blob_keys_v3[] = {"name",  "rank",   "bytes",
					   "xxh64", "offset", NULL};

static hexi_rc parse_meta(json_t *root, ck_manifest *m, const char *where)
{
	char fmt[64];
	int64_t v, ws;
	hexi_rc rc;

	if (!json_is_object(root))
		return hexi_error(HEXI_ERR_PARSE, "%s: not a JSON object",
				  where);
	if (ck_json_str(root, "format", fmt, sizeof(fmt), where) != HEXI_OK ||
	    strcmp(fmt, HEXI_CKPT_FORMAT) != 0)
		return hexi_error(HEXI_ERR_PARSE, "%s: 'format' is not '%s'",
				  where, HEXI_CKPT_FORMAT);
	if ((rc = ck_json_i64(root, "version", 0, INT32_MAX, &v, where)))
		return rc;
	if (v < HEXI_CKPT_VERSION_MIN || v > HEXI_CKPT_VERSION)
		return hexi_error(HEXI_ERR_VERSION,
				  "%s: format version %lld, "
				  "this build reads versions %d to %d",
				  where, (long long)v, HEXI_CKPT_VERSION_MIN,
				  HEXI_CKPT_VERSION);
	m->version = (int)v;
	if ((rc = ck_json_keys(root, top_keys, where)) ||
	    (rc = ck_json_str(root, "model", m->meta.model,
			      sizeof(m->meta.model), where)) ||
	    (rc = ck_json_str(root, "plan_hash", m->meta.plan_hash,
			      sizeof(m->meta.plan_hash), where)) ||
	    (rc = ck_json_i64(root, "step", 0, HEXI_CKPT_MAX_STEP,
			      &m->meta.step, where)) ||
	    (rc = ck_json_i64(root, "tokens_seen", 0, INT64_MAX,
			      &m->meta.tokens_seen, where)) ||
	    (rc = ck_json_i64(root, "data_position", 0, INT64_MAX,
			      &m->meta.data_position, where)) ||
	    (rc = ck_json_i64(root, "opt_step", 0, INT64_MAX, &m->meta.opt_step,
			      where)) ||
	    (rc = ck_json_i64(root, "world_size", 1, HEXI_CKPT_MAX_RANKS, &ws,
			      where)))
		return rc;
	m->meta.world_size = (int)ws;
	return ck_meta_check(&m->meta, where);
}

/* ---- per-version read hooks ---------------------------------------------
 * One row per format version this build reads (HEXI_CKPT_VERSION_MIN ..
 * HEXI_CKPT_VERSION): what differs is parsed by the row's hooks.  A new
 * version adds a row; the rows of old versions stay. */

/* One entry of 'files': rank, name, bytes (both versions). */
static hexi_rc file_common(json_t *f, size_t i, const char *const *keys,
			   ck_manifest *m, const char *where)
{
	char name[64], want[64];
	int64_t r, bytes;
	hexi_rc rc;

	if ((rc = ck_json_keys(f, keys, where)) ||
	    (rc = ck_json_i64(f, "rank", 0, HEXI_CKPT_MAX_RANKS, &r, where)) ||
	    (rc = ck_json_str(f, "name", name, sizeof(name), where)) ||
	    (rc = ck_json_i64(f, "bytes", 0, INT64_MAX, &bytes, where)))
		return rc;
	snprintf(want, sizeof(want), "rank-%05d.h5", (int)i);
	if (r != (int64_t)i || strcmp(name, want) != 0)
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: files[%zu] must be "
				  "rank %zu, '%s'",
				  where, i, i, want);
	m->file_bytes[i] = (uint64_t)bytes;
	return HEXI_OK;
}

/* Version 1: no whole-file checksum. */
static hexi_rc file_v1(json_t *f, size_t i, ck_manifest *m, const char *where)
{
	return file_common(f, i, file_keys_v1, m, where);
}

/* Version 2: "xxh64" of the whole rank file, required. */
static hexi_rc file_v2(json_t *f, size_t i, ck_manifest *m, const char *where)
{
	hexi_rc rc = file_common(f, i, file_keys_v2, m, where);

	return rc != HEXI_OK
		   ? rc
		   : ck_json_hex64(f, "xxh64", &m->file_xxh[i], where);
}

static const struct version_hooks {
	int version;
	int file_xxh; /* the manifest has whole-file checksums */
	int offsets;  /* slices and blobs have "offset" */
	hexi_rc (*file)(json_t *f, size_t i, ck_manifest *m, const char *where);
} version_table[] = {
    {1, 0, 0, file_v1},
    {2, 1, 0, file_v2},
    {3, 1, 1, file_v2},
};

static const struct version_hooks *hooks_of(int version)
{
	size_t i;

	for (i = 0; i < sizeof(version_table) / sizeof(version_table[0]); i++)
		if (version_table[i].version == version)
			return &version_table[i];
	return NULL;
}

static hexi_rc parse_files(json_t *a, ck_manifest *m, const char *where)
{
	const struct version_hooks *h = hooks_of(m->version);
	size_t i;
	hexi_rc rc;

	if (h == NULL)
		return hexi_error(HEXI_ERR_VERSION, "%s: format version %d",
				  where, m->version);
	if (!json_is_array(a) ||
	    json_array_size(a) != (size_t)m->meta.world_size)
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: 'files' must list %d rank "
				  "files",
				  where, m->meta.world_size);
	m->file_bytes = calloc((size_t)m->meta.world_size, sizeof(uint64_t));
	m->file_xxh = h->file_xxh
			  ? calloc((size_t)m->meta.world_size, sizeof(uint64_t))
			  : NULL;
	if (m->file_bytes == NULL || (h->file_xxh && m->file_xxh == NULL))
		return hexi_error(HEXI_ERR_NOMEM, "%s: file list", where);
	for (i = 0; i < json_array_size(a); i++)
		if ((rc = h->file(json_array_get(a, i), i, m, where)))
			return rc;
	return HEXI_OK;
}

static hexi_rc json_offset(json_t *o, uint64_t *off, const char *where)
{
	int64_t v;
	hexi_rc rc = ck_json_i64(o, "offset", 0, INT64_MAX, &v, where);

	if (rc == HEXI_OK)
		*off = (uint64_t)v;
	return rc;
}

/* BYTES at OFF lie inside rank file RANK (whose size the file list gave;
 * a rank outside the world is the validator's to report). */
static hexi_rc offset_check(const ck_manifest *m, int rank, uint64_t off,
			    uint64_t bytes, const char *name, const char *where)
{
	uint64_t size;

	if (rank >= m->meta.world_size || m->file_bytes == NULL)
		return HEXI_OK;
	size = m->file_bytes[rank];
	if (off > size || bytes > size - off)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: '%s': %" PRIu64 " bytes at offset %" PRIu64
				  " lie outside rank-%05d.h5 (%" PRIu64 " bytes)",
				  where, name, bytes, off, rank, size);
	return HEXI_OK;
}

static hexi_rc parse_tensor(json_t *t, ck_manifest *m, const char *where)
{
	char name[HEXI_CKPT_NAME_MAX], dtype[16];
	int ndim = 0;
	int64_t shape[2], rank, b, e;
	uint64_t xxh;
	json_t *sl;
	size_t i;
	int offsets = hooks_of(m->version)->offsets;
	hexi_rc rc;

	if ((rc = ck_json_keys(t, tensor_keys, where)) ||
	    (rc = ck_json_str(t, "name", name, sizeof(name), where)) ||
	    (rc = ck_json_shape(t, &ndim, shape, where)) ||
	    (rc = ck_json_str(t, "dtype", dtype, sizeof(dtype), where)))
		return rc;
	if (strcmp(dtype, "float32") != 0)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "%s: tensor '%s': dtype "
				  "'%s' (only float32)",
				  where, name, dtype);
	sl = json_object_get(t, "slices");
	if (!json_is_array(sl) || json_array_size(sl) == 0)
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: tensor '%s': 'slices' "
				  "must be a non-empty array",
				  where, name);
	for (i = 0; i < json_array_size(sl); i++) {
		json_t *s = json_array_get(sl, i);
		uint64_t off = CK_NO_OFFSET;
		if ((rc = ck_json_keys(s, offsets ? slice_keys_v3 : slice_keys,
				       where)) ||
		    (rc = ck_json_i64(s, "rank", 0, HEXI_CKPT_MAX_RANKS - 1,
				      &rank, where)) ||
		    (rc = ck_json_rows(s, &b, &e, where)) ||
		    (rc = ck_json_hex64(s, "xxh64", &xxh, where)) ||
		    (offsets && (rc = json_offset(s, &off, where))) ||
		    (rc = ck_manifest_add_slice(m, name, ndim, shape, (int)rank,
						b, e, xxh, off, where)))
			return rc;
		/* shape and rows were checked by add_slice: no overflow */
		if (offsets &&
		    (rc = offset_check(m, (int)rank, off,
				       (uint64_t)(e - b) *
					   (uint64_t)(ndim == 2 ? shape[1] : 1) *
					   4,
				       name, where)))
			return rc;
	}
	return HEXI_OK;
}

static hexi_rc parse_blob(json_t *o, ck_manifest *m, const char *where)
{
	char name[HEXI_CKPT_NAME_MAX];
	int64_t rank, bytes;
	uint64_t xxh, off = CK_NO_OFFSET;
	int offsets = hooks_of(m->version)->offsets;
	hexi_rc rc;

	if ((rc = ck_json_keys(o, offsets ? blob_keys_v3 : blob_keys, where)) ||
	    (rc = ck_json_str(o, "name", name, sizeof(name), where)) ||
	    (rc = ck_json_i64(o, "rank", 0, HEXI_CKPT_MAX_RANKS - 1, &rank,
			      where)) ||
	    (rc = ck_json_i64(o, "bytes", 0, (int64_t)CK_BLOB_MAX_BYTES, &bytes,
			      where)) ||
	    (rc = ck_json_hex64(o, "xxh64", &xxh, where)) ||
	    (offsets && (rc = json_offset(o, &off, where))) ||
	    (offsets && (rc = offset_check(m, (int)rank, off, (uint64_t)bytes,
					   name, where))))
		return rc;
	return ck_manifest_add_blob(m, name, (int)rank, (uint64_t)bytes, xxh,
				    off, where);
}

static hexi_rc parse_root(json_t *root, ck_manifest *m, const char *where)
{
	json_t *a, *plan;
	size_t i;
	hexi_rc rc;

	if ((rc = parse_meta(root, m, where)) != HEXI_OK ||
	    (rc = parse_files(json_object_get(root, "files"), m, where)))
		return rc;
	a = json_object_get(root, "tensors");
	if (!json_is_array(a) || json_array_size(a) > CK_MAX_TENSORS)
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: 'tensors' must be an "
				  "array",
				  where);
	for (i = 0; i < json_array_size(a); i++)
		if ((rc = parse_tensor(json_array_get(a, i), m, where)))
			return rc;
	a = json_object_get(root, "blobs");
	if (!json_is_array(a))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: 'blobs' must be an array", where);
	for (i = 0; i < json_array_size(a); i++)
		if ((rc = parse_blob(json_array_get(a, i), m, where)))
			return rc;
	plan = json_object_get(root, "plan");
	if (plan == NULL || !(json_is_object(plan) || json_is_null(plan)))
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: 'plan' must be an object "
				  "or null",
				  where);
	m->plan_json =
	    json_is_null(plan) ? strdup("") : json_dumps(plan, JSON_COMPACT);
	if (m->plan_json == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "%s: plan", where);
	if (json_is_null(plan) && m->meta.plan_hash[0] != '\0')
		return hexi_error(HEXI_ERR_PARSE,
				  "%s: plan hash without a plan", where);
	return ck_manifest_validate(m, where);
}

hexi_rc ck_manifest_parse(const char *json, size_t len, const char *where,
			  ck_manifest *out)
{
	json_error_t jerr;
	json_t *root;
	hexi_rc rc;

	ck_manifest_init(out, NULL);
	if (len > CK_MANIFEST_MAX_BYTES)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: manifest larger than %zu "
				  "bytes",
				  where, CK_MANIFEST_MAX_BYTES);
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL)
		return hexi_error(HEXI_ERR_PARSE, "%s: line %d: %s", where,
				  jerr.line, jerr.text);
	rc = parse_root(root, out, where);
	json_decref(root);
	if (rc != HEXI_OK)
		ck_manifest_fini(out);
	return rc;
}

hexi_rc hexi_ckpt_manifest_check(const char *json, size_t len)
{
	ck_manifest m;
	hexi_rc rc = ck_manifest_parse(json, len, "manifest", &m);

	if (rc == HEXI_OK)
		ck_manifest_fini(&m);
	return rc;
}

/* ---- output ------------------------------------------------------------ */

static json_t *tensor_json(const ck_tensor *t)
{
	json_t *o, *sl = json_array();
	int i;

	if (sl == NULL)
		return NULL;
	for (i = 0; i < t->nslices; i++) {
		const ck_slice *s = &t->slices[i];
		if (json_array_append_new(
			sl,
			json_pack("{s:i,s:[I,I],s:o,s:I}", "rank", s->rank,
				  "rows", (json_int_t)s->b, (json_int_t)s->e,
				  "xxh64", ck_json_hex64_new(s->xxh), "offset",
				  (json_int_t)s->off)) < 0) {
			json_decref(sl);
			return NULL;
		}
	}
	o = json_pack("{s:s,s:o,s:s,s:o}", "name", t->name, "shape",
		      ck_json_shape_new(t->ndim, t->shape), "dtype", "float32",
		      "slices", sl);
	return o;
}

static json_t *manifest_json(const ck_manifest *m)
{
	json_t *files = json_array(), *tensors = json_array(),
	       *blobs = json_array(), *plan = NULL, *root = NULL;
	char fn[32];
	int i, bad = files == NULL || tensors == NULL || blobs == NULL;

	for (i = 0; !bad && i < m->meta.world_size; i++) {
		snprintf(fn, sizeof(fn), "rank-%05d.h5", i);
		bad = json_array_append_new(
		    files,
		    json_pack(
			"{s:i,s:s,s:I,s:o}", "rank", i, "name", fn, "bytes",
			(json_int_t)m->file_bytes[i], "xxh64",
			ck_json_hex64_new(m->file_xxh ? m->file_xxh[i] : 0)));
	}
	for (i = 0; !bad && i < m->ntensors; i++)
		bad =
		    json_array_append_new(tensors, tensor_json(&m->tensors[i]));
	for (i = 0; !bad && i < m->nblobs; i++)
		bad = json_array_append_new(
		    blobs,
		    json_pack("{s:s,s:i,s:I,s:o,s:I}", "name", m->blobs[i].name,
			      "rank", m->blobs[i].rank, "bytes",
			      (json_int_t)m->blobs[i].bytes, "xxh64",
			      ck_json_hex64_new(m->blobs[i].xxh), "offset",
			      (json_int_t)m->blobs[i].off));
	if (!bad)
		plan = m->plan_json && m->plan_json[0]
			   ? json_loads(m->plan_json, 0, NULL)
			   : json_null();
	if (!bad && plan != NULL)
		root = json_pack(
		    "{s:s,s:i,s:s,s:s,s:I,s:I,s:I,s:I,s:i,s:O,s:O,s:O,s:O}",
		    "format", HEXI_CKPT_FORMAT, "version", HEXI_CKPT_VERSION,
		    "model", m->meta.model, "plan_hash", m->meta.plan_hash,
		    "step", (json_int_t)m->meta.step, "tokens_seen",
		    (json_int_t)m->meta.tokens_seen, "data_position",
		    (json_int_t)m->meta.data_position, "opt_step",
		    (json_int_t)m->meta.opt_step, "world_size",
		    m->meta.world_size, "files", files, "tensors", tensors,
		    "blobs", blobs, "plan", plan);
	json_decref(plan);
	json_decref(blobs);
	json_decref(tensors);
	json_decref(files);
	return root;
}

hexi_rc ck_manifest_to_json(const ck_manifest *m, char **out)
{
	json_t *root = manifest_json(m);
	char *s;

	if (root == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "manifest: building JSON");
	s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (s == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "manifest: dumping JSON");
	*out = s;
	return HEXI_OK;
}
