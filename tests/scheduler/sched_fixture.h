/*
 * sched_fixture.h - hand-built clusters and contexts for the cost-model
 * and planner tests, independent of the catalog's numbers (header only).
 */
#ifndef HEXI_SCHED_FIXTURE_H
#define HEXI_SCHED_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

typedef struct fx_node {
	const char *type;
	int ngpus;
	double intra_gbps, tflops, eff, mem_gib;
} fx_node;

typedef struct fx {
	hexi_cluster c;
	hexi_node nodes[16];
	int idx[16][16];
	sched_ctx x;
} fx;

static __attribute__((unused)) void fx_model(hexi_model *m, const char *name,
					     int L, int C, int H, int KV, int F)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->name, name);
	m->layers = L;
	m->hidden = C;
	m->heads = H;
	m->kv_heads = KV;
	m->ffn = F;
	m->vocab = 32000;
	m->seq_len = 4096;
}

static __attribute__((unused)) void fx_train(hexi_train *t, int gb, int mb)
{
	memset(t, 0, sizeof(*t));
	t->global_batch = gb;
	t->micro_batch = mb;
	t->recompute = 1;
	t->bytes_per_param = 16;
	t->act_bytes = 2;
	t->reserve_gib = 2;
}

/* Fill f->c and f->x by hand from n node descriptions. */
static __attribute__((unused)) void
fx_init(fx *f, const fx_node *nd, int n, double inter_gbps, const hexi_model *m,
	const hexi_train *t, hexi_cost_kind kind)
{
	int k = 0, ndev = 0;

	memset(f, 0, sizeof(*f));
	f->c.nnodes = n;
	f->c.nodes = f->nodes;
	f->c.inter_bw_gbps = inter_gbps;
	for (int i = 0; i < n; i++)
		ndev += nd[i].ngpus;
	f->x.c = &f->c;
	f->x.m = *m;
	f->x.t = *t;
	f->x.kind = kind;
	f->x.overlap_dp = 1;
	f->x.dev = calloc((size_t)ndev, sizeof(sched_dev));
	f->x.node_first = calloc((size_t)n + 1, sizeof(int));
	for (int i = 0; i < n; i++) {
		snprintf(f->nodes[i].name, HEXI_NAME_MAX, "n%d", i);
		snprintf(f->nodes[i].gpu_type, HEXI_NAME_MAX, "%s", nd[i].type);
		f->nodes[i].ngpus = nd[i].ngpus;
		f->nodes[i].gpu_index = f->idx[i];
		f->nodes[i].intra_bw_gbps = nd[i].intra_gbps;
		f->x.node_first[i] = k;
		for (int j = 0; j < nd[i].ngpus; j++, k++) {
			f->idx[i][j] = j;
			f->x.dev[k].node = i;
			f->x.dev[k].gpu = j;
			f->x.dev[k].type = i; /* one type per node here */
			f->x.dev[k].peak_tflops = nd[i].tflops;
			f->x.dev[k].eff = nd[i].eff;
			f->x.dev[k].mem_gib = nd[i].mem_gib;
			/* the cost model's generic attention figures (a type
			 * without them in the catalog); tests set their own */
			f->x.dev[k].attn_eff = SCHED_ATTN_EFF;
			f->x.dev[k].attn_bwd_eff = SCHED_ATTN_BWD_EFF;
			f->x.dev[k].attn_own_eff = SCHED_ATTN_OWN_EFF;
			f->x.peak_sum_tflops += nd[i].tflops;
		}
	}
	f->x.node_first[n] = k;
	f->x.ndev = k;
	f->x.ntypes = n;
}

static __attribute__((unused)) void fx_fini(fx *f)
{
	sched_ctx_fini(&f->x);
}

/* One stage of tp devices (node, first gpu .. first gpu + tp - 1). */
static __attribute__((unused)) void fx_stage(hexi_stage *s, int l0, int l1,
					     int node, int gpu0, int tp)
{
	memset(s, 0, sizeof(*s));
	s->layer_begin = l0;
	s->layer_end = l1;
	s->tp = tp;
	s->devices = calloc((size_t)tp, sizeof(hexi_device));
	for (int i = 0; i < tp; i++) {
		s->devices[i].node = node;
		s->devices[i].gpu = gpu0 + i;
	}
}

static __attribute__((unused)) void fx_pipe_free(hexi_pipeline *p, int np)
{
	for (int q = 0; q < np; q++) {
		for (int s = 0; s < p[q].nstages; s++)
			free(p[q].stages[s].devices);
		free(p[q].stages);
	}
}

#endif
