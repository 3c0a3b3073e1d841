/*
 * bench_model.c - model forward+backward FLOP rate against the GEMM rate
 * OpenBLAS reaches on this machine in the same run (CPU "MFU").
 *
 * Validates first (a step must give a finite loss near log V), then times.
 * Prints one JSON line per measurement and the ratio; never fails on speed.
 * Usage: bench_model [layers hidden heads kv ffn vocab seq batch]
 */
#include "config.h"

#include "rt_model.h"
#include "rt_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Best of 3 timings of an n x n x n sgemm, in GFLOP/s. */
static double gemm_gflops(int n)
{
	size_t nn = (size_t)n * n;
	float *a = calloc(nn, sizeof(float)), *b = calloc(nn, sizeof(float));
	float *c = calloc(nn, sizeof(float));
	double best = 0;
	if (!a || !b || !c)
		goto out;
	for (size_t i = 0; i < nn; i++)
		a[i] = b[i] = (float)(i % 7) * 0.1f;
	for (int r = 0; r < 4; r++) {
		double t0 = hexi_now_s();
		rt_sgemm(0, 1, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
		double dt = hexi_now_s() - t0;
		double g = 2.0 * n * n * (double)n / dt / 1e9;
		if (r > 0 && g > best) /* first run warms up */
			best = g;
	}
out:
	free(a);
	free(b);
	free(c);
	return best;
}

static int arg(int argc, char **argv, int i, int def)
{
	long v;
	if (argc <= i)
		return def;
	if (hexi_parse_long(argv[i], 1, 1 << 20, &v)) {
		fprintf(stderr, "bench_model: bad argument '%s'\n", argv[i]);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char **argv)
{
	hexi_model md;
	memset(&md, 0, sizeof(md));
	md.layers = arg(argc, argv, 1, 4);
	md.hidden = arg(argc, argv, 2, 256);
	md.heads = arg(argc, argv, 3, 8);
	md.kv_heads = arg(argc, argv, 4, 4);
	md.ffn = arg(argc, argv, 5, 688);
	md.vocab = arg(argc, argv, 6, 512);
	md.seq_len = arg(argc, argv, 7, 128);
	int B = arg(argc, argv, 8, 4), T = md.seq_len;
	rt_model_config c = {.model = md,
			     .layer_end = md.layers,
			     .tp_size = 1,
			     .has_embed = 1,
			     .has_head = 1,
			     .max_slots = 1,
			     .max_batch = B,
			     .seed = 1};
	rt_model *m = NULL;
	int *tok = malloc((size_t)B * (T + 1) * sizeof(int));
	int *tgt = malloc((size_t)B * T * sizeof(int));
	hexi_rc rc =
	    tok && tgt ? rt_model_create(&c, NULL, &m) : HEXI_ERR_NOMEM;
	if (rc) {
		fprintf(stderr, "bench_model: %s\n", hexi_errmsg(rc));
		return 1;
	}
	for (int b = 0; b < B; b++) {
		int *s = tok + (size_t)b * T;
		hexi_rt_data_sample(1, md.vocab, T, b, s);
		memcpy(tgt + (size_t)b * T, s + 1, (size_t)T * sizeof(int));
	}
	/* validate */
	double loss = 0;
	rc = rt_model_forward(m, 0, B, tok, NULL, NULL, tgt, 1.0f / B, &loss);
	rc = rc ? rc : rt_model_backward(m, 0, NULL, NULL);
	if (rc || !isfinite(loss) || fabs(loss / B - log(md.vocab)) > 2.0) {
		fprintf(stderr,
			"bench_model: validation failed (%s, loss %g)\n",
			rc ? hexi_errmsg(rc) : "ok", loss / B);
		return 1;
	}
	/* time */
	double best = 1e30;
	for (int r = 0; r < 3 && !rc; r++) {
		double t0 = hexi_now_s();
		rc = rt_model_forward(m, 0, B, tok, NULL, NULL, tgt, 1.0f / B,
				      &loss);
		rc = rc ? rc : rt_model_backward(m, 0, NULL, NULL);
		double dt = hexi_now_s() - t0;
		best = dt < best ? dt : best;
	}
	double model_gf = rt_model_flops(m, B) / best / 1e9;
	double gemm_gf = gemm_gflops(512);
	printf("{\"bench\":\"gemm\",\"n\":512,\"gflops\":%.2f,\"blas\":%d}\n",
	       gemm_gf, rt_sgemm_is_blas());
	printf("{\"bench\":\"model_fwd_bwd\",\"layers\":%d,\"hidden\":%d,"
	       "\"seq\":%d,\"batch\":%d,\"s\":%.4f,\"tokens_per_s\":%.0f,"
	       "\"gflops\":%.2f,\"ratio_to_gemm\":%.3f}\n",
	       md.layers, md.hidden, T, B, best, B * T / best, model_gf,
	       gemm_gf > 0 ? model_gf / gemm_gf : 0.0);
	rt_model_destroy(m);
	free(tok);
	free(tgt);
	return rc ? 1 : 0;
}
