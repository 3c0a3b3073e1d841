/*
 * bench_gpu_train.c - single-GPU training throughput of the reference model
 * (rt_cuda_model): tokens/s, achieved TFLOP/s and MFU against the catalog
 * peak of the GPU's type.  Used by device-check.sh; a benchmark, not a test.
 *
 *   bench_gpu_train [--model NAME|FILE] [--batch B] [--steps N]
 *                   [--dtype bf16|fp32] [--json]
 *
 * One JSON object per step with --json, then a summary object.  Each step
 * is timed in three parts (forward to the loss, backward, AdamW; each
 * ends with a device sync), and after the steps the model's attention
 * (the kernel it chose, one layer at the model's shape) is timed alone,
 * so the summary says where a step's time goes: fwd_s, bwd_s, opt_s
 * (means over steps 2..), attn_fwd_ms, attn_bwd_ms (one layer) and
 * attn_share (all layers' attention over the step; all three -1 when
 * that timing failed, which is reported and does not fail the run).  Exit
 * 77 with the
 * reason when there is no usable GPU; otherwise the hexi_rc code.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_sched.h"
#include "rt_cuda.h"
#include "rt_model.h"

static const rt_cuda_init ref_init = {.tensor = rt_init_tensor,
				      .std = rt_init_std};

typedef struct args {
	const char *model;
	long batch, steps;
	rt_cuda_dtype dt;
	int json;
} args;

static int parse(int argc, char **argv, args *a)
{
	a->model = "tiny-4l";
	a->batch = 4;
	a->steps = 6;
	a->dt = RT_CUDA_BF16;
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(argv[i], "--json") == 0) {
			a->json = 1;
			continue;
		}
		if (v == NULL)
			goto bad;
		if (strcmp(argv[i], "--model") == 0)
			a->model = v;
		else if (strcmp(argv[i], "--batch") == 0) {
			if (hexi_parse_long(v, 1, 4096, &a->batch) != HEXI_OK)
				goto bad;
		} else if (strcmp(argv[i], "--steps") == 0) {
			if (hexi_parse_long(v, 2, 100000, &a->steps) != HEXI_OK)
				goto bad;
		} else if (strcmp(argv[i], "--dtype") == 0) {
			if (strcmp(v, "bf16") == 0)
				a->dt = RT_CUDA_BF16;
			else if (strcmp(v, "fp32") == 0)
				a->dt = RT_CUDA_F32;
			else
				goto bad;
		} else
			goto bad;
		i++;
	}
	return 0;
bad:
	fprintf(stderr,
		"usage: bench_gpu_train [--model NAME|FILE] [--batch 1..4096] "
		"[--steps 2..] [--dtype bf16|fp32] [--json]\n");
	return HEXI_ERR_USAGE;
}

/* One layer's attention at the model's shape, with the kernel the model
 * chose (cuDNN's plans built again here, or the own kernel): forward and
 * backward milliseconds, the best of 3 after a warm-up. */
static hexi_rc time_attention(rt_cuda *cu, const rt_cuda_model *m,
			      const hexi_model *md, rt_cuda_dtype dt, int B,
			      double *fwd_ms, double *bwd_ms)
{
	const int T = md->seq_len, NH = md->heads, NKV = md->kv_heads,
		  hs = md->hidden / md->heads;
	size_t e = rt_cuda_dtype_size(dt), nq = (size_t)B * T * NH * hs,
	       nk = (size_t)B * T * NKV * hs, nrow = (size_t)B * NH * T;
	void *q = NULL, *k = NULL, *v = NULL, *o = NULL, *dO = NULL,
	     *dq = NULL, *dk = NULL, *dv = NULL;
	float *lse = NULL, *delta = NULL;
	rt_cuda_sdpa *a = NULL;
	rt_cuda_stream s = rt_cuda_compute_stream(cu);
	hexi_rc rv;

	*fwd_ms = *bwd_ms = 0;
	if ((rv = rt_cuda_alloc(&q, nq * e)) || (rv = rt_cuda_alloc(&k, nk * e)) ||
	    (rv = rt_cuda_alloc(&v, nk * e)) || (rv = rt_cuda_alloc(&o, nq * e)) ||
	    (rv = rt_cuda_alloc(&dO, nq * e)) ||
	    (rv = rt_cuda_alloc(&dq, nq * e)) ||
	    (rv = rt_cuda_alloc(&dk, nk * e)) ||
	    (rv = rt_cuda_alloc(&dv, nk * e)) ||
	    (rv = rt_cuda_alloc((void **)&lse, nrow * 4)) ||
	    (rv = rt_cuda_alloc((void **)&delta, nrow * 4)))
		goto out;
	if (rt_cuda_model_attn_kind(m) == RT_CUDA_ATTN_CUDNN &&
	    (rv = rt_cuda_sdpa_create(cu, dt, B, T, NH, NKV, hs, &a)) !=
		HEXI_OK)
		goto out;
	/* zero inputs: the kernels' time does not depend on the values */
	for (int rep = 0; rep < 4; rep++) {
		double t0 = hexi_now_s(), t1, t2;

		rv = a != NULL ? rt_cuda_sdpa_forward(a, o, lse, q, k, v)
			       : rt_cuda_attention_forward(s, dt, o, lse, q, k, v,
							   B, T, NH, NKV, hs);
		if (rv != HEXI_OK || (rv = rt_cuda_sync(NULL)) != HEXI_OK)
			goto out;
		t1 = hexi_now_s();
		rv = a != NULL ? rt_cuda_sdpa_backward(a, dq, dk, dv, dO, o, q,
						       k, v, lse)
			       : rt_cuda_attention_backward(
				     s, dt, dq, dk, dv, dO, o, q, k, v, lse,
				     delta, B, T, NH, NKV, hs);
		if (rv != HEXI_OK || (rv = rt_cuda_sync(NULL)) != HEXI_OK)
			goto out;
		t2 = hexi_now_s();
		if (rep == 0)
			continue; /* warm-up */
		if (*fwd_ms == 0 || (t1 - t0) * 1e3 < *fwd_ms)
			*fwd_ms = (t1 - t0) * 1e3;
		if (*bwd_ms == 0 || (t2 - t1) * 1e3 < *bwd_ms)
			*bwd_ms = (t2 - t1) * 1e3;
	}
out:
	rt_cuda_sdpa_destroy(a);
	rt_cuda_free(q), rt_cuda_free(k), rt_cuda_free(v), rt_cuda_free(o);
	rt_cuda_free(dO), rt_cuda_free(dq), rt_cuda_free(dk), rt_cuda_free(dv);
	rt_cuda_free(lse), rt_cuda_free(delta);
	return rv;
}

/* Catalog peak (TFLOP/s) of the device, 0 if its type is unknown. */
static double peak_of(const char *device_name, char *type, size_t cap)
{
	hexi_catalog *cat = NULL;
	const hexi_gpu_type *t;
	double peak = 0;

	snprintf(type, cap, "unknown");
	if (hexi_catalog_builtin(&cat) != HEXI_OK)
		return 0;
	if ((t = hexi_catalog_find(cat, device_name)) != NULL) {
		peak = t->peak_tflops;
		snprintf(type, cap, "%s", t->name);
	}
	hexi_catalog_destroy(cat);
	return peak;
}

int main(int argc, char **argv)
{
	args a = {0};
	hexi_model md;
	rt_cuda *cu = NULL;
	rt_cuda_model *m = NULL;
	int *tok = NULL, *tgt = NULL, *buf = NULL, n = 0;
	double t_total = 0, loss = 0, peak, part[3] = {0, 0, 0};
	double afwd = 0, abwd = 0;
	char type[HEXI_NAME_MAX];
	hexi_rc rv = (hexi_rc)parse(argc, argv, &a);

	if (rv != HEXI_OK)
		return rv;
	if ((rv = hexi_model_load(a.model, &md)) != HEXI_OK)
		goto out;
	if ((rv = rt_cuda_device_count(&n)) != HEXI_OK) {
		printf("SKIP: %s\n", hexi_errmsg(rv));
		return 77;
	}
	if ((rv = rt_cuda_create(0, 1, &cu)) != HEXI_OK ||
	    (rv = rt_cuda_model_create(cu, &md, a.dt, (int)a.batch, 1234,
				       &ref_init, &m)) != HEXI_OK)
		goto out;
	tok = malloc(sizeof(int) * (size_t)(a.batch * md.seq_len));
	tgt = malloc(sizeof(int) * (size_t)(a.batch * md.seq_len));
	buf = malloc(sizeof(int) * (size_t)(md.seq_len + 1));
	if (tok == NULL || tgt == NULL || buf == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "batch buffers");
		goto out;
	}
	peak = peak_of(rt_cuda_device_name(cu), type, sizeof(type));
	for (long s = 1; s <= a.steps; s++) {
		double t0 = hexi_now_s(), dt_s, tps;

		for (long b = 0; b < a.batch; b++) {
			hexi_rt_data_sample(1234, md.vocab, md.seq_len,
					    (s - 1) * a.batch + b, buf);
			memcpy(tok + b * md.seq_len, buf,
			       sizeof(int) * (size_t)md.seq_len);
			memcpy(tgt + b * md.seq_len, buf + 1,
			       sizeof(int) * (size_t)md.seq_len);
		}
		double t[4], ls = 0;

		/* rt_cuda_model_fwd_bwd's three calls, timed apart: the
		 * forward ends at the loss's download (synchronous) */
		t[0] = t0;
		if ((rv = rt_cuda_model_zero_grad(m)) ||
		    (rv = rt_cuda_model_forward(m, 0, tok, NULL, NULL, tgt,
						1.0f / (float)a.batch, &ls)))
			goto out;
		t[1] = hexi_now_s();
		if ((rv = rt_cuda_model_backward(m, 0, NULL, NULL)) ||
		    (rv = rt_cuda_sync(NULL)))
			goto out;
		t[2] = hexi_now_s();
		if ((rv = rt_cuda_model_adamw(m, 3e-4f, 0.9f, 0.95f, 1e-8f,
					      0.0f, (int)s)) ||
		    (rv = rt_cuda_sync(NULL)))
			goto out;
		t[3] = hexi_now_s();
		loss = ls / (double)a.batch;
		dt_s = t[3] - t0;
		tps = (double)a.batch * md.seq_len / dt_s;
		if (s > 1) { /* step 1 is warm-up */
			t_total += dt_s;
			for (int i = 0; i < 3; i++)
				part[i] += t[i + 1] - t[i];
		}
		if (a.json)
			printf("{\"step\":%ld,\"loss\":%.6f,\"time_s\":%.6f,"
			       "\"tokens_per_s\":%.1f,\"fwd_s\":%.6f,"
			       "\"bwd_s\":%.6f,\"opt_s\":%.6f}\n",
			       s, loss, dt_s, tps, t[1] - t[0], t[2] - t[1],
			       t[3] - t[2]);
		else
			printf("step %ld: loss %.4f, %.3f s (forward %.3f, "
			       "backward %.3f, AdamW %.3f), %.0f tokens/s\n",
			       s, loss, dt_s, t[1] - t[0], t[2] - t[1],
			       t[3] - t[2], tps);
	}
	/* a failure here (memory for another layer's buffers, cuDNN's plans
	 * built twice) costs only the breakdown, never the figures above */
	if ((rv = time_attention(cu, m, &md, a.dt, (int)a.batch, &afwd,
				 &abwd)) != HEXI_OK) {
		fprintf(stderr, "bench_gpu_train: attention timing: %s\n",
			hexi_errmsg(rv));
		hexi_error_clear();
		rv = HEXI_OK;
		afwd = abwd = -1;
	}
	{
		double per = t_total / (double)(a.steps - 1);
		double ns = (double)(a.steps - 1);
		char attn[256];

		/* the attention choice, safe inside a JSON string */
		snprintf(attn, sizeof(attn), "%s", rt_cuda_model_attention(m));
		for (char *c = attn; *c != '\0'; c++)
			if (*c == '"' || *c == '\\' || (unsigned char)*c < 32)
				*c = '\'';
		double tps = (double)a.batch * md.seq_len / per;
		double tflops = rt_cuda_model_flops(m) / per / 1e12;

		printf("{\"summary\":true,\"model\":\"%s\",\"params\":%zu,"
		       "\"dtype\":\"%s\",\"batch\":%ld,\"seq\":%d,"
		       "\"device\":\"%s\",\"gpu_type\":\"%s\","
		       "\"tokens_per_s\":%.1f,\"tflops\":%.2f,"
		       "\"peak_tflops\":%.2f,\"mfu\":%.4f,\"final_loss\":%.5f,"
		       "\"attention\":\"%s\",\"fwd_s\":%.6f,\"bwd_s\":%.6f,"
		       "\"opt_s\":%.6f,\"attn_fwd_ms\":%.3f,"
		       "\"attn_bwd_ms\":%.3f,\"attn_share\":%.4f}\n",
		       md.name, rt_cuda_model_numel(m),
		       rt_cuda_dtype_name(a.dt), a.batch, md.seq_len,
		       rt_cuda_device_name(cu), type, tps, tflops, peak,
		       peak > 0 ? tflops / peak : 0.0, loss, attn, part[0] / ns,
		       part[1] / ns, part[2] / ns, afwd, abwd,
		       afwd < 0 ? -1.0 : md.layers * (afwd + abwd) / 1e3 / per);
	}
out:
	if (rv != HEXI_OK)
		fprintf(stderr, "bench_gpu_train: %s\n", hexi_errmsg(rv));
	free(tok);
	free(tgt);
	free(buf);
	rt_cuda_model_destroy(m);
	rt_cuda_destroy(cu);
	return (int)rv;
}
