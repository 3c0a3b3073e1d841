/*
 * bench_gpu_train.c - single-GPU training throughput of the reference model
 * (rt_cuda_model): tokens/s, achieved TFLOP/s and MFU against the catalog
 * peak of the GPU's type.  Used by device-check.sh; a benchmark, not a test.
 *
 *   bench_gpu_train [--model NAME|FILE] [--batch B] [--steps N]
 *                   [--dtype bf16|fp32] [--json]
 *
 * One JSON object per step with --json, then a summary object.  Exit 77
 * with the reason when there is no usable GPU; otherwise the hexi_rc code.
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
	double t_total = 0, loss = 0, peak;
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
		if ((rv = rt_cuda_model_fwd_bwd(m, tok, tgt, &loss)) ||
		    (rv = rt_cuda_model_adamw(m, 3e-4f, 0.9f, 0.95f, 1e-8f,
					      0.0f, (int)s)))
			goto out;
		dt_s = hexi_now_s() - t0;
		tps = (double)a.batch * md.seq_len / dt_s;
		if (s > 1) /* step 1 is warm-up */
			t_total += dt_s;
		if (a.json)
			printf("{\"step\":%ld,\"loss\":%.6f,\"time_s\":%.6f,"
			       "\"tokens_per_s\":%.1f}\n",
			       s, loss, dt_s, tps);
		else
			printf("step %ld: loss %.4f, %.3f s, %.0f tokens/s\n",
			       s, loss, dt_s, tps);
	}
	{
		double per = t_total / (double)(a.steps - 1);
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
		       "\"attention\":\"%s\"}\n",
		       md.name, rt_cuda_model_numel(m),
		       rt_cuda_dtype_name(a.dt), a.batch, md.seq_len,
		       rt_cuda_device_name(cu), type, tps, tflops, peak,
		       peak > 0 ? tflops / peak : 0.0, loss, attn);
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
