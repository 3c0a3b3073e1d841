/*
 * planner_metis.c - phase 1: partition the GPU graph into P pipelines with
 * METIS (multi-constraint k-way: vertex weights compute and memory, edge
 * weights from link bandwidth).  idx_t is 32-bit on Debian, so every
 * weight is scaled into 1..1000.
 */
#include "config.h"

#include <math.h>
#include <metis.h>
#include <stdlib.h>
#include <string.h>

#include "planner_int.h"

#define WSCALE 1000.0

typedef struct pl_graph {
	idx_t n, ne;	/* vertices, directed edge entries */
	idx_t *xadj;	/* [n + 1] */
	idx_t *adj, *w; /* [ne] */
	idx_t *vw;	/* [2 n] compute, memory */
	int *node;	/* [n] node of a vertex (its first GPU) */
} pl_graph;

/* Undirected edge list before CSR. */
typedef struct pl_edge {
	int u, v;
	double bw;
} pl_edge;

static int cmp_edge(const void *a, const void *b)
{
	const pl_edge *x = a, *y = b;

	if (x->u != y->u)
		return x->u < y->u ? -1 : 1;
	return (x->v > y->v) - (x->v < y->v);
}

static idx_t scale(double v, double max)
{
	double s = max > 0 ? floor(WSCALE * v / max + 0.5) : 1;

	return (idx_t)(s < 1 ? 1 : s > WSCALE ? WSCALE : s);
}

/* CSR from edges e[ne] (u < v, deduplicated here). */
static hexi_rc to_csr(const sched_ctx *x, pl_graph *g, pl_edge *e, long ne,
		      int dir)
{
	long k = 0;
	double bmax = 0, bmin = 1e300;
	idx_t *fill = NULL;

	qsort(e, (size_t)ne, sizeof(*e), cmp_edge);
	for (long i = 0; i < ne; i++)
		if (k == 0 || e[k - 1].u != e[i].u || e[k - 1].v != e[i].v)
			e[k++] = e[i];
	ne = k;
	for (long i = 0; i < ne; i++) {
		bmax = e[i].bw > bmax ? e[i].bw : bmax;
		bmin = e[i].bw < bmin ? e[i].bw : bmin;
	}
	(void)x;
	g->xadj = calloc((size_t)g->n + 1, sizeof(idx_t));
	g->adj = calloc((size_t)(2 * ne + 1), sizeof(idx_t));
	g->w = calloc((size_t)(2 * ne + 1), sizeof(idx_t));
	fill = calloc((size_t)g->n + 1, sizeof(idx_t));
	if (!g->xadj || !g->adj || !g->w || !fill) {
		free(fill);
		return hexi_error(HEXI_ERR_NOMEM, "phase 1: graph");
	}
	for (long i = 0; i < ne; i++) {
		g->xadj[e[i].u + 1]++;
		g->xadj[e[i].v + 1]++;
	}
	for (idx_t i = 0; i < g->n; i++)
		g->xadj[i + 1] += g->xadj[i];
	for (long i = 0; i < ne; i++) {
		/* dir 0: fast links heavy (kept inside a pipeline);
		 * dir 1: slow links heavy, fast links are cut (DP) */
		idx_t w = dir ? scale(bmin * bmax / e[i].bw, bmax)
			      : scale(e[i].bw, bmax);
		idx_t a = g->xadj[e[i].u] + fill[e[i].u]++;
		idx_t b = g->xadj[e[i].v] + fill[e[i].v]++;
		g->adj[a] = e[i].v;
		g->w[a] = w;
		g->adj[b] = e[i].u;
		g->w[b] = w;
	}
	g->ne = 2 * (idx_t)ne;
	free(fill);
	return HEXI_OK;
}

static void graph_free(pl_graph *g)
{
	free(g->xadj);
	free(g->adj);
	free(g->w);
	free(g->vw);
	free(g->node);
	memset(g, 0, sizeof(*g));
}

/* Node pairs joined by edges: all pairs for up to 32 nodes, otherwise a
 * hypercube-like set (offsets 1, 2, 4, ...) so big clusters stay sparse. */
static int node_linked(int a, int b, int nn)
{
	int d = b > a ? b - a : a - b;

	if (nn <= 32)
		return 1;
	d = d < nn - d ? d : nn - d;
	return (d & (d - 1)) == 0;
}

/* Vertices = groups of GPUs (a GPU, or a TP group); vdev[v] lists them. */
static hexi_rc build_graph(const sched_ctx *x, int nv, const int *vfirst,
			   const int *vdevs, int dir, pl_graph *g)
{
	int nn = x->c->nnodes;
	long ne = 0;
	pl_edge *e = NULL;
	double fmax = 0, mmax = 0, *f = NULL, *mm = NULL;
	hexi_rc rc = HEXI_ERR_NOMEM;
	int *cnt = calloc((size_t)nn, sizeof(int));
	int *pos = calloc((size_t)nv + 1, sizeof(int));

	memset(g, 0, sizeof(*g));
	g->n = nv;
	g->vw = calloc((size_t)nv * 2, sizeof(idx_t));
	g->node = calloc((size_t)nv, sizeof(int));
	f = calloc((size_t)nv * 2, sizeof(double));
	if (!g->vw || !g->node || !f || !cnt || !pos)
		goto out;
	mm = f + nv;
	for (int v = 0; v < nv; v++) {
		for (int i = vfirst[v]; i < vfirst[v + 1]; i++) {
			const sched_dev *d = &x->dev[vdevs[i]];
			f[v] += d->peak_tflops * d->eff;
			mm[v] += d->mem_gib;
		}
		g->node[v] = x->dev[vdevs[vfirst[v]]].node;
		pos[v] = cnt[g->node[v]]++;
		fmax = f[v] > fmax ? f[v] : fmax;
		mmax = mm[v] > mmax ? mm[v] : mmax;
	}
	for (int v = 0; v < nv; v++) {
		g->vw[2 * v] = scale(f[v], fmax);
		g->vw[2 * v + 1] = scale(mm[v], mmax);
	}
	/* edges: complete inside a node; across linked node pairs every
	 * pair of vertices, or past 128 vertices only equal local positions */
	for (int pass = 0; pass < 2; pass++) {
		ne = 0;
		for (int u = 0; u < nv; u++)
			for (int v = u + 1; v < nv; v++) {
				int a = g->node[u], b = g->node[v];
				if (a != b && (!node_linked(a, b, nn) ||
					       (nv > 128 && pos[u] != pos[v])))
					continue;
				if (pass) {
					e[ne].u = u;
					e[ne].v = v;
					e[ne].bw = sched_bw_gbps(x, a, b);
				}
				ne++;
			}
		if (!pass) {
			e = calloc((size_t)ne + 1, sizeof(*e));
			if (!e)
				goto out;
		}
	}
	rc = to_csr(x, g, e, ne, dir);
out:
	free(e);
	free(f);
	free(cnt);
	free(pos);
	if (rc != HEXI_OK)
		graph_free(g);
	return rc;
}

/* Every part gets at least one vertex. */
static void repair(int n, int P, idx_t *part)
{
	int *size = calloc((size_t)P, sizeof(int));

	if (!size)
		return;
	for (int i = 0; i < n; i++)
		size[part[i]]++;
	for (int q = 0; q < P; q++) {
		int big = 0;
		if (size[q])
			continue;
		for (int r = 0; r < P; r++)
			big = size[r] > size[big] ? r : big;
		for (int i = n - 1; i >= 0; i--)
			if (part[i] == big) {
				part[i] = q;
				size[big]--;
				size[q]++;
				break;
			}
	}
	free(size);
}

static hexi_rc partition(pl_state *st, pl_graph *g, int P, idx_t *part)
{
	idx_t ncon = 2, np = P, obj = 0, nv = g->n; /* METIS gets copies */
	idx_t opt[METIS_NOPTIONS];
	real_t ub[2] = {1.05f, 1.2f};
	int r;

	if (P == 1 || P >= g->n) {
		for (idx_t i = 0; i < g->n; i++)
			part[i] = P == 1 ? 0 : i % P;
		return HEXI_OK;
	}
	METIS_SetDefaultOptions(opt);
	opt[METIS_OPTION_SEED] = (idx_t)(st->o->seed & 0x7fffffff);
	opt[METIS_OPTION_NUMBERING] = 0;
	if (g->n > 128)
		opt[METIS_OPTION_NITER] =
		    2; /* big graphs: fewer refinement passes */
	r = METIS_PartGraphKway(&nv, &ncon, g->xadj, g->adj, g->vw, NULL, g->w,
				&np, NULL, ub, opt, &obj, part);
	if (r != METIS_OK)
		return hexi_error(
		    HEXI_ERR_METIS,
		    "phase 1: METIS_PartGraphKway failed (%d) for "
		    "%d parts of %d vertices",
		    r, P, (int)g->n);
	repair((int)g->n, P, part);
	return HEXI_OK;
}

hexi_rc pl_phase1_metis(pl_state *st, int P, int dir, int *part)
{
	const sched_ctx *x = &st->x;
	int n = x->ndev, nv = n, *first = calloc((size_t)n + 1, sizeof(int));
	int *devs = calloc((size_t)n + 1, sizeof(int));
	idx_t *pt = calloc((size_t)n + 1, sizeof(idx_t));
	pl_graph g = {0};
	hexi_rc rc = HEXI_ERR_NOMEM;

	if (!first || !devs || !pt)
		goto out;
	for (int i = 0; i < n; i++)
		devs[i] = i;
	/* big clusters: whole nodes are the vertices while there are at
	 * least as many nodes as pipelines (METIS' multi-constraint initial
	 * bisection is slow on large uncoarsened graphs) */
	if (n > 64 && P <= x->c->nnodes) {
		nv = x->c->nnodes;
		memcpy(first, x->node_first, sizeof(int) * ((size_t)nv + 1));
	} else {
		for (int i = 0; i <= n; i++)
			first[i] = i;
	}
	if (P > 1 && P < nv) {
		rc = build_graph(x, nv, first, devs, dir, &g);
		if (rc != HEXI_OK)
			goto out;
	}
	g.n = nv;
	rc = partition(st, &g, P, pt);
	for (int v = 0; v < nv && rc == HEXI_OK; v++)
		for (int i = first[v]; i < first[v + 1]; i++)
			part[devs[i]] = (int)pt[v];
out:
	graph_free(&g);
	free(first);
	free(devs);
	free(pt);
	return rc;
}

void pl_phase1_random(pl_state *st, int P, int *part)
{
	int n = st->x.ndev, *perm = calloc((size_t)n, sizeof(int));

	if (!perm) {
		for (int i = 0; i < n; i++)
			part[i] = i % P;
		return;
	}
	for (int i = 0; i < n; i++)
		perm[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(pl_rand(st) % (uint64_t)(i + 1)), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (int i = 0; i < n; i++)
		part[perm[i]] = (int)((long)i * P / n);
	free(perm);
}

hexi_rc pl_phase1_groups(pl_state *st, const pl_cand *cand, int dir, int *part,
			 int *grp)
{
	const sched_ctx *x = &st->x;
	int nv = 0, k = 0, *first = NULL, *devs = NULL;
	idx_t *pt = NULL;
	pl_graph g = {0};
	hexi_rc rc = HEXI_ERR_NOMEM;

	for (int p = 0; p < cand->np; p++)
		nv += cand->pp[p].nstages;
	first = calloc((size_t)nv + 1, sizeof(int));
	devs = calloc((size_t)x->ndev + 1, sizeof(int));
	pt = calloc((size_t)nv + 1, sizeof(idx_t));
	if (!first || !devs || !pt)
		goto out;
	for (int i = 0; i < x->ndev; i++)
		part[i] = grp[i] = -1;
	nv = 0;
	for (int p = 0; p < cand->np; p++)
		for (int s = 0; s < cand->pp[p].nstages; s++, nv++) {
			const hexi_stage *sg = &cand->pp[p].stages[s];
			first[nv] = k;
			for (int i = 0; i < sg->tp; i++) {
				int d = sched_dev_index(x, sg->devices[i].node,
							sg->devices[i].gpu);
				devs[k++] = d;
				grp[d] = nv;
			}
		}
	first[nv] = k;
	rc = build_graph(x, nv, first, devs, dir, &g);
	if (rc != HEXI_OK)
		goto out;
	rc = partition(st, &g, cand->np, pt);
	for (int v = 0; v < nv && rc == HEXI_OK; v++)
		for (int i = first[v]; i < first[v + 1]; i++)
			part[devs[i]] = (int)pt[v];
out:
	graph_free(&g);
	free(first);
	free(devs);
	free(pt);
	return rc;
}
