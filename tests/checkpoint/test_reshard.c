/*
 * test_reshard.c - checkpoints of real plans (the scheduler's planner and
 * layout): reshard A->B->A is bit-exact, export(A) == export(reshard(A->B)),
 * optimizer moments follow their tensor's layout, any buffer size works,
 * a plan of another model is refused, the stored plan's hash is checked.
 */
#include "config.h"

#include <hdf5.h>

#include "tap.h"
#include "ckpt_fixture.h"

static char *src(const char *rel)
{
	static char buf[4][1024];
	static int k;
	const char *top = getenv("top_srcdir");

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", top ? top : "../..", rel);
	return buf[k];
}

static hexi_plan *make_plan(const char *cluster, const char *model)
{
	hexi_catalog *cat = NULL;
	hexi_cluster *c = NULL;
	hexi_model m;
	hexi_train t;
	hexi_plan_opts o;
	hexi_plan *p = NULL;

	hexi_train_defaults(&t);
	hexi_plan_opts_defaults(&o);
	o.seed = 1;
	/* A hand-made plan file pins a layout the planner may not choose. */
	if (strstr(cluster, "/plans/") != NULL) {
		if (hexi_catalog_builtin(&cat) != HEXI_OK ||
		    hexi_plan_load(src(cluster), cat, &p) != HEXI_OK)
			tap_diag("plan %s: %s", cluster,
				 hexi_errmsg(HEXI_ERR_IO));
		hexi_catalog_destroy(cat);
		return p;
	}
	if (hexi_catalog_builtin(&cat) != HEXI_OK ||
	    hexi_cluster_load(src(cluster), cat, &c) != HEXI_OK ||
	    hexi_model_load(model, &m) != HEXI_OK ||
	    hexi_plan_create(c, &m, &t, &o, &p) != HEXI_OK)
		tap_diag("plan for %s: %s", cluster, hexi_errmsg(HEXI_ERR_IO));
	hexi_cluster_destroy(c);
	hexi_catalog_destroy(cat);
	return p;
}

/* LAYOUT plus opt.m.X / opt.v.X entries with the shards of X. */
static hexi_layout *with_moments(const hexi_layout *l)
{
	static const char *const pre[3] = {"", "opt.m.", "opt.v."};
	hexi_layout *o = calloc(1, sizeof(*o));
	int i, k;

	if (o == NULL)
		return NULL;
	o->tensors = calloc((size_t)l->ntensors * 3, sizeof(*o->tensors));
	o->ntensors = l->ntensors * 3;
	for (k = 0; k < 3; k++)
		for (i = 0; i < l->ntensors; i++) {
			hexi_tensor_layout *t =
			    &o->tensors[k * l->ntensors + i];
			*t = l->tensors[i];
			snprintf(t->name, sizeof(t->name), "%s%s", pre[k],
				 l->tensors[i].name);
			t->shards =
			    malloc((size_t)t->nshards * sizeof(hexi_shard));
			memcpy(t->shards, l->tensors[i].shards,
			       (size_t)t->nshards * sizeof(hexi_shard));
		}
	return o;
}

typedef struct ck {
	hexi_plan *plan;
	hexi_layout *layout; /* the scheduler's */
	char *json;
} ck;

static int ck_init(ck *c, const char *cluster, const char *model)
{
	memset(c, 0, sizeof(*c));
	c->plan = make_plan(cluster, model);
	return c->plan != NULL &&
		       hexi_layout_create(c->plan, &c->layout) == 0 &&
		       hexi_plan_to_json(c->plan, &c->json) == 0
		   ? 0
		   : -1;
}

static void ck_fini(ck *c)
{
	free(c->json);
	hexi_layout_destroy(c->layout);
	hexi_plan_destroy(c->plan);
}

static hexi_rc reshard(const char *from, const ck *to, const char *dir,
		       size_t maxbuf)
{
	hexi_ckpt_reader *r = NULL;
	hexi_ckpt_reshard_target t = {to->layout, to->plan->world_size,
				      to->plan->hash, to->json, maxbuf};
	hexi_rc rc = hexi_ckpt_open(from, NULL, &r);

	if (rc == HEXI_OK)
		rc = hexi_ckpt_reshard(r, &t, dir, NULL, NULL);
	hexi_ckpt_close(r);
	return rc;
}

static int check_dir(const char *dir, uint64_t seed, int *ntensors, char *hash)
{
	hexi_ckpt_reader *r = NULL;
	int bad = -1;

	if (hexi_ckpt_open(dir, NULL, &r) != HEXI_OK)
		return -1;
	bad = fx_check(r, seed, 5);
	*ntensors = hexi_ckpt_ntensors(r);
	if (hash != NULL)
		memcpy(hash, hexi_ckpt_reader_meta(r)->plan_hash,
		       HEXI_HASH_HEX);
	if (bad == 0 && hexi_ckpt_verify(r, NULL, NULL) != HEXI_OK)
		bad = -1;
	hexi_ckpt_close(r);
	return bad;
}

/* Slices of tensor NAME as "rank:b-e," for comparing layouts. */
static void slices_str(const char *dir, const char *name, char *out, size_t cap)
{
	hexi_ckpt_reader *r = NULL;
	hexi_ckpt_tensor_info ti;
	hexi_ckpt_slice_info si;
	int idx, j;
	size_t n = 0;

	out[0] = '\0';
	if (hexi_ckpt_open(dir, NULL, &r) != HEXI_OK ||
	    hexi_ckpt_tensor_find(r, name, &ti, &idx) != HEXI_OK) {
		hexi_ckpt_close(r);
		return;
	}
	for (j = 0; j < ti.nslices && n < cap; j++) {
		hexi_ckpt_slice_at(r, idx, j, &si);
		n += (size_t)snprintf(out + n, cap - n, "%d:%lld-%lld,",
				      si.rank, (long long)si.row_begin,
				      (long long)si.row_end);
	}
	hexi_ckpt_close(r);
}

static hexi_rc export_dir(const char *dir, const char *file)
{
	hexi_ckpt_reader *r = NULL;
	hexi_rc rc = hexi_ckpt_open(dir, NULL, &r);

	if (rc == HEXI_OK)
		rc = hexi_ckpt_export(r, file, NULL, NULL);
	hexi_ckpt_close(r);
	return rc;
}

/* Number of /tensors datasets whose bytes differ between two exports
 * (-1 if unreadable); *n gets the dataset count of A. */
static int exports_differ(const char *a, const char *b, int *n)
{
	hid_t fa = H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT);
	hid_t fb = H5Fopen(b, H5F_ACC_RDONLY, H5P_DEFAULT);
	hid_t ga = fa < 0 ? -1 : H5Gopen2(fa, "tensors", H5P_DEFAULT);
	H5G_info_t info;
	char name[256];
	hsize_t i;
	int diff = 0;

	*n = 0;
	if (ga < 0 || fb < 0 || H5Gget_info(ga, &info) < 0)
		diff = -1;
	for (i = 0; diff >= 0 && i < info.nlinks; i++) {
		char path[300];
		hid_t da, db, s;
		hssize_t np;
		float *x, *y;
		H5Lget_name_by_idx(ga, ".", H5_INDEX_NAME, H5_ITER_INC, i, name,
				   sizeof(name), H5P_DEFAULT);
		snprintf(path, sizeof(path), "/tensors/%s", name);
		da = H5Dopen2(fa, path, H5P_DEFAULT);
		db = H5Dopen2(fb, path, H5P_DEFAULT);
		s = H5Dget_space(da);
		np = H5Sget_simple_extent_npoints(s);
		x = malloc((size_t)np * 4);
		y = malloc((size_t)np * 4);
		if (db < 0 ||
		    H5Dread(da, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
			    x) < 0 ||
		    H5Dread(db, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
			    y) < 0 ||
		    memcmp(x, y, (size_t)np * 4) != 0)
			diff++;
		(*n)++;
		free(x);
		free(y);
		H5Sclose(s);
		if (db >= 0)
			H5Dclose(db);
		H5Dclose(da);
	}
	if (ga >= 0)
		H5Gclose(ga);
	if (fb >= 0)
		H5Fclose(fb);
	if (fa >= 0)
		H5Fclose(fa);
	return diff;
}

int main(void)
{
	ck A, B, C;
	hexi_layout *la = NULL;
	char tmp[512], da[600], db[600], da2[600], dc[600], ea[600], eb[600];
	char sa[4096], sa2[4096], hash[HEXI_HASH_HEX];
	int n = 0, nd;
	hexi_rc rc;

	hexi_log_set_level(HEXI_LOG_ERROR);
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	if (ck_init(&A, "examples/clusters/hetero-a100-4090-12.json",
		    "tiny-4l") ||
	    ck_init(&B, "examples/plans/tiny-4l-cpu4.json", "tiny-4l") ||
	    ck_init(&C, "examples/clusters/cpu-2x2.json", "tiny-8l"))
		tap_bail("cannot make the test plans");
	if (fx_tmpdir(tmp, sizeof(tmp)) == NULL)
		tap_bail("tmpdir");
	snprintf(da, sizeof(da), "%s/a", tmp);
	snprintf(db, sizeof(db), "%s/b", tmp);
	snprintf(da2, sizeof(da2), "%s/a2", tmp);
	snprintf(dc, sizeof(dc), "%s/c", tmp);
	snprintf(ea, sizeof(ea), "%s/a.h5", tmp);
	snprintf(eb, sizeof(eb), "%s/b.h5", tmp);
	tap_diag("A: %d ranks, %d pipelines; B: %d ranks, %d pipelines",
		 A.plan->world_size, A.plan->npipelines, B.plan->world_size,
		 B.plan->npipelines);
	ok(strcmp(A.plan->hash, B.plan->hash) != 0,
	   "A and B are different plans");

	la = with_moments(A.layout);
	is_rc(fx_save_model(da, la, A.plan->world_size, 5, A.plan->hash,
			    A.plan->model.name, A.json),
	      HEXI_OK, "save A (parameters and AdamW moments) at step 5");
	is_int(check_dir(da, 5, &n, hash), 0, "A reads back bit-exact");
	is_int(n, 3 * A.layout->ntensors, "A has every tensor and its moments");
	is_str(hash, A.plan->hash, "A carries A's plan hash");

	is_rc(reshard(da, &B, db, 0), HEXI_OK, "reshard A -> B");
	is_int(check_dir(db, 5, &n, hash), 0, "B holds A's values bit-exact");
	is_str(hash, B.plan->hash, "B carries B's plan hash");
	is_rc(reshard(db, &A, da2, 1000), HEXI_OK,
	      "reshard B -> A with a "
	      "1000-byte buffer");
	is_int(check_dir(da2, 5, &n, NULL), 0, "A2 = A bit-exact");
	slices_str(da, "opt.v.layers.1.attn.wq", sa, sizeof(sa));
	slices_str(da2, "opt.v.layers.1.attn.wq", sa2, sizeof(sa2));
	ok(sa[0] != '\0' && strcmp(sa, sa2) == 0,
	   "A2 has A's slices for a moment tensor: %s", sa2);
	slices_str(db, "opt.v.layers.1.attn.wq", sa2, sizeof(sa2));
	ok(strcmp(sa, sa2) != 0, "B's slices differ: %s", sa2);

	is_rc(export_dir(da, ea), HEXI_OK, "export A");
	is_rc(export_dir(db, eb), HEXI_OK, "export B");
	nd = exports_differ(ea, eb, &n);
	is_int(nd, 0, "export(A) == export(reshard(A->B)) (%d tensors)", n);
	is_int(n, 3 * A.layout->ntensors, "export holds every tensor");

	rc = reshard(da, &C, dc, 0);
	is_int(rc, HEXI_ERR_MISMATCH, "reshard into a plan of another model");
	ok(strstr(hexi_errmsg(rc), "tensor") != NULL, "message: %s",
	   hexi_errmsg(rc));

	/* A manifest naming another plan hash than its stored plan. */
	{
		char mp[700], *text = NULL, *p;
		size_t len;
		hexi_ckpt_reader *r = NULL;
		snprintf(mp, sizeof(mp), "%s/step-00000005/MANIFEST.json", db);
		if (hexi_read_file(mp, 1 << 26, &text, &len) != HEXI_OK)
			tap_bail("read manifest");
		p = strstr(text, B.plan->hash);
		if (p != NULL)
			p[0] = p[0] == '0' ? '1' : '0';
		hexi_write_file_atomic(mp, text, len, 0644);
		free(text);
		rc = hexi_ckpt_open(db, NULL, &r);
		is_int(rc, HEXI_ERR_MISMATCH,
		       "manifest's plan hash differs from "
		       "the stored plan: MISMATCH");
		ok(strstr(hexi_errmsg(rc), "stored plan has hash") != NULL,
		   "message: %s", hexi_errmsg(rc));
		hexi_ckpt_close(r);
	}
	fx_layout_free(la);
	ck_fini(&A);
	ck_fini(&B);
	ck_fini(&C);
	fx_rmrf(tmp);
	return tap_done();
}
