/*
 * test_cost.c - the reference cost model's known answer (issue 3) and the
 * building blocks of both models.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sched_fixture.h"
#include "sched_test.h"
#include "tap.h"

/* The paper's case-study numbers: llama2-13b, one pipeline of four TP=1
 * stages [A100, 4090, 4090, 3090], layers [25,5,5,5], b = 1, m = 10. */
static void known_answer(void)
{
	const fx_node nd[3] = {{"a100-80g", 3, 200, 312, 1, 80},
			       {"rtx4090", 3, 2, 165.2, 1, 24},
			       {"rtx3090", 2, 2, 80, 1, 24}};
	const double want[4] = {0.9368, 0.3634, 0.4025, 0.6698};
	hexi_model m;
	hexi_train t;
	fx f;
	hexi_pipeline pl = {0};
	hexi_stage st[4];
	hexi_stage_report rep[4];
	sched_eval ev;

	fx_model(&m, "llama2-13b", 40, 5120, 40, 40, 13824);
	fx_train(&t, 10, 1);
	fx_init(&f, nd, 3, 1.0, &m, &t, HEXI_COST_REFERENCE);
	fx_stage(&st[0], 0, 25, 0, 0, 1);
	fx_stage(&st[1], 25, 30, 1, 0, 1);
	fx_stage(&st[2], 30, 35, 1, 1, 1);
	fx_stage(&st[3], 35, 40, 2, 0, 1);
	pl.nstages = 4;
	pl.stages = st;
	pl.batch = 10;
	pl.micro_batches = 10;
	is_int(sched_evaluate(&f.x, &pl, 1, &ev, rep), HEXI_OK,
	       "reference: evaluate");
	for (int s = 0; s < 4; s++)
		ok(fabs(st[s].time_s - want[s]) < 0.5e-4,
		   "reference: stage %d cost %.4f s (want %.4f)", s,
		   st[s].time_s, want[s]);
	ok(fabs(pl.time_s - 11.3776) < 0.5e-4, "reference: T_pipe %.4f s",
	   pl.time_s);
	ok(fabs(ev.iter_s - 20.4797) < 0.5e-4, "reference: T_iter %.4f s",
	   ev.iter_s);
	ok(fabs(100 * ev.mfu - 13.151) < 0.5e-3, "reference: MFU %.3f %%",
	   100 * ev.mfu);
	ok(fabs(ev.tokens_per_s - 2000.03) < 0.5e-2, "reference: %.2f tokens/s",
	   ev.tokens_per_s);
	is_near(ev.dp_sync_s, 0, 1e-12, "reference: no DP sync, one pipeline");
	is_near(rep[0].compute_s + rep[0].tp_comm_s + rep[0].pp_comm_s +
		    rep[0].bubble_s,
		pl.time_s, 1e-12, "report: stage 0 parts add up to T_pipe");
	/* the send term alone: 2 * 40 MiB / 1 GiB/s */
	is_near(rep[0].pp_comm_s / 10, 2 * 41943040.0 / 1073741824.0, 1e-12,
		"reference: PP send A100 -> 4090 per micro-batch");
	for (int s = 0; s < 4; s++)
		free(st[s].devices);
	fx_fini(&f);
}

/* The same through the real cluster parser, catalog and hexi_simulate()
 * (examples/clusters/reference-known-answer.json). */
static void known_answer_simulate(void)
{
	static const char *json =
	    "{\"format\":\"hexiscale-cluster\",\"version\":1,\"nodes\":["
	    "{\"name\":\"a100\",\"gpu\":\"a100\",\"count\":3,"
	    "\"intra_bw_gbps\":200},"
	    "{\"name\":\"r4090\",\"gpu\":\"rtx4090\",\"count\":3,"
	    "\"intra_bw_gbps\":2},"
	    "{\"name\":\"r3090\",\"gpu\":\"rtx3090\",\"count\":2,"
	    "\"intra_bw_gbps\":2}],\"inter_bw_gbps\":1}";
	const tpipe pp = {10,
			  10,
			  {{0, 1, 0, 0, 25},
			   {1, 1, 0, 25, 30},
			   {1, 1, 1, 30, 35},
			   {2, 1, 0, 35, 40}}};
	hexi_cluster *c = tcluster(json);
	hexi_plan *p = tplan(c, "llama2-13b", 1, &pp);
	hexi_stage_report rep[4];
	hexi_rc rc;

	p->train.recompute = 1;
	p->train.micro_batch = 1;
	rc = hexi_simulate(p, HEXI_COST_REFERENCE, rep);
	is_int(rc, HEXI_OK, "hexi_simulate reference: %s", hexi_errmsg(rc));
	ok(fabs(p->pipelines[0].time_s - 11.3776) < 0.5e-4,
	   "hexi_simulate reference: T_pipe %.4f", p->pipelines[0].time_s);
	ok(fabs(p->pred.iter_s - 20.4797) < 0.5e-4,
	   "hexi_simulate reference: T_iter %.4f", p->pred.iter_s);
	ok(fabs(100 * p->pred.mfu - 13.151) < 0.5e-3,
	   "hexi_simulate reference: MFU %.3f%%", 100 * p->pred.mfu);
	ok(fabs(p->pred.tokens_per_s - 2000.03) < 0.5e-2,
	   "hexi_simulate reference: %.2f tokens/s", p->pred.tokens_per_s);
	ok(fabs(p->pipelines[0].stages[3].time_s - 0.6698) < 0.5e-4,
	   "hexi_simulate reference: 3090 stage %.4f s",
	   p->pipelines[0].stages[3].time_s);
	is_str(p->cost_model, "reference", "hexi_simulate records the model");
	rc = hexi_simulate(p, HEXI_COST_HEXISCALE, rep);
	is_int(rc, HEXI_OK, "hexi_simulate hexiscale: ok");
	ok(p->pred.iter_s > 0 && p->pred.mfu > 0 && p->pred.mfu < 1,
	   "hexi_simulate hexiscale: iteration %.3f s, MFU %.2f%%",
	   p->pred.iter_s, 100 * p->pred.mfu);
	ok(rep[0].mem_gib > 0 && rep[0].mem_cap_gib == 80.0,
	   "hexi_simulate hexiscale: memory %.1f of %.0f GiB on the A100",
	   rep[0].mem_gib, rep[0].mem_cap_gib);
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
}

/* The chunk groups of hexi_layout_create() (the runtime's) against the
 * cost model's own: per-rank sum of ring all-reduces over the chunks of one
 * layer's sharded tensors, pipelines with TP 2 and 3 on one node, no
 * latency (so splitting a chunk per tensor changes nothing). */
static void layout_chunks_match(void)
{
	static const char *json =
	    "{\"format\":\"hexiscale-cluster\",\"version\":1,\"nodes\":["
	    "{\"name\":\"n\",\"gpu\":\"a100\",\"count\":5,"
	    "\"intra_bw_gbps\":100}],\"intra_lat_s\":0}";
	const tpipe pp[2] = {{4, 4, {{0, 2, 0, 0, 80}}},
			     {4, 4, {{0, 3, 2, 0, 80}}}};
	hexi_cluster *c = tcluster(json);
	hexi_plan *p = tplan(c, "llama2-70b", 2, pp);
	hexi_layout *lay = NULL;
	sched_ctx x;
	int h0[2] = {0, 1}, h1[3] = {2, 3, 4}, tps[2] = {2, 3};
	const int *hold[2] = {h0, h1};
	double load[5] = {0}, got, want = 0, norm;

	is_int(hexi_layout_create(p, &lay), HEXI_OK, "layout of a 2+3 plan");
	is_int(sched_ctx_init(&x, p->cluster, &p->model, &p->train,
			      HEXI_COST_HEXISCALE),
	       HEXI_OK, "context of the plan");
	got = sched_hexi_layer_sync_s(&x, 2, hold, tps, load);
	memset(load, 0, sizeof(load));
	for (int k = 0; lay && k < lay->nchunks; k++) {
		const hexi_chunk *ch = &lay->chunks[k];
		const hexi_tensor_layout *t = &lay->tensors[ch->tensor];
		double bytes = (ch->row_end - ch->row_begin) *
			       (t->ndim == 2 ? (double)t->shape[1] : 1.0) * 2;
		double ar = 2.0 * (ch->nranks - 1) / ch->nranks * bytes / 100e9;
		if (strncmp(t->name, "layers.0.", 9) || t->ndim != 2)
			continue;
		for (int i = 0; i < ch->nranks; i++)
			load[ch->ranks[i]] += ar;
	}
	for (int r = 0; r < 5; r++)
		want = load[r] > want ? load[r] : want;
	/* the model adds the two norm vectors on the TP-rank-0 holders */
	norm = 2.0 * 8192 * 2 / 100e9;
	ok(want > 0 && fabs(got - want) <= norm * 1.0001,
	   "chunked sync = hexi_layout_create's chunk groups (%.6f vs %.6f s)",
	   got, want);
	sched_ctx_fini(&x);
	hexi_layout_destroy(lay);
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
}

static void gpipe_and_1f1b(void)
{
	const double c[3] = {1, 3, 2};

	/* columns: {0} {0,1} {0,1,2} {1,2} {2} with m = 3 */
	is_near(sched_ref_pipe_s(c, 3, 3), 1 + 3 + 3 + 3 + 2, 1e-12,
		"GPipe slot sum, m = S");
	/* m = 1: every column one stage */
	is_near(sched_ref_pipe_s(c, 3, 1), 6, 1e-12, "GPipe slot sum, m = 1");
	is_near(sched_hexi_pipe_s(c, 3, 5), 6 + 4 * 3, 1e-12,
		"1F1B: sum + (m-1) max");
}

/* Two TP groups of 2 on one node: 4 all-reduces of b s C 2 bytes per layer
 * (6 with recompute) in the hexiscale model. */
static void hexi_tp_and_mem(void)
{
	const fx_node nd[1] = {{"x", 4, 100, 100, 0.5, 80}};
	hexi_model m;
	hexi_train t;
	fx f;
	int g[2] = {0, 1}, one[1] = {0};
	sched_sdesc d1 = {.dev = one,
			  .tp = 1,
			  .inflight = 1,
			  .mb = 1,
			  .recompute = 1,
			  .dp = 1};
	sched_sdesc d2 = {
	    .dev = g, .tp = 2, .inflight = 1, .mb = 1, .recompute = 1, .dp = 1};
	sched_scost k1, k2;
	double act = 4096.0 * 1024 * 2;

	fx_model(&m, "tiny", 4, 1024, 16, 16, 4096);
	fx_train(&t, 8, 1);
	fx_init(&f, nd, 1, 10, &m, &t, HEXI_COST_HEXISCALE);
	sched_hexi_stage(&f.x, &d1, &k1);
	sched_hexi_stage(&f.x, &d2, &k2);
	is_near(k1.tp_layer_s, 0, 0, "hexi: TP=1 has no TP traffic");
	is_near(k2.tp_layer_s, 6 * (2.0 * 1 / 2 * act / 100e9), 1e-12,
		"hexi: 6 ring all-reduces per layer with recompute");
	is_near(k2.comp_layer_s, k1.comp_layer_s / 2, 1e-12,
		"hexi: TP=2 halves compute on equal GPUs");
	ok(k2.mem_layer_b < k1.mem_layer_b, "hexi: TP=2 lowers memory/layer");
	/* FLOPs per layer fwd: 8 T C^2 (q,k,v,o) + 6 T C F (SwiGLU) +
	 * 4 T^2 C (scores and values over the full T x T: the MFU
	 * convention), MHA.  Time: the GEMMs at the GEMM rate, the causal
	 * attention core (2 T (T+1) C) at the fused path's rates, forward
	 * twice (recompute) and backward 2.5x; no memory bandwidth here, so
	 * no traffic term. */
	{
		double T = 4096, C = 1024, F = 4096;
		double gemm = 8 * T * C * C + 6 * T * C * F;
		double fwd = gemm + 4 * T * T * C;
		double core = 2 * T * (T + 1) * C;
		double want = 3 * (4 * fwd + 2 * T * C * 32000);
		is_near(sched_model_flops(&m), want, 1e-12,
			"hexi: model FLOPs per sample");
		is_near(k1.comp_layer_s,
			4 * gemm / (100e12 * 0.5) +
			    2 * core / (100e12 * SCHED_ATTN_EFF) +
			    2.5 * core / (100e12 * SCHED_ATTN_BWD_EFF),
			1e-12,
			"hexi: compute of one layer (fwd+bwd+recompute), "
			"attention at the fused rates");
		/* the cpu type keeps the attention core in its GEMMs, full
		 * square, backward 2x (the CPU runtime's per-head sgemms) */
		f.x.dev[0].cpu = 1;
		sched_hexi_stage(&f.x, &d1, &k2);
		is_near(k2.comp_layer_s, 4 * fwd / (100e12 * 0.5), 1e-12,
			"hexi: cpu type, attention core at the GEMM rate");
		f.x.dev[0].cpu = 0;
	}
	f.x.t.recompute = 0;
	d1.recompute = 0; /* a stage's own setting, as its pipeline's */
	sched_hexi_stage(&f.x, &d1, &k2);
	ok(k2.mem_layer_b > k1.mem_layer_b,
	   "hexi: no recompute keeps more activations");
	fx_fini(&f);
}

/* The attention term of one layer, one sample, TP 1 (doc/COSTMODEL.md
 * "Attention"): x's model, recompute rc, the GPU of dev 0. */
static double stage_comp(fx *f, int rc)
{
	int one[1] = {0};
	sched_sdesc d = {.dev = one,
			 .tp = 1,
			 .inflight = 1,
			 .mb = 1,
			 .recompute = rc,
			 .dp = 1};
	sched_scost k;

	sched_hexi_stage(&f->x, &d, &k);
	return k.comp_layer_s;
}

/* GEMM and element-wise part of stage_comp: what is left when the
 * attention core is taken out (GPU counts, eb bytes per element). */
static double gemm_eb(const hexi_model *m, double P, double e, double bw,
		      int rc, double eb)
{
	double T = m->seq_len, C = m->hidden, F = m->ffn;
	double d = C / m->heads, hk = (m->heads + m->kv_heads) * d;
	double g = 2 * T * C * (m->heads * d + 2 * m->kv_heads * d) +
		   2 * T * m->heads * d * C + 6 * T * C * F;
	double el =
	    (10 * C + 2 * hk + 3 * F) * (rc ? 2 : 1) + 12 * C + 2 * hk + 5 * F;

	return (rc ? 4 : 3) * g / (P * e) + (bw > 0 ? T * el * eb / bw : 0);
}

static double gemm_part(const hexi_model *m, double P, double e, double bw,
			int rc)
{
	return gemm_eb(m, P, e, bw, rc, 2);
}

static void attention_term(void)
{
	const fx_node nd[1] = {{"x", 1, 100, 400, 0.8, 80}};
	const double P = 400e12, bw = 2000e9;
	hexi_model m;
	hexi_train t;
	fx f;
	double T, q, kv, st, core, io, a, b, c, want;

	/* GQA: 32 query heads, 8 KV heads, head size 128 */
	fx_model(&m, "gqa", 4, 4096, 32, 8, 11008);
	m.seq_len = 2048;
	fx_train(&t, 8, 1);
	fx_init(&f, nd, 1, 10, &m, &t, HEXI_COST_HEXISCALE);
	f.x.dev[0].attn_eff = 0.6;
	f.x.dev[0].attn_bwd_eff = 0.45;
	f.x.dev[0].attn_own_eff = 0.02;
	f.x.dev[0].cc = 9.0;
	T = 2048;
	core = 2 * T * (T + 1) * 4096; /* causal pairs x 4 d, all heads */

	/* fused: forward once (no recompute), backward 2.5x */
	a = stage_comp(&f, 0) - gemm_part(&m, P, 0.8, 0, 0);
	is_near(a, core / (P * 0.6) + 2.5 * core / (P * 0.45), 1e-12,
		"attention: fused core at attn_efficiency and "
		"attn_bwd_efficiency");
	f.x.dev[0].attn_eff = 0.3;
	b = stage_comp(&f, 0) - gemm_part(&m, P, 0.8, 0, 0);
	is_near(b - a, core / (P * 0.3) - core / (P * 0.6), 1e-12,
		"attention: halving attn_efficiency doubles the forward "
		"term");
	f.x.dev[0].attn_bwd_eff = 0.9;
	c = stage_comp(&f, 0) - gemm_part(&m, P, 0.8, 0, 0);
	is_near(c, core / (P * 0.3) + 2.5 * core / (P * 0.9), 1e-12,
		"attention: attn_bwd_efficiency prices the backward");
	f.x.dev[0].attn_eff = 0.6;
	f.x.dev[0].attn_bwd_eff = 0.45;
	a = stage_comp(&f, 1) - gemm_part(&m, P, 0.8, 0, 1);
	is_near(a, 2 * core / (P * 0.6) + 2.5 * core / (P * 0.45), 1e-12,
		"attention: recompute runs the forward again");

	/* doubling T quadruples the core (T (T+1) pairs) */
	m.seq_len = 4096;
	f.x.m = m;
	b = stage_comp(&f, 0) - gemm_part(&m, P, 0.8, 0, 0);
	a = core / (P * 0.6) + 2.5 * core / (P * 0.45);
	is_near(b / a, 2.0 * (2 * T + 1) / (T + 1), 1e-12,
		"attention: 2T gives 2(2T+1)/(T+1) times the core");
	is_near(b / a, 4.0, 1e-3, "attention: doubling T quadruples it");
	m.seq_len = 2048;
	f.x.m = m;

	/* memory traffic: q, kv elements of 2 bytes, fp32 row stats */
	f.x.dev[0].mem_bw_gbps = 2000;
	q = T * 4096, kv = T * 8 * 128, st = 4 * T * 32;
	io = (2 * (2 * q + 2 * kv) + st) + (2 * (5 * q + 6 * kv) + st);
	a = stage_comp(&f, 0) - gemm_part(&m, P, 0.8, bw, 0);
	want = core / (P * 0.6) + 2.5 * core / (P * 0.45) + io / bw;
	is_near(a, want, 1e-12,
		"attention: fused traffic Q K V O, dO dQ dK dV, zeroing");
	ok(io / bw > 0.01 * want,
	   "attention: the traffic term is visible (%.3g of %.3g s)", io / bw,
	   want);

	/* the own kernel: fp32 activations pick it; backward 3.5x; its
	 * traffic reads and writes the gradients it accumulates */
	f.x.t.act_bytes = 4;
	io = (4 * (2 * q + 2 * kv) + st) + (4 * (9 * q + 10 * kv) + 5 * st);
	a = stage_comp(&f, 0) - gemm_eb(&m, P, 0.8, bw, 0, 4);
	is_near(a, 4.5 * core / (P * 0.02) + io / bw, 1e-12,
		"attention: fp32 prices the own kernel, 4-byte traffic");
	f.x.attn = SCHED_ATTN_OWN;
	f.x.t.act_bytes = 2;
	io = (2 * (2 * q + 2 * kv) + st) + (2 * (9 * q + 10 * kv) + 5 * st);
	a = stage_comp(&f, 0) - gemm_part(&m, P, 0.8, bw, 0);
	is_near(a, 4.5 * core / (P * 0.02) + io / bw, 1e-12,
		"attention: own kernel at attn_own_efficiency, bwd 3.5x");
	/* head size 64: half the lanes of its unrolled loops idle */
	fx_model(&m, "gqa64", 4, 4096, 64, 8, 11008);
	m.seq_len = 2048;
	f.x.m = m;
	f.x.dev[0].mem_bw_gbps = 0;
	a = stage_comp(&f, 0) - gemm_part(&m, P, 0.8, 0, 0);
	is_near(a, 4.5 * core / (P * 0.02 * 0.5), 1e-12,
		"attention: own kernel at head size 64 runs at half rate");
	f.x.attn = SCHED_ATTN_FUSED;
	a = stage_comp(&f, 0) - gemm_part(&m, P, 0.8, 0, 0);
	is_near(a, core / (P * 0.6) + 2.5 * core / (P * 0.45), 1e-12,
		"attention: --attention fused forces the fused path");

	/* the automatic choice, as rt_cuda_attn_pick */
	f.x.attn = SCHED_ATTN_AUTO;
	{
		static const struct {
			double cc, ab;
			int C, H, fused;
			const char *what;
		} cases[] = {
		    {9.0, 2, 4096, 64, 1, "bf16, sm_90, head 64"},
		    {8.0, 2, 4096, 32, 1, "bf16, sm_80, head 128"},
		    {0, 2, 4096, 32, 1, "no compute capability given"},
		    {7.5, 2, 4096, 32, 0, "sm_75"},
		    {9.0, 4, 4096, 32, 0, "fp32"},
		    {9.0, 2, 5120, 32, 0, "head 160"},
		    {9.0, 2, 4000, 32, 0, "head 125"},
		};
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			double hs;
			fx_model(&m, "pick", 4, cases[i].C, cases[i].H,
				 cases[i].H, 11008);
			m.seq_len = 2048;
			f.x.m = m;
			f.x.t.act_bytes = cases[i].ab;
			f.x.dev[0].cc = cases[i].cc;
			a = stage_comp(&f, 0);
			f.x.t.act_bytes = 2; /* same GEMM part for both */
			a -= gemm_part(&m, P, 0.8, 0, 0);
			core = 2 * T * (T + 1) * cases[i].C;
			hs = (double)cases[i].C / cases[i].H / 128;
			want =
			    cases[i].fused
				? core / (P * 0.6) + 2.5 * core / (P * 0.45)
				: 4.5 * core / (P * 0.02 * (hs < 1 ? hs : 1));
			is_near(a, want, 1e-12, "attention path: %s -> %s",
				cases[i].what,
				cases[i].fused ? "fused" : "own");
		}
	}
	fx_fini(&f);
}

/* The catalog's attention fields reach the cost model; 0 = defaults. */
static void attention_catalog(void)
{
	hexi_catalog *cat = NULL;
	hexi_cluster *c = NULL;
	hexi_model m;
	hexi_train t;
	sched_ctx x;
	const char *js =
	    "{\"format\":\"hexiscale-catalog\",\"version\":1,\"gpus\":["
	    "{\"name\":\"h200\",\"attn_efficiency\":0.7,"
	    "\"attn_own_efficiency\":0.05},"
	    "{\"name\":\"newgpu\",\"peak_tflops\":500,\"mem_gib\":96,"
	    "\"mem_bw_gbps\":4000,\"intra_bw_gbps\":400}]}";

	hexi_catalog_builtin(&cat);
	is_int(hexi_catalog_parse(cat, js, strlen(js)), HEXI_OK,
	       "catalog with attention fields parses");
	hexi_cluster_create(2, cat, &c);
	hexi_cluster_set_node(c, 0, "a", "h200", 1, NULL, 0);
	hexi_cluster_set_node(c, 1, "b", "newgpu", 1, NULL, 0);
	c->inter_bw_gbps = 10;
	is_int(hexi_cluster_validate(c), HEXI_OK, "cluster of h200, newgpu");
	hexi_model_builtin("llama2-7b", &m);
	hexi_train_defaults(&t);
	is_int(sched_ctx_init(&x, c, &m, &t, HEXI_COST_HEXISCALE), HEXI_OK,
	       "context");
	is_near(x.dev[0].attn_eff, 0.7, 1e-15, "h200: attn_efficiency set");
	is_near(x.dev[0].attn_bwd_eff, 0.40, 1e-15,
		"h200: attn_bwd_efficiency the built-in one");
	is_near(x.dev[0].attn_own_eff, 0.05, 1e-15,
		"h200: attn_own_efficiency set");
	is_near(x.dev[0].cc, 9.0, 1e-15, "h200: compute capability 9.0");
	is_near(x.dev[1].attn_eff, SCHED_ATTN_EFF, 1e-15,
		"new type: default attn_efficiency");
	is_near(x.dev[1].attn_bwd_eff, SCHED_ATTN_BWD_EFF, 1e-15,
		"new type: default attn_bwd_efficiency");
	is_near(x.dev[1].attn_own_eff, SCHED_ATTN_OWN_EFF, 1e-15,
		"new type: default attn_own_efficiency");
	is_near(x.dev[1].cc, 0, 0, "new type: no compute capability");
	sched_ctx_fini(&x);
	hexi_cluster_destroy(c);
	hexi_catalog_destroy(cat);
}

/* Chunked sync: layer held with TP 1 in pipeline 0 and TP 2 in pipeline 1
 * on one node: the chunks follow pipeline 1's halves; each half goes to
 * the single holder of pipeline 0, which therefore carries both. */
static void chunked_sync(void)
{
	const fx_node nd[1] = {{"x", 3, 100, 100, 1, 80}};
	hexi_model m;
	hexi_train t;
	fx f;
	int a[1] = {0}, b[2] = {1, 2};
	const int *hold[2] = {a, b};
	int tps[2] = {1, 2};
	double load[3], s, C = 1024, d = 64;
	double layer_b;

	fx_model(&m, "tiny", 4, 1024, 16, 16, 4096);
	fx_train(&t, 8, 1);
	fx_init(&f, nd, 1, 10, &m, &t, HEXI_COST_HEXISCALE);
	s = sched_hexi_layer_sync_s(&f.x, 2, hold, tps, load);
	/* all-reduce of 2 ranks moves its bytes once: S / bw */
	layer_b = (2 * 16 * d * C + 2 * 16 * d * C + 3 * C * 4096) * 2;
	is_near(s, layer_b / 100e9 + 2 * C * 2 / 100e9, 1e-9,
		"chunked sync: TP1 holder carries every chunk");
	is_near(load[1], layer_b / 2 / 100e9 + 2 * C * 2 / 100e9, 1e-12,
		"chunked sync: TP2 rank 0 carries its half and the norms");
	is_near(load[2], layer_b / 2 / 100e9, 1e-12,
		"chunked sync: TP2 rank 1 carries its half");
	fx_fini(&f);
}

/* ZeRO-2 reduce-scatters once per micro-batch (the runtime keeps no full
 * gradient): the predicted sync volume is the all-reduce's with its
 * reduce-scatter half repeated for every micro-batch of the longest
 * pipeline beyond the first (m = 4: 1 + 3 x 0.5), zero 1 the all-reduce's;
 * the iteration is not shorter. */
static void zero2_rounds(void)
{
	static const char *json =
	    "{\"format\":\"hexiscale-cluster\",\"version\":1,\"nodes\":["
	    "{\"name\":\"n\",\"gpu\":\"a100\",\"count\":4,"
	    "\"intra_bw_gbps\":100}],\"intra_lat_s\":0}";
	const tpipe pp[2] = {{8, 4, {{0, 2, 0, 0, 32}}},
			     {4, 2, {{0, 2, 2, 0, 32}}}};
	hexi_cluster *c = tcluster(json);
	hexi_plan *p = tplan(c, "llama2-7b", 2, pp);
	hexi_stage_report rep[2];
	double v[3] = {0}, it[3] = {0};

	for (int z = 0; z < 3; z++) {
		p->train.zero = z;
		is_int(hexi_simulate(p, HEXI_COST_HEXISCALE, rep), HEXI_OK,
		       "simulate zero %d", z);
		v[z] = p->pred.dp_sync_s;
		it[z] = p->pred.iter_s;
	}
	is_near(v[1], v[0], 1e-12 * v[0], "zero 1: the all-reduce's volume");
	is_near(v[2], 2.5 * v[1], 1e-9 * v[1],
		"zero 2: reduce-scatter per micro-batch (%.4f vs %.4f s)", v[2],
		v[1]);
	ok(it[2] > it[1], "zero 2 iteration %.4f s > zero 1 %.4f s", it[2],
	   it[1]);
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
}

/* The overlapped sync's staging (DECISIONS 183): a packed fp32 copy of
 * the stage's gradients up to 32 MiB, at zero 0 and 1 with D >= 2 and the
 * sync overlapped, none where every holder has TP 1; the room for layers
 * is exact against the piecewise memory. */
static void sync_staging_mem(void)
{
	const fx_node nd[1] = {{"x", 4, 100, 100, 0.5, 80}};
	hexi_model m;
	hexi_train t;
	fx f;
	int g[2] = {0, 1};
	sched_sdesc d = {.dev = g,
			 .tp = 2,
			 .inflight = 1,
			 .mb = 1,
			 .recompute = 1,
			 .dp = 2,
			 .first = 1};
	sched_sdesc base; /* d without its runs */
	sched_scost k, k0;
	double C = 512, F = 1376, dh = 64, lay, room;

	/* 6.3 MB of staging per layer, 65.5 MB for the embedding */
	fx_model(&m, "small", 8, 512, 8, 8, 1376);
	fx_train(&t, 8, 1);
	fx_init(&f, nd, 1, 10, &m, &t, HEXI_COST_HEXISCALE);
	/* the largest TP share of a layer: half the heads and FFN */
	lay = (2.0 * 8 * dh * C + 2.0 * 8 * dh * C) / 2 + 3.0 * C * F / 2 +
	      2.0 * C;
	sched_hexi_stage(&f.x, &d, &k);
	is_near(k.stage_layer_b, 4.0 * lay, 1e-6,
		"staging: 4 B per parameter of the TP share per layer");
	is_near(k.stage_fixed_b, 4.0 * 32000 * C, 1e-6,
		"staging: the first stage's embedding counts whole");
	is_near(k.stage_cap_b, 32.0 * 1048576, 0,
		"staging: the budget is 8 buckets of 2^20 floats");
	/* a pipeline holding the embedding on two TP ranks: the table is a
	 * chunk group of its own, reduced in place by the overlap */
	d.emb_holders = 3;
	sched_hexi_stage(&f.x, &d, &k0);
	is_near(
	    k0.stage_fixed_b, 0, 0,
	    "staging: an embedding of 3 holders over 2 pipelines, in place");
	d.emb_holders = 2;
	sched_hexi_stage(&f.x, &d, &k0);
	is_near(k0.stage_fixed_b, k.stage_fixed_b, 0,
		"staging: an embedding of one holder per pipeline, packed");
	d.emb_holders = 0;
	is_near(sched_stage_mem_b(&k, 4) - sched_stage_mem_b(&k, 0),
		4 * k.mem_layer_b, 1e-3,
		"staging: above the budget it no longer grows with layers");
	/* a small stage (no embedding) stays below the budget */
	d.first = 0;
	sched_hexi_stage(&f.x, &d, &k);
	is_near(sched_stage_mem_b(&k, 2),
		2 * k.mem_layer_b + k.mem_fixed_b + 2 * 4.0 * lay, 1e-3,
		"staging: below the budget, 4 B per parameter");
	/* none: TP 1 holders throughout, zero 2, no overlap, one pipeline */
	d.dp_tp1 = 1;
	sched_hexi_stage(&f.x, &d, &k0);
	is_near(k0.stage_cap_b, 0, 0, "staging: none when all hold TP 1");
	d.dp_tp1 = 0;
	f.x.overlap_dp = 0;
	sched_hexi_stage(&f.x, &d, &k0);
	is_near(k0.stage_cap_b, 0, 0, "staging: none without the overlap");
	f.x.overlap_dp = 1;
	f.x.t.zero = 2;
	sched_hexi_stage(&f.x, &d, &k0);
	is_near(k0.stage_cap_b, 0, 0, "staging: none at zero 2");
	f.x.t.zero = 1;
	d.dp = 1;
	sched_hexi_stage(&f.x, &d, &k0);
	is_near(k0.stage_cap_b, 0, 0, "staging: none with one pipeline");
	/* zero 1 on a GPU: the sharded sync stages its windows too (NCCL
	 * has no in-place variable-count reduce-scatter); the cpu type's
	 * sync runs in place or as a ring */
	d.dp = 2;
	sched_hexi_stage(&f.x, &d, &k0);
	is_near(k0.stage_layer_b, 8.0 * lay, 1e-6,
		"staging: zero 1 on a GPU, the overlap's and the windows'");
	is_near(k0.stage_cap_b, 64.0 * 1048576, 0,
		"staging: zero 1 on a GPU, two budgets");
	/* with the stage's chunk groups known (the simulator) the windows
	 * hold the largest group's, a fixed term; the embedding goes with
	 * the first run (DECISIONS 184) */
	sched_run run[3] = {{1, 2}, {2, 2}, {1, 2}};
	d.runs = 3;
	d.run = run;
	sched_hexi_stage(&f.x, &d, &k);
	is_near(k.stage_layer_b, 4.0 * lay, 1e-6,
		"staging: runs known, the overlap's alone per layer");
	is_near(k.stage_cap_b, 32.0 * 1048576, 0,
		"staging: runs known, one budget per layer term");
	is_near(k.mem_fixed_b - k0.mem_fixed_b, 2 * 4.0 * lay, 1e-3,
		"staging: runs known, the windows of the 2-layer run");
	d.first = 1;
	sched_hexi_stage(&f.x, &d, &k);
	base = d;
	base.runs = 0;
	base.run = NULL;
	sched_hexi_stage(&f.x, &base, &k0);
	is_near(k.mem_fixed_b - k0.mem_fixed_b, 32.0 * 1048576, 1e-3,
		"staging: runs known, the embedding's run at the budget");
	d.first = 0;
	/* a run another pipeline holds at TP 4: its groups are quarters
	 * (here of the 2-layer run: the heads and FFN split in 4, the
	 * norms whole) */
	run[1].tp = 4;
	sched_hexi_stage(&f.x, &d, &k);
	base.first = 0;
	sched_hexi_stage(&f.x, &base, &k0);
	is_near(k.mem_fixed_b - k0.mem_fixed_b,
		4.0 * fmax(lay, 2 * ((4.0 * 8 * dh * C) / 4 + 3.0 * C * F / 4 +
				     2.0 * C)),
		1e-3, "staging: runs known, TP 4 holders cut the run in 4");
	d.runs = 0;
	d.run = NULL;
	f.x.dev[0].cpu = f.x.dev[1].cpu = 1;
	sched_hexi_stage(&f.x, &d, &k0);
	is_near(k0.stage_cap_b, 32.0 * 1048576, 0,
		"staging: zero 1 on the cpu type, the overlap's only");
	f.x.dev[0].cpu = f.x.dev[1].cpu = 0;
	/* zero 2 on a GPU: one unit's staging, a fixed term */
	f.x.t.zero = 2;
	sched_hexi_stage(&f.x, &d, &k0);
	f.x.t.zero = 0;
	sched_hexi_stage(&f.x, &d, &k);
	{
		/* zero 2's fixed part less zero 0's: the window and its
		 * staging (4 B per unit parameter each); the moments and
		 * gradients sharded per layer */
		double fx2 = k0.mem_fixed_b - k.mem_fixed_b;
		sched_run r4[2] = {{1, 2}, {1, 4}};
		is_near(fx2, 8.0 * lay, 1e-3,
			"staging: zero 2, the window and its staging");
		/* runs known, one held at TP 4 by another pipeline: the
		 * staging holds a chunk group of one layer, at most the
		 * largest of the runs' shares (here TP 2's, the stage's) */
		d.runs = 2;
		d.run = r4;
		f.x.t.zero = 2;
		sched_hexi_stage(&f.x, &d, &k0);
		is_near(k0.mem_fixed_b - k.mem_fixed_b, 8.0 * lay, 1e-3,
			"staging: zero 2, runs known, the TP 2 run's layer");
		r4[0].tp = 4;
		sched_hexi_stage(&f.x, &d, &k0);
		is_near(k0.mem_fixed_b - k.mem_fixed_b,
			4.0 * lay + 4.0 * ((4.0 * 8 * dh * C) / 4 +
					   3.0 * C * F / 4 + 2.0 * C),
			1e-3, "staging: zero 2, runs known, quarters at TP 4");
		f.x.t.zero = 0;
		d.runs = 0;
		d.run = NULL;
	}
	/* the room: the most layers whose memory fits, on both pieces */
	sched_hexi_stage(&f.x, &d, &k);
	for (int i = 0; i < 2; i++) {
		/* a capacity where the budget binds (i 0) and one below it */
		k.cap_b = i == 0 ? sched_stage_mem_b(&k, 7.5)
				 : k.mem_fixed_b + 3.2 * k.mem_layer_b +
				       k.stage_fixed_b + 3.2 * k.stage_layer_b;
		room = sched_stage_room(&k);
		ok(sched_stage_mem_b(&k, floor(room)) <= k.cap_b &&
		       sched_stage_mem_b(&k, floor(room) + 1) > k.cap_b,
		   "staging: room %.3f layers is exact (%s the budget)", room,
		   i == 0 ? "above" : "below");
		if (i == 1)
			ok(3.2 * k.stage_layer_b < k.stage_cap_b &&
			       4.0 * k.stage_layer_b < k.stage_cap_b,
			   "staging: 3 and 4 layers stage below the budget");
	}
	fx_fini(&f);
}

/* The simulator cuts each stage's layers at the other pipelines' stage
 * boundaries (the sync's chunk groups): at zero 1 on a GPU the windows'
 * staging is the largest group's, embedding and head with the end runs.
 * Pipeline 0 holds all 8 layers of tiny-8l; pipeline 1 holds them in one
 * stage (one group: 8 layers, embedding and head) or three (2, 3, 3). */
/* Bytes more on plan a's first stage than on plan b's, both simulated at
 * train.zero z (hexiscale model). */
static double first_stage_diff(hexi_plan *a, hexi_plan *b, int z,
			       const char *what)
{
	hexi_stage_report ra[4], rb[4];

	a->train.zero = b->train.zero = z;
	is_int(hexi_simulate(a, HEXI_COST_HEXISCALE, ra), HEXI_OK,
	       "%s: simulate one group, zero %d", what, z);
	is_int(hexi_simulate(b, HEXI_COST_HEXISCALE, rb), HEXI_OK,
	       "%s: simulate three groups, zero %d", what, z);
	return (ra[0].mem_gib - rb[0].mem_gib) * 1073741824.0;
}

static void zero1_window_runs(void)
{
	static const char *json =
	    "{\"format\":\"hexiscale-cluster\",\"version\":1,\"nodes\":["
	    "{\"name\":\"n\",\"gpu\":\"a100\",\"count\":4,"
	    "\"intra_bw_gbps\":100}],\"intra_lat_s\":0}";
	const tpipe one[2] = {{4, 2, {{0, 1, 0, 0, 8}}},
			      {4, 2, {{0, 1, 1, 0, 8}}}};
	const tpipe three[2] = {
	    {4, 2, {{0, 1, 0, 0, 8}}},
	    {4, 2, {{0, 1, 1, 0, 2}, {0, 1, 2, 2, 5}, {0, 1, 3, 5, 8}}}};
	/* tiny-8l: C 48, 6 heads of 8, FFN 128, vocabulary 64 */
	const double lay = 4.0 * 48 * 48 + 3.0 * 48 * 128 + 2 * 48;
	const double emb = 64.0 * 48, head = 64.0 * 48 + 48;
	hexi_cluster *c = tcluster(json);
	hexi_plan *a = tplan(c, "tiny-8l", 2, one);
	hexi_plan *b = tplan(c, "tiny-8l", 2, three);
	hexi_stage_report ra[2], rb[4];
	double gib = 1073741824.0, diff[2];

	for (int z = 0; z <= 1; z++)
		diff[z] = first_stage_diff(a, b, z, "runs");
	is_near(diff[0], 0, 1e-3,
		"runs: zero 0, pipeline 0's memory whatever the other's split");
	{
		/* pipeline 1 at TP 2: the tables have 3 holders, two in
		 * one pipeline, so each is a chunk group of its own, and
		 * pipeline 0's layers are cut in two by the shares (3 of 6
		 * heads, 64 of 128 FFN rows): its windows hold 8 half
		 * layers, not 8 layers and both tables.  A holder with TP 2
		 * brings the overlap's staging (not every holder has TP 1),
		 * the layers' only (the tables alone are reduced in place).
		 * The tables are sharded over 3 holders, not 2: 14 B per
		 * parameter (2 + 4 + 4 + 12/3), not 16 */
		const tpipe tp2[2] = {{4, 2, {{0, 1, 0, 0, 8}}},
				      {4, 2, {{0, 2, 1, 0, 8}}}};
		hexi_plan *h = tplan(c, "tiny-8l", 2, tp2);
		const double half = 4.0 * 48 * 48 / 2 + 3.0 * 48 * 64 + 2 * 48;
		h->train.zero = a->train.zero = 1;
		is_int(hexi_simulate(h, HEXI_COST_HEXISCALE, rb), HEXI_OK,
		       "runs: simulate TP 1 + TP 2, zero 1");
		is_int(hexi_simulate(a, HEXI_COST_HEXISCALE, ra), HEXI_OK,
		       "runs: simulate TP 1 + TP 1, zero 1");
		is_near((ra[0].mem_gib - rb[0].mem_gib) * gib,
			4.0 * (8 * lay + emb + head) - 4.0 * 8 * half -
			    4.0 * 8 * lay + 2.0 * (emb + head),
			1e-3, "runs: zero 1, a TP 2 holder halves the group");
		hexi_plan_destroy(h);
	}
	/* one group: 4 B x (8 layers + embedding + head); three: the
	 * largest of 2 layers + embedding, 3, 3 + head */
	is_near(diff[1], 4.0 * (8 * lay + emb + head) - 4.0 * (3 * lay + head),
		1e-3,
		"runs: zero 1, the windows of the largest group (%.0f B "
		"less)",
		diff[1]);
	hexi_plan_destroy(a);
	hexi_plan_destroy(b);
	hexi_cluster_destroy(c);
	/* on the cpu type the sharded sync stages two ring segments (2 x
	 * 65536 elements) or a smaller group whole: one group of 8 layers
	 * and both tables is above that, the 3 + head of three below */
	c = tcluster("{\"format\":\"hexiscale-cluster\",\"version\":1,"
		     "\"nodes\":[{\"name\":\"n\",\"gpu\":\"cpu\","
		     "\"count\":4,\"intra_bw_gbps\":100}],"
		     "\"intra_lat_s\":0}");
	a = tplan(c, "tiny-8l", 2, one);
	b = tplan(c, "tiny-8l", 2, three);
	for (int z = 0; z <= 1; z++)
		diff[z] = first_stage_diff(a, b, z, "runs, cpu");
	is_near(diff[0], 0, 1e-3, "runs, cpu: zero 0, no sharded staging");
	is_near(diff[1], 4.0 * (2 * 65536.0 - (3 * lay + head)), 1e-3,
		"runs, cpu: zero 1, the largest group below two segments");
	hexi_plan_destroy(a);
	hexi_plan_destroy(b);
	hexi_cluster_destroy(c);
}

int main(void)
{
	known_answer();
	known_answer_simulate();
	layout_chunks_match();
	gpipe_and_1f1b();
	hexi_tp_and_mem();
	attention_term();
	attention_catalog();
	chunked_sync();
	zero2_rounds();
	sync_staging_mem();
	zero1_window_runs();
	return tap_done();
}
