/*
 * cost_hexi.c - the `hexiscale` cost model (default): real FLOPs of the
 * model shape, achievable FLOPS per GPU, uneven TP shards bounded by their
 * slowest member, the attention core at its kernel's rate plus its memory
 * traffic, ring all-reduces with per-link bandwidth and latency, PP
 * leader send + broadcast, 1F1B, chunked DP sync over the real chunk groups,
 * memory-bound element-wise work and the optimizer step at the memory
 * bandwidth, and memory per GPU.  SI units: 1 TFLOPS = 1e12 FLOP/s, 1 GB/s =
 * 1e9 B/s. doc/COSTMODEL.md lists every formula with units.
 */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

#define GB 1e9
#define TF 1e12

static int split_begin(int n, int t, int r)
{
	return t > 0 ? (int)((long)r * n / t) : 0; /* t >= 1 in a valid plan */
}

/* Fraction of n units held by TP rank r of t (hexi_layout_split rule). */
static double frac(int n, int t, int r)
{
	return (double)(split_begin(n, t, r + 1) - split_begin(n, t, r)) / n;
}

/* Forward FLOP of one layer for one sample: proj, the q, k, v, o
 * projections (they follow the KV-head shard); core, the attention core
 * (Q K^T and P V) over the full T x T, the model-FLOPs convention of MFU
 * (what a device computes of it is attn_core_s's); ffn, gate, up, down. */
static void layer_fwd_flop(const hexi_model *m, double *proj, double *core,
			   double *ffn)
{
	double C = m->hidden, T = m->seq_len, d = C / m->heads;
	double Hd = m->heads * d, KVd = m->kv_heads * d;

	*proj = 2.0 * T * C * (Hd + 2.0 * KVd) + 2.0 * T * Hd * C;
	*core = 4.0 * T * T * Hd;
	*ffn = 6.0 * T * C * m->ffn;
}

double sched_model_flops(const hexi_model *m)
{
	double proj, core, ffn;

	layer_fwd_flop(m, &proj, &core, &ffn);
	return 3.0 * (m->layers * (proj + core + ffn) +
		      2.0 * m->seq_len * (double)m->hidden * m->vocab);
}

/* Ring all-reduce of `bytes` among t members at bw GB/s, lat s each hop. */
static double allreduce_s(double bytes, int t, double bw, double lat)
{
	if (t <= 1)
		return 0;
	return 2.0 * (t - 1) / t * bytes / (bw * GB) + 2.0 * (t - 1) * lat;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Ring bottleneck over the nodes of n devices: sorted distinct nodes in a
 * cycle; one node = its intra-node link.  nodes[] is scratch [n]. */
static void ring_link(const sched_ctx *x, const int *dev, int n, int *nodes,
		      double *bw, double *lat)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		nodes[i] = x->dev[dev[i]].node;
	qsort(nodes, (size_t)n, sizeof(int), cmp_int);
	for (int i = 0; i < n; i++)
		if (k == 0 || nodes[k - 1] != nodes[i])
			nodes[k++] = nodes[i];
	*bw = sched_bw_gbps(x, nodes[0], nodes[0]);
	*lat = sched_lat_s(x, nodes[0], nodes[0]);
	if (k == 1)
		return;
	*bw = DBL_MAX;
	*lat = 0;
	for (int i = 0; i < k; i++) {
		int a = nodes[i], b = nodes[(i + 1) % k];
		double w = sched_bw_gbps(x, a, b), l = sched_lat_s(x, a, b);
		*bw = w < *bw ? w : *bw;
		*lat = l > *lat ? l : *lat;
	}
}

static double group_min(const sched_ctx *x, const int *dev, int t, int what_mem)
{
	double v = DBL_MAX;

	for (int i = 0; i < t; i++) {
		const sched_dev *g = &x->dev[dev[i]];
		double w = what_mem ? g->mem_gib * SCHED_GIB
				    : g->peak_tflops * TF * g->eff;
		v = w < v ? w : v;
	}
	return v;
}

/* Seconds per byte of memory-bound work on g; 0 when the type has no
 * bandwidth (then memory-bound work is not modelled). */
static double sec_per_byte(const sched_dev *g)
{
	return g->mem_bw_gbps > 0 ? 1.0 / (g->mem_bw_gbps * GB) : 0;
}

/* Element bytes of the runtime on a device: fp32 on CPU, act_bytes on GPU. */
static double elem_bytes(const sched_ctx *x, const sched_dev *g)
{
	return g->cpu ? 4.0 : x->t.act_bytes;
}

/* 1 when a GPU's attention is cuDNN's fused kernel, 0 for the runtime's
 * own: rt_cuda_attn_pick's rule (16-bit activations, compute capability
 * 8.0 or newer, head size 8..128 in steps of 8), unless x->attn forces
 * one.  A type without a compute capability has a BF16 peak, so it is
 * taken as 8.0 or newer. */
static int attn_fused(const sched_ctx *x, const sched_dev *g)
{
	int d = x->m.hidden / x->m.heads;

	if (x->attn != SCHED_ATTN_AUTO)
		return x->attn == SCHED_ATTN_FUSED;
	return x->t.act_bytes <= 2.0 && (g->cc == 0 || g->cc >= 8.0) &&
	       d % 8 == 0 && d >= 8 && d <= 128;
}

/* Seconds of the attention core (Q K^T, softmax, P V) of one layer and one
 * sample on GPU g, every head (the caller takes its rank's share):
 * forward (twice with recompute) and backward FLOPs over the causal
 * pairs both kernels compute, at the path's rates, plus the bytes each
 * kernel must move (q, k, v, o and their gradients, the fp32 row
 * statistics); neither path stores the T x T scores.  doc/COSTMODEL.md
 * "Attention". */
static double attn_core_s(const sched_ctx *x, const sched_dev *g, int rc)
{
	const hexi_model *m = &x->m;
	double T = m->seq_len, d = (double)m->hidden / m->heads;
	double q = T * m->heads * d, kv = T * m->kv_heads * d;
	double st = 4.0 * T * m->heads, eb = x->t.act_bytes;
	double P = g->peak_tflops * TF, fwd = rc ? 2.0 : 1.0;
	double f = 2.0 * T * (T + 1.0) * m->heads * d;
	double io_fwd = eb * (2.0 * q + 2.0 * kv) + st;

	if (attn_fused(x, g))
		return fwd * f / (P * g->attn_eff) +
		       SCHED_ATTN_BWD_FUSED * f / (P * g->attn_bwd_eff) +
		       (fwd * io_fwd + eb * (5.0 * q + 6.0 * kv) + st) *
			   sec_per_byte(g);
	/* the own kernel's loops are unrolled for head size 128 */
	double hs = d < SCHED_ATTN_OWN_HS ? d / SCHED_ATTN_OWN_HS : 1.0;
	return (fwd + SCHED_ATTN_BWD_OWN) * f / (P * g->attn_own_eff * hs) +
	       (fwd * io_fwd + eb * (9.0 * q + 10.0 * kv) + 5.0 * st) *
		   sec_per_byte(g);
}

/* Memory-bound (non-GEMM) traffic of one layer, per token, in elements,
 * fwd + bwd (+ the forward again with recompute), for a rank holding the
 * fractions fa (KV heads) and ff (FFN rows).  GPU types: two RMSNorms
 * (fwd 2C, bwd 3C each), two residual adds (3C + 3C each), RoPE on q and k
 * (2 fwd + 2 bwd passes), SwiGLU (fwd 3F, bwd 5F).  The CPU type counts
 * the CPU runtime's loops (runtime/ops.c, model.c) as they touch memory:
 * RMSNorm fwd 3C (x read twice, y written), bwd 6C (dy, x read twice, dx
 * read and written); residual fwd 3C, no residual backward (the norms
 * accumulate into the residual gradient); RoPE 2 per element each way;
 * SwiGLU fwd 3F, bwd 7F (dout, gate, up read; dgate, dup read and
 * written); the causal softmax 3T per head and token each way (max, exp,
 * normalise passes over the used half, zeros over the rest; backward:
 * dot and scale passes on the T x T workspace); the backward's zeroed
 * gradient buffers (dh, dgate, dup: 3F; dln twice: 2C; datty, dq, dk, dv:
 * 2(H+KV)d).  doc/COSTMODEL.md "Memory-bound work". */
static double layer_elems(const sched_ctx *x, const sched_dev *g, double fa,
			  double ff, int recompute)
{
	const hexi_model *m = &x->m;
	double C = m->hidden, d = C / m->heads, T = m->seq_len;
	double hk = (m->heads + m->kv_heads) * d * fa;
	double F = m->ffn * ff, fwd, bwd;

	if (g->cpu) {
		double sc = m->heads * fa * T;
		fwd = 12.0 * C + 2.0 * hk + 3.0 * F + 3.0 * sc;
		bwd = 14.0 * C + 4.0 * hk + 10.0 * F + 3.0 * sc;
	} else {
		fwd = 10.0 * C + 2.0 * hk + 3.0 * F;
		bwd = 12.0 * C + 2.0 * hk + 5.0 * F;
	}
	return fwd * (recompute ? 2.0 : 1.0) + bwd;
}

/* Parameters of one layer held by a rank with fractions fa, ff. */
static double layer_params(const hexi_model *m, double fa, double ff)
{
	double C = m->hidden, dh = C / m->heads;

	return (2.0 * m->heads * dh * C + 2.0 * m->kv_heads * dh * C) * fa +
	       3.0 * C * m->ffn * ff + 2.0 * C;
}

static void hexi_stage_time(const sched_ctx *x, const sched_sdesc *d,
			    sched_scost *out)
{
	const hexi_model *m = &x->m;
	double proj, core, ffn, passes = 3.0 + (d->recompute ? 1.0 : 0.0);
	/* activations travel in the runtime's element type (fp32 on CPU) */
	double act = (double)d->mb * m->seq_len * m->hidden *
		     elem_bytes(x, &x->dev[d->dev[0]]);
	double bw, lat, worst = 0;
	int nodes[HEXI_MAX_GPUS_PER_NODE];
	int tp =
	    d->tp > HEXI_MAX_GPUS_PER_NODE ? HEXI_MAX_GPUS_PER_NODE : d->tp;

	layer_fwd_flop(m, &proj, &core, &ffn);
	out->opt_layer_s = out->opt_fixed_s = 0;
	for (int r = 0; r < d->tp; r++) {
		const sched_dev *g = &x->dev[d->dev[r]];
		double fa = frac(m->kv_heads, d->tp, r);
		double ff = frac(m->ffn, d->tp, r);
		/* the CPU runtime runs the attention core as per-head sgemms
		 * over the full T x T: at its GEMM rate, backward 2x forward
		 * (its traffic is in layer_elems); a GPU's has its own term */
		double f = passes * d->mb *
			   (g->cpu ? (proj + core) * fa + ffn * ff
				   : proj * fa + ffn * ff);
		double spb = sec_per_byte(g), eb = elem_bytes(x, g);
		double tok = (double)d->mb * m->seq_len,
		       vc = (double)m->vocab * m->hidden;
		double s =
		    f / (g->peak_tflops * TF * g->eff) +
		    tok * layer_elems(x, g, fa, ff, d->recompute) * eb * spb;
		if (!g->cpu)
			s += d->mb * fa * attn_core_s(x, g, d->recompute);
		/* optimizer: every byte of weights, grads and state read and
		 * written once per iteration (2 x bytes_per_param; with ZeRO
		 * only the owned shard's), plus the gradients zeroed, read
		 * for the norm, scaled (4 passes) */
		double o = (2.0 * x->t.bytes_per_param *
				sched_opt_share(x, g->cpu, d->dp) +
			    4.0 * eb) *
			   spb;
		double ol = layer_params(m, fa, ff) * o;
		double of =
		    (d->first ? vc : 0) + (d->last ? vc + m->hidden : 0);
		worst = s > worst ? s : worst;
		out->opt_layer_s =
		    ol > out->opt_layer_s ? ol : out->opt_layer_s;
		of *= o;
		out->opt_fixed_s =
		    of > out->opt_fixed_s ? of : out->opt_fixed_s;
	}
	out->comp_layer_s = worst;
	ring_link(x, d->dev, tp, nodes, &bw, &lat);
	out->tp_layer_s = (4.0 + 2.0 * (d->recompute ? 1 : 0)) *
			  allreduce_s(act, d->tp, bw, lat);
	/* LM head replicated on every rank of the last stage (LAYOUT.md) */
	out->fixed_s = d->last ? 6.0 * d->mb * m->seq_len * (double)m->hidden *
				     m->vocab / group_min(x, d->dev, d->tp, 0)
			       : 0;
	/* memory-bound, per token, slowest member.  GPU: embedding gather
	 * and scatter (2C), final norm (5C), softmax cross-entropy (4V).
	 * CPU runtime: embedding copy (2C) and gradient accumulation (3C);
	 * final norm fwd 3C, bwd 6C, its zeroed input gradient C; cross-
	 * entropy fwd 4V (max, sum, probability passes), zeroed dlogits V,
	 * bwd 3V (probs read, dlogits read and written). */
	{
		double worst_e = 0, tok = (double)d->mb * m->seq_len;
		for (int r = 0; r < d->tp; r++) {
			const sched_dev *g = &x->dev[d->dev[r]];
			double e =
			    ((d->first ? (g->cpu ? 5.0 : 2.0) * m->hidden : 0) +
			     (d->last
				  ? (g->cpu ? 10.0 * m->hidden + 8.0 * m->vocab
					    : 5.0 * m->hidden + 4.0 * m->vocab)
				  : 0)) *
			    tok * elem_bytes(x, g) * sec_per_byte(g);
			worst_e = e > worst_e ? e : worst_e;
		}
		out->fixed_s += worst_e;
	}
	out->pp_s = 0;
	if (d->next) {
		int a = x->dev[d->dev[0]].node, b = x->dev[d->next[0]].node;
		double one =
		    act / (sched_bw_gbps(x, a, b) * GB) + sched_lat_s(x, a, b);
		double bc_next =
		    d->next_tp > 1
			? act / (sched_bw_gbps(x, b, b) * GB) +
			      ceil(log2(d->next_tp)) * sched_lat_s(x, b, b)
			: 0;
		double bc_this =
		    d->tp > 1 ? act / (sched_bw_gbps(x, a, a) * GB) +
				    ceil(log2(d->tp)) * sched_lat_s(x, a, a)
			      : 0;
		out->pp_s = 2.0 * one + bc_next + bc_this;
	}
}

/* Bytes per parameter the CPU runtime's gradient sync holds beside the
 * model with n >= 2 holders (the D pipelines, or a table's holders)
 * (runtime/sync.c, DECISIONS 125): zero 1 the owned gradient reduce-scattered
 * (g/n); zero 2 none beyond sched_param_bytes' g/D (the owned sums) but one
 * backward unit's window, counted once by the caller.  The overlap's staging is
 * sync_staging's. */
static double cpu_sync_per_param(const sched_ctx *x, int n)
{
	return n >= 2 && x->t.zero == 1 ? 4.0 / n : 0.0;
}

/* The largest TP share of a layer at run r's largest TP degree: a bound
 * on the part of the layer in any one chunk group of the run (a group
 * lies in every holder's share). */
static double run_share(const hexi_model *m, const sched_run *r)
{
	const int t = r->tp > 1 ? r->tp : 1;
	double share = 0;

	for (int k = 0; k < t; k++) {
		double p = layer_params(m, frac(m->kv_heads, t, k),
					frac(m->ffn, t, k));
		share = p > share ? p : share;
	}
	return share;
}

/* 1 if a table held by `holders` ranks over the d->dp pipelines is a
 * chunk group of its own: some pipeline holds it on two TP ranks, which
 * no layer's chunk has (one holder per pipeline), so the sync's bucket of
 * the table is the table alone, one array on every member. */
static int table_alone(const sched_sdesc *d, int holders)
{
	return holders > d->dp;
}

/* Elements of the largest chunk group of a stage whose runs are known
 * (sched_sdesc.run) that the sharded sync stages: a run's layers are cut
 * by the TP shares of its holders, so a group holds at most the largest
 * share at the run's largest TP degree per layer (a group is within every
 * holder's share); the embedding (emb) and head tables, whole, are
 * groups of their own (table_alone) or join the first and last run.  On
 * the CPU (cpu 1) a table alone, one array on every member, is
 * reduce-scattered in place (sync.c agree_flat): not staged. */
static double largest_group(const hexi_model *m, const sched_sdesc *d,
			    double emb, double head, int cpu)
{
	double most = 0;

	if (table_alone(d, d->emb_holders)) {
		most = cpu ? 0.0 : emb;
		emb = 0;
	}
	if (table_alone(d, d->head_holders)) {
		most = !cpu && head > most ? head : most;
		head = 0;
	}

	for (int i = 0; i < d->runs; i++) {
		double e = d->run[i].layers * run_share(m, &d->run[i]) +
			   (i == 0 ? emb : 0.0) +
			   (i == d->runs - 1 ? head : 0.0);
		most = e > most ? e : most;
	}
	return most;
}

/* Zero 2's buckets hold one backward unit each (sync.c split_by_key): the
 * largest chunk group of one layer of a run, or a table (whole; on the
 * CPU always in place, one array on every member, so not staged). */
static double largest_unit_group(const hexi_model *m, const sched_sdesc *d,
				 double emb, double head, int cpu)
{
	double most = cpu ? 0.0 : emb > head ? emb : head;

	for (int i = 0; i < d->runs; i++) {
		double e = run_share(m, &d->run[i]);
		most = e > most ? e : most;
	}
	return most;
}

/* Bytes of a staging of fp32 copies of `elems` elements, at most the
 * budget (SCHED_SYNC_STAGE_B). */
static double sync_window_b(double elems)
{
	return 4.0 * elems < SCHED_SYNC_STAGE_B ? 4.0 * elems
						: SCHED_SYNC_STAGE_B;
}

/* Elements the CPU runtime's sharded sync stages for chunk groups of at
 * most g elements: a group beyond two ring segments runs as a ring (two
 * segments of its members' blocks), a smaller one is staged whole. */
static double ring_staging(double g)
{
	return g < 2.0 * SCHED_CPU_SYNC_SEG ? g : 2.0 * SCHED_CPU_SYNC_SEG;
}

/* Bytes per parameter of the embedding or head table on a stage of d,
 * held by `holders` ranks (0: not known, d->dp): ZeRO shards a table over
 * every rank holding it (sync.c's chunk group of the table: each TP rank
 * of each pipeline holds it whole); the CPU's zero 1 adds its owned
 * gradient (cpu_sync_per_param). */
static double table_pb(const sched_ctx *x, const sched_sdesc *d, int cpu,
		       int holders)
{
	int n = holders > 0 ? holders : d->dp;

	return sched_param_bytes(x, cpu, n) +
	       (cpu ? cpu_sync_per_param(x, n) : 0.0);
}

/* The gradient sync's staging of fp32 copies, D >= 2 (DECISIONS 180,
 * 183): each is a copy of the gradients (or weights) of the chunks it
 * stages, at most SCHED_SYNC_STAGE_B (8 buckets of 2^20 elements):
 *  - the overlap's (zero 0 and 1 overlapped; both trainers, in device
 *    memory on a GPU): the sub-buckets that are not one array in memory,
 *    none where every holder of the stage's layers has TP 1 (in place,
 *    d->dp_tp1);
 *  - on a GPU the sharded sync's (zero 1), whose chunk groups are never
 *    reduce-scattered in place (NCCL has no variable-count collectives):
 *    they go through the staging a window at a time, so it holds the
 *    largest chunk group's (largest_group, a fixed term; while the runs
 *    are not known, the stage's, an upper bound); zero 2's buckets
 *    are one backward unit each: min(4 x the largest unit, budget),
 *    added by the caller.  The CPU's sharded sync runs in place or as a
 *    ring of two segments (hexi_stage_mem_cpu).
 * params is the largest TP share of a layer; the embedding and head
 * tables count whole, as sched_param_bytes' callers count them. */
static void sync_staging(const sched_ctx *x, const sched_sdesc *d,
			 double params, int gpu, sched_scost *out)
{
	const hexi_model *m = &x->m;
	const double VC = (double)m->vocab * m->hidden;
	const double emb = d->first ? VC : 0.0;
	const double head = d->last ? VC + m->hidden : 0.0;
	/* the overlap reduces a table of its own in place (one array) */
	const double tables_o = (table_alone(d, d->emb_holders) ? 0.0 : emb) +
				(table_alone(d, d->head_holders) ? 0.0 : head);
	int k = 0, ko = 0;

	if (d->dp >= 2 && x->overlap_dp && !d->dp_tp1 && x->t.zero <= 1)
		ko = 1;
	if (d->dp >= 2 && gpu && x->t.zero == 1) {
		/* the windows stage one chunk group at a time: with the
		 * stage's runs known (the simulator), its largest; the
		 * embedding and head tables join the first and last run
		 * (DECISIONS 184) */
		if (d->runs > 0)
			out->mem_fixed_b +=
			    sync_window_b(largest_group(m, d, emb, head, 0));
		else
			k++;
	}
	/* k (the windows while the runs are not known) comes with no
	 * holders known either: both buffers then have the same terms */
	out->stage_layer_b = (ko + k) * 4.0 * params;
	out->stage_fixed_b = 4.0 * (ko * tables_o + k * (emb + head));
	out->stage_cap_b = (ko + k) * SCHED_SYNC_STAGE_B;
}

/* Memory of a stage on the `cpu` type, counted from what the CPU runtime
 * allocates (runtime/model.c, train.c; fp32, 4 bytes per element) for the
 * TP rank with the largest share: per layer and slot the saved tensors
 * (residual input, ln1, xmid, ln2: 4C; q, attention output: 2Hd; k, v:
 * 2KVd; gate, up, SwiGLU: 3F; two rstd; the T x T softmax per head), or
 * with recompute the layer input only plus one layer's tensors shared;
 * per slot the stage output (last stage: its final norm, the
 * probabilities (V) and tokens); once the backward scratch (3C + 2Hd +
 * 2KVd + 3F per token, the logits, a T x T workspace) and the two
 * pipeline buffers.  doc/COSTMODEL.md "Memory per GPU", CPU. */
static void hexi_stage_mem_cpu(const sched_ctx *x, const sched_sdesc *d,
			       sched_scost *out)
{
	const hexi_model *m = &x->m;
	const double C = m->hidden, T = m->seq_len, dh = C / m->heads;
	const double V = m->vocab, e = 4.0, tok = (double)d->mb * T;
	const double i = d->inflight, rc = d->recompute ? 1.0 : 0.0;
	const double emb = d->first ? V * C : 0.0;
	const double head = d->last ? V * C + C : 0.0;
	/* weights, gradients, AdamW moments; ZeRO shards (sched_param_bytes) */
	const double pb =
	    sched_param_bytes(x, 1, d->dp) + cpu_sync_per_param(x, d->dp);
	double params = 0, lx = 0, work = 0;

	for (int r = 0; r < d->tp; r++) {
		double fa = frac(m->kv_heads, d->tp, r);
		double ff = frac(m->ffn, d->tp, r);
		double hk = 2.0 * (m->heads + m->kv_heads) * dh * fa;
		double p = layer_params(m, fa, ff);
		double a = tok * (3.0 * C + 2.0 + hk + 3.0 * m->ffn * ff) +
			   d->mb * m->heads * fa * T * T;
		double w = tok * (3.0 * C + hk + 3.0 * m->ffn * ff) + T * T;
		params = p > params ? p : params;
		lx = a > lx ? a : lx;
		work = w > work ? w : work;
	}
	out->mem_layer_b = params * pb + e * i * (tok * C + (1.0 - rc) * lx);
	/* per slot: the stage output, the last stage's head and targets;
	 * with recompute one layer's tensors (+ the output buffer) once */
	out->mem_fixed_b = x->t.reserve_gib * SCHED_GIB +
			   e * (i * (d->last || !rc ? tok * C : 0.0) +
				rc * (lx + (d->last ? 0 : tok * C))) +
			   e * i * 2.0 * tok + e * (work + tok + 2.0 * tok * C);
	if (d->first)
		out->mem_fixed_b += V * C * table_pb(x, d, 1, d->emb_holders);
	if (d->last)
		out->mem_fixed_b +=
		    (V * C + C) * table_pb(x, d, 1, d->head_holders) +
		    e * (i * tok * (C + 1.0 + V) + tok * V);
	/* zero 1's staging: two ring segments (runtime/sync.c SYNC_SEG),
	 * whatever the other pipelines' splits (DECISIONS 150); a bucket
	 * too small for the ring stages its blocks, no more than the
	 * largest chunk group where the simulator knows it (DECISIONS
	 * 184) */
	if (x->t.zero == 1 && d->dp > 1)
		out->mem_fixed_b +=
		    e * ring_staging(d->runs > 0
					 ? largest_group(m, d, emb, head, 1)
					 : 2.0 * SCHED_CPU_SYNC_SEG);
	if (x->t.zero == 2 && d->dp > 1) { /* the window: the largest unit */
		double u = params;
		u = d->first && V * C > u ? V * C : u;
		u = d->last && V * C + C > u ? V * C + C : u;
		out->mem_fixed_b += e * u;
		/* zero 2's buckets are one unit's chunk group each: two
		 * ring segments of it at most, or a smaller bucket's blocks
		 * (DECISIONS 184) */
		out->mem_fixed_b +=
		    e * ring_staging(
			    d->runs > 0 ? largest_unit_group(m, d, emb, head, 1)
					: u);
	}
	sync_staging(x, d, params, 0, out);
	out->cap_b = group_min(x, d->dev, d->tp, 1);
}

static void hexi_stage_mem(const sched_ctx *x, const sched_sdesc *d,
			   sched_scost *out)
{
	const hexi_model *m = &x->m;

	if (x->dev[d->dev[0]].cpu) {
		hexi_stage_mem_cpu(x, d, out);
		return;
	}
	double C = m->hidden, T = m->seq_len, dh = C / m->heads;
	double tok = (double)d->mb * T, ab = x->t.act_bytes;
	double params = 0, acts = 0, work = 0;

	for (int r = 0; r < d->tp; r++) {
		double fa = frac(m->kv_heads, d->tp, r);
		double ff = frac(m->ffn, d->tp, r);
		double p =
		    (2.0 * m->heads * dh * C + 2.0 * m->kv_heads * dh * C) *
			fa +
		    3.0 * C * m->ffn * ff + 2.0 * C;
		/* per token, 3C + 2q + 2k + 3f in the activation type and
		 * an fp32 value per local head, both in what one layer
		 * saves for its backward (rt_cuda_model.c gact_init: ln1,
		 * xmid, ln2, q and the attention output, k, v, gate, up,
		 * SwiGLU; the softmax statistics; and two rstd) and in its
		 * backward's scratch (acts_init, "work": residual and norm
		 * gradients and a temporary, dy and dq, dk and dv, dh,
		 * dgate, dup; the statistics' gradient; DECISIONS 184) */
		double w =
		    ab * (3.0 * C +
			  (2.0 * m->heads + 2.0 * m->kv_heads) * dh * fa +
			  3.0 * m->ffn * ff) +
		    4.0 * m->heads * fa;
		double a = w + 8.0;
		params = p > params ? p : params;
		acts = a > acts ? a : acts;
		work = w > work ? w : work;
	}
	acts *= tok; /* bytes of one layer, one micro-batch */
	/* the scratch, the RoPE table (T x dh/2 cos and sin, fp32) and,
	 * with TP and 16-bit activations, the fp32 buffer of the TP
	 * all-reduce (DECISIONS 184) */
	work = tok * work + T * dh * 4.0 +
	       (d->tp > 1 && ab < 4.0 ? tok * C * 4.0 : 0.0);
	/* weights, gradients, optimizer state: ZeRO shards the replicated
	 * embedding/head tables too (the sync treats them as chunks) */
	double pb = sched_param_bytes(x, x->dev[d->dev[0]].cpu, d->dp);

	out->mem_layer_b = params * pb;
	/* the reserve; the pipeline's two activation buffers (received,
	 * sent: runtime/train_gpu.c), every stage */
	out->mem_fixed_b =
	    x->t.reserve_gib * SCHED_GIB + 2.0 * tok * C * ab + work;
	/* zero 2: the GPU trainer's gradient window, one backward unit (a
	 * layer, or the embedding / final norm + head table) in fp32
	 * (DECISIONS 157) */
	if (x->t.zero >= 2 && d->dp >= 2) {
		double unit = params;
		if ((d->first || d->last) && m->vocab * C > unit)
			unit = (double)m->vocab * C;
		out->mem_fixed_b += 4.0 * unit;
		/* and the staging of its reduce-scatter, a chunk group of
		 * one unit at a time (sync_staging; the unit while the
		 * runs are not known) */
		out->mem_fixed_b += sync_window_b(
		    d->runs > 0 ? largest_unit_group(
				      m, d, d->first ? m->vocab * C : 0.0,
				      d->last ? m->vocab * C + C : 0.0, 0)
				: unit);
	}
	/* per layer and slot its input; without recompute its saved
	 * tensors, with recompute one layer's shared by every slot; per
	 * slot the stage's output (the final norm's input on the last
	 * stage), with recompute one shared buffer on other stages */
	out->mem_layer_b += d->inflight * tok * C * ab;
	if (d->recompute) {
		out->mem_fixed_b +=
		    acts + (d->last ? d->inflight : 1) * tok * C * ab;
	} else {
		out->mem_layer_b += d->inflight * acts;
		out->mem_fixed_b += d->inflight * tok * C * ab;
	}
	if (d->first) /* the table; the tokens per slot */
		out->mem_fixed_b +=
		    m->vocab * C * table_pb(x, d, 0, d->emb_holders) +
		    d->inflight * tok * 4.0;
	if (d->last)
		out->mem_fixed_b +=
		    (m->vocab * C + C) * table_pb(x, d, 0, d->head_holders) +
		    /* per slot the final norm, the logits, the norm's
		     * rstd, the softmax statistics, the targets; once
		     * the logits' gradient and the token losses */
		    d->inflight * tok * ((C + m->vocab) * ab + 12.0) +
		    tok * (m->vocab * ab + 4.0);
	sync_staging(x, d, params, 1, out);
	out->cap_b = group_min(x, d->dev, d->tp, 1);
}

void sched_hexi_stage(const sched_ctx *x, const sched_sdesc *d,
		      sched_scost *out)
{
	hexi_stage_time(x, d, out);
	hexi_stage_mem(x, d, out);
}

/* 1F1B: sum_s c_s + (m - 1) max_s c_s */
double sched_hexi_pipe_s(const double *c, int S, int m)
{
	double sum = 0, mx = 0;

	for (int s = 0; s < S; s++) {
		sum += c[s];
		mx = c[s] > mx ? c[s] : mx;
	}
	return sum + (m - 1) * mx;
}

/* ---- chunked gradient synchronisation ------------------------------------ */

/* One axis of a layer (n units of unit_b bytes, sharded by each pipeline's
 * TP degree): cut at the union of every pipeline's shard boundaries, each
 * chunk all-reduced among its holders; adds the time to each holder. */
static void axis_sync(const sched_ctx *x, int np, const int *const *holders,
		      const int *tps, int n, double unit_b, double *load,
		      int *scratch)
{
	int *cuts = scratch, ncut = 0, *grp, *nodes;

	for (int p = 0; p < np; p++)
		for (int r = 0; r <= tps[p]; r++)
			cuts[ncut++] = split_begin(n, tps[p], r);
	qsort(cuts, (size_t)ncut, sizeof(int), cmp_int);
	{
		int k = 0;
		for (int i = 0; i < ncut; i++)
			if (k == 0 || cuts[k - 1] != cuts[i])
				cuts[k++] = cuts[i];
		ncut = k;
	}
	grp = cuts + ncut;
	nodes = grp + np;
	for (int k = 0; k + 1 < ncut; k++) {
		int a = cuts[k];
		double bw, lat, s;
		for (int p = 0; p < np; p++) {
			int r = (int)(((long)(a + 1) * tps[p] - 1) / n);
			grp[p] = holders[p][r];
		}
		ring_link(x, grp, np, nodes, &bw, &lat);
		s = allreduce_s((cuts[k + 1] - a) * unit_b, np, bw, lat);
		for (int p = 0; p < np; p++)
			load[grp[p]] += s;
	}
}

double sched_hexi_layer_sync_s(const sched_ctx *x, int np,
			       const int *const *holders, const int *tps,
			       double *load)
{
	const hexi_model *m = &x->m;
	double C = m->hidden, dh = C / m->heads;
	/* gradients travel in the runtime's element type (fp32 on CPU) */
	double gb = np > 0 ? elem_bytes(x, &x->dev[holders[0][0]]) : 2.0;
	size_t ncut = 0;
	int *scratch = NULL, *lead = malloc(sizeof(int) * (size_t)np);
	double worst = 0, bw, lat;

	for (int p = 0; p < np; p++)
		ncut += (size_t)tps[p] + 1;
	scratch = malloc(sizeof(int) * (ncut + 2 * (size_t)np + 1));
	if (!scratch || !lead || np < 2)
		goto out;
	for (int p = 0; p < np; p++)
		for (int r = 0; r < tps[p]; r++)
			load[holders[p][r]] = 0;
	axis_sync(x, np, holders, tps, m->kv_heads,
		  (2.0 * m->heads / m->kv_heads * dh * C + 2.0 * dh * C) * gb,
		  load, scratch);
	axis_sync(x, np, holders, tps, m->ffn, 3.0 * C * gb, load, scratch);
	/* two replicated norm vectors: among TP rank 0 of each pipeline */
	for (int p = 0; p < np; p++)
		lead[p] = holders[p][0];
	ring_link(x, lead, np, scratch, &bw, &lat);
	for (int p = 0; p < np; p++)
		load[lead[p]] += allreduce_s(2.0 * C * gb, np, bw, lat);
	for (int p = 0; p < np; p++)
		for (int r = 0; r < tps[p]; r++)
			worst = load[holders[p][r]] > worst
				    ? load[holders[p][r]]
				    : worst;
out:
	free(scratch);
	free(lead);
	return worst;
}

typedef struct dp_seg {
	int l0, l1;   /* layers [l0, l1) with the same holders everywhere */
	int *st;      /* [np] holding stage per pipeline */
	double ready; /* earliest start, s from iteration start */
	double cost;  /* sync time of the whole segment, s */
} dp_seg;

static int cmp_seg(const void *a, const void *b)
{
	const dp_seg *x = a, *y = b;

	if (x->ready != y->ready)
		return x->ready < y->ready ? -1 : 1;
	return (x->l0 > y->l0) - (x->l0 < y->l0);
}

/* Sync of a replicated (V, C) table among the leaders of one stage per
 * pipeline, then a broadcast inside each TP group. */
static double table_sync_s(const sched_ctx *x, int np,
			   const int *const *holders, const int *tps,
			   int *scratch)
{
	double bytes = (double)x->m.vocab * x->m.hidden *
		       elem_bytes(x, &x->dev[holders[0][0]]);
	double bw, lat, bc = 0;

	for (int p = 0; p < np; p++) {
		scratch[np + p] = holders[p][0];
		if (tps[p] > 1) {
			int n = x->dev[holders[p][0]].node;
			double b = bytes / (sched_bw_gbps(x, n, n) * GB);
			bc = b > bc ? b : bc;
		}
	}
	ring_link(x, scratch + np, np, scratch, &bw, &lat);
	return allreduce_s(bytes, np, bw, lat) + bc;
}

/* ZeRO: the all-gather of the updated shards follows the optimizer step,
 * after every reduce-scatter; each job adds its time to its holders'
 * load, and the busiest GPU's load is the exposed all-gather time. */
static void ag_add(double *ag, int np, const int *const *holders,
		   const int *tps, double cost)
{
	for (int p = 0; cost > 0 && p < np; p++)
		for (int r = 0; r < tps[p]; r++)
			ag[holders[p][r]] += cost;
}

/* Run one sync job on its devices: start when ready and every holder is
 * free; returns its end time. */
static double run_job(double *busy, int np, const int *const *holders,
		      const int *tps, double ready, double cost)
{
	double start = ready;

	for (int p = 0; p < np; p++)
		for (int r = 0; r < tps[p]; r++)
			if (busy[holders[p][r]] > start)
				start = busy[holders[p][r]];
	for (int p = 0; p < np; p++)
		for (int r = 0; r < tps[p]; r++)
			busy[holders[p][r]] = start + cost;
	return start + cost;
}

/* Finish time of stage s's last backward in pipeline p under 1F1B: where
 * that stage's ranks start their sync without overlap (each rank syncs
 * after its own schedule, not after the whole pipeline's).  With layer
 * l >= 0 and overlap: when layer l's gradient is final, i.e. its
 * backward in the last micro-batch is done, the stage's backward running
 * from its last layer down, an even share each (the head's and the
 * embedding's backward are spread over the layers: on the last stage a
 * layer is priced ready up to the head's share early). */
static double stage_finish(const sched_ctx *x, const hexi_pipeline *pp,
			   const double *c, int s, int l)
{
	double bf = sched_pipe_recompute(x, pp) ? 3.0 / 4.0 : 2.0 / 3.0;
	double t = pp->time_s;
	const hexi_stage *st = &pp->stages[s];

	for (int k = 0; k < s; k++)
		t -= bf * c[k];
	if (l >= st->layer_begin && st->layer_end > st->layer_begin)
		t -= bf * c[s] * (l - st->layer_begin) /
		     (st->layer_end - st->layer_begin);
	return t;
}

/* The layers' sync segments: runs of layers with the same holding stage
 * in every pipeline, or (per_layer) one layer each. */
static int build_segs(const hexi_pipeline *pp, int np, int L, dp_seg *seg,
		      int *stbuf, int per_layer)
{
	int nseg = 0, *cur = stbuf;

	for (int p = 0; p < np; p++)
		cur[p] = 0;
	for (int l = 0; l < L; l++) {
		int change = l == 0 || per_layer;
		for (int p = 0; p < np; p++)
			while (l >= pp[p].stages[cur[p]].layer_end) {
				cur[p]++;
				change = 1;
			}
		if (change) {
			seg[nseg].l0 = l;
			seg[nseg].st = stbuf + (size_t)(nseg + 1) * np;
			memcpy(seg[nseg].st, cur, sizeof(int) * (size_t)np);
			nseg++;
		}
		seg[nseg - 1].l1 = l + 1;
	}
	return nseg;
}

double sched_hexi_dp(const sched_ctx *x, const hexi_pipeline *pp, int np,
		     const sched_map *map, const double *stage_s,
		     double *total_s)
{
	int L = x->m.layers, nseg, *base = NULL, *tps = NULL, *stbuf = NULL;
	const int **hold = NULL;
	double maxT = 0, end = 0, *busy = NULL, *load = NULL, *ag = NULL;
	double rs = x->t.zero >= 1 ? 0.5 : 1.0, ag_max = 0;
	/* zero 2 reduce-scatters every micro-batch (the gradient is not
	 * accumulated in full, DECISIONS 125): rounds of the longest pipeline,
	 * charged where the last one runs (the CPU runtime's are blocking) */
	double rounds = 1;
	dp_seg *seg = NULL;

	*total_s = 0;
	for (int p = 0; p < np; p++) {
		maxT = pp[p].time_s > maxT ? pp[p].time_s : maxT;
		if (x->t.zero >= 2 && pp[p].micro_batches > rounds)
			rounds = pp[p].micro_batches;
	}
	if (np < 2)
		return maxT;
	base = calloc((size_t)np, sizeof(int));
	tps = calloc((size_t)np, sizeof(int));
	hold = calloc((size_t)np, sizeof(*hold));
	stbuf =
	    calloc((size_t)(L + 2) * (size_t)np + 2 * (size_t)np, sizeof(int));
	seg = calloc((size_t)L, sizeof(*seg));
	busy = calloc((size_t)x->ndev, sizeof(double));
	load = calloc((size_t)x->ndev, sizeof(double));
	ag = calloc((size_t)x->ndev, sizeof(double));
	if (!base || !tps || !hold || !stbuf || !seg || !busy || !load || !ag) {
		end = -1;
		goto out;
	}
	for (int p = 1; p < np; p++)
		base[p] = base[p - 1] + pp[p - 1].nstages;
	/* Overlap (zero 0's all-reduce, zero 1's reduce-scatter; zero 2's
	 * rounds are blocking) starts each layer as its gradient is final;
	 * otherwise a stage's segments start when its last backward is done
	 * (DECISIONS 160, 179).  Zero 1's all-gather follows the step. */
	const int per_layer = x->overlap_dp && x->t.zero <= 1;
	nseg = build_segs(pp, np, L, seg, stbuf, per_layer);
	for (int k = 0; k < nseg; k++) {
		seg[k].ready = 0;
		for (int p = 0; p < np; p++) {
			int s = seg[k].st[p];
			double f = stage_finish(x, &pp[p], stage_s + base[p], s,
						per_layer ? seg[k].l0 : -1);
			hold[p] = map->dev[base[p] + s];
			tps[p] = pp[p].stages[s].tp;
			seg[k].ready = f > seg[k].ready ? f : seg[k].ready;
		}
		/* per layer, a layer held by the same stages as the one
		 * before costs what it cost */
		if (k > 0 && per_layer &&
		    memcmp(seg[k].st, seg[k - 1].st,
			   sizeof(int) * (size_t)np) == 0)
			seg[k].cost = seg[k - 1].cost;
		else
			seg[k].cost =
			    (seg[k].l1 - seg[k].l0) *
			    sched_hexi_layer_sync_s(x, np, hold, tps, load);
		*total_s += seg[k].cost * (1 + (rounds - 1) * rs);
	}
	qsort(seg, (size_t)nseg, sizeof(*seg), cmp_seg);
	for (int k = 0; k < nseg; k++) {
		double e;
		for (int p = 0; p < np; p++) {
			hold[p] = map->dev[base[p] + seg[k].st[p]];
			tps[p] = pp[p].stages[seg[k].st[p]].tp;
		}
		e = run_job(busy, np, hold, tps, seg[k].ready,
			    rounds * rs * seg[k].cost);
		end = e > end ? e : end;
		ag_add(ag, np, hold, tps, (1 - rs) * seg[k].cost);
	}
	for (int which = 0; which < 2; which++) {
		double ready = 0, cost, e;
		int *scratch = stbuf; /* segments are done with it */
		for (int p = 0; p < np; p++) {
			int s = which ? pp[p].nstages - 1 : 0;
			double f =
			    stage_finish(x, &pp[p], stage_s + base[p], s, -1);
			hold[p] = map->dev[base[p] + s];
			tps[p] = pp[p].stages[s].tp;
			ready = f > ready ? f : ready;
		}
		cost = table_sync_s(x, np, hold, tps, scratch);
		*total_s += cost * (1 + (rounds - 1) * rs);
		e = run_job(busy, np, hold, tps, ready, rounds * rs * cost);
		end = e > end ? e : end;
		ag_add(ag, np, hold, tps, (1 - rs) * cost);
	}
	end = end > maxT ? end : maxT;
	for (int i = 0; rs < 1 && i < x->ndev; i++)
		ag_max = ag[i] > ag_max ? ag[i] : ag_max;
	end += ag_max;
out:
	free(base);
	free(tps);
	free(hold);
	free(stbuf);
	free(seg);
	free(busy);
	free(load);
	free(ag);
	return end;
}

/* The optimizer step follows the last gradient; MFU in SI TFLOPS. */
static void hexi_finish(const sched_ctx *x, const hexi_pipeline *pp, int np,
			double dp_end, double dp_total, sched_eval *ev)
{
	double G = 0;

	for (int p = 0; p < np; p++)
		G += pp[p].batch;
	ev->dp_sync_s = dp_total;
	ev->iter_s = dp_end + ev->opt_s;
	ev->tokens_per_s = G * x->m.seq_len / ev->iter_s;
	ev->mfu = G * sched_model_flops(&x->m) / ev->iter_s /
		  (x->peak_sum_tflops * 1e12);
}

/* 1F1B grows by the largest stage per micro-batch from the first one. */
static int hexi_linear_from(int S)
{
	(void)S;
	return 1;
}

const sched_cost_model sched_cost_hexiscale = {
    .name = "hexiscale",
    .stage = sched_hexi_stage,
    .pipe_s = sched_hexi_pipe_s,
    .linear_from = hexi_linear_from,
    .dp = sched_hexi_dp,
    .finish = hexi_finish,
};
