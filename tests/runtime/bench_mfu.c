/*
 * bench_mfu - hexitrain's single-process training throughput against the
 * OpenBLAS sgemm FLOP rate measured in the same run (CPU MFU).
 *
 *   bench_mfu [MODEL] [BATCH] [STEPS] [--json]
 *
 * Model FLOPs per step: 3 x forward (backward = 2 x forward), forward =
 * 2 x tokens x (matrix parameters of the blocks + LM head) + attention
 * 4 x B x T^2 x H x d per layer (scores and weighted sum, full square as
 * computed).  The GEMM rate is the best of a few 1024^3 sgemm calls.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_rt.h"
#include "rt_ops.h"

static double gemm_gflops(void)
{
	const int n = 1024;
	float *a = malloc(sizeof(float) * n * n),
	      *b = malloc(sizeof(float) * n * n),
	      *c = malloc(sizeof(float) * n * n);
	double best = 0;

	for (int i = 0; i < n * n; i++) {
		a[i] = (float)(i % 7) * 0.1f;
		b[i] = (float)(i % 5) * 0.1f;
	}
	for (int r = 0; r < 5; r++) {
		double t0 = hexi_now_s();
		rt_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
		double g = 2.0 * n * n * n / (hexi_now_s() - t0) / 1e9;
		if (g > best)
			best = g;
	}
	free(a);
	free(b);
	free(c);
	return best;
}

static double step_flops(const hexi_model *m, int batch)
{
	double C = m->hidden, d = (double)m->hidden / m->heads;
	double T = m->seq_len, tok = (double)batch * T;
	double blk =
	    C * m->heads * d * 2 + 2 * C * m->kv_heads * d + 3 * C * m->ffn;
	double fwd = 2 * tok * (m->layers * blk + (double)m->vocab * C) +
		     m->layers * 4.0 * batch * T * T * m->heads * d;
	return 3 * fwd;
}

int main(int argc, char **argv)
{
	const char *model = argc > 1 && argv[1][0] != '-' ? argv[1] : "tiny-8l";
	int batch = argc > 2 && argv[2][0] != '-' ? atoi(argv[2]) : 16;
	int steps = argc > 3 && argv[3][0] != '-' ? atoi(argv[3]) : 6;
	int json = strcmp(argv[argc - 1], "--json") == 0;
	hexi_rt_opts o;
	hexi_train_opts to;
	hexi_rt *rt = NULL;
	hexi_trainer *t = NULL;
	hexi_step_stats st;
	double best = 1e30, gf, flops;
	hexi_rc rc;

	hexi_rt_opts_defaults(&o);
	o.model = model;
	o.global_batch = batch > 0 ? batch : 16;
	hexi_train_opts_defaults(&to);
	to.steps = steps;
	rc = hexi_rt_init(&argc, &argv, &o, &rt);
	if (rc == HEXI_OK)
		rc = hexi_trainer_create(rt, &to, &t);
	for (int i = 0; rc == HEXI_OK && i < steps; i++) {
		rc = hexi_trainer_step(t, &st);
		if (i > 0 && st.time_s < best) /* step 1 warms caches */
			best = st.time_s;
	}
	if (rc != HEXI_OK) {
		fprintf(stderr, "bench_mfu: %s\n", hexi_errmsg(rc));
		return (int)rc;
	}
	gf = gemm_gflops();
	flops = step_flops(&hexi_rt_plan(rt)->model, o.global_batch);
	if (json)
		printf("{\"bench\":\"mfu\",\"model\":\"%s\",\"batch\":%d,"
		       "\"step_s\":%.6g,\"model_gflops\":%.4g,"
		       "\"sgemm_gflops\":%.4g,\"mfu\":%.4f}\n",
		       model, o.global_batch, best, flops / best / 1e9, gf,
		       flops / best / 1e9 / gf);
	else
		printf("mfu %s batch %d: best step %.4f s, %.2f GFLOP/s of "
		       "model FLOPs; OpenBLAS sgemm 1024^3 %.2f GFLOP/s; "
		       "ratio (CPU MFU) %.3f\n",
		       model, o.global_batch, best, flops / best / 1e9, gf,
		       flops / best / 1e9 / gf);
	hexi_trainer_destroy(t);
	hexi_rt_destroy(rt);
	return 0;
}
