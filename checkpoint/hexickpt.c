/*
 * hexickpt - inspect, verify, reshard, export, compare and list HexiScale
 * checkpoints (hexickpt(1), hexiscale-ckpt(5)).
 * Exit status: 0, or the hexi_rc code of the failure (usage errors 2);
 * diff exits HEXI_ERR_MISMATCH (11) when the checkpoints differ.
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hexi_ckpt.h"
#include "hexi_sched.h"
#include "ckpt_plan.h"
#include "hf_llama.h"

#define PROG "hexickpt"

typedef struct opts {
	int json, quiet, no_verify, allow_unchecked;
	long step;
	const char *plan, *out;
	double tolerance;
	const char *format, *dtype, *model,
	    *name; /* export --format hf, import */
} opts;

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: " PROG " COMMAND [OPTIONS] ARGS\n"
	    "Commands:\n"
	    "  info CKPT                 step, model, plan, tensors and "
	    "layout\n"
	    "  verify CKPT               every checksum, coverage, overlaps\n"
	    "  reshard SRC --plan PLAN -o DST   rewrite for another plan\n"
	    "  export SRC -o FILE        one HDF5 file of full tensors\n"
	    "  export SRC --format hf -o DIR [--dtype fp32|bf16|fp16]\n"
	    "                            Hugging Face Llama directory\n"
	    "  import HF_DIR -o CKPT [--name NAME]\n"
	    "                            HF Llama directory to a new (or "
	    "empty)\n"
	    "                            checkpoint directory\n"
	    "  diff A B                  per-tensor max abs/rel difference\n"
	    "  ls DIR                    checkpoints with step and state\n"
	    "CKPT is a checkpoint directory (its latest commit) or a step "
	    "directory.\n"
	    "Options:\n"
	    "  --json            machine-readable output (every command)\n"
	    "  --step N          open step N instead of the latest\n"
	    "  --plan PLAN       target plan file (reshard)\n"
	    "  -o, --output P    output directory (reshard) or file (export)\n"
	    "  --no-verify       skip checksums while reading (reshard, "
	    "export, diff;\n"
	    "                    format 1-2: from 3 every read is checked)\n"
	    "  --allow-unchecked as root, open another user's format-1 "
	    "checkpoint\n"
	    "                    (no whole-file checksums)\n"
	    "  --tolerance X     diff: differences <= X count as equal "
	    "(default 0)\n"
	    "  --format F        export: hdf5 (default) or hf\n"
	    "  --dtype T         export --format hf: fp32 (default), bf16, "
	    "fp16\n"
	    "  --model M         export --format hf: model name or file\n"
	    "  --name NAME       import: model name (default hf-DIRNAME)\n"
	    "  -q, --quiet       no progress bar\n"
	    "  -h, --help        this text\n"
	    "  -V, --version     version\n");
}

#define fail(rc) hexi_cli_fail(PROG, rc)

/* what, then arg (may be NULL) */
static int usage_error(const char *what, const char *arg)
{
	return hexi_cli_usage_error(PROG, "%s%s", what, arg ? arg : "");
}

/* ---- progress bar (a terminal only) ---------------------------------- */

static void progress(const char *what, uint64_t done, uint64_t total, void *arg)
{
	int w = 30, n = total ? (int)(w * (double)done / (double)total) : w;

	(void)arg;
	fprintf(stderr, "\r[%.*s%*s] %3d%% %-40.40s", n,
		"##############################", w - n, "",
		total ? (int)(100.0 * (double)done / (double)total) : 100,
		what);
	if (done >= total)
		fprintf(stderr, "\n");
}

static hexi_ckpt_progress_fn bar(const opts *o)
{
	return !o->quiet && !o->json && isatty(2) ? progress : NULL;
}

static hexi_rc open_ckpt(const char *path, const opts *o, int verify,
			 hexi_ckpt_reader **r)
{
	hexi_ckpt_open_opts oo;

	hexi_ckpt_open_opts_init(&oo);
	oo.verify = verify && !o->no_verify;
	oo.allow_unchecked = o->allow_unchecked;
	oo.step = o->step;
	return hexi_ckpt_open(path, &oo, r);
}

static int print_json(json_t *j)
{
	char *s =
	    j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;

	json_decref(j);
	if (s == NULL) /* json_pack or the dump refused a value */
		return fail(hexi_error(
		    HEXI_ERR_RANGE, "--json: the output cannot be written (a "
				    "number that is not finite, or a string "
				    "that is not UTF-8, such as a path)"));
	printf("%s\n", s);
	free(s);
	return 0;
}

/* ---- info -------------------------------------------------------------- */

static uint64_t tensor_bytes(const hexi_ckpt_tensor_info *t)
{
	return (uint64_t)t->shape[0] * (uint64_t)t->shape[1] * 4;
}

static json_t *meta_json(const hexi_ckpt_reader *r)
{
	const hexi_ckpt_meta *m = hexi_ckpt_reader_meta(r);

	return json_pack("{s:s,s:s,s:i,s:s,s:s,s:I,s:I,s:I,s:I,s:i}", "path",
			 hexi_ckpt_reader_path(r), "format", HEXI_CKPT_FORMAT,
			 "version", hexi_ckpt_reader_version(r), "model",
			 m->model, "plan_hash", m->plan_hash, "step",
			 (json_int_t)m->step, "tokens_seen",
			 (json_int_t)m->tokens_seen, "data_position",
			 (json_int_t)m->data_position, "opt_step",
			 (json_int_t)m->opt_step, "world_size", m->world_size);
}

/* Bytes of slices held by each rank file: the layout at a glance. */
static uint64_t *rank_bytes(const hexi_ckpt_reader *r)
{
	int ws = hexi_ckpt_reader_meta(r)->world_size, i, j;
	uint64_t *v = calloc((size_t)ws, sizeof(*v));
	hexi_ckpt_tensor_info ti;
	hexi_ckpt_slice_info si;

	for (i = 0; v != NULL && i < hexi_ckpt_ntensors(r); i++) {
		hexi_ckpt_tensor_at(r, i, &ti);
		for (j = 0; j < ti.nslices; j++) {
			hexi_ckpt_slice_at(r, i, j, &si);
			v[si.rank] += (uint64_t)(si.row_end - si.row_begin) *
				      (uint64_t)ti.shape[1] * 4;
		}
	}
	return v;
}

static int info_json(const hexi_ckpt_reader *r, const uint64_t *rb)
{
	json_t *root = meta_json(r), *ts = json_array(), *ranks = json_array();
	hexi_ckpt_tensor_info ti;
	hexi_ckpt_slice_info si;
	int i, j;

	for (i = 0; i < hexi_ckpt_ntensors(r); i++) {
		json_t *sl = json_array();
		hexi_ckpt_tensor_at(r, i, &ti);
		for (j = 0; j < ti.nslices; j++) {
			hexi_ckpt_slice_at(r, i, j, &si);
			json_array_append_new(
			    sl, json_pack("{s:i,s:[I,I]}", "rank", si.rank,
					  "rows", (json_int_t)si.row_begin,
					  (json_int_t)si.row_end));
		}
		json_array_append_new(
		    ts, json_pack("{s:s,s:[I,I],s:i,s:o}", "name", ti.name,
				  "shape", (json_int_t)ti.shape[0],
				  (json_int_t)(ti.ndim == 2 ? ti.shape[1] : 0),
				  "ndim", ti.ndim, "slices", sl));
	}
	for (i = 0; i < hexi_ckpt_reader_meta(r)->world_size; i++)
		json_array_append_new(ranks, json_integer((json_int_t)rb[i]));
	json_object_set_new(root, "plan", ckpt_plan_summary_json(r));
	json_object_set_new(root, "rank_bytes", ranks);
	json_object_set_new(root, "tensors", ts);
	return print_json(root);
}

static void info_text(const hexi_ckpt_reader *r, const uint64_t *rb)
{
	const hexi_ckpt_meta *m = hexi_ckpt_reader_meta(r);
	hexi_ckpt_tensor_info ti;
	uint64_t total = 0;
	int i;

	printf("checkpoint  %s\n", hexi_ckpt_reader_path(r));
	printf("format      %s version %d\n", HEXI_CKPT_FORMAT,
	       hexi_ckpt_reader_version(r));
	printf("model       %s\n", m->model);
	printf("step        %" PRId64 " (optimizer step %" PRId64 ")\n",
	       m->step, m->opt_step);
	printf("tokens      %" PRId64 ", data position %" PRId64 "\n",
	       m->tokens_seen, m->data_position);
	ckpt_plan_summary_text(r);
	printf("ranks       %d\n", m->world_size);
	for (i = 0; i < m->world_size; i++)
		printf("  rank-%05d.h5  %10.3f MiB of slices\n", i,
		       (double)rb[i] / 1048576.0);
	printf("tensors     %d\n", hexi_ckpt_ntensors(r));
	for (i = 0; i < hexi_ckpt_ntensors(r); i++) {
		hexi_ckpt_tensor_at(r, i, &ti);
		total += tensor_bytes(&ti);
		if (ti.ndim == 2)
			printf("  %-40s (%" PRId64 ", %" PRId64
			       ")  %d slice%s\n",
			       ti.name, ti.shape[0], ti.shape[1], ti.nslices,
			       ti.nslices == 1 ? "" : "s");
		else
			printf("  %-40s (%" PRId64 ")  %d slice%s\n", ti.name,
			       ti.shape[0], ti.nslices,
			       ti.nslices == 1 ? "" : "s");
	}
	printf("bytes       %.3f MiB of tensors, %d blobs\n",
	       (double)total / 1048576.0, hexi_ckpt_nblobs(r));
}

static int cmd_info(int argc, char **argv, const opts *o)
{
	hexi_ckpt_reader *r = NULL;
	uint64_t *rb;
	hexi_rc rc;
	int st;

	if (argc != 1)
		return usage_error("info: expected one checkpoint path", NULL);
	if ((rc = open_ckpt(argv[0], o, 0, &r)) != HEXI_OK)
		return fail(rc);
	rb = rank_bytes(r);
	if (rb == NULL) {
		hexi_ckpt_close(r);
		return fail(hexi_error(HEXI_ERR_NOMEM, "info"));
	}
	if (o->json) {
		st = info_json(r, rb);
	} else {
		info_text(r, rb);
		st = 0;
	}
	free(rb);
	hexi_ckpt_close(r);
	return st;
}

/* ---- verify ------------------------------------------------------------ */

static int cmd_verify(int argc, char **argv, const opts *o)
{
	hexi_ckpt_reader *r = NULL;
	hexi_ckpt_tensor_info ti;
	hexi_rc rc;
	uint64_t bytes = 0;
	int i, nslices = 0, jrc = 0;
	const char *filechk;

	if (argc != 1)
		return usage_error("verify: expected one checkpoint path",
				   NULL);
	rc = open_ckpt(argv[0], o, 1, &r);
	if (rc == HEXI_OK)
		rc = hexi_ckpt_verify(r, bar(o), NULL);
	if (rc == HEXI_OK)
		for (i = 0; i < hexi_ckpt_ntensors(r); i++) {
			hexi_ckpt_tensor_at(r, i, &ti);
			nslices += ti.nslices;
			bytes += tensor_bytes(&ti);
		}
	/* Whole-file checks (size + xxh64 before libhdf5) exist from format
	 * version 2 on; older checkpoints say so. */
	filechk = r == NULL			     ? ""
		  : hexi_ckpt_reader_version(r) >= 2 ? "ok"
						     : "unavailable";
	if (o->json) {
		json_t *j = json_pack(
		    "{s:s,s:b,s:s,s:s,s:i,s:i,s:I,s:i,s:s}", "path", argv[0],
		    "ok", rc == HEXI_OK, "error",
		    rc == HEXI_OK ? "" : hexi_errname(rc), "message",
		    rc == HEXI_OK ? "" : hexi_errmsg(rc), "tensors",
		    r ? hexi_ckpt_ntensors(r) : 0, "slices", nslices, "bytes",
		    (json_int_t)bytes, "version",
		    r ? hexi_ckpt_reader_version(r) : 0, "file_check", filechk);
		jrc = print_json(j);
	} else if (rc == HEXI_OK) {
		printf("%s: OK: %d tensors, %d slices, %.3f MiB verified\n",
		       hexi_ckpt_reader_path(r), hexi_ckpt_ntensors(r), nslices,
		       (double)bytes / 1048576.0);
		if (hexi_ckpt_reader_version(r) >= 2)
			printf("%s: rank files: size and whole-file xxh64 "
			       "checked before HDF5\n",
			       hexi_ckpt_reader_path(r));
		else
			printf("%s: rank files: whole-file check not possible "
			       "(format version %d has no file checksums)\n",
			       hexi_ckpt_reader_path(r),
			       hexi_ckpt_reader_version(r));
	}
	hexi_ckpt_close(r);
	if (rc != HEXI_OK && !o->json)
		return fail(rc);
	/* the verdict's code first; else that the JSON could not be written */
	return rc != HEXI_OK ? (int)rc : jrc;
}

/* ---- export ------------------------------------------------------------ */

/* End of export and reshard: close r; on success say what was written
 * (--json: the source's metadata plus command, output and target plan). */
static int wrote(hexi_ckpt_reader *r, hexi_rc rc, const char *cmd,
		 const opts *o, const char *plan)
{
	json_t *j = NULL;

	if (rc == HEXI_OK && o->json) {
		j = meta_json(r);
		if (j != NULL) {
			json_object_set_new(j, "command", json_string(cmd));
			json_object_set_new(j, "output", json_string(o->out));
			if (plan != NULL)
				json_object_set_new(j, "target_plan",
						    json_string(plan));
		}
	}
	hexi_ckpt_close(r);
	if (rc != HEXI_OK)
		return fail(rc);
	if (o->json)
		return print_json(j);
	if (!o->quiet)
		fprintf(stderr, PROG ": wrote %s\n", o->out);
	return 0;
}

static int cmd_export(int argc, char **argv, const opts *o)
{
	hexi_ckpt_reader *r = NULL;
	hexi_rc rc;

	if (argc != 1 || o->out == NULL)
		return usage_error("export: expected SRC -o FILE", NULL);
	if (o->format != NULL && strcmp(o->format, "hf") != 0 &&
	    strcmp(o->format, "hdf5") != 0)
		return usage_error("--format: hdf5 or hf, not ", o->format);
	if ((o->dtype != NULL || o->model != NULL) &&
	    (o->format == NULL || strcmp(o->format, "hf") != 0))
		return usage_error("--dtype and --model need --format hf",
				   NULL);
	if ((rc = open_ckpt(argv[0], o, 1, &r)) == HEXI_OK) {
		if (o->format != NULL && strcmp(o->format, "hf") == 0) {
			hexi_model m;
			rc = hexi_hf_model_of(r, argv[0], o->model, &m);
			if (rc == HEXI_OK)
				rc = hexi_hf_export(r, &m, o->out,
						    o->dtype ? o->dtype
							     : "fp32");
		} else {
			rc = hexi_ckpt_export(r, o->out, bar(o), NULL);
		}
	}
	return wrote(r, rc, "export", o, NULL);
}

/* ---- import (hf_llama.c) ---------------------------------------------- */

static int cmd_import(int argc, char **argv, const opts *o)
{
	hexi_model m;
	hexi_rc rc;

	if (argc != 1 || o->out == NULL)
		return usage_error("import: expected HF_DIR -o CKPT", NULL);
	rc = hexi_hf_import(argv[0], o->out, o->name, &m);
	if (rc != HEXI_OK)
		return fail(rc);
	if (o->json) {
		char mj[4200];
		snprintf(mj, sizeof(mj), "%s/model.json", o->out);
		return print_json(json_pack(
		    "{s:s,s:s,s:s,s:s,s:I,s:s,s:i,s:i,s:i,s:i,s:i}", "command",
		    "import", "source", argv[0], "output", o->out, "model",
		    m.name, "step", (json_int_t)0, "model_json", mj, "layers",
		    m.layers, "hidden", m.hidden, "heads", m.heads, "ffn",
		    m.ffn, "vocab", m.vocab));
	}
	if (!o->quiet)
		fprintf(stderr,
			PROG ": wrote %s (step 0, model %s: %s/model.json)\n",
			o->out, m.name, o->out);
	return 0;
}

/* ---- reshard ----------------------------------------------------------- */

static int cmd_reshard(int argc, char **argv, const opts *o)
{
	hexi_ckpt_reader *r = NULL;
	hexi_rc rc;

	if (argc != 1 || o->out == NULL || o->plan == NULL)
		return usage_error("reshard: expected SRC --plan PLAN -o DST",
				   NULL);
	if ((rc = open_ckpt(argv[0], o, 1, &r)) == HEXI_OK)
		rc = ckpt_reshard_with_plan(r, o->plan, o->out, bar(o));
	return wrote(r, rc, "reshard", o, o->plan);
}

/* ---- diff -------------------------------------------------------------- */

typedef struct tdiff {
	double max_abs, max_rel;
	int64_t ndiff;
} tdiff;

static hexi_rc diff_tensor(hexi_ckpt_reader *a, hexi_ckpt_reader *b,
			   const hexi_ckpt_tensor_info *t, tdiff *d)
{
	int64_t blk = (int64_t)(((size_t)8 << 20) / ((size_t)t->shape[1] * 4)),
		x, y, i, n;
	float *pa, *pb;
	hexi_rc rc = HEXI_OK;

	if (blk < 1)
		blk = 1;
	memset(d, 0, sizeof(*d));
	pa = malloc((size_t)blk * (size_t)t->shape[1] * 4);
	pb = malloc((size_t)blk * (size_t)t->shape[1] * 4);
	if (pa == NULL || pb == NULL) {
		rc = hexi_error(HEXI_ERR_NOMEM, "diff buffers");
		goto out;
	}
	for (x = 0; x < t->shape[0]; x = y) {
		y = x + blk < t->shape[0] ? x + blk : t->shape[0];
		if ((rc = hexi_ckpt_read_rows(a, t->name, x, y, pa)) ||
		    (rc = hexi_ckpt_read_rows(b, t->name, x, y, pb)))
			goto out;
		n = (y - x) * t->shape[1];
		for (i = 0; i < n; i++) {
			/* equal values (equal infinities too) and two NaNs
			 * are the same; a NaN against a number, or inf
			 * against anything else, differs without bound */
			if (pa[i] == pb[i] || (isnan(pa[i]) && isnan(pb[i])))
				continue;
			double da = fabs((double)pa[i] - (double)pb[i]);
			double den = fabs((double)pa[i]);
			if (isnan(da))
				da = INFINITY;
			d->ndiff++;
			if (da > d->max_abs)
				d->max_abs = da;
			if (den > 0 && isfinite(den) && da / den > d->max_rel)
				d->max_rel = da / den;
			else if (den == 0 || !isfinite(den))
				d->max_rel = INFINITY;
		}
	}
out:
	free(pa);
	free(pb);
	return rc;
}

static int cmd_diff(int argc, char **argv, const opts *o)
{
	hexi_ckpt_reader *a = NULL, *b = NULL;
	hexi_ckpt_tensor_info ta, tb;
	json_t *arr = json_array();
	hexi_rc rc;
	int i, differ = 0, finished = 0, jrc = 0;
	tdiff d;

	if (argc != 2)
		return usage_error("diff: expected two checkpoints", NULL);
	if ((rc = open_ckpt(argv[0], o, 1, &a)) != HEXI_OK ||
	    (rc = open_ckpt(argv[1], o, 1, &b)) != HEXI_OK)
		goto out;
	for (i = 0; i < hexi_ckpt_ntensors(a); i++) {
		const char *state = "compared";
		hexi_ckpt_tensor_at(a, i, &ta);
		memset(&d, 0, sizeof(d));
		if (hexi_ckpt_tensor_find(b, ta.name, &tb, NULL) != HEXI_OK) {
			state = "only in A";
		} else if (ta.ndim != tb.ndim || ta.shape[0] != tb.shape[0] ||
			   ta.shape[1] != tb.shape[1]) {
			state = "shape differs";
		} else if ((rc = diff_tensor(a, b, &ta, &d)) != HEXI_OK) {
			goto out;
		}
		if (strcmp(state, "compared") != 0 || d.max_abs > o->tolerance)
			differ = 1;
		/* JSON has no infinity: an unbounded difference is null */
		/* no figures where nothing was compared (only in A, shape
		 * differs): they read as "0 elements differ" */
		if (strcmp(state, "compared") != 0) {
			if (o->json)
				json_array_append_new(
				    arr, json_pack("{s:s,s:s}", "name", ta.name,
						   "state", state));
			else
				printf("%-40s %s\n", ta.name, state);
			continue;
		}
		if (o->json)
			json_array_append_new(
			    arr,
			    json_pack("{s:s,s:s,s:o,s:o,s:I}", "name", ta.name,
				      "state", state, "max_abs",
				      isfinite(d.max_abs) ? json_real(d.max_abs)
							  : json_null(),
				      "max_rel",
				      isfinite(d.max_rel) ? json_real(d.max_rel)
							  : json_null(),
				      "elements_differing",
				      (json_int_t)d.ndiff));
		else
			printf("%-40s %-13s max_abs %.6g max_rel %.6g (%" PRId64
			       " elements differ)\n",
			       ta.name, state, d.max_abs, d.max_rel, d.ndiff);
	}
	hexi_error_clear();
	for (i = 0; i < hexi_ckpt_ntensors(b); i++) {
		hexi_ckpt_tensor_at(b, i, &tb);
		if (hexi_ckpt_tensor_find(a, tb.name, NULL, NULL) == HEXI_OK)
			continue;
		differ = 1;
		if (o->json)
			json_array_append_new(
			    arr, json_pack("{s:s,s:s}", "name", tb.name,
					   "state", "only in B"));
		else
			printf("%-40s only in B\n", tb.name);
	}
	hexi_error_clear();
	if (o->json) {
		jrc = print_json(json_pack("{s:b,s:f,s:O}", "identical",
					   !differ, "tolerance", o->tolerance,
					   "tensors", arr));
	} else {
		printf("%s\n", differ ? "checkpoints differ"
				      : "checkpoints are "
					"identical");
	}
	rc = differ ? HEXI_ERR_MISMATCH : HEXI_OK;
	if (jrc != 0)
		rc = (hexi_rc)jrc;
	finished = 1;
out:
	json_decref(arr);
	hexi_ckpt_close(b);
	hexi_ckpt_close(a);
	/* a read or checksum error is reported whatever was found before it */
	if (rc != HEXI_OK && !finished)
		return fail(rc);
	return (int)rc;
}

/* ---- ls ---------------------------------------------------------------- */

static int cmd_ls(int argc, char **argv, const opts *o)
{
	hexi_ckpt_entry *e = NULL;
	json_t *arr;
	hexi_rc rc;
	int i, n = 0;

	if (argc != 1)
		return usage_error("ls: expected one directory", NULL);
	if ((rc = hexi_ckpt_list(argv[0], &e, &n)) != HEXI_OK)
		return fail(rc);
	if (o->json) {
		arr = json_array();
		for (i = 0; i < n; i++)
			json_array_append_new(
			    arr,
			    json_pack("{s:s,s:I,s:b,s:b,s:i,s:I}", "name",
				      e[i].name, "step", (json_int_t)e[i].step,
				      "committed", e[i].committed, "latest",
				      e[i].latest, "rank_files", e[i].nfiles,
				      "bytes", (json_int_t)e[i].bytes));
		free(e);
		return print_json(arr);
	}
	printf("%-14s %9s %-11s %6s %12s\n", "NAME", "STEP", "STATE", "FILES",
	       "MiB");
	for (i = 0; i < n; i++)
		printf("%-14s %9" PRId64 " %-11s %6d %12.3f%s\n", e[i].name,
		       e[i].step, e[i].committed ? "committed" : "incomplete",
		       e[i].nfiles, (double)e[i].bytes / 1048576.0,
		       e[i].latest ? "  (latest)" : "");
	free(e);
	return 0;
}

/* ---- main -------------------------------------------------------------- */

static const struct option longopts[] = {
    {"json", no_argument, NULL, 'j'},
    {"step", required_argument, NULL, 's'},
    {"plan", required_argument, NULL, 'p'},
    {"output", required_argument, NULL, 'o'},
    {"no-verify", no_argument, NULL, 'n'},
    {"allow-unchecked", no_argument, NULL, 'u'},
    {"tolerance", required_argument, NULL, 't'},
    {"quiet", no_argument, NULL, 'q'},
    {"format", required_argument, NULL, 'F'},
    {"dtype", required_argument, NULL, 'D'},
    {"model", required_argument, NULL, 'M'},
    {"name", required_argument, NULL, 'N'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static int parse_opts(int argc, char **argv, opts *o)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->step = -1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:qhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			o->json = 1;
			break;
		case 'q':
			o->quiet = 1;
			break;
		case 'n':
			o->no_verify = 1;
			break;
		case 'u':
			o->allow_unchecked = 1;
			break;
		case 'p':
			o->plan = optarg;
			break;
		case 'F':
			o->format = optarg;
			break;
		case 'D':
			o->dtype = optarg;
			break;
		case 'M':
			o->model = optarg;
			break;
		case 'N':
			o->name = optarg;
			break;
		case 'o':
			o->out = optarg;
			break;
		case 's':
			if (hexi_parse_long(optarg, 0, HEXI_CKPT_MAX_STEP,
					    &o->step) != HEXI_OK)
				return usage_error(
				    "--step: not a step number: ", optarg);
			break;
		case 't':
			if (hexi_parse_double(optarg, 0, 1e300,
					      &o->tolerance) != HEXI_OK)
				return usage_error(
				    "--tolerance: not a number >= 0: ", optarg);
			break;
		case 'h':
			usage(stdout);
			return -1;
		case 'V':
			printf(PROG " (hexiscale) %s\n", PACKAGE_VERSION);
			return -1;
		case ':': /* the optstring's leading ':' */
			return hexi_cli_usage_error(PROG,
						    "option '%s' needs a value",
						    argv[optind - 1]);
		default: /* optopt: an unknown letter, maybe inside "-xq",
			  * where optind has not moved past its word yet */
			if (optopt > 0 && optopt < 128)
				return hexi_cli_usage_error(
				    PROG, "unknown option '-%c'", optopt);
			return hexi_cli_usage_error(PROG, "unknown option '%s'",
						    argv[optind - 1]);
		}
	}
	return 0;
}

static int run(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **, const opts *);
	} cmds[] = {{"info", cmd_info},	      {"verify", cmd_verify},
		    {"reshard", cmd_reshard}, {"export", cmd_export},
		    {"diff", cmd_diff},	      {"ls", cmd_ls},
		    {"import", cmd_import}};
	const char *cmd;
	opts o;
	int i, st;

	if (argc >= 2 &&
	    (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc >= 2 &&
	    (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
		printf(PROG " (hexiscale) %s\n", PACKAGE_VERSION);
		return 0;
	}
	if (argc < 2)
		return usage_error("missing command", NULL);
	cmd = argv[1];
	/* Options may come before or after the operands. */
	for (i = 0; i < (int)(sizeof(cmds) / sizeof(cmds[0])); i++) {
		if (strcmp(cmd, cmds[i].name) != 0)
			continue;
		st = parse_opts(argc - 1, argv + 1, &o);
		if (st != 0)
			return st < 0 ? 0 : st;
		return cmds[i].fn(argc - 1 - optind, argv + 1 + optind, &o);
	}
	return usage_error("unknown command: ", cmd);
}

int main(int argc, char **argv)
{
	return hexi_cli_close_stdout("hexickpt", run(argc, argv));
}
