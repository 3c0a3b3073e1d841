/*
 * test_gpu_model.c - one training step of the reference model on the GPU
 * (rt_cuda_model) against the CPU model (rt_model) with the same weights
 * (both initialise from rt_init_tensor with the same seed) and the same
 * batch: loss, every parameter gradient, and the weights after AdamW.
 * fp32: |gpu - cpu| <= 1e-5 + 1e-3 |cpu| for gradients (a whole model's
 * reassociation), 1e-4 relative for the loss; bf16: loss within 3 %.
 * AdamW: the CPU AdamW applied to the GPU's own gradients against the
 * GPU's AdamW (so a reordered GEMM cannot fail it), both dtypes.
 * Then the same batch through two stage shards (embedding + layer 0 |
 * layer 1 + head) as two micro-batches in 1F1B order (both forwards in
 * flight on stage 0), activations and their gradients handed over in
 * device memory: the same loss, gradients and SGD step as the CPU model.
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

#define NB    2
#define SEED 77

static const hexi_model tiny = {"gpu-test", 2, 64, 4, 2, 96, 50, 24};
static const rt_cuda_init ref_init = {.tensor = rt_init_tensor,
				      .std = rt_init_std};

static void batch(int *tokens, int *targets)
{
	int buf[25]; /* seq_len + 1 */

	for (int b = 0; b < NB; b++) {
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
	cfg.max_batch = NB;
	cfg.seed = SEED;
	if (rt_model_create(&cfg, NULL, &m) != HEXI_OK)
		tap_bail(hexi_errmsg(HEXI_ERR_INTERNAL));
	return m;
}

/* $HEXI_TEST_EXPECT_ATTN (own|cudnn), when set, is the attention a bf16
 * model must pick (tests/gpuemu drives the choice through the emulated
 * compute capability and cuDNN version); fp32 is always the own kernel. */
static void expect_attention(const rt_cuda_model *gm, rt_cuda_dtype dt)
{
	const char *want = getenv("HEXI_TEST_EXPECT_ATTN");
	rt_cuda_attn_kind k = rt_cuda_model_attn_kind(gm);

	if (dt == RT_CUDA_F32)
		ok(k == RT_CUDA_ATTN_OWN, "fp32: the own attention kernel (%s)",
		   rt_cuda_model_attention(gm));
	else if (want != NULL)
		ok((strcmp(want, "cudnn") == 0) == (k == RT_CUDA_ATTN_CUDNN),
		   "bf16: attention is %s (%s)", want,
		   rt_cuda_model_attention(gm));
}

static void step(rt_cuda *cu, rt_cuda_dtype dt)
{
	int tokens[NB * 24], targets[NB * 24];
	rt_model *cm = cpu_model();
	rt_cuda_model *gm = NULL;
	rt_adamw_opts o;
	double closs = 0, gloss = 0, wg = 0, ww = 0;
	const char *dn = rt_cuda_dtype_name(dt);
	hexi_rc rv;

	batch(tokens, targets);
	rv = rt_cuda_model_create(cu, &tiny, dt, NB, SEED, &ref_init, &gm);
	is_int(rv, HEXI_OK, "%s: GPU model created (%s)", dn, hexi_errmsg(rv));
	if (gm == NULL)
		return;
	tap_diag("%s: attention %s", dn, rt_cuda_model_attention(gm));
	expect_attention(gm, dt);
	is_int(rt_cuda_model_numel(gm), rt_model_numel(cm),
	       "%s: same parameter count", dn);
	is_int(rt_model_forward(cm, 0, NB, tokens, NULL, NULL, targets, 1.0f / NB,
				&closs),
	       HEXI_OK, "CPU forward");
	closs /= NB;
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
		/* The AdamW check below runs the CPU AdamW on the GPU's own
		 * gradients: at step 1 AdamW is ~lr * sign(g), so two GEMM
		 * summation orders alone can flip a small gradient's sign and
		 * move a weight by 2 lr (issue 17: 3-5 of 20 seeds failed). */
		memcpy(p->g, h, p->n * sizeof(float));
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
	/* Same gradients, same fp32 master weights: only the rounding of
	 * one elementwise formula differs, in either dtype. */
	ok(ww <= 1, "%s: weights after AdamW on the GPU's gradients match the "
	   "CPU AdamW (worst %.3g)", dn, ww);
	if (dt != RT_CUDA_F32)
		tap_diag("bf16: worst gradient %.3g x the fp32 tolerance (not "
			 "asserted)", wg);
	rt_cuda_model_destroy(gm);
	rt_model_destroy(cm);
}

static rt_cuda_model *shard(rt_cuda *cu, int lb, int le, int first, int last)
{
	rt_cuda_shard_cfg cfg;
	rt_cuda_model *m = NULL;
	hexi_rc rv;

	memset(&cfg, 0, sizeof(cfg));
	cfg.model = &tiny;
	cfg.layer_begin = lb;
	cfg.layer_end = le;
	cfg.tp_size = 1;
	cfg.has_embed = first;
	cfg.has_head = last;
	cfg.max_slots = 2;
	cfg.B = 1;
	cfg.dt = RT_CUDA_F32;
	cfg.seed = SEED;
	cfg.init = ref_init;
	rv = rt_cuda_shard_create(cu, &cfg, NULL, &m);
	is_int(rv, HEXI_OK, "stage shard [%d,%d) created (%s)", lb, le,
	       hexi_errmsg(rv));
	return m;
}

/* Worst deviation (in tolerances) of the two stages' gradients (what 1,
 * 1e-3 relative) or weights (what 0, 1e-4) from the CPU model's. */
static double stage_worst(rt_model *cm, rt_cuda_model *s0, rt_cuda_model *s1,
			  int what)
{
	double wmax = 0;

	for (int i = 0; i < rt_model_nparams(cm); i++) {
		rt_param *p = rt_model_param(cm, i);
		float *h = malloc(p->n * sizeof(float));
		rt_cuda_model *g = strstr(p->name, "layers.1.") ||
					   !strncmp(p->name, "final", 5) ||
					   !strncmp(p->name, "lm_head", 7)
				       ? s1
				       : s0;
		if (h == NULL || rt_cuda_model_read(g, p->name, what, h, p->n))
			tap_bail("reading a stage tensor");
		double w = worst(h, what ? p->g : p->w, p->n, 1e-5,
				 what ? 1e-3 : 1e-4);
		if (w > wmax)
			wmax = w;
		free(h);
	}
	return wmax;
}

/* Two stages, two micro-batches of one sample, 1F1B: F0 F1 on stage 0,
 * then per micro-batch F(stage 1) B(stage 1) B(stage 0). */
static void stages(rt_cuda *cu)
{
	const int T = tiny.seq_len;
	int tokens[NB * 24], targets[NB * 24];
	rt_model *cm = cpu_model();
	rt_cuda_model *s0 = shard(cu, 0, 1, 1, 0), *s1 = shard(cu, 1, 2, 0, 1);
	void *act[2] = {NULL, NULL}, *dact = NULL;
	double closs = 0, gloss = 0, l = 0, wg = 0, ww = 0;
	size_t ab;

	if (s0 == NULL || s1 == NULL)
		tap_bail("stage shards");
	ab = rt_cuda_model_act_bytes(s0);
	is_int(ab, sizeof(float) * T * tiny.hidden, "activation bytes");
	if (rt_cuda_alloc(&act[0], ab) || rt_cuda_alloc(&act[1], ab) ||
	    rt_cuda_alloc(&dact, ab))
		tap_bail("activation buffers");
	batch(tokens, targets);
	is_int(rt_cuda_model_numel(s0) + rt_cuda_model_numel(s1),
	       rt_model_numel(cm), "shards hold every parameter once");
	rt_model_forward(cm, 0, NB, tokens, NULL, NULL, targets, 1.0f / NB,
			 &closs);
	rt_model_backward(cm, 0, NULL, NULL);
	is_int(rt_cuda_model_zero_grad(s0) | rt_cuda_model_zero_grad(s1),
	       HEXI_OK, "zero gradients");
	for (int mb = 0; mb < 2; mb++)
		is_int(rt_cuda_model_forward(s0, mb, tokens + mb * T, NULL,
					     act[mb], NULL, 1.0f / NB, NULL),
		       HEXI_OK, "stage 0 forward mb %d", mb);
	ok(rt_cuda_model_forward(s0, 0, tokens, NULL, act[0], NULL, 1, NULL) ==
	       HEXI_ERR_INVAL,
	   "a busy slot is refused: %s", hexi_errmsg(HEXI_ERR_INVAL));
	for (int mb = 0; mb < 2; mb++) {
		is_int(rt_cuda_model_forward(s1, 0, NULL, act[mb], NULL,
					     targets + mb * T, 1.0f / NB, &l),
		       HEXI_OK, "stage 1 forward mb %d", mb);
		gloss += l;
		is_int(rt_cuda_model_backward(s1, 0, NULL, dact), HEXI_OK,
		       "stage 1 backward mb %d", mb);
		is_int(rt_cuda_model_backward(s0, mb, dact, NULL), HEXI_OK,
		       "stage 0 backward mb %d", mb);
	}
	ok(fabs(gloss - closs) <= 1e-4 * fabs(closs),
	   "two stages: loss sum %.6f vs CPU %.6f", gloss, closs);
	wg = stage_worst(cm, s0, s1, 1);
	ok(wg <= 1, "two stages: every gradient within tolerance (worst %.3g)",
	   wg);
	rt_model_sgd(cm, 0.5f);
	is_int(rt_cuda_model_sgd(s0, 0.5f) | rt_cuda_model_sgd(s1, 0.5f),
	       HEXI_OK, "SGD on both stages");
	ww = stage_worst(cm, s0, s1, 0);
	ok(ww <= 1, "two stages: weights after SGD match (worst %.3g)", ww);
	rt_cuda_free(act[0]);
	rt_cuda_free(act[1]);
	rt_cuda_free(dact);
	rt_cuda_model_destroy(s0);
	rt_cuda_model_destroy(s1);
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
	step(cu, RT_CUDA_BF16); /* $HEXI_ATTENTION, auto: cuDNN where it can */
	if (getenv("HEXI_ATTENTION") == NULL) {
		/* the other path too, against the same CPU model */
		setenv("HEXI_ATTENTION", "own", 1);
		unsetenv("HEXI_TEST_EXPECT_ATTN");
		step(cu, RT_CUDA_BF16);
		unsetenv("HEXI_ATTENTION");
	}
	stages(cu);
	rt_cuda_destroy(cu);
	return tap_done();
}
