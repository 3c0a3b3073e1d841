/*
 * test_gpu_model.c - one training step of the reference model on the GPU
 * (rt_cuda_model) against the CPU model (rt_model) with the same weights
 * (both initialise from rt_init_tensor with the same seed) and the same
 * batch: loss, every parameter gradient, and the weights after AdamW.
 * fp32: |gpu - cpu| <= 1e-5 + 1e-3 |cpu| for gradients (a whole model's
 * reassociation), 1e-4 relative for the loss; bf16: loss within 3 %.
 * Exit 77 with the reason without a usable GPU.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_sched.h"
#include "rt_cuda.h"
#include "rt_model.h"
#include "tap.h"

#define B    2
#define SEED 77

static const hexi_model tiny = {"gpu-test", 2, 64, 4, 2, 96, 50, 24};

static void batch(int *tokens, int *targets)
{
	int buf[25]; /* seq_len + 1 */

	for (int b = 0; b < B; b++) {
		hexi_rt_data_sample(5, tiny.vocab, tiny.seq_len, b, buf);
		memcpy(tokens + b * tiny.seq_len, buf,
		       sizeof(int) * tiny.seq_len);
		memcpy(targets + b * tiny.seq_len, buf + 1,
		       sizeof(int) * tiny.seq_len);
	}
}

static double worst(const float *got, const float *want, size_t n, double atol,
		    double rtol)
{
	double w = 0;

	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - want[i]) /
			   (atol + rtol * fabs((double)want[i]));
		if (!(e <= w))
			w = e;
	}
	return w;
}

static rt_model *cpu_model(void)
{
	rt_model_config cfg;
	rt_model *m = NULL;

	memset(&cfg, 0, sizeof(cfg));
	cfg.model = tiny;
	cfg.layer_begin = 0;
	cfg.layer_end = tiny.layers;
	cfg.tp_rank = 0;
	cfg.tp_size = 1;
	cfg.has_embed = cfg.has_head = 1;
	cfg.max_slots = 1;
	cfg.max_batch = B;
	cfg.seed = SEED;
	if (rt_model_create(&cfg, NULL, &m) != HEXI_OK)
		tap_bail(hexi_errmsg(HEXI_ERR_INTERNAL));
	return m;
}

static void step(rt_cuda *cu, rt_cuda_dtype dt)
{
	int tokens[B * 24], targets[B * 24];
	rt_model *cm = cpu_model();
	rt_cuda_model *gm = NULL;
	rt_adamw_opts o;
	double closs = 0, gloss = 0, wg = 0, ww = 0;
	const char *dn = rt_cuda_dtype_name(dt);
	hexi_rc rv;

	batch(tokens, targets);
	rv = rt_cuda_model_create(cu, &tiny, dt, B, SEED, &gm);
	is_int(rv, HEXI_OK, "%s: GPU model created (%s)", dn, hexi_errmsg(rv));
	if (gm == NULL)
		return;
	is_int(rt_cuda_model_numel(gm), rt_model_numel(cm),
	       "%s: same parameter count", dn);
	is_int(rt_model_forward(cm, 0, B, tokens, NULL, NULL, targets, 1.0f / B,
				&closs),
	       HEXI_OK, "CPU forward");
	closs /= B;
	is_int(rt_model_backward(cm, 0, NULL, NULL), HEXI_OK, "CPU backward");
	is_int(rt_cuda_model_fwd_bwd(gm, tokens, targets, &gloss), HEXI_OK,
	       "%s: GPU forward + backward", dn);
	ok(fabs(gloss - closs) <=
	       (dt == RT_CUDA_F32 ? 1e-4 : 3e-2) * fabs(closs),
	   "%s: loss %.6f vs CPU %.6f", dn, gloss, closs);
	rt_adamw_defaults(&o);
	o.weight_decay = 0.1f;
	for (int i = 0; i < rt_model_nparams(cm); i++) {
		rt_param *p = rt_model_param(cm, i);
		float *h = malloc(p->n * sizeof(float));

		if (h == NULL ||
		    rt_cuda_model_read(gm, p->name, 1, h, p->n) != HEXI_OK)
			tap_bail("reading a GPU gradient");
		double w = worst(h, p->g, p->n, 1e-5, 1e-3);
		if (w > wg)
			wg = w;
		if (w > 1)
			tap_diag("%s: gradient of %s off by %.3g x tolerance",
				 dn, p->name, w);
		free(h);
	}
	if (dt == RT_CUDA_F32)
		ok(wg <= 1,
		   "fp32: every gradient within tolerance (worst "
		   "%.3g)",
		   wg);
	is_int(rt_model_adamw(cm, &o, 1), HEXI_OK, "CPU AdamW");
	is_int(rt_cuda_model_adamw(gm, o.lr, o.beta1, o.beta2, o.eps,
				   o.weight_decay, 1),
	       HEXI_OK, "%s: GPU AdamW", dn);
	for (int i = 0; i < rt_model_nparams(cm); i++) {
		rt_param *p = rt_model_param(cm, i);
		float *h = malloc(p->n * sizeof(float));

		if (h == NULL ||
		    rt_cuda_model_read(gm, p->name, 0, h, p->n) != HEXI_OK)
			tap_bail("reading GPU weights");
		double w = worst(h, p->w, p->n, 1e-5, 1e-4);
		if (w > ww)
			ww = w;
		free(h);
	}
	if (dt == RT_CUDA_F32)
		ok(ww <= 1, "fp32: weights after AdamW match (worst %.3g)", ww);
	else
		tap_diag("bf16: worst gradient %.3g, weight %.3g x the fp32 "
			 "tolerance (not asserted)",
			 wg, ww);
	rt_cuda_model_destroy(gm);
	rt_model_destroy(cm);
}

int main(void)
{
	rt_cuda *cu = NULL;
	int n = 0;
	hexi_rc rv = rt_cuda_device_count(&n);

	if (rv != HEXI_OK) {
		printf("1..0 # SKIP %s\n", hexi_errmsg(rv));
		return 77;
	}
	if ((rv = rt_cuda_create(0, 1, &cu)) != HEXI_OK)
		tap_bail(hexi_errmsg(rv));
	step(cu, RT_CUDA_F32);
	step(cu, RT_CUDA_BF16);
	rt_cuda_destroy(cu);
	return tap_done();
}
