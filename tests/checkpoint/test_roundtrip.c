/*
 * test_roundtrip.c - save with an asymmetric layout, commit, read back
 * bit-exact in any row ranges; metadata, blobs, commit-time checks.
 */
#include "config.h"

#include "tap.h"
#include "ckpt_fixture.h"

static const char *plan_a = "{\"name\":\"A\",\"pipelines\":[2,3]}";

static void test_roundtrip(const char *dir, const hexi_layout *l, int world)
{
	hexi_ckpt_reader *r = NULL;
	hexi_ckpt_tensor_info ti;
	hexi_ckpt_slice_info si;
	const hexi_ckpt_meta *m;
	void *blob = NULL;
	size_t len = 0;
	int idx = -1;

	is_rc(fx_save(dir, l, world, 3, "00112233aabbccdd", plan_a), HEXI_OK,
	      "save and commit step 3");
	is_rc(hexi_ckpt_open(dir, NULL, &r), HEXI_OK, "open latest");
	if (r == NULL)
		tap_bail("cannot open the checkpoint just written");
	m = hexi_ckpt_reader_meta(r);
	is_int(m->step, 3, "step");
	is_int(m->tokens_seen, 3 * 4096, "tokens_seen");
	is_int(m->data_position, 24, "data_position");
	is_int(m->opt_step, 3, "opt_step");
	is_int(m->world_size, world, "world_size");
	is_str(m->model, "fixture", "model");
	is_str(m->plan_hash, "00112233aabbccdd", "plan hash");
	ok(strstr(hexi_ckpt_reader_plan_json(r), "\"pipelines\":[2,3]") != NULL,
	   "plan JSON kept: %s", hexi_ckpt_reader_plan_json(r));
	is_int(hexi_ckpt_ntensors(r), l->ntensors, "tensor count");
	is_int(hexi_ckpt_tensor_find(r, "layers.1.mlp.w_up", &ti, &idx),
	       HEXI_OK, "find layers.1.mlp.w_up");
	is_int(ti.shape[0], 30, "w_up rows");
	is_int(ti.shape[1], 8, "w_up cols");
	is_int(ti.nslices, 3, "w_up stored as pipeline 1's 3 TP shards only");
	is_int(hexi_ckpt_slice_at(r, idx, 1, &si), HEXI_OK, "slice 1");
	is_int(si.row_begin, 10, "slice 1 begins at 10");
	is_int(si.rank, 3, "slice 1 written by rank 3");
	is_int(hexi_ckpt_tensor_find(r, "embed.weight", &ti, NULL), HEXI_OK,
	       "find embed");
	is_int(ti.nslices, 1, "replicated embed stored once");
	is_int(hexi_ckpt_tensor_find(r, "nope", &ti, NULL), HEXI_ERR_NOTFOUND,
	       "unknown tensor: NOTFOUND");
	is_int(fx_check(r, 3, 1000000), 0, "all tensors bit-exact (whole)");
	is_int(fx_check(r, 3, 7), 0, "all tensors bit-exact (7-row pieces)");
	is_int(fx_check(r, 4, 7), l->ntensors,
	       "other data differs (check "
	       "can fail)");
	is_int(hexi_ckpt_read_blob(r, "rng", &blob, &len), HEXI_OK,
	       "read blob");
	is_int(len, 32, "blob length");
	ok(blob != NULL && ((uint64_t *)blob)[3] == 3, "blob content");
	free(blob);
	is_int(hexi_ckpt_read_blob(r, "none", &blob, &len), HEXI_ERR_NOTFOUND,
	       "unknown blob");
	{
		float x[8];
		is_int(hexi_ckpt_read_rows(r, "embed.weight", 0, 100, x),
		       HEXI_ERR_RANGE, "rows past the end: RANGE");
		is_int(hexi_ckpt_read_rows(r, "embed.weight", 5, 5, x),
		       HEXI_ERR_RANGE, "empty range: RANGE");
	}
	is_int(hexi_ckpt_verify(r, NULL, NULL), HEXI_OK, "verify");
	hexi_ckpt_close(r);
}

static void test_open_opts(const char *dir)
{
	hexi_ckpt_open_opts o;
	hexi_ckpt_reader *r = NULL;
	hexi_rc rc;

	hexi_ckpt_open_opts_init(&o);
	o.model = "llama2-7b";
	rc = hexi_ckpt_open(dir, &o, &r);
	is_int(rc, HEXI_ERR_MISMATCH, "other model: MISMATCH");
	ok(strstr(hexi_errmsg(rc), "fixture") != NULL,
	   "message names the "
	   "model: %s",
	   hexi_errmsg(rc));
	hexi_ckpt_open_opts_init(&o);
	o.plan_hash = "ffffffffffffffff";
	is_int(hexi_ckpt_open(dir, &o, &r), HEXI_ERR_MISMATCH,
	       "other plan hash: MISMATCH");
	hexi_ckpt_open_opts_init(&o);
	o.step = 4;
	is_int(hexi_ckpt_open(dir, &o, &r), HEXI_ERR_NOTFOUND,
	       "absent step: NOTFOUND");
	o.step = 3;
	is_int(hexi_ckpt_open(dir, &o, &r), HEXI_OK, "named step opens");
	hexi_ckpt_close(r);
}

static void test_commit_rules(const char *dir, const hexi_layout *l, int world)
{
	hexi_ckpt_meta meta;
	hexi_ckpt_writer *w = NULL;
	int64_t shape[2] = {10, 4};
	float d[40] = {0};
	hexi_rc rc;
	int i;

	fx_meta(&meta, 3, world, "00112233aabbccdd");
	is_int(hexi_ckpt_save_begin(dir, &meta, 0, &w), HEXI_ERR_INVAL,
	       "saving into a committed step: INVAL");
	is_int(fx_save(dir, l, world, 3, "00112233aabbccdd", plan_a),
	       HEXI_ERR_INVAL, "committing a step twice: INVAL");

	/* A gap: rows [6,10) never written. */
	fx_meta(&meta, 7, 1, "");
	is_int(hexi_ckpt_save_begin(dir, &meta, 0, &w), HEXI_OK,
	       "begin step 7");
	is_int(hexi_ckpt_write_slice(w, "t", 2, shape, 0, 6, d), HEXI_OK,
	       "write rows 0-6");
	is_int(hexi_ckpt_write_slice(w, "t", 2, shape, 0, 6, d), HEXI_ERR_INVAL,
	       "same slice twice: INVAL");
	is_int(hexi_ckpt_write_slice(w, "bad name", 2, shape, 0, 6, d),
	       HEXI_ERR_INVAL, "bad name: INVAL");
	is_int(hexi_ckpt_write_slice(w, "u", 2, shape, 4, 12, d),
	       HEXI_ERR_RANGE, "rows past the shape: RANGE");
	is_int(hexi_ckpt_save_end(w), HEXI_OK, "end step 7");
	rc = hexi_ckpt_commit(dir, &meta, NULL);
	is_int(rc, HEXI_ERR_MISMATCH, "commit with a gap: MISMATCH");
	ok(strstr(hexi_errmsg(rc), "'t': rows [6,10) not covered") != NULL,
	   "message: %s", hexi_errmsg(rc));

	/* An overlap between two ranks. */
	fx_meta(&meta, 8, 2, "");
	for (i = 0; i < 2; i++) {
		hexi_ckpt_save_begin(dir, &meta, i, &w);
		hexi_ckpt_write_slice(w, "t", 2, shape, i * 4, i * 4 + 6, d);
		hexi_ckpt_save_end(w);
	}
	rc = hexi_ckpt_commit(dir, &meta, NULL);
	is_int(rc, HEXI_ERR_MISMATCH, "commit with an overlap: MISMATCH");
	ok(strstr(hexi_errmsg(rc), "overlap") != NULL, "message: %s",
	   hexi_errmsg(rc));

	/* A rank that never saved. */
	fx_meta(&meta, 9, 2, "");
	hexi_ckpt_save_begin(dir, &meta, 0, &w);
	hexi_ckpt_write_slice(w, "t", 2, shape, 0, 10, d);
	hexi_ckpt_save_end(w);
	rc = hexi_ckpt_commit(dir, &meta, NULL);
	is_int(rc, HEXI_ERR_NOTFOUND, "commit with a missing rank file");
	ok(strstr(hexi_errmsg(rc), "rank-00001.h5") != NULL, "message: %s",
	   hexi_errmsg(rc));
	/* A failed commit loses the save: nothing is left behind. */
	rc = hexi_ckpt_commit(dir, &meta, NULL);
	is_int(rc, HEXI_ERR_INVAL, "commit again after a failed commit: INVAL");
	/* Disagreeing metadata between ranks. */
	for (i = 0; i < 2; i++) {
		hexi_ckpt_save_begin(dir, &meta, i, &w);
		hexi_ckpt_write_slice(w, "t", 2, shape, i * 5, i * 5 + 5, d);
		hexi_ckpt_save_end(w);
	}
	meta.tokens_seen = 1;
	rc = hexi_ckpt_commit(dir, &meta, NULL);
	is_int(rc, HEXI_ERR_MISMATCH, "commit with other tokens_seen");
}

static void test_list(const char *dir)
{
	hexi_ckpt_entry *e = NULL;
	int n = 0, i, committed = 0, latest = -1;

	is_int(hexi_ckpt_list(dir, &e, &n), HEXI_OK, "list");
	is_int(n, 1, "1 step directory (failed commits leave none)");
	for (i = 0; i < n; i++) {
		committed += e[i].committed;
		if (e[i].latest)
			latest = (int)e[i].step;
	}
	is_int(committed, 1, "one committed");
	is_int(latest, 3, "latest is step 3");
	ok(n > 0 && e[0].step == 3 && e[0].nfiles == 5 && e[0].bytes > 0,
	   "step 3: 5 rank files, bytes");
	free(e);
}

int main(void)
{
	fx_model fm = {2, 12, 8, 30, 1};
	int tp[2] = {2, 3};
	hexi_layout *l = fx_layout(&fm, 2, tp);
	char tmp[512];
	int world = fx_world(2, tp);

	if (l == NULL || fx_tmpdir(tmp, sizeof(tmp)) == NULL)
		tap_bail("setup");
	hexi_log_set_level(HEXI_LOG_ERROR);
	test_roundtrip(tmp, l, world);
	test_open_opts(tmp);
	test_commit_rules(tmp, l, world);
	test_list(tmp);
	fx_rmrf(tmp);
	fx_layout_free(l);
	return tap_done();
}
