/*
 * test_model_tp.c - tensor parallelism simulated in one process.
 *
 * t shard models (tp_rank 0..t-1) run in lockstep on t threads; their
 * allreduce_sum callback is a pthread-barrier reduction that sums the ranks'
 * buffers in rank order, so every rank gets bit-identical results.  The
 * loss, the weights and the gradients (gathered by each shard's row range)
 * must equal those of the tp=1 model: loss within 1e-5 relative, every
 * tensor's gradient within ||g_t - g_1|| / ||g_1|| <= 1e-5, replicated
 * tensors bit-identical across ranks.  One step = two micro-batches of 2
 * samples accumulated with grad_scale 1/4, then SGD, then the loss of a
 * second step is compared too.  Cases: t = 2, 3 with MHA (kv 6) and GQA
 * (kv 3, giving uneven head splits), FFN 128 split unevenly by 3.
 * Then asymmetric TP across a pipeline split: stage 0 (embedding + layer 0)
 * on t0 ranks, stage 1 (layers 1-2 + head) on t1 ranks, t0|t1 = 2|3 and
 * 3|1, activations passed by hand, against the unsplit tp=1 model.
 */
#include "config.h"

#include "rt_model.h"
#include "tap.h"

#include <pthread.h>

#define MAXT 4
#define NMB  2 /* micro-batches per step */
#define MB   2 /* samples per micro-batch */

typedef struct group {
	int t;
	pthread_barrier_t bar;
	float *bufs[MAXT];
} group;

typedef struct rank_ctx {
	group *g;
	int rank;
	float *tmp; /* reduction result, sized for the largest buffer */
	size_t cap;
	rt_model *m;
	const hexi_model *md;
	double loss[2]; /* loss sum of step 1 and step 2 */
	hexi_rc rc;
	/* pipeline case: one phase of one stage per thread run */
	int phase;
	const int *tok, *tgt;
	const float *in;
	float *out; /* (MB,T,C) */
} rank_ctx;

static hexi_rc allreduce(void *ctx, float *buf, size_t n)
{
	rank_ctx *c = ctx;
	group *g = c->g;
	if (n > c->cap)
		return hexi_error(HEXI_ERR_RANGE, "test allreduce: %zu > %zu",
				  n, c->cap);
	g->bufs[c->rank] = buf;
	pthread_barrier_wait(&g->bar);
	for (size_t i = 0; i < n; i++) {
		float s = g->bufs[0][i];
		for (int r = 1; r < g->t; r++)
			s += g->bufs[r][i];
		c->tmp[i] = s;
	}
	pthread_barrier_wait(&g->bar); /* everyone has read every buffer */
	memcpy(buf, c->tmp, n * sizeof(float));
	return HEXI_OK;
}

static void get_batch(const hexi_model *md, int mb, int *tok, int *tgt)
{
	int T = md->seq_len;
	int buf[T + 1];
	for (int b = 0; b < MB; b++) {
		hexi_rt_data_sample(11, md->vocab, T, mb * MB + b, buf);
		memcpy(tok + b * T, buf, (size_t)T * sizeof(int));
		memcpy(tgt + b * T, buf + 1, (size_t)T * sizeof(int));
	}
}

/* Step 1: NMB micro-batches (two slots in flight), then SGD; step 2: loss
 * only.  Gradients of step 1 are left in the model for comparison, the
 * weights after SGD too. */
static hexi_rc run_steps(rt_model *m, const hexi_model *md, double loss[2])
{
	const int T = md->seq_len;
	int tok[NMB][MB * T], tgt[NMB][MB * T];
	hexi_rc rc = HEXI_OK;
	for (int i = 0; i < NMB; i++)
		get_batch(md, i, tok[i], tgt[i]);
	rt_model_zero_grad(m);
	loss[0] = loss[1] = 0.0;
	for (int i = 0; i < NMB && !rc; i++) {
		double l = 0.0;
		rc = rt_model_forward(m, i, MB, tok[i], NULL, NULL, tgt[i],
				      1.0f / (NMB * MB), &l);
		loss[0] += l;
	}
	for (int i = NMB - 1; i >= 0 && !rc; i--)
		rc = rt_model_backward(m, i, NULL, NULL);
	if (rc)
		return rc;
	/* SGD changes the weights; the grads stay for the comparison */
	rt_model_sgd(m, 0.1f);
	rc = rt_model_forward(m, 0, MB, tok[0], NULL, NULL, tgt[0], 1.0f,
			      &loss[1]);
	if (!rc)
		rc = rt_model_release(m, 0);
	return rc;
}

static void *rank_main(void *arg)
{
	rank_ctx *c = arg;
	c->rc = run_steps(c->m, c->md, c->loss);
	if (c->rc)
		fprintf(stderr, "rank %d: %s\n", c->rank, hexi_errmsg(c->rc));
	return NULL;
}

static rt_model_config config(const hexi_model *md, int t, int r)
{
	rt_model_config c;
	memset(&c, 0, sizeof(c));
	c.model = *md;
	c.layer_end = md->layers;
	c.tp_rank = r;
	c.tp_size = t;
	c.has_embed = c.has_head = 1;
	c.max_slots = NMB;
	c.max_batch = MB;
	c.seed = 2024;
	return c;
}

/* Relative difference of p's rows against the same rows of q. */
static double rows_diff(const float *p, const rt_param *whole,
			const float *qbase, const rt_param *shard)
{
	size_t cols = (size_t)whole->shape[1];
	const float *q = qbase + (size_t)shard->row_begin * cols;
	double num = 0, den = 0;
	for (size_t i = 0; i < shard->n; i++) {
		num += ((double)p[i] - q[i]) * ((double)p[i] - q[i]);
		den += (double)q[i] * q[i];
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Compare every tensor the group holds with the tp=1 model; check that
 * the group's shards tile its rows. */
static void compare(rank_ctx *rk, int t, rt_model *ref, const char *tag)
{
	double gworst = 0, wworst = 0;
	int rep_same = 1, covered = 1;
	const char *gname = "";
	for (int i = 0; i < rt_model_nparams(ref); i++) {
		rt_param *q = rt_model_param(ref, i);
		int64_t next_row = 0;
		if (!rt_model_find_param(rk[0].m, q->name))
			continue; /* another pipeline stage holds it */
		for (int r = 0; r < t; r++) {
			rt_param *p = rt_model_find_param(rk[r].m, q->name);
			if (!p || p->shape[0] != q->shape[0] ||
			    p->row_begin != next_row) {
				covered = 0;
				continue;
			}
			next_row = p->replicated_in_tp ? 0 : p->row_end;
			double dg = rows_diff(p->g, q, q->g, p);
			double dw = rows_diff(p->w, q, q->w, p);
			if (dg > gworst) {
				gworst = dg;
				gname = q->name;
			}
			wworst = dw > wworst ? dw : wworst;
			rt_param *p0 = rt_model_find_param(rk[0].m, q->name);
			if (p->replicated_in_tp &&
			    memcmp(p->g, p0->g, p->n * sizeof(float)))
				rep_same = 0;
		}
		if (!q->replicated_in_tp && next_row != q->shape[0])
			covered = 0;
	}
	ok(covered, "%s: shards tile every tensor's rows exactly", tag);
	ok(gworst <= 1e-5, "%s: grads equal tp=1 (worst %.2e, %s)", tag, gworst,
	   gname);
	ok(wworst <= 1e-5, "%s: weights equal tp=1 (worst %.2e)", tag, wworst);
	ok(rep_same, "%s: replicated grads bit-identical across ranks", tag);
}

static void run_case(int t, int kv)
{
	hexi_model md;
	memset(&md, 0, sizeof(md));
	md.layers = 2;
	md.hidden = 48;
	md.heads = 6;
	md.kv_heads = kv;
	md.ffn = 128;
	md.vocab = 64;
	md.seq_len = 16;
	char tag[32];
	snprintf(tag, sizeof(tag), "tp %d kv %d", t, kv);

	rt_model_config c = config(&md, 1, 0);
	rt_model *ref = NULL;
	double lref[2];
	if (rt_model_create(&c, NULL, &ref) || run_steps(ref, &md, lref))
		tap_bail("tp=1 reference failed");

	group g = {.t = t};
	rank_ctx rk[MAXT];
	pthread_t th[MAXT];
	memset(rk, 0, sizeof(rk));
	pthread_barrier_init(&g.bar, NULL, (unsigned)t);
	for (int r = 0; r < t; r++) {
		rk[r].g = &g;
		rk[r].rank = r;
		rk[r].md = &md;
		rk[r].cap = (size_t)MB * md.seq_len * md.hidden;
		rk[r].tmp = malloc(rk[r].cap * sizeof(float));
		rt_tp_comm tp = {allreduce, &rk[r]};
		c = config(&md, t, r);
		if (!rk[r].tmp || rt_model_create(&c, &tp, &rk[r].m))
			tap_bail("shard create failed");
	}
	for (int r = 0; r < t; r++)
		pthread_create(&th[r], NULL, rank_main, &rk[r]);
	int fails = 0;
	for (int r = 0; r < t; r++) {
		pthread_join(th[r], NULL);
		fails += rk[r].rc != HEXI_OK;
	}
	is_int(fails, 0, "%s: all ranks ran", tag);
	for (int s = 0; s < 2; s++) {
		double worst = 0;
		for (int r = 0; r < t; r++) {
			double d = fabs(rk[r].loss[s] - lref[s]) / lref[s];
			worst = d > worst ? d : worst;
		}
		ok(worst <= 1e-5,
		   "%s: step %d loss %.6f equals tp=1 %.6f "
		   "(rel %.1e)",
		   tag, s + 1, rk[0].loss[s], lref[s], worst);
	}
	compare(rk, t, ref, tag);
	for (int r = 0; r < t; r++) {
		rt_model_destroy(rk[r].m);
		free(rk[r].tmp);
	}
	pthread_barrier_destroy(&g.bar);
	rt_model_destroy(ref);
}

/* ---- asymmetric TP across two pipeline stages ------------------------- */

/* Stage 0 forward (phase 0) and backward (2); stage 1 forward+backward (1). */
static void *phase_main(void *arg)
{
	rank_ctx *c = arg;
	rt_model *m = c->m;
	switch (c->phase) {
	case 0:
		c->rc = rt_model_forward(m, 0, MB, c->tok, NULL, c->out, NULL,
					 0.0f, NULL);
		break;
	case 1:
		c->rc = rt_model_forward(m, 0, MB, NULL, c->in, NULL, c->tgt,
					 1.0f / MB, &c->loss[0]);
		if (!c->rc)
			c->rc = rt_model_backward(m, 0, NULL, c->out);
		break;
	default:
		c->rc = rt_model_backward(m, 0, c->in, NULL);
	}
	return NULL;
}

/* Run phase on the t ranks of one group; 1 if all ranks produced the
 * same out (bitwise) and succeeded. */
static int run_phase(rank_ctx *rk, int t, int phase, size_t nout)
{
	pthread_t th[MAXT];
	int good = 1;
	for (int r = 0; r < t; r++) {
		rk[r].phase = phase;
		pthread_create(&th[r], NULL, phase_main, &rk[r]);
	}
	for (int r = 0; r < t; r++) {
		pthread_join(th[r], NULL);
		good &= rk[r].rc == HEXI_OK;
		if (phase != 2 && nout)
			good &=
			    !memcmp(rk[r].out, rk[0].out, nout * sizeof(float));
	}
	return good;
}

typedef struct stage_group {
	group g;
	rank_ctx rk[MAXT];
} stage_group;

static void stage_init(stage_group *sg, const hexi_model *md, int t, int l0,
		       int l1)
{
	size_t n = (size_t)MB * md->seq_len * md->hidden;
	memset(sg, 0, sizeof(*sg));
	sg->g.t = t;
	pthread_barrier_init(&sg->g.bar, NULL, (unsigned)t);
	for (int r = 0; r < t; r++) {
		rank_ctx *c = &sg->rk[r];
		rt_model_config cfg = config(md, t, r);
		rt_tp_comm tp = {allreduce, c};
		cfg.layer_begin = l0;
		cfg.layer_end = l1;
		cfg.has_embed = l0 == 0;
		cfg.has_head = l1 == md->layers;
		c->g = &sg->g;
		c->rank = r;
		c->cap = n;
		c->tmp = malloc(n * sizeof(float));
		c->out = malloc(n * sizeof(float));
		if (!c->tmp || !c->out || rt_model_create(&cfg, &tp, &c->m))
			tap_bail("stage shard create failed");
	}
}

static void stage_fini(stage_group *sg)
{
	for (int r = 0; r < sg->g.t; r++) {
		rt_model_destroy(sg->rk[r].m);
		free(sg->rk[r].tmp);
		free(sg->rk[r].out);
	}
	pthread_barrier_destroy(&sg->g.bar);
}

/* Stage 0 = layers [0,1) + embedding on t0 ranks, stage 1 = [1,3) + head
 * on t1 ranks; activations and their gradients passed by hand. */
static void run_pipeline_case(int t0, int t1)
{
	hexi_model md = {.layers = 3,
			 .hidden = 48,
			 .heads = 6,
			 .kv_heads = 3,
			 .ffn = 128,
			 .vocab = 64,
			 .seq_len = 16};
	const int T = md.seq_len;
	int tok[MB * T], tgt[MB * T];
	char tag[48];
	snprintf(tag, sizeof(tag), "pipeline tp %d|%d", t0, t1);
	get_batch(&md, 0, tok, tgt);

	rt_model_config c = config(&md, 1, 0);
	rt_model *ref = NULL;
	double lref = 0;
	if (rt_model_create(&c, NULL, &ref) ||
	    rt_model_forward(ref, 0, MB, tok, NULL, NULL, tgt, 1.0f / MB,
			     &lref) ||
	    rt_model_backward(ref, 0, NULL, NULL))
		tap_bail("tp=1 reference failed");

	stage_group *s0 = malloc(sizeof(*s0)), *s1 = malloc(sizeof(*s1));
	if (!s0 || !s1)
		tap_bail("out of memory");
	stage_init(s0, &md, t0, 0, 1);
	stage_init(s1, &md, t1, 1, md.layers);
	size_t n = (size_t)MB * T * md.hidden;
	for (int r = 0; r < t0; r++) {
		s0->rk[r].tok = tok;
		s0->rk[r].in = s1->rk[0].out; /* dy for the backward */
	}
	for (int r = 0; r < t1; r++) {
		s1->rk[r].tgt = tgt;
		s1->rk[r].in = s0->rk[0].out;
	}
	ok(run_phase(s0->rk, t0, 0, n),
	   "%s: stage 0 forward, identical "
	   "outputs on its ranks",
	   tag);
	ok(run_phase(s1->rk, t1, 1, n),
	   "%s: stage 1 forward+backward, "
	   "identical input grads on its ranks",
	   tag);
	ok(run_phase(s0->rk, t0, 2, 0), "%s: stage 0 backward", tag);
	is_near(s1->rk[0].loss[0], lref, 1e-5, "%s: loss equals unsplit tp=1",
		tag);
	snprintf(tag, sizeof(tag), "pipeline tp %d|%d stage 0", t0, t1);
	compare(s0->rk, t0, ref, tag);
	snprintf(tag, sizeof(tag), "pipeline tp %d|%d stage 1", t0, t1);
	compare(s1->rk, t1, ref, tag);
	stage_fini(s0);
	stage_fini(s1);
	free(s0);
	free(s1);
	rt_model_destroy(ref);
}

int main(void)
{
	run_case(2, 6);
	run_case(3, 6);
	run_case(2, 3);
	run_case(3, 3);
	run_pipeline_case(2, 3);
	run_pipeline_case(3, 1);
	return tap_done();
}
