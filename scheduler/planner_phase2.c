/*
 * planner_phase2.c - phase 2 of the planner: TP groups inside nodes, stage
 * order by a maximum-bandwidth path, the optimal contiguous min-max layer
 * split under memory caps, and the batch split over pipelines, then the
 * evaluation of the finished candidate (pl_finish).
 */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner_int.h"

/* ---- layer split --------------------------------------------------------- */

static int split_count(double T, double a, double c, int cap)
{
	double k = floor((T - c) / a);

	if (k < 0)
		return 0;
	return k > cap ? cap : (int)k;
}

int sched_split_layers(int L, int S, const double *a, const double *c,
		       const int *cap, int *n)
{
	double lo = 0, hi = 0;
	long sum = 0;

	if (S < 1 || S > L)
		return -1;
	for (int s = 0; s < S; s++) {
		if (cap[s] < 1 || !(a[s] > 0))
			return -1;
		sum += cap[s];
		lo = a[s] + c[s] > lo ? a[s] + c[s] : lo;
		hi = a[s] * L + c[s] > hi ? a[s] * L + c[s] : hi;
	}
	if (sum < L)
		return -1;
	lo *= 1 - 1e-12;
	hi = hi * (1 + 1e-9) + 1e-300;
	for (int it = 0; it < 200 && hi - lo > 1e-12 * hi; it++) {
		double mid = 0.5 * (lo + hi);
		long got = 0;
		int ok = 1;
		for (int s = 0; s < S; s++) {
			int k = split_count(mid, a[s], c[s], cap[s]);
			ok &= k >= 1;
			got += k;
		}
		if (ok && got >= L)
			hi = mid;
		else
			lo = mid;
	}
	sum = 0;
	for (int s = 0; s < S; s++) {
		n[s] = split_count(hi, a[s], c[s], cap[s]);
		n[s] = n[s] < 1 ? 1 : n[s];
		sum += n[s];
	}
	/* every n[s] keeps its stage under the optimal bound; drop the
	 * surplus from the stages with the dearest layers, which also gives
	 * the smallest sum of stage times (1F1B: sum + (m-1) max).  The
	 * dearest stage stays the dearest while it loses layers, so it
	 * gives all it can at once: O(S^2), not O(surplus * S) (a surplus of
	 * 1e5 layers over 1024 stages took seconds per candidate) */
	while (sum > L) {
		int w = -1, k;
		for (int s = 0; s < S; s++)
			if (n[s] > 1 && (w < 0 || a[s] > a[w]))
				w = s;
		if (w < 0)
			return -1;
		k = n[w] - 1 < sum - L ? n[w] - 1 : (int)(sum - L);
		n[w] -= k;
		sum -= k;
	}
	return sum == L ? 0 : -1;
}

/* ---- batch split --------------------------------------------------------- */

/* Time of one pipeline for m micro-batches, O(1) once the anchor is
 * known: every cost model's pipeline time grows by its largest stage per
 * micro-batch from m = anchor on (sched_cost_model.linear_from: 1 for
 * 1F1B, S-1 for the GPipe slot sum). */
typedef struct pipe_fn {
	const double *c;
	const sched_cost_model *cm;
	int S, anchor;
	double mx, t_anchor;
} pipe_fn;

static double pipe_t(const pipe_fn *f, long m)
{
	if (m >= f->anchor)
		return f->t_anchor + (double)(m - f->anchor) * f->mx;
	return f->cm->pipe_s(f->c, f->S, (int)m);
}

/* Largest m >= 1 with pipe_t(m) <= T (0 if none). */
static long pipe_count(const pipe_fn *f, double T, long M)
{
	long m;

	if (T >= f->t_anchor) {
		m = f->anchor + (long)floor((T - f->t_anchor) / f->mx);
		return m > M ? M : m;
	}
	for (m = f->anchor - 1; m >= 1; m--)
		if (pipe_t(f, m) <= T)
			return m;
	return 0;
}

/* Minimise max_p T_p(m_p) with sum m_p = M, m_p >= 1: bisection on the
 * bound (each T_p grows with m), then the surplus leaves the pipelines
 * whose time is largest.  O(np log) instead of O(M np). */
int sched_split_batches(const sched_ctx *x, int np, int M,
			const double *const *stage_s, const int *S, int *m)
{
	pipe_fn *f = calloc((size_t)(np > 0 ? np : 1), sizeof(*f));
	double lo = 0, hi = 0;
	long sum = 0;
	int rc = -1;

	if (!f || np < 1 || M < np)
		goto out;
	for (int p = 0; p < np; p++) {
		f[p].c = stage_s[p];
		f[p].S = S[p];
		f[p].cm = sched_cost_get(x->kind);
		for (int s = 0; s < S[p]; s++)
			f[p].mx =
			    stage_s[p][s] > f[p].mx ? stage_s[p][s] : f[p].mx;
		if (!(f[p].mx > 0))
			goto out;
		f[p].anchor = f[p].cm->linear_from(S[p]);
		f[p].t_anchor = f[p].cm->pipe_s(f[p].c, S[p], f[p].anchor);
		lo = pipe_t(&f[p], 1) > lo ? pipe_t(&f[p], 1) : lo;
		hi = pipe_t(&f[p], M) > hi ? pipe_t(&f[p], M) : hi;
	}
	lo *= 1 - 1e-12;
	hi = hi * (1 + 1e-9);
	for (int it = 0; it < 200 && hi - lo > 1e-12 * hi; it++) {
		double mid = 0.5 * (lo + hi);
		long got = 0;
		int ok = 1;
		for (int p = 0; p < np && ok; p++) {
			long k = pipe_count(&f[p], mid, M);
			ok = k >= 1;
			got += k;
		}
		if (ok && got >= M)
			hi = mid;
		else
			lo = mid;
	}
	for (int p = 0; p < np; p++) {
		long k = pipe_count(&f[p], hi, M);
		m[p] = (int)(k < 1 ? 1 : k);
		sum += m[p];
	}
	while (sum > M) { /* surplus from the slowest pipelines */
		int w = -1;
		for (int p = 0; p < np; p++)
			if (m[p] > 1 && (w < 0 || pipe_t(&f[p], m[p]) >
						      pipe_t(&f[w], m[w])))
				w = p;
		if (w < 0)
			goto out;
		m[w]--;
		sum--;
	}
	rc = sum == M ? 0 : -1;
out:
	free(f);
	return rc;
}

/* ---- phase 2 ------------------------------------------------------------- */

typedef struct pl_grp {
	int node, tp, pipe;
	int *dev; /* [tp] context indices */
} pl_grp;

/* qsort_r keys (no globals: hexi_plan_create may run in several threads) */
typedef struct dev_key {
	const sched_dev *dev;
	const int *part, *grp;
} dev_key;

static int cmp_dev(const void *a, const void *b, void *arg)
{
	const dev_key *kk = arg;
	int i = *(const int *)a, j = *(const int *)b;
	const sched_dev *d = kk->dev;
	int k[4] = {kk->part[i], d[i].node, kk->grp ? kk->grp[i] : 0, i};
	int l[4] = {kk->part[j], d[j].node, kk->grp ? kk->grp[j] : 0, j};

	for (int q = 0; q < 4; q++)
		if (k[q] != l[q])
			return k[q] < l[q] ? -1 : 1;
	return 0;
}

/* Order the nodes nd[k] of one pipeline: maximum-bandwidth path (largest
 * bottleneck, then largest sum), ties broken by the given order. */
static void order_nodes(const sched_ctx *x, int *nd, int k)
{
	int best[16], cur[16], used[16];
	double bmin = -1, bsum = -1;

	if (!x->c->pair_bw_gbps || k < 3 || k > 16)
		return; /* uniform links: every order ties */
	for (int start = 0; start < k && start < 4; start++) {
		double mn = DBL_MAX, sm = 0;
		memset(used, 0, sizeof(used));
		cur[0] = start;
		used[start] = 1;
		for (int i = 1; i < k; i++) {
			int w = -1;
			double wb = -1;
			for (int j = 0; j < k; j++) {
				double b =
				    sched_bw_gbps(x, nd[cur[i - 1]], nd[j]);
				if (!used[j] && b > wb) {
					wb = b;
					w = j;
				}
			}
			cur[i] = w;
			used[w] = 1;
			mn = wb < mn ? wb : mn;
			sm += wb;
		}
		if (mn > bmin || (mn == bmin && sm > bsum)) {
			bmin = mn;
			bsum = sm;
			memcpy(best, cur, sizeof(int) * (size_t)k);
		}
	}
	for (int i = 0; i < k; i++)
		cur[i] = nd[best[i]];
	memcpy(nd, cur, sizeof(int) * (size_t)k);
}

/* The memory constraint of the stage that holds the fewest layers, for a
 * pipeline whose caps cap[S] cannot hold L layers. */
static void why_memory(pl_state *st, pl_grp **g, int S, const int *cap,
		       const sched_scost *k, pl_why *why)
{
	const sched_ctx *x = &st->x;
	int L = x->m.layers, w = 0, want;
	const sched_dev *d;
	double need;

	for (int s = 1; s < S; s++)
		if (cap[s] < cap[w])
			w = s;
	want = (L + S - 1) / S;
	want = cap[w] + 1 > want ? cap[w] + 1 : want;
	want = want > L ? L : want;
	d = &x->dev[g[w]->dev[0]];
	need = sched_stage_mem_b(&k[w], want) / SCHED_GIB;
	pl_why_set(why, HEXI_ERR_NOFIT,
		   "stage %d of %d on %s (%s x%d, %.0f GiB) needs %.1f GiB for "
		   "%d of the %d layers at micro-batch %d",
		   w, S, x->c->nodes[d->node].name,
		   x->c->nodes[d->node].gpu_type, g[w]->tp,
		   k[w].cap_b / SCHED_GIB, need, want, L, st->mb);
}

/* Stage costs of the ordered groups g[S]; layer split; fills pl. Returns
 * the min-max stage time, or a negative deficit when it cannot fit (then
 * *why names the stage). */
static double build_pipe(pl_state *st, pl_grp **g, int S, hexi_pipeline *pl,
			 pl_why *why)
{
	const sched_ctx *x = &st->x;
	int L = x->m.layers, mcap = st->M; /* no pipeline gets more */
	double *a = calloc((size_t)S, sizeof(double) * 2), *c = NULL, res = -1;
	int *cap = calloc((size_t)S, sizeof(int) * 2), *n = NULL;
	sched_scost *ks = calloc((size_t)S, sizeof(sched_scost));
	long capsum = 0;

	if (!a || !cap || !ks)
		goto out;
	c = a + S;
	n = cap + S;
	mcap = mcap < 1 ? 1 : mcap;
	for (int s = 0; s < S; s++) {
		sched_sdesc d = {.dev = g[s]->dev,
				 .tp = g[s]->tp,
				 .next = s + 1 < S ? g[s + 1]->dev : NULL,
				 .next_tp = s + 1 < S ? g[s + 1]->tp : 0,
				 .first = s == 0,
				 .last = s == S - 1,
				 .inflight = S - s < mcap ? S - s : mcap,
				 .mb = st->mb,
				 .recompute = x->t.recompute != 0,
				 .dp = st->np_cur};
		sched_scost k;
		double room;
		sched_stage_cost(x, &d, &k);
		a[s] = k.comp_layer_s + k.tp_layer_s;
		c[s] = k.fixed_s + k.pp_s;
		room = sched_stage_room(&k);
		cap[s] = room < 0 ? 0 : room > L ? L : (int)floor(room);
		capsum += cap[s];
		ks[s] = k;
	}
	if (sched_split_layers(L, S, a, c, cap, n) != 0) {
		res = -(double)(L > capsum ? L - capsum : 0) - 1;
		if (S > L)
			pl_why_set(why, HEXI_ERR_SHAPE,
				   "a pipeline of %d stages for the %d layers "
				   "of %s",
				   S, L, x->m.name);
		else
			why_memory(st, g, S, cap, ks, why);
		goto out;
	}
	pl->nstages = S;
	pl->stages = calloc((size_t)S, sizeof(hexi_stage));
	if (!pl->stages)
		goto out;
	res = 0;
	for (int s = 0, l = 0; s < S; s++) {
		hexi_stage *sg = &pl->stages[s];
		sg->layer_begin = l;
		sg->layer_end = l += n[s];
		sg->tp = g[s]->tp;
		sg->time_s = a[s] * n[s] + c[s];
		res = sg->time_s > res ? sg->time_s : res;
		sg->devices = calloc((size_t)sg->tp, sizeof(hexi_device));
		if (!sg->devices) {
			res = -1;
			goto out;
		}
		for (int i = 0; i < sg->tp; i++) {
			sg->devices[i].node = x->dev[g[s]->dev[i]].node;
			sg->devices[i].gpu = x->dev[g[s]->dev[i]].gpu;
		}
	}
out:
	free(a);
	free(cap);
	free(ks);
	return res;
}

static void free_stages(hexi_pipeline *pl)
{
	if (pl->stages)
		for (int s = 0; s < pl->nstages; s++)
			free(pl->stages[s].devices);
	free(pl->stages);
	pl->stages = NULL;
	pl->nstages = 0;
}

typedef struct node_key {
	const sched_ctx *x;
	int dir;
} node_key;

static int cmp_node_mem(const void *a, const void *b, void *arg)
{
	const node_key *nk = arg;
	const sched_ctx *x = nk->x;
	int i = *(const int *)a, j = *(const int *)b;
	double mi = x->dev[x->node_first[i]].mem_gib;
	double mj = x->dev[x->node_first[j]].mem_gib;

	if (mi != mj)
		return (mi > mj ? -1 : 1) * nk->dir;
	return (i > j) - (i < j);
}

/* Groups g[ng] of one pipeline: try node orders (memory descending and
 * ascending, each along a max-bandwidth path) and keep the better. */
/* Build the pipeline with nodes in the order nd[k]; keep it in *pl if it
 * beats *best (min-max stage time; a negative value is a deficit). */
static void try_order(pl_state *st, pl_grp *g, int ng, const int *nd, int k,
		      pl_grp **ord, hexi_pipeline *pl, double *best, int *have,
		      pl_why *why)
{
	hexi_pipeline tmp = {0};
	pl_why w = {0};
	int q = 0;
	double r;

	for (int i = 0; i < k; i++)
		for (int j = 0; j < ng; j++)
			if (g[j].node == nd[i])
				ord[q++] = &g[j];
	r = build_pipe(st, ord, ng, &tmp, &w);
	if (r >= 0 && (!*have || r < *best)) {
		free_stages(pl);
		*pl = tmp;
		*best = r;
		*have = 1;
		return;
	}
	if (!*have && r > *best) {
		*best = r; /* smallest deficit so far */
		*why = w;
	}
	free_stages(&tmp);
}

static int next_perm(int *a, int k)
{
	int i = k - 2, j = k - 1, t;

	while (i >= 0 && a[i] >= a[i + 1])
		i--;
	if (i < 0)
		return 0;
	while (a[j] <= a[i])
		j--;
	t = a[i];
	a[i] = a[j];
	a[j] = t;
	for (int l = i + 1, r = k - 1; l < r; l++, r--) {
		t = a[l];
		a[l] = a[r];
		a[r] = t;
	}
	return 1;
}

/* Groups g[ng] of one pipeline: node orders memory descending and
 * ascending, each along a max-bandwidth path; every order when the
 * pipeline spans at most 3 nodes (5 for the exhaustive search).  Keep the
 * best. */
static double order_and_split(pl_state *st, pl_grp *g, int ng,
			      hexi_pipeline *pl, pl_why *why)
{
	int *nd = calloc((size_t)ng, sizeof(int)), k = 0, have = 0;
	pl_grp **ord = calloc((size_t)ng, sizeof(*ord));
	double best = -DBL_MAX;

	if (!ord || !nd)
		goto out;
	for (int i = 0; i < ng; i++)
		if (k == 0 || nd[k - 1] != g[i].node)
			nd[k++] = g[i].node;
	if (k <= (st->all_orders ? 5 : 3)) {
		do
			try_order(st, g, ng, nd, k, ord, pl, &best, &have, why);
		while (next_perm(nd, k));
		goto out;
	}
	for (int dir = 1; dir >= -1; dir -= 2) {
		node_key nk = {.x = &st->x, .dir = dir};
		qsort_r(nd, (size_t)k, sizeof(int), cmp_node_mem, &nk);
		order_nodes(&st->x, nd, k);
		try_order(st, g, ng, nd, k, ord, pl, &best, &have, why);
	}
out:
	free(ord);
	free(nd);
	return best;
}

int pl_phase2_groups(pl_state *st, const int *part, int P, const int *grp,
		     pl_cand *out)
{
	const sched_ctx *x = &st->x;
	int n = x->ndev, *idx = calloc((size_t)n, sizeof(int)), ng = 0;
	pl_grp *g = calloc((size_t)n, sizeof(pl_grp));
	double deficit = 0;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	out->score = DBL_MAX;
	out->pp = calloc((size_t)P, sizeof(hexi_pipeline));
	if (!idx || !g || !out->pp)
		goto out;
	out->np = P;
	st->np_cur = P;
	for (int i = 0; i < n; i++)
		idx[i] = i;
	{
		dev_key kk = {.dev = x->dev, .part = part, .grp = grp};
		qsort_r(idx, (size_t)n, sizeof(int), cmp_dev, &kk);
	}
	for (int i = 0; i < n; i++) {
		int d = idx[i];
		if (part[d] < 0)
			continue;
		if (ng == 0 || g[ng - 1].pipe != part[d] ||
		    grp[g[ng - 1].dev[0]] != grp[d]) {
			g[ng].node = x->dev[d].node;
			g[ng].pipe = part[d];
			g[ng].dev = &idx[i];
			ng++;
		}
		g[ng - 1].tp++;
	}
	for (int p = 0, i = 0; p < P; p++) {
		int j = i;
		double r;
		while (j < ng && g[j].pipe == p)
			j++;
		if (j == i)
			goto out; /* empty pipeline */
		pl_why w = {0};
		r = order_and_split(st, g + i, j - i, &out->pp[p], &w);
		if (r < 0 && out->why.rc == HEXI_OK) {
			out->why = w;
			if (P > 1)
				pl_why_set(&out->why, w.rc,
					   "pipeline %d: %.200s", p, w.msg);
		}
		if (r < 0)
			deficit += -r;
		i = j;
	}
	if (deficit > 0) {
		out->score = PL_INFEASIBLE * (2.0 + deficit / x->m.layers);
		rc = 0;
		goto out;
	}
	rc = pl_finish(st, out);
out:
	free(idx);
	free(g);
	return rc;
}

int pl_phase2(pl_state *st, const int *part, int P, const int *tp_of_type,
	      pl_cand *out)
{
	const sched_ctx *x = &st->x;
	int n = x->ndev, *grp = calloc((size_t)n, sizeof(int)), gid = 0;
	int *idx = calloc((size_t)n, sizeof(int)), rc = -1;

	memset(out, 0, sizeof(*out));
	out->score = DBL_MAX;
	if (!grp || !idx)
		goto out;
	for (int i = 0; i < n; i++)
		idx[i] = i;
	{
		dev_key kk = {.dev = x->dev, .part = part};
		qsort_r(idx, (size_t)n, sizeof(int), cmp_dev, &kk);
	}
	for (int i = 0; i < n;) {
		int d = idx[i], j = i, k, t;
		while (j < n && part[idx[j]] == part[d] &&
		       x->dev[idx[j]].node == x->dev[d].node)
			j++;
		k = j - i;
		t = tp_of_type[x->dev[d].type];
		if (st->o->no_asymmetric_tp && (t > k || k % t)) {
			pl_why_set(&st->why, HEXI_ERR_SHAPE,
				   "one TP degree for every stage: TP %d does "
				   "not divide the %d GPUs of pipeline %d on "
				   "%s",
				   t, k, part[d],
				   x->c->nodes[x->dev[d].node].name);
			out->score = PL_INFEASIBLE * 4;
			rc = 0;
			goto out;
		}
		t = t > k ? k : t;
		t = t > st->kv ? st->kv : t;
		t = t < 1 ? 1 : t;
		for (int q = 0; q < k; q++) /* groups of t, then the rest */
			grp[idx[i + q]] = gid + q / t;
		gid += (k + t - 1) / t;
		i = j;
	}
	rc = pl_phase2_groups(st, part, P, grp, out);
out:
	free(grp);
	free(idx);
	return rc;
}

/* The stage of c furthest over its GPUs' memory, by name (the layer split
 * honours each stage's cap at the planned micro-batch count; a pipeline
 * that got fewer micro-batches than stages in flight, or the evaluation's
 * own terms, can still exceed it). */
void pl_why_fit(pl_state *st, pl_cand *c)
{
	const sched_ctx *x = &st->x;
	hexi_stage_report *rep;
	int ns = 0, k = 0, wp = 0, ws = 0, wk = 0;
	double worst = -1;

	for (int p = 0; p < c->np; p++)
		ns += c->pp[p].nstages;
	rep = calloc((size_t)ns, sizeof(*rep));
	if (rep == NULL ||
	    sched_evaluate(x, c->pp, c->np, &c->ev, rep) != HEXI_OK) {
		free(rep);
		return;
	}
	for (int p = 0; p < c->np; p++)
		for (int s = 0; s < c->pp[p].nstages; s++, k++)
			if (rep[k].mem_gib / rep[k].mem_cap_gib > worst) {
				worst = rep[k].mem_gib / rep[k].mem_cap_gib;
				wp = p;
				ws = s;
				wk = k;
			}
	{
		const hexi_stage *sg = &c->pp[wp].stages[ws];
		const hexi_node *nd = &x->c->nodes[sg->devices[0].node];
		pl_why_set(&c->why, HEXI_ERR_NOFIT,
			   "pipeline %d stage %d on %s (%s x%d, %.0f GiB) "
			   "needs %.1f GiB for %d layers at micro-batch %d",
			   wp, ws, nd->name, nd->gpu_type, sg->tp,
			   rep[wk].mem_cap_gib, rep[wk].mem_gib,
			   sg->layer_end - sg->layer_begin,
			   c->pp[wp].batch / c->pp[wp].micro_batches);
	}
	free(rep);
}

int pl_finish(pl_state *st, pl_cand *c)
{
	const double **ss = calloc((size_t)c->np, sizeof(*ss));
	int *S = calloc((size_t)c->np, sizeof(int) * 2), *m = NULL;
	double *buf = NULL;
	int rc = -1, tot = 0, k = 0;

	if (ss != NULL && S != NULL)
		m = S + c->np;
	if (!ss || !S)
		goto out;
	for (int p = 0; p < c->np; p++)
		tot += c->pp[p].nstages;
	buf = calloc((size_t)tot, sizeof(double));
	if (!buf)
		goto out;
	for (int p = 0; p < c->np; p++) {
		S[p] = c->pp[p].nstages;
		ss[p] = buf + k;
		for (int s = 0; s < S[p]; s++)
			buf[k++] = c->pp[p].stages[s].time_s;
	}
	if (st->o->uniform_batch && st->M >= c->np) {
		for (int p = 0; p < c->np; p++)
			m[p] = st->M / c->np + (p < st->M % c->np);
	} else if (sched_split_batches(&st->x, c->np, st->M, ss, S, m)) {
		pl_why_set(&c->why, HEXI_ERR_BATCH,
			   "global batch %d (%d micro-batches of %d) cannot "
			   "feed %d pipelines",
			   st->M * st->mb, st->M, st->mb, c->np);
		c->score = PL_INFEASIBLE * 8;
		rc = 0;
		goto out;
	}
	for (int p = 0; p < c->np; p++) {
		c->pp[p].micro_batches = m[p];
		c->pp[p].batch = m[p] * st->mb;
	}
	st->evals++;
	if (sched_evaluate(&st->x, c->pp, c->np, &c->ev, NULL) != HEXI_OK)
		goto out;
	c->score = c->ev.fits ? c->ev.iter_s
			      : PL_INFEASIBLE * (1.0 + c->ev.worst_mem_ratio);
	if (!c->ev.fits)
		pl_why_fit(st, c);
	rc = 0;
out:
	free(ss);
	free(S);
	free(buf);
	return rc;
}
