/*
 * test_model.c - the stage-shard model in one process: parameter table
 * against doc/LAYOUT.md, whole-model backward against finite differences of
 * the loss, pipeline split equal to the unsplit model, micro-batch gradient
 * accumulation, slots in flight, activation recompute, the gradient
 * window of zero 2, optimizers, synthetic data, bad input.
 */
#include "config.h"

#include "rt_model.h"
#include "rt_ops.h"
#include "tap.h"

#define B_MAX 2

static hexi_model tiny(int layers, int C, int H, int KV, int F, int V, int T)
{
	hexi_model m;
	memset(&m, 0, sizeof(m));
	snprintf(m.name, sizeof(m.name), "test");
	m.layers = layers;
	m.hidden = C;
	m.heads = H;
	m.kv_heads = KV;
	m.ffn = F;
	m.vocab = V;
	m.seq_len = T;
	return m;
}

static rt_model_config whole(hexi_model md, int slots)
{
	rt_model_config c;
	memset(&c, 0, sizeof(c));
	c.model = md;
	c.layer_begin = 0;
	c.layer_end = md.layers;
	c.tp_size = 1;
	c.has_embed = c.has_head = 1;
	c.max_slots = slots;
	c.max_batch = B_MAX;
	c.seed = 42;
	return c;
}

static rt_model *make(const rt_model_config *c)
{
	rt_model *m = NULL;
	hexi_rc rc = rt_model_create(c, NULL, &m);
	if (rc) {
		printf("# %s\n", hexi_errmsg(rc));
		tap_bail("rt_model_create failed");
	}
	return m;
}

/* Synthetic batch: tokens and targets (B,T). */
static void batch(const hexi_model *md, int B, int64_t first, int *tok,
		  int *tgt)
{
	int T = md->seq_len;
	int buf[T + 1];
	for (int b = 0; b < B; b++) {
		hexi_rt_data_sample(7, md->vocab, T, first + b, buf);
		memcpy(tok + b * T, buf, (size_t)T * sizeof(int));
		memcpy(tgt + b * T, buf + 1, (size_t)T * sizeof(int));
	}
}

static double loss_of(rt_model *m, int B, const int *tok, const int *tgt,
		      float scale)
{
	double l = 0.0;
	hexi_rc rc = rt_model_forward(m, 0, B, tok, NULL, NULL, tgt, scale, &l);
	if (rc)
		tap_bail(hexi_errmsg(rc));
	rt_model_release(m, 0);
	return l * scale;
}

/* ---- layout ------------------------------------------------------------ */

static void test_layout(void)
{
	hexi_model md = tiny(2, 16, 4, 2, 24, 11, 6);
	rt_model_config c = whole(md, 1);
	rt_model *m = make(&c);
	is_int(rt_model_nparams(m), 1 + 2 * 9 + 2, "param count, whole model");
	is_str(rt_model_param(m, 0)->name, "embed.weight", "first param");
	is_str(rt_model_param(m, 1 + 9 + 1)->name, "layers.1.attn.wq",
	       "layer 1 wq position");
	rt_param *p = rt_model_find_param(m, "layers.1.attn.wk");
	ok(p && p->ndim == 2 && p->shape[0] == 8 && p->shape[1] == 16 &&
	       p->row_begin == 0 && p->row_end == 8 && p->n == 128 &&
	       !p->replicated_in_tp,
	   "wk stored (KV*d, C) = (8, 16)");
	p = rt_model_find_param(m, "layers.0.mlp.w_down");
	ok(p && p->shape[0] == 24 && p->shape[1] == 16, "w_down (F, C)");
	p = rt_model_find_param(m, "final_norm.weight");
	ok(p && p->ndim == 1 && p->shape[0] == 16 && p->w[3] == 1.0f &&
	       p->replicated_in_tp,
	   "final_norm (C), ones, replicated");
	ok(rt_model_find_param(m, "layers.2.attn.wq") == NULL,
	   "no layer 2 in a 2-layer model");
	/* weights are the rows of the global tensor, whatever the holder */
	p = rt_model_find_param(m, "lm_head.weight");
	float row[16];
	rt_init_tensor(row, "lm_head.weight", 5, 6, 16,
		       rt_init_std(&md, "lm_head.weight"), 42);
	ok(memcmp(row, p->w + 5 * 16, sizeof(row)) == 0,
	   "init of row 5 alone equals row 5 of the whole tensor");
	float sd = rt_init_std(&md, "lm_head.weight");
	double ss = 0;
	for (size_t i = 0; i < p->n; i++)
		ss += (double)p->w[i] * p->w[i];
	is_near(sqrt(ss / p->n), sd, 0.15, "lm_head init std ~ 1/sqrt(C)");
	/* 6*BT*(per-token GEMM 1920 + attention 2*16*3.5) per layer + head */
	is_near(rt_model_flops(m, 2), 6.0 * 12 * (2 * (1920 + 112) + 16 * 11),
		1e-12, "flops of a micro-batch");
	rt_model_destroy(m);
}

/* ---- finite differences of the whole model ------------------------------ */

/* Loss of the model vs the analytic gradient of a few elements per tensor.
 * eps 1e-2 on fp32 weights, loss in double; pass per tensor:
 * ||fd - g|| <= 2e-3 * ||g|| + 2e-5 * sqrt(k) over k checked elements. */
static void test_fd(int KV)
{
	hexi_model md = tiny(2, 16, 4, KV, 24, 11, 6);
	rt_model_config c = whole(md, 1);
	rt_model *m = make(&c);
	const int B = 2, T = md.seq_len;
	const float scale = 1.0f / B;
	int tok[B * T], tgt[B * T];
	batch(&md, B, 0, tok, tgt);
	double l0 = 0.0;
	rt_model_zero_grad(m);
	if (rt_model_forward(m, 0, B, tok, NULL, NULL, tgt, scale, &l0) ||
	    rt_model_backward(m, 0, NULL, NULL))
		tap_bail("forward/backward failed");
	ok(l0 > 0.5 * log(md.vocab) * B && l0 < 2.0 * log(md.vocab) * B,
	   "KV%d initial loss sum %.4f near B*log(V) = %.4f", KV, l0,
	   B * log(md.vocab));
	for (int i = 0; i < rt_model_nparams(m); i++) {
		rt_param *p = rt_model_param(m, i);
		double num = 0, den = 0;
		int k = 0;
		size_t stride = p->n / 10 + 1;
		for (size_t j = i % 3; j < p->n; j += stride, k++) {
			float old = p->w[j], e = 1e-2f;
			p->w[j] = old + e;
			double lp = loss_of(m, B, tok, tgt, scale);
			p->w[j] = old - e;
			double lm = loss_of(m, B, tok, tgt, scale);
			p->w[j] = old;
			double fd = (lp - lm) / ((double)(old + e) - (old - e));
			num += (fd - p->g[j]) * (fd - p->g[j]);
			den += (double)p->g[j] * p->g[j];
		}
		ok(sqrt(num) <= 2e-3 * sqrt(den) + 2e-5 * sqrt(k),
		   "KV%d fd %s: |fd-g| %.2e, |g| %.2e (%d elements)", KV,
		   p->name, sqrt(num), sqrt(den), k);
	}
	rt_model_destroy(m);
}

/* ---- pipeline split, accumulation, slots -------------------------------- */

static double rel_diff(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)b[i] * b[i];
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Max over params of m (all found in ref by name) of the relative grad diff. */
static double grad_diff(rt_model *m, rt_model *ref)
{
	double worst = 0.0;
	for (int i = 0; i < rt_model_nparams(m); i++) {
		rt_param *p = rt_model_param(m, i);
		rt_param *q = rt_model_find_param(ref, p->name);
		if (!q || q->n != p->n)
			return INFINITY;
		double d = rel_diff(p->g, q->g, p->n);
		if (d > worst)
			worst = d;
	}
	return worst;
}

static void test_pipeline_split(void)
{
	hexi_model md = tiny(3, 16, 4, 2, 24, 11, 6);
	rt_model_config c = whole(md, 1);
	rt_model *ref = make(&c);
	c.layer_end = 1;
	c.has_head = 0;
	rt_model *s0 = make(&c);
	c.layer_begin = 1;
	c.layer_end = md.layers;
	c.has_embed = 0;
	c.has_head = 1;
	rt_model *s1 = make(&c);
	const int B = 2, T = md.seq_len, C = md.hidden;
	int tok[B * T], tgt[B * T];
	float x[B * T * C], dx[B * T * C];
	double lref = 0, lsplit = 0;
	batch(&md, B, 10, tok, tgt);
	hexi_rc rc =
	    rt_model_forward(ref, 0, B, tok, NULL, NULL, tgt, 0.5f, &lref);
	rc = rc ? rc : rt_model_backward(ref, 0, NULL, NULL);
	rc = rc ? rc : rt_model_forward(s0, 0, B, tok, NULL, x, NULL, 0, NULL);
	rc = rc ? rc
		: rt_model_forward(s1, 0, B, NULL, x, NULL, tgt, 0.5f, &lsplit);
	rc = rc ? rc : rt_model_backward(s1, 0, NULL, dx);
	rc = rc ? rc : rt_model_backward(s0, 0, dx, NULL);
	is_int(rc, HEXI_OK, "two-stage forward/backward runs");
	is_near(lsplit, lref, 1e-6, "pipeline split loss equals unsplit");
	double d0 = grad_diff(s0, ref), d1 = grad_diff(s1, ref);
	ok(d0 <= 1e-6 && d1 <= 1e-6,
	   "pipeline split grads equal unsplit (stage 0 %.1e, stage 1 %.1e)",
	   d0, d1);
	is_int(rt_model_nparams(s0) + rt_model_nparams(s1),
	       rt_model_nparams(ref), "stages hold every tensor exactly once");
	rt_model_destroy(ref);
	rt_model_destroy(s0);
	rt_model_destroy(s1);
}

/* Two micro-batches of 1 accumulate to one micro-batch of 2; two slots in
 * flight (F0 F1 B1 B0) give the same as one after the other. */
static void test_accumulate(void)
{
	hexi_model md = tiny(2, 16, 4, 2, 24, 11, 6);
	rt_model_config c = whole(md, 2);
	rt_model *a = make(&c), *b = make(&c);
	const int T = md.seq_len;
	int tok[2 * T], tgt[2 * T];
	double l2 = 0, la = 0, lb = 0;
	batch(&md, 2, 3, tok, tgt);
	hexi_rc rc = rt_model_forward(a, 0, 2, tok, NULL, NULL, tgt, 0.5f, &l2);
	rc = rc ? rc : rt_model_backward(a, 0, NULL, NULL);
	rc = rc ? rc
		: rt_model_forward(b, 0, 1, tok, NULL, NULL, tgt, 0.5f, &la);
	rc = rc ? rc
		: rt_model_forward(b, 1, 1, tok + T, NULL, NULL, tgt + T, 0.5f,
				   &lb);
	rc = rc ? rc : rt_model_backward(b, 1, NULL, NULL);
	rc = rc ? rc : rt_model_backward(b, 0, NULL, NULL);
	is_int(rc, HEXI_OK, "two slots in flight run");
	is_near(la + lb, l2, 1e-6, "loss sums add over micro-batches");
	double d = grad_diff(b, a);
	ok(d <= 1e-5, "grads accumulate over micro-batches (rel %.1e)", d);
	rt_model_zero_grad(b);
	ok(rt_model_grad_sumsq(b, NULL) == 0.0, "zero_grad clears");
	rt_model_destroy(a);
	rt_model_destroy(b);
}

/* ---- gradient window (zero 2) ------------------------------------------ */

/* The grad hook of a windowed model: adds each finished unit's gradient
 * (the params of that key) into sums[param], and records the keys. */
typedef struct capture {
	rt_model *m;
	float **sums;
	int keys[64], nkeys;
	int L;
} capture;

static int key_of(const char *name, int L)
{
	int n = 0;
	if (strncmp(name, "embed", 5) == 0)
		return -1;
	if (sscanf(name, "layers.%d.", &n) == 1)
		return n;
	return L;
}

static hexi_rc capture_hook(void *ctx, int layer)
{
	capture *c = ctx;
	if (c->nkeys < 64)
		c->keys[c->nkeys++] = layer;
	for (int i = 0; i < rt_model_nparams(c->m); i++) {
		rt_param *p = rt_model_param(c->m, i);
		if (key_of(p->name, c->L) != layer)
			continue;
		for (size_t j = 0; j < p->n; j++)
			c->sums[i][j] += p->g[j];
	}
	return HEXI_OK;
}

/* One and two micro-batches (two slots in flight) through a model with
 * and one without the window: the hook's per-unit gradients add up to the
 * accumulated ones (bitwise for one micro-batch: every unit starts from
 * zero in both), the window holds the largest unit, the keys come in
 * backward order. */
static void test_grad_window(void)
{
	hexi_model md = tiny(3, 16, 4, 2, 24, 11, 6);
	rt_model_config c = whole(md, 2);
	rt_model *a = make(&c);
	c.grad_window = 1;
	rt_model *w = make(&c);
	const int T = md.seq_len;
	int tok[2 * T], tgt[2 * T], n = rt_model_nparams(w), bits = 1;
	float *sums[32];
	capture cap = {.m = w, .sums = sums, .L = md.layers};
	size_t unit = 0, lay = 0;
	rt_model_mem ma, mw;
	double l = 0, worst = 0;
	hexi_rc rc = HEXI_OK;

	for (int i = 0; i < n; i++) {
		rt_param *p = rt_model_param(w, i);
		sums[i] = calloc(p->n, sizeof(float));
		if (key_of(p->name, md.layers) == 0)
			lay += p->n;
	}
	unit = lay;
	if (md.vocab * md.hidden + md.hidden > (int)unit)
		unit = (size_t)md.vocab * md.hidden + md.hidden;
	rt_model_set_grad_hook(w, capture_hook, &cap);
	batch(&md, 2, 5, tok, tgt);
	for (int k = 0; k < 2 && rc == HEXI_OK; k++) { /* k+1 micro-batches */
		rt_model *ms[2] = {a, w};
		rt_model_zero_grad(a);
		for (int i = 0; i < n; i++)
			memset(sums[i], 0, rt_model_param(w, i)->n * 4);
		cap.nkeys = 0;
		for (int j = 0; j < 2 && rc == HEXI_OK; j++)
			for (int b = 0; b <= k && rc == HEXI_OK; b++)
				rc = rt_model_forward(ms[j], b, 1, tok + b * T,
						      NULL, NULL, tgt + b * T,
						      0.5f, &l);
		for (int j = 0; j < 2 && rc == HEXI_OK; j++)
			for (int b = 0; b <= k && rc == HEXI_OK; b++)
				rc = rt_model_backward(ms[j], b, NULL, NULL);
		for (int i = 0; i < n && rc == HEXI_OK; i++) {
			rt_param *p = rt_model_param(a, i);
			double d = rel_diff(sums[i], p->g, p->n);
			worst = d > worst ? d : worst;
			if (k == 0 && memcmp(sums[i], p->g, p->n * 4) != 0)
				bits = 0;
		}
		if (k == 0)
			ok(bits, "window: one micro-batch, unit gradients "
				 "bit-identical to the full array");
	}
	is_int(rc, HEXI_OK, "window: forward/backward with the hook run");
	ok(worst <= 1e-6,
	   "window: two micro-batches sum to the accumulated "
	   "gradients (rel %.1e)",
	   worst);
	ok(cap.nkeys == 10 && cap.keys[0] == 3 && cap.keys[1] == 2 &&
	       cap.keys[3] == 0 && cap.keys[4] == -1 && cap.keys[5] == 3,
	   "window: hook keys head, layers 2..0, embedding, per backward");
	rt_model_mem_bytes(a, &ma);
	rt_model_mem_bytes(w, &mw);
	ok(mw.grads == unit * sizeof(float) && ma.grads > 3 * mw.grads &&
	       mw.params == ma.params,
	   "window: %zu gradient bytes (the largest unit) vs %zu", mw.grads,
	   ma.grads);
	for (int i = 0; i < n; i++)
		free(sums[i]);
	rt_model_destroy(a);
	rt_model_destroy(w);
}

/* ---- activation recompute ----------------------------------------------- */

/* One 1F1B-like step of a two-stage split of md with three slots in
 * flight (F0 F1 F2 B0 F3... drained), then AdamW; losses summed. */
static double split_steps(rt_model *s0, rt_model *s1, const hexi_model *md,
			  int steps)
{
	const int B = 2, T = md->seq_len, C = md->hidden;
	int tok[B * T], tgt[B * T];
	float x[3][B * T * C], dx[B * T * C];
	double loss = 0, l = 0;
	rt_adamw_opts o;
	hexi_rc rc = HEXI_OK;
	rt_adamw_defaults(&o);
	o.lr = 1e-2f;
	for (int st = 0; st < steps && !rc; st++) {
		rt_model_zero_grad(s0);
		rt_model_zero_grad(s1);
		for (int mb = 0; mb < 3 && !rc; mb++) {
			batch(md, B, 100 * st + 2 * mb, tok, tgt);
			rc = rt_model_forward(s0, mb, B, tok, NULL, x[mb], NULL,
					      0, NULL);
		}
		for (int mb = 0; mb < 3 && !rc; mb++) {
			batch(md, B, 100 * st + 2 * mb, tok, tgt);
			rc = rt_model_forward(s1, 0, B, NULL, x[mb], NULL, tgt,
					      1.0f / 6, &l);
			loss += l;
			rc = rc ? rc : rt_model_backward(s1, 0, NULL, dx);
			rc = rc ? rc : rt_model_backward(s0, mb, dx, NULL);
		}
		rc = rc ? rc : rt_model_adamw(s0, &o, st + 1);
		rc = rc ? rc : rt_model_adamw(s1, &o, st + 1);
	}
	if (rc)
		tap_bail(hexi_errmsg(rc));
	return loss;
}

static double param_diff(rt_model *m, rt_model *ref, int *bitwise)
{
	double worst = 0.0;
	for (int i = 0; i < rt_model_nparams(m); i++) {
		rt_param *p = rt_model_param(m, i), *q = rt_model_param(ref, i);
		double d = rel_diff(p->w, q->w, p->n);
		if (memcmp(p->w, q->w, p->n * sizeof(float)) != 0)
			*bitwise = 0;
		worst = d > worst ? d : worst;
	}
	return worst;
}

/* Recompute on vs off: the same losses and parameters (the recomputed
 * forward makes the same calls, so the bits agree), less activation
 * memory, for a first stage with three slots in flight and a last one. */
static void test_recompute(void)
{
	hexi_model md = tiny(4, 16, 4, 2, 24, 11, 6);
	rt_model *m[2][2];
	rt_model_mem mem[2][2];
	double loss[2];
	for (int r = 0; r < 2; r++) {
		rt_model_config c = whole(md, 3);
		c.recompute = r;
		c.layer_end = 3;
		c.has_head = 0;
		m[r][0] = make(&c);
		c.max_slots = 1;
		c.layer_begin = 3;
		c.layer_end = md.layers;
		c.has_embed = 0;
		c.has_head = 1;
		m[r][1] = make(&c);
		loss[r] = split_steps(m[r][0], m[r][1], &md, 3);
		rt_model_mem_bytes(m[r][0], &mem[r][0]);
		rt_model_mem_bytes(m[r][1], &mem[r][1]);
	}
	int bitwise = 1;
	double d = param_diff(m[1][0], m[0][0], &bitwise);
	double d1 = param_diff(m[1][1], m[0][1], &bitwise);
	d = d1 > d ? d1 : d;
	double rl = fabs(loss[1] - loss[0]) / fabs(loss[0]);
	ok(rl <= 1e-7, "recompute: same loss over 3 steps (%.12g vs %.12g)",
	   loss[1], loss[0]);
	ok(d <= 1e-7,
	   "recompute: same parameters after 3 AdamW steps "
	   "(rel %.1e, %s)",
	   d, bitwise ? "bit-identical" : "not bit-identical");
	/* stage 0: 3 slots of 3 layers -> 3 x 3 layer inputs + one layer's
	 * activations; stage 1 keeps its input, output and head. */
	const size_t BTC = (size_t)B_MAX * md.seq_len * md.hidden;
	ok(mem[1][0].acts < mem[0][0].acts / 3 &&
	       mem[1][0].acts >= 9 * BTC * sizeof(float),
	   "recompute: stage 0 activations %zu bytes, without %zu",
	   mem[1][0].acts, mem[0][0].acts);
	ok(mem[1][0].params == mem[0][0].params &&
	       mem[1][0].optim == 2 * mem[1][0].params &&
	       mem[1][0].params == rt_model_numel(m[1][0]) * sizeof(float),
	   "memory: params %zu, grads %zu, optimizer %zu bytes",
	   mem[1][0].params, mem[1][0].grads, mem[1][0].optim);
	for (int r = 0; r < 2; r++) {
		rt_model_destroy(m[r][0]);
		rt_model_destroy(m[r][1]);
	}
}

/* ---- optimizers and training ------------------------------------------- */

static void test_optim(void)
{
	float w[2] = {1.0f, -2.0f}, g[2] = {0.5f, -0.25f}, mm[2] = {0},
	      vv[2] = {0};
	rt_param p = {.w = w, .g = g, .m = mm, .v = vv, .n = 2, .ndim = 2};
	rt_adamw_opts o;
	rt_adamw_defaults(&o);
	o.weight_decay = 0.1f;
	rt_param_adamw(&p, &o, 1, 1);
	/* step 1: mhat = g, vhat = g^2, update = sign(g) (eps negligible) */
	is_near(w[0], 1.0 - 1e-3 * (1.0 + 0.1 * 1.0), 1e-7,
		"adamw step 1 with decay");
	is_near(w[1], -2.0 - 1e-3 * (-1.0 + 0.1 * -2.0), 1e-7,
		"adamw step 1 negative grad");
	is_near(mm[0], 0.05, 1e-7, "adamw first moment");
	is_near(vv[0], 0.05 * 0.25, 1e-7, "adamw second moment");

	hexi_model md = tiny(2, 16, 4, 2, 24, 11, 6);
	rt_model_config c = whole(md, 1);
	rt_model *m = make(&c);
	o.lr = -1.0f;
	is_int(rt_model_adamw(m, &o, 1), HEXI_ERR_INVAL, "adamw rejects lr<0");
	rt_adamw_defaults(&o);
	is_int(rt_model_adamw(m, &o, 0), HEXI_ERR_INVAL,
	       "adamw rejects step 0");
	o.lr = 1e-2f;
	const int B = 2, T = md.seq_len;
	int tok[B * T], tgt[B * T];
	double first = 0, last = 0;
	batch(&md, B, 0, tok, tgt); /* one batch, memorised */
	for (int step = 1; step <= 30; step++) {
		double l = 0;
		rt_model_zero_grad(m);
		if (rt_model_forward(m, 0, B, tok, NULL, NULL, tgt, 0.5f, &l) ||
		    rt_model_backward(m, 0, NULL, NULL) ||
		    rt_model_adamw(m, &o, step))
			tap_bail("training step failed");
		if (step == 1)
			first = l / B;
		last = l / B;
	}
	ok(last < 0.5 * first,
	   "30 AdamW steps on one batch: loss %.3f -> "
	   "%.3f",
	   first, last);
	rt_param *q = rt_model_param(m, 3);
	float w0 = q->w[0], g0 = q->g[0];
	rt_model_sgd(m, 0.5f);
	is_near(q->w[0], w0 - 0.5f * g0, 1e-7, "sgd update");
	double s = rt_model_grad_sumsq(m, NULL);
	rt_model_grad_scale(m, 0.5f);
	is_near(rt_model_grad_sumsq(m, NULL), 0.25 * s, 1e-6,
		"grad_scale scales sum of squares");
	unsigned char sel[64] = {0};
	sel[3] = 1;
	double s3 = 0;
	for (size_t i = 0; i < q->n; i++)
		s3 += (double)q->g[i] * q->g[i];
	is_near(rt_model_grad_sumsq(m, sel), s3, 1e-9, "grad_sumsq subset");
	rt_model_destroy(m);
}

static void test_data(void)
{
	int a[17], b[17], bad = 0;
	hexi_rt_data_sample(5, 13, 16, 99, a);
	hexi_rt_data_sample(5, 13, 16, 99, b);
	for (int i = 0; i < 17; i++)
		bad |= a[i] < 0 || a[i] >= 13;
	ok(!bad && memcmp(a, b, sizeof(a)) == 0,
	   "synthetic sample deterministic and in range");
	hexi_rt_data_sample(5, 13, 16, 100, b);
	ok(memcmp(a, b, sizeof(a)) != 0, "different samples differ");
}

/* ---- invalid configurations and calls ----------------------------------- */

static void test_errors(void)
{
	static const struct {
		const char *what;
		int field, value;
	} bad[] = {
	    {"tp > kv_heads", 0, 3},
	    {"tp rank >= tp", 1, 1},
	    {"layer_end > layers", 2, 3},
	    {"layer_begin < 0", 3, -1},
	    {"heads not multiple of kv", 4, 3},
	    {"odd head size", 5, 12},
	    {"max_slots 0", 6, 0},
	    {"max_batch 0", 7, 0},
	    {"vocab 1", 8, 1},
	    {"activations beyond 64 TiB", 9, 1 << 19},
	};
	hexi_model md = tiny(2, 16, 4, 2, 24, 11, 6);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rt_model_config c = whole(md, 1);
		rt_model *m = (rt_model *)(uintptr_t)1; /* must become NULL */
		switch (bad[i].field) {
		case 0:
			c.tp_size = bad[i].value;
			break;
		case 1:
			c.tp_rank = bad[i].value;
			break;
		case 2:
			c.layer_end = bad[i].value;
			break;
		case 3:
			c.layer_begin = bad[i].value;
			break;
		case 4:
			c.model.kv_heads = bad[i].value;
			break;
		case 5:
			c.model.hidden = bad[i].value;
			break;
		case 6:
			c.max_slots = bad[i].value;
			break;
		case 7:
			c.max_batch = bad[i].value;
			break;
		case 8:
			c.model.vocab = bad[i].value;
			break;
		case 9: /* 2^19 heads of size 2, T 2^10 (max_batch 1): huge att
			 */
			c.model.hidden = c.model.heads = c.model.kv_heads =
			    bad[i].value;
			c.model.hidden *= 2;
			c.model.seq_len = 1024;
			c.max_batch = 1;
			c.max_slots = 1024;
			break;
		}
		hexi_rc rc = rt_model_create(&c, NULL, &m);
		ok(rc != HEXI_OK && m == NULL && strlen(hexi_errmsg(rc)) > 10,
		   "rejects %s (%s)", bad[i].what, hexi_errmsg(rc));
	}
	rt_model_config c = whole(md, 1);
	rt_model *m = make(&c);
	int tok[6] = {0, 1, 2, 3, 4, 11}, tgt[6] = {1, 2, 3, 4, 5, 6};
	double l;
	hexi_rc rc = rt_model_forward(m, 0, 1, tok, NULL, NULL, tgt, 1, &l);
	ok(rc == HEXI_ERR_RANGE && strstr(hexi_errmsg(rc), "tokens[5]"),
	   "token out of vocabulary rejected: %s", hexi_errmsg(rc));
	tok[5] = 0;
	is_int(rt_model_forward(m, 1, 1, tok, NULL, NULL, tgt, 1, &l),
	       HEXI_ERR_RANGE, "slot out of range");
	is_int(rt_model_forward(m, 0, 3, tok, NULL, NULL, tgt, 1, &l),
	       HEXI_ERR_RANGE, "micro-batch above max_batch");
	is_int(rt_model_backward(m, 0, NULL, NULL), HEXI_ERR_INVAL,
	       "backward without forward");
	is_int(rt_model_forward(m, 0, 1, tok, NULL, NULL, tgt, 1, &l), HEXI_OK,
	       "forward");
	is_int(rt_model_forward(m, 0, 1, tok, NULL, NULL, tgt, 1, &l),
	       HEXI_ERR_INVAL, "forward into a busy slot");
	rt_model_release(m, 0);
	rc = rt_model_forward(m, 0, 1, NULL, NULL, NULL, tgt, 1, &l);
	ok(rc == HEXI_ERR_INVAL && strstr(hexi_errmsg(rc), "tokens"),
	   "first stage without tokens: %s", hexi_errmsg(rc));
	rt_model_destroy(m);
	rt_model_destroy(NULL);
}

int main(void)
{
	test_layout();
	test_fd(2);
	test_fd(4);
	test_pipeline_split();
	test_accumulate();
	test_grad_window();
	test_recompute();
	test_optim();
	test_data();
	test_errors();
	return tap_done();
}
