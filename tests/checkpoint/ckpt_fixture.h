/*
 * ckpt_fixture.h - synthetic models, layouts and data for checkpoint tests
 * and benchmarks (header only; no scheduler needed).
 *
 * A synthetic model has embed.weight (V,C), and per layer l
 * layers.l.attn_norm.weight (C) replicated, layers.l.mlp.w_up (F,C) split
 * over TP ranks; "opt" adds opt.m.* and opt.v.* of every tensor.  A layout
 * is P pipelines with TP degrees tp[p]; ranks are numbered pipeline-major.
 * Values are a pure function of (tensor, row, col, seed), so any reader
 * can check any range without keeping the data.
 */
#ifndef CKPT_FIXTURE_H
#define CKPT_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hexi_ckpt.h"

/* is_int on hexi_rc values, with the library's message on failure. */
#define is_rc(got, want, ...)                                                  \
	do {                                                                   \
		hexi_rc fx_rc_ = (got);                                        \
		is_int(fx_rc_, (want), __VA_ARGS__);                           \
		if (fx_rc_ != (want))                                          \
			tap_diag("  %s", hexi_errmsg(fx_rc_));                 \
	} while (0)

typedef struct fx_model {
	int layers;
	int64_t vocab, hidden, ffn;
	int opt; /* also opt.m.* / opt.v.* */
} fx_model;

static __attribute__((unused)) uint32_t fx_hash32(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (uint32_t)x;
}

static __attribute__((unused)) uint64_t fx_name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

/* Value of element (row, col) of tensor NAME for SEED: finite, varied. */
static __attribute__((unused)) float fx_value(const char *name, int64_t row,
					      int64_t col, uint64_t seed)
{
	uint32_t h = fx_hash32(fx_name_hash(name) ^
			       (uint64_t)row * 0x9e3779b97f4a7c15ull ^
			       (uint64_t)col * 0xbf58476d1ce4e5b9ull ^ seed);

	return ((float)(h >> 8) / 16777216.0f - 0.5f) * 0.1f;
}

static __attribute__((unused)) void fx_fill(const char *name, int64_t b,
					    int64_t e, int64_t cols,
					    uint64_t seed, float *dst)
{
	int64_t r, c;

	for (r = b; r < e; r++)
		for (c = 0; c < cols; c++)
			dst[(r - b) * cols + c] = fx_value(name, r, c, seed);
}

/* Build the layout; free with fx_layout_free. */
static __attribute__((unused)) hexi_layout *fx_layout(const fx_model *m,
						      int npipe, const int *tp)
{
	static const char *const pre[3] = {"", "opt.m.", "opt.v."};
	int nbase = 1 + 2 * m->layers, nt = nbase * (m->opt ? 3 : 1);
	hexi_layout *l = calloc(1, sizeof(*l));
	int i, k, p, r, base;

	if (l == NULL)
		return NULL;
	l->tensors = calloc((size_t)nt, sizeof(*l->tensors));
	l->ntensors = nt;
	for (i = 0; i < nt; i++) {
		hexi_tensor_layout *t = &l->tensors[i];
		int bi = i % nbase, split = 0, ns = 0;
		k = i / nbase;
		if (bi == 0) {
			snprintf(t->name, sizeof(t->name), "%sembed.weight",
				 pre[k]);
			t->ndim = 2;
			t->shape[0] = m->vocab;
			t->shape[1] = m->hidden;
		} else if (bi % 2 == 1) {
			snprintf(t->name, sizeof(t->name),
				 "%slayers.%d.attn_norm.weight", pre[k],
				 (bi - 1) / 2);
			t->ndim = 1;
			t->shape[0] = m->hidden;
			t->shape[1] = 1;
		} else {
			snprintf(t->name, sizeof(t->name),
				 "%slayers.%d.mlp.w_up", pre[k], (bi - 1) / 2);
			t->ndim = 2;
			t->shape[0] = m->ffn;
			t->shape[1] = m->hidden;
			split = 1;
		}
		for (p = 0; p < npipe; p++)
			ns += tp[p];
		t->shards = calloc((size_t)ns, sizeof(*t->shards));
		t->nshards = ns;
		base = 0;
		ns = 0;
		for (p = 0; p < npipe; p++) {
			for (r = 0; r < tp[p]; r++) {
				hexi_shard *s = &t->shards[ns++];
				s->rank = base + r;
				s->pipeline = p;
				s->row_begin =
				    split ? (int)(r * t->shape[0] / tp[p]) : 0;
				s->row_end =
				    split ? (int)((r + 1) * t->shape[0] / tp[p])
					  : (int)t->shape[0];
			}
			base += tp[p];
		}
	}
	return l;
}

static __attribute__((unused)) void fx_layout_free(hexi_layout *l)
{
	int i;

	if (l == NULL)
		return;
	for (i = 0; i < l->ntensors; i++)
		free(l->tensors[i].shards);
	free(l->tensors);
	free(l);
}

static __attribute__((unused)) int fx_world(int npipe, const int *tp)
{
	int p, w = 0;

	for (p = 0; p < npipe; p++)
		w += tp[p];
	return w;
}

static __attribute__((unused)) void fx_meta(hexi_ckpt_meta *m, int64_t step,
					    int world, const char *plan_hash)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->model, sizeof(m->model), "fixture");
	snprintf(m->plan_hash, sizeof(m->plan_hash), "%s", plan_hash);
	m->step = step;
	m->tokens_seen = step * 4096;
	m->data_position = step * 8;
	m->opt_step = step;
	m->world_size = world;
}

/* Save a whole checkpoint as all ranks would (one process), commit it.
 * The data of step S uses seed S. */
static __attribute__((unused)) hexi_rc
fx_save_model(const char *dir, const hexi_layout *l, int world, int64_t step,
	      const char *plan_hash, const char *model, const char *plan_json)
{
	hexi_ckpt_meta meta;
	hexi_ckpt_writer *w;
	hexi_rc rc;
	int rank, i, j;

	fx_meta(&meta, step, world, plan_hash);
	snprintf(meta.model, sizeof(meta.model), "%s", model);
	for (rank = 0; rank < world; rank++) {
		rc = hexi_ckpt_save_begin(dir, &meta, rank, &w);
		if (rc != HEXI_OK)
			return rc;
		for (i = 0; i < l->ntensors; i++) {
			const hexi_tensor_layout *t = &l->tensors[i];
			for (j = 0; j < t->nshards; j++) {
				const hexi_shard *s = &t->shards[j];
				int64_t cols = t->ndim == 2 ? t->shape[1] : 1;
				float *buf;
				if (s->rank != rank ||
				    !hexi_ckpt_shard_is_writer(t, j))
					continue;
				buf =
				    malloc((size_t)(s->row_end - s->row_begin) *
					   (size_t)cols * sizeof(float));
				if (buf == NULL) {
					hexi_ckpt_save_abort(w);
					return HEXI_ERR_NOMEM;
				}
				fx_fill(t->name, s->row_begin, s->row_end, cols,
					(uint64_t)step, buf);
				rc = hexi_ckpt_write_slice(
				    w, t->name, t->ndim, t->shape, s->row_begin,
				    s->row_end, buf);
				free(buf);
				if (rc != HEXI_OK) {
					hexi_ckpt_save_abort(w);
					return rc;
				}
			}
		}
		if (rank == 0) {
			uint64_t rng[4] = {1, 2, 3, (uint64_t)step};
			rc = hexi_ckpt_write_blob(w, "rng", rng, sizeof(rng));
			if (rc != HEXI_OK) {
				hexi_ckpt_save_abort(w);
				return rc;
			}
		}
		if ((rc = hexi_ckpt_save_end(w)) != HEXI_OK)
			return rc;
	}
	return hexi_ckpt_commit(dir, &meta, plan_json);
}

static __attribute__((unused)) hexi_rc
fx_save(const char *dir, const hexi_layout *l, int world, int64_t step,
	const char *plan_hash, const char *plan_json)
{
	return fx_save_model(dir, l, world, step, plan_hash, "fixture",
			     plan_json);
}

/* Check every tensor of the open checkpoint against the fixture data of
 * SEED, reading in pieces of CHUNK rows; returns the number of mismatching
 * tensors (or -1 on a read error). */
static __attribute__((unused)) int fx_check(hexi_ckpt_reader *r, uint64_t seed,
					    int64_t chunk)
{
	int i, bad = 0;

	for (i = 0; i < hexi_ckpt_ntensors(r); i++) {
		hexi_ckpt_tensor_info ti;
		int64_t b, e;
		float *got, *want;
		if (hexi_ckpt_tensor_at(r, i, &ti) != HEXI_OK)
			return -1;
		got = malloc((size_t)chunk * (size_t)ti.shape[1] * 4);
		want = malloc((size_t)chunk * (size_t)ti.shape[1] * 4);
		if (got == NULL || want == NULL) {
			free(got);
			free(want);
			return -1;
		}
		for (b = 0; b < ti.shape[0]; b = e) {
			e = b + chunk < ti.shape[0] ? b + chunk : ti.shape[0];
			if (hexi_ckpt_read_rows(r, ti.name, b, e, got) !=
			    HEXI_OK) {
				free(got);
				free(want);
				return -1;
			}
			fx_fill(ti.name, b, e, ti.shape[1], seed, want);
			if (memcmp(got, want,
				   (size_t)(e - b) * (size_t)ti.shape[1] * 4)) {
				bad++;
				break;
			}
		}
		free(got);
		free(want);
	}
	return bad;
}

/* mkdtemp under $TMPDIR (or /tmp) into BUF. */
static __attribute__((unused)) char *fx_tmpdir(char *buf, size_t cap)
{
	const char *t = getenv("TMPDIR");

	snprintf(buf, cap, "%s/hexickpt-test.XXXXXX", t && *t ? t : "/tmp");
	return mkdtemp(buf);
}

static __attribute__((unused)) void fx_rmrf(const char *path)
{
	char cmd[4200];

	if (path == NULL || strlen(path) < 8)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "# could not remove %s\n", path);
}

#endif /* CKPT_FIXTURE_H */
