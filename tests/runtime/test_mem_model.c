/*
 * test_mem_model.c - the hexiscale cost model's memory per stage on the
 * "cpu" type (scheduler/cost_hexi.c) against what the CPU runtime's stage
 * shards allocate (rt_model_mem_bytes, plus the trainer's two pipeline
 * buffers): a 3-stage pipeline with TP 1, 3 (uneven KV heads) and 2, four
 * micro-batches (1F1B keeps 3, 2, 1 in flight), recompute on and off.
 * The largest TP share of each stage must match within 1 % (the
 * runtime's 64-byte alignment of each tensor is the rest).
 */
#include "config.h"

#include "hexi_sched.h"
#include "rt_model.h"
#include "tap.h"

#define NS 3

static const int tps[NS] = {1, 3, 2}, layers[NS] = {1, 4, 3};

static hexi_rc noop_sum(void *ctx, float *buf, size_t n)
{
	(void)ctx;
	(void)buf;
	(void)n;
	return HEXI_OK;
}

static hexi_plan *make_plan(const hexi_model *md, int recompute, int B, int m)
{
	hexi_cluster *c = NULL;
	hexi_plan *p = NULL;
	hexi_train tr;
	int rank = 0, l = 0;
	hexi_rc rc = hexi_cluster_create(NS, NULL, &c);

	hexi_train_defaults(&tr);
	tr.global_batch = B * m;
	tr.micro_batch = B;
	tr.recompute = recompute;
	tr.reserve_gib = 0;
	for (int s = 0; rc == HEXI_OK && s < NS; s++) {
		char nm[8];
		snprintf(nm, sizeof(nm), "n%d", s + 1);
		rc = hexi_cluster_set_node(c, s, nm, "cpu", tps[s], NULL, 0);
	}
	if (rc == HEXI_OK) {
		c->inter_bw_gbps = 10;
		rc = hexi_cluster_validate(c);
	}
	if (rc == HEXI_OK)
		rc = hexi_plan_new(c, md, &tr, 1, &p);
	if (rc != HEXI_OK)
		tap_bail(hexi_errmsg(rc));
	hexi_pipeline *pp = &p->pipelines[0];
	pp->nstages = NS;
	pp->batch = B * m;
	pp->micro_batches = m;
	pp->stages = calloc(NS, sizeof(hexi_stage));
	for (int s = 0; s < NS; s++) {
		hexi_stage *st = &pp->stages[s];
		st->layer_begin = l;
		l += layers[s];
		st->layer_end = l;
		st->tp = tps[s];
		st->devices = calloc((size_t)tps[s], sizeof(hexi_device));
		for (int d = 0; d < tps[s]; d++) {
			st->devices[d].node = s;
			st->devices[d].gpu = d;
			st->devices[d].rank = rank++;
		}
	}
	p->world_size = rank;
	rc = hexi_plan_hash(p);
	if (rc == HEXI_OK)
		rc = hexi_plan_validate(p);
	hexi_cluster_destroy(c);
	if (rc != HEXI_OK)
		tap_bail(hexi_errmsg(rc));
	return p;
}

/* Largest total of the stage's TP ranks: model bytes + 2 pipeline
 * buffers (train.c). */
static double measured(const hexi_model *md, int s, int recompute, int B, int m)
{
	rt_tp_comm tp = {.allreduce_sum = noop_sum, .ctx = NULL};
	double worst = 0;
	int l0 = 0;

	for (int i = 0; i < s; i++)
		l0 += layers[i];
	for (int r = 0; r < tps[s]; r++) {
		rt_model_config c;
		rt_model *mod = NULL;
		rt_model_mem mm;
		memset(&c, 0, sizeof(c));
		c.model = *md;
		c.layer_begin = l0;
		c.layer_end = l0 + layers[s];
		c.tp_rank = r;
		c.tp_size = tps[s];
		c.has_embed = s == 0;
		c.has_head = s == NS - 1;
		c.max_slots = NS - s < m ? NS - s : m;
		c.max_batch = B;
		c.seed = 1;
		c.recompute = recompute;
		if (rt_model_create(&c, &tp, &mod) != HEXI_OK)
			tap_bail(hexi_errmsg(HEXI_ERR_INVAL));
		rt_model_mem_bytes(mod, &mm);
		double t = (double)(mm.params + mm.grads + mm.optim + mm.acts +
				    mm.work) +
			   2.0 * 4.0 * B * md->seq_len * md->hidden;
		worst = t > worst ? t : worst;
		rt_model_destroy(mod);
	}
	return worst;
}

int main(void)
{
	hexi_model md;
	const int B = 2, m = 4;

	memset(&md, 0, sizeof(md));
	snprintf(md.name, sizeof(md.name), "memtest");
	md.layers = 8;
	md.hidden = 64;
	md.heads = 8;
	md.kv_heads = 4;
	md.ffn = 96;
	md.vocab = 128;
	md.seq_len = 32;
	for (int rc = 0; rc <= 1; rc++) {
		hexi_plan *p = make_plan(&md, rc, B, m);
		hexi_stage_report rep[NS];
		hexi_rc r = hexi_simulate(p, HEXI_COST_HEXISCALE, rep);
		is_int(r, HEXI_OK, "simulate (recompute %d)", rc);
		for (int s = 0; s < NS; s++) {
			double pred = rep[s].mem_gib * 1073741824.0;
			double meas = measured(&md, s, rc, B, m);
			double dev = (pred - meas) / meas;
			ok(fabs(dev) <= 0.01,
			   "recompute %d stage %d (TP %d, %d layers): "
			   "predicted %.0f bytes, allocated %.0f (%+.2f %%)",
			   rc, s, tps[s], layers[s], pred, meas, 100 * dev);
		}
		hexi_plan_destroy(p);
	}
	return tap_done();
}
