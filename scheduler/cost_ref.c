/*
 * cost_ref.c - the `reference` cost model: a transcription of the formulas
 * of the authors' public cost model (FlashFlex/HexiScale, experimental/
 * cost_modeling.py), so our planner can be compared on their own terms.
 *
 * Units are theirs: 1 TFLOPS = 2^40 FLOP/s, 1 GB/s = 2^30 B/s, s = 4096,
 * V = 32000, 2 bytes per element.  doc/COSTMODEL.md lists every formula.
 */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "sched_int.h"

static double ref_bw(const sched_ctx *x, int i, int j)
{
	return sched_bw_gbps(x, x->dev[i].node, x->dev[j].node) * SCHED_TWO30;
}

/* a_c b s h^2 (1 + s/(6h) + V/(16 L h)): FLOP of one layer, one micro-batch */
static double ref_layer_flop(const sched_ctx *x, int mb, int recompute)
{
	double h = x->m.hidden, s = SCHED_REF_SEQ, V = SCHED_REF_VOCAB;
	double L = x->m.layers;
	double ac = recompute ? 96.0 : 72.0;

	return ac * mb * s * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h));
}

/* a_t max_i sum_{j != i} b s h 2 / (t B_ij) */
static double ref_tp_s(const sched_ctx *x, const sched_sdesc *d)
{
	double msg =
	    (double)d->mb * SCHED_REF_SEQ * x->m.hidden * SCHED_REF_BYTES;
	double at = d->recompute ? 12.0 : 8.0, worst = 0;

	for (int i = 0; i < d->tp; i++) {
		double sum = 0;
		for (int j = 0; j < d->tp; j++)
			if (d->dev[j] != d->dev[i])
				sum += msg / (d->tp *
					      ref_bw(x, d->dev[i], d->dev[j]));
		if (sum > worst)
			worst = sum;
	}
	return at * worst;
}

/* 2 min_{u in T, v in T'} [M/B_uv + sum_{w in T', w != v} M/(|T'| B_vw)] */
static double ref_pp_s(const sched_ctx *x, const sched_sdesc *d)
{
	double M =
	    (double)d->mb * SCHED_REF_SEQ * x->m.hidden * SCHED_REF_BYTES;
	double best = DBL_MAX;

	if (!d->next)
		return 0;
	for (int u = 0; u < d->tp; u++)
		for (int v = 0; v < d->next_tp; v++) {
			double cost = M / ref_bw(x, d->dev[u], d->next[v]);
			for (int w = 0; w < d->next_tp; w++)
				if (d->next[w] != d->next[v])
					cost += M / (d->next_tp *
						     ref_bw(x, d->next[v],
							    d->next[w]));
			if (cost < best)
				best = cost;
		}
	return 2.0 * best;
}

void sched_ref_stage(const sched_ctx *x, const sched_sdesc *d, sched_scost *out)
{
	double h = x->m.hidden, s = SCHED_REF_SEQ, V = SCHED_REF_VOCAB;
	double B = SCHED_REF_BYTES, t = d->tp, cap = DBL_MAX;
	const sched_dev *d0 = &x->dev[d->dev[0]];

	out->comp_layer_s = ref_layer_flop(x, d->mb, d->recompute) /
			    (d0->peak_tflops * SCHED_TWO40 * t);
	out->tp_layer_s = ref_tp_s(x, d);
	out->fixed_s = 0;
	out->pp_s = ref_pp_s(x, d);
	/* parameters x4 (weights, grads, 2 Adam moments) at B bytes; ZeRO
	 * (not in their formulas) divides the copies it shards over the DP
	 * replicas: zero 1 the 2 moments, zero 2 the gradient as well */
	double D = d->dp > 1 ? d->dp : 1;
	double copies = x->t.zero >= 2	 ? 1.0 + 3.0 / D
			: x->t.zero == 1 ? 2.0 + 2.0 / D
					 : 4.0;

	out->mem_layer_b =
	    12.0 * h * h / t * B * copies + d->mb * s * h / t * B;
	out->mem_fixed_b = (h * d->last + V * h * d->last +
			    h * (V + s) * d->first) *
			       B * copies +
			   d->mb * s * h * 2.0 * B;
	for (int i = 0; i < d->tp; i++)
		if (x->dev[d->dev[i]].mem_gib * SCHED_GIB < cap)
			cap = x->dev[d->dev[i]].mem_gib * SCHED_GIB;
	out->cap_b = cap;
}

/* GPipe slot sum: sum over columns col = 0 .. S+m-2 of
 * max { c_k : k <= col <= k+m-1 }. */
double sched_ref_pipe_s(const double *c, int S, int m)
{
	double total = 0;

	for (int col = 0; col <= S + m - 2; col++) {
		int lo = col - m + 1 > 0 ? col - m + 1 : 0;
		int hi = col < S - 1 ? col : S - 1;
		double mx = 0;
		for (int k = lo; k <= hi; k++)
			if (c[k] > mx)
				mx = c[k];
		total += mx;
	}
	return total;
}

/* Holder of layer l in pipeline p: stage index. */
static int ref_stage_of(const hexi_pipeline *pp, int l)
{
	for (int s = 0; s < pp->nstages; s++)
		if (l >= pp->stages[s].layer_begin &&
		    l < pp->stages[s].layer_end)
			return s;
	return -1;
}

/* 2 max_i sum_{j != i} 12 h^2 2 / (t_min |G| B_ij) over one DP group G. */
static double ref_dp_group_s(const sched_ctx *x, const int *g, int n, int tmin)
{
	double bytes =
	    12.0 * x->m.hidden * (double)x->m.hidden * SCHED_REF_BYTES;
	double worst = 0;

	for (int i = 0; i < n; i++) {
		double sum = 0;
		for (int j = 0; j < n; j++)
			if (g[j] != g[i])
				sum += bytes / ((double)tmin * n *
						ref_bw(x, g[i], g[j]));
		if (sum > worst)
			worst = sum;
	}
	return 2.0 * worst;
}

/*
 * Per layer: the holder TP groups of every pipeline are padded to the
 * largest degree (member k of a group of t repeated tmax/t times, i.e.
 * padded[i] = group[floor(i t / tmax)]); DP group i takes padded[i] of
 * every pipeline; the first max_p floor(t_p / tmin) groups are charged.
 */
double sched_ref_dp_s(const sched_ctx *x, const hexi_pipeline *pp, int np,
		      const sched_map *map)
{
	int *g = malloc(sizeof(int) * (size_t)(np > 0 ? np : 1));
	int *base = calloc((size_t)(np > 0 ? np : 1), sizeof(int));
	double total = 0;

	if (!g || !base || np < 2)
		goto out;
	for (int p = 1; p < np; p++)
		base[p] = base[p - 1] + pp[p - 1].nstages;
	for (int l = 0; l < x->m.layers; l++) {
		int tmax = 0, tmin = 1 << 30, rel = 0;
		for (int p = 0; p < np; p++) {
			int t = pp[p].stages[ref_stage_of(&pp[p], l)].tp;
			tmax = t > tmax ? t : tmax;
			tmin = t < tmin ? t : tmin;
		}
		for (int p = 0; p < np; p++) {
			int t = pp[p].stages[ref_stage_of(&pp[p], l)].tp;
			rel = t / tmin > rel ? t / tmin : rel;
		}
		for (int i = 0; i < rel && i < tmax; i++) {
			for (int p = 0; p < np; p++) {
				int s = ref_stage_of(&pp[p], l);
				int t = pp[p].stages[s].tp;
				g[p] = map->dev[base[p] + s]
					       [(int)((long)i * t / tmax)];
			}
			total += ref_dp_group_s(x, g, np, tmin);
		}
	}
out:
	free(g);
	free(base);
	return total;
}

/* Their DP formula knows no overlap: the whole sync follows the pipelines. */
static double ref_dp(const sched_ctx *x, const hexi_pipeline *pp, int np,
		     const sched_map *map, const double *stage_s,
		     double *total_s)
{
	(void)stage_s;
	*total_s = sched_ref_dp_s(x, pp, np, map);
	return 0;
}

/* T = 1.8 max_p T_p + 1.1 T_dp; MFU with a_c over every GPU's peak. */
static void ref_finish(const sched_ctx *x, const hexi_pipeline *pp, int np,
		       double dp_end, double dp_total, sched_eval *ev)
{
	double G = 0, h = x->m.hidden, s = SCHED_REF_SEQ, V = SCHED_REF_VOCAB;
	double ac = x->t.recompute ? 96.0 : 72.0, flop;

	(void)dp_end;
	for (int p = 0; p < np; p++)
		G += pp[p].batch;
	flop = ac * x->m.layers * G * s * h * h *
	       (1.0 + s / (6.0 * h) + V / (16.0 * x->m.layers * h));
	ev->dp_sync_s = dp_total;
	ev->iter_s = 1.8 * ev->max_pipe_s + 1.1 * dp_total;
	ev->tokens_per_s = G * s / ev->iter_s;
	ev->mfu = flop / ev->iter_s / (x->peak_sum_tflops * SCHED_TWO40);
}

/* The slot sum grows by the largest stage per micro-batch from m = S-1 on
 * (every later column spans all stages). */
static int ref_linear_from(int S)
{
	return S - 1 > 1 ? S - 1 : 1;
}

const sched_cost_model sched_cost_reference = {
    .name = "reference",
    .stage = sched_ref_stage,
    .pipe_s = sched_ref_pipe_s,
    .linear_from = ref_linear_from,
    .dp = ref_dp,
    .finish = ref_finish,
};
