/*
 * rt_cmp - compare two hexitrain runs (test helper).
 *
 *   rt_cmp [--tol X] [--skip N] [--key K] --loss A.jsonl B.jsonl
 *   rt_cmp [--tol X] --params PREFIX_A PREFIX_B
 *
 * --loss: the "loss" of every step line (lines with "loss") must agree within
 * X relative (|a-b| <= X*|a|); the first N lines of A are skipped (B is a
 * resumed run that logged only the later steps); --key K compares "K"
 * instead (e.g. val_loss, the validation lines).
 * --params: PREFIX.rank0, PREFIX.rank1 ... (hexitrain --dump) are assembled
 * into full tensors; replicas of the same rows inside one run (other
 * pipelines, TP replicas) must agree within X too; then for every tensor
 * ||a-b|| / ||a|| <= X.  Prints the worst values.  Exit 0 ok, 1 differ,
 * 99 unreadable input.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 4096

typedef struct tensor {
	char name[128];
	long long rows, cols;
	float *v;
	unsigned char *have; /* [rows] */
} tensor;

typedef struct run {
	int n;
	tensor t[MAXT];
	double replica_diff; /* worst relative difference between replicas */
} run;

static double tol = 1e-5;
static char key[64] = "\"loss\":";

static __attribute__((noreturn)) void die(const char *msg, const char *arg)
{
	fprintf(stderr, "rt_cmp: %s %s\n", msg, arg ? arg : "");
	exit(99);
}

static tensor *find_or_add(run *r, const char *name, long long rows,
			   long long cols)
{
	for (int i = 0; i < r->n; i++)
		if (strcmp(r->t[i].name, name) == 0)
			return &r->t[i];
	if (r->n == MAXT)
		die("too many tensors", name);
	tensor *t = &r->t[r->n++];
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->rows = rows;
	t->cols = cols;
	t->v = calloc((size_t)(rows * cols), sizeof(float));
	t->have = calloc((size_t)rows, 1);
	if (t->v == NULL || t->have == NULL)
		die("out of memory", name);
	return t;
}

static void put_rows(run *r, tensor *t, int rb, int re, const float *d)
{
	for (int i = rb; i < re; i++) {
		float *dst = t->v + (size_t)i * t->cols;
		const float *src = d + (size_t)(i - rb) * t->cols;
		if (t->have[i]) {
			double num = 0, den = 0;
			for (long long c = 0; c < t->cols; c++) {
				num += ((double)dst[c] - src[c]) *
				       ((double)dst[c] - src[c]);
				den += (double)dst[c] * dst[c];
			}
			double rel = den > 0 ? sqrt(num / den) : sqrt(num);
			if (rel > r->replica_diff)
				r->replica_diff = rel;
		} else {
			memcpy(dst, src, sizeof(float) * (size_t)t->cols);
			t->have[i] = 1;
		}
	}
}

static int load_file(run *r, const char *path)
{
	char line[512], name[128];
	int rank, pipe, np, rb, re;
	long long rows, cols;
	size_t n;
	FILE *f = fopen(path, "rb");

	if (f == NULL)
		return 0;
	if (fgets(line, sizeof(line), f) == NULL ||
	    sscanf(line, "hexitrain-dump 1 rank %d pipeline %d nparams %d",
		   &rank, &pipe, &np) != 3)
		die("bad header in", path);
	for (int i = 0; i < np; i++) {
		if (fgets(line, sizeof(line), f) == NULL ||
		    sscanf(line, "%127s %lld %lld %d %d %zu", name, &rows,
			   &cols, &rb, &re, &n) != 6 ||
		    rb < 0 || re > rows || rb > re ||
		    n != (size_t)(re - rb) * (size_t)cols)
			die("bad record in", path);
		float *d = malloc(sizeof(float) * (n ? n : 1));
		if (d == NULL || fread(d, sizeof(float), n, f) != n)
			die("short data in", path);
		put_rows(r, find_or_add(r, name, rows, cols), rb, re, d);
		free(d);
	}
	fclose(f);
	return 1;
}

static void load_run(run *r, const char *prefix)
{
	char path[4096];
	int k = 0;

	for (;; k++) {
		snprintf(path, sizeof(path), "%s.rank%d", prefix, k);
		if (!load_file(r, path))
			break;
	}
	if (k == 0)
		die("no dump files for", prefix);
	for (int i = 0; i < r->n; i++)
		for (long long j = 0; j < r->t[i].rows; j++)
			if (!r->t[i].have[j])
				die("rows missing in tensor", r->t[i].name);
	printf("# %s: %d ranks, %d tensors, replicas agree within %.3g\n",
	       prefix, k, r->n, r->replica_diff);
}

static int cmp_params(const char *a, const char *b)
{
	static run ra, rb;
	double worst = 0;
	const char *wname = "";
	int bad = 0;

	load_run(&ra, a);
	load_run(&rb, b);
	if (ra.n != rb.n) {
		printf("not ok: %d tensors vs %d\n", ra.n, rb.n);
		return 1;
	}
	for (int i = 0; i < ra.n; i++) {
		tensor *x = &ra.t[i], *y = NULL;
		for (int j = 0; j < rb.n; j++)
			if (strcmp(rb.t[j].name, x->name) == 0)
				y = &rb.t[j];
		if (y == NULL || y->rows != x->rows || y->cols != x->cols) {
			printf("not ok: tensor %s missing or reshaped\n",
			       x->name);
			return 1;
		}
		double num = 0, den = 0;
		for (long long k = 0; k < x->rows * x->cols; k++) {
			double d = (double)x->v[k] - y->v[k];
			num += d * d;
			den += (double)x->v[k] * x->v[k];
		}
		double rel = den > 0 ? sqrt(num / den) : sqrt(num);
		if (rel > worst) {
			worst = rel;
			wname = x->name;
		}
		if (rel > tol) {
			printf("tensor %s: |a-b|/|a| = %.3g > %.3g\n", x->name,
			       rel, tol);
			bad = 1;
		}
	}
	if (ra.replica_diff > tol || rb.replica_diff > tol)
		bad = 1;
	printf("params: %d tensors, worst |a-b|/|a| = %.3g (%s), tol %.3g: "
	       "%s\n",
	       ra.n, worst, wname, tol, bad ? "DIFFER" : "same");
	return bad;
}

static int read_losses(const char *path, double *v, int cap)
{
	char line[4096];
	int n = 0;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		die("cannot open", path);
	while (fgets(line, sizeof(line), f) != NULL && n < cap) {
		char *p = strstr(line, key);
		if (p != NULL)
			v[n++] = strtod(p + strlen(key), NULL);
	}
	fclose(f);
	return n;
}

static int cmp_loss(const char *a, const char *b, int skip)
{
	static double la[100000], lb[100000];
	int na = read_losses(a, la, 100000), nb = read_losses(b, lb, 100000);
	double worst = 0;
	int bad = 0;

	if (na - skip != nb || nb == 0) {
		printf("not ok: %d steps in %s (skip %d) vs %d in %s\n", na, a,
		       skip, nb, b);
		return 1;
	}
	for (int i = 0; i < nb; i++) {
		double x = la[i + skip], y = lb[i];
		double rel = fabs(x - y) / (fabs(x) > 0 ? fabs(x) : 1);
		printf("# step %d: loss %.9g vs %.9g (rel %.3g)\n",
		       i + skip + 1, x, y, rel);
		if (rel > worst)
			worst = rel;
		if (!(rel <= tol))
			bad = 1;
	}
	printf("loss: %d steps, worst relative difference %.3g, tol %.3g: "
	       "%s\n",
	       nb, worst, tol, bad ? "DIFFER" : "same");
	return bad;
}

int main(int argc, char **argv)
{
	int i = 1, skip = 0;

	for (; i < argc; i++) {
		if (strcmp(argv[i], "--tol") == 0 && i + 1 < argc)
			tol = strtod(argv[++i], NULL);
		else if (strcmp(argv[i], "--skip") == 0 && i + 1 < argc)
			skip = atoi(argv[++i]);
		else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc &&
			 strlen(argv[i + 1]) < sizeof(key) - 4)
			snprintf(key, sizeof(key), "\"%s\":", argv[++i]);
		else
			break;
	}
	if (i + 3 == argc && strcmp(argv[i], "--loss") == 0)
		return cmp_loss(argv[i + 1], argv[i + 2], skip);
	if (i + 3 == argc && strcmp(argv[i], "--params") == 0)
		return cmp_params(argv[i + 1], argv[i + 2]);
	fprintf(stderr, "usage: rt_cmp [--tol X] [--skip N] [--key K] --loss "
			"A B | "
			"--params PREFIX_A PREFIX_B\n");
	return 2;
}
