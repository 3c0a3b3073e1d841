/* test_layout.c - hexi_layout_create against doc/LAYOUT.md, by hand. */
#include "config.h"

#include "sched_test.h"

/* Chunk k of tensor name: rows and ranks as "b-e:r,r". */
static const char *chunk_desc(const hexi_layout *l, const char *name, int k)
{
	static char buf[600];
	int ti = hexi_layout_find(l, name), n = 0;

	for (int i = 0; ti >= 0 && i < l->nchunks; i++)
		if (l->chunks[i].tensor == ti && n++ == k) {
			snprintf(buf, sizeof(buf), "%d-%d:%s",
				 l->chunks[i].row_begin, l->chunks[i].row_end,
				 tranks(&l->chunks[i]));
			return buf;
		}
	return "(none)";
}

static int nchunks_of(const hexi_layout *l, const char *name)
{
	int ti = hexi_layout_find(l, name), n = 0;

	for (int i = 0; i < l->nchunks; i++)
		n += l->chunks[i].tensor == ti;
	return n;
}

static void test_split(void)
{
	int b, e;

	hexi_layout_split(6, 4, 0, &b, &e);
	ok(b == 0 && e == 1, "split(6,4,0) = [0,1)");
	hexi_layout_split(6, 4, 1, &b, &e);
	ok(b == 1 && e == 3, "split(6,4,1) = [1,3)");
	hexi_layout_split(6, 4, 3, &b, &e);
	ok(b == 4 && e == 6, "split(6,4,3) = [4,6)");
	hexi_layout_split(128, 3, 1, &b, &e);
	ok(b == 42 && e == 85, "split(128,3,1) = [42,85)");
	hexi_layout_split(28672, 7, 6, &b, &e);
	ok(b == 24576 && e == 28672, "split(28672,7,6)");
	hexi_layout_split(10, 0, 0, &b, &e);
	ok(b == 0 && e == 0, "t = 0 gives an empty range, no crash");
}

/* pipeline 0 = [TP2 x layers 0-2, TP1 x layers 3-7] (ranks 0,1 | 2)
 * pipeline 1 = [TP4 x layers 0-7] (ranks 3..6); tiny-8l: H = KV = 6, d = 8,
 * F = 128, V = 64, C = 48. */
static void test_tp2_tp1_vs_tp4(void)
{
	hexi_cluster *c = tcluster(
	    "{\"nodes\":[{\"name\":\"c1\",\"gpu\":\"cpu\",\"count\":3},"
	    "{\"name\":\"c2\",\"gpu\":\"cpu\",\"count\":4}],"
	    "\"inter_bw_gbps\":10}");
	tpipe pp[2] = {{4, 2, {{0, 2, 0, 0, 3}, {0, 1, 2, 3, 8}}},
		       {4, 4, {{1, 4, 0, 0, 8}}}};
	hexi_plan *p = tplan(c, "tiny-8l", 2, pp);
	hexi_layout *l = NULL;
	const hexi_tensor_layout *t;
	int ti;

	is_int(hexi_layout_create(p, &l), HEXI_OK, "layout of TP2/TP1 vs TP4");
	if (l == NULL)
		tap_bail("layout");
	is_int(l->ntensors, 1 + 8 * 9 + 2, "75 tensors");
	is_str(l->tensors[0].name, "embed.weight", "first tensor");
	is_str(l->tensors[1].name, "layers.0.attn_norm.weight", "second");
	is_str(l->tensors[2].name, "layers.0.attn.wq", "third");
	is_str(l->tensors[9].name, "layers.0.mlp.w_down", "tenth");
	is_str(l->tensors[73].name, "final_norm.weight", "final norm");
	is_str(l->tensors[74].name, "lm_head.weight", "lm head last");
	ti = hexi_layout_find(l, "layers.0.attn.wk");
	t = &l->tensors[ti];
	ok(t->ndim == 2 && t->shape[0] == 48 && t->shape[1] == 48,
	   "wk shape (KV*d, C) = (48,48)");
	is_int(t->nshards, 6, "wk: 2 + 4 shards");
	ok(t->shards[0].rank == 0 && t->shards[0].row_begin == 0 &&
	       t->shards[0].row_end == 24 && t->shards[0].pipeline == 0,
	   "rank 0 holds wk rows 0-24");
	ok(t->shards[3].rank == 4 && t->shards[3].row_begin == 8 &&
	       t->shards[3].row_end == 24 && t->shards[3].pipeline == 1,
	   "rank 4 holds wk rows 8-24 (KV heads 1,2)");
	t = &l->tensors[hexi_layout_find(l, "layers.1.attn_norm.weight")];
	ok(t->ndim == 1 && t->shape[0] == 48 && t->nshards == 6 &&
	       t->shards[1].row_begin == 0 && t->shards[1].row_end == 48,
	   "norm replicated on all 6 holders");
	t = &l->tensors[hexi_layout_find(l, "layers.2.mlp.w_down")];
	ok(t->shape[0] == 128 && t->shape[1] == 48, "w_down stored (F, C)");

	is_int(nchunks_of(l, "layers.0.attn.wq"), 4, "wq layer 0: 4 chunks");
	is_str(chunk_desc(l, "layers.0.attn.wq", 0), "0-8:0,3", "wq chunk 0");
	is_str(chunk_desc(l, "layers.0.attn.wq", 1), "8-24:0,4", "wq chunk 1");
	is_str(chunk_desc(l, "layers.0.attn.wq", 2), "24-32:1,5", "wq chunk 2");
	is_str(chunk_desc(l, "layers.0.attn.wq", 3), "32-48:1,6", "wq chunk 3");
	is_str(chunk_desc(l, "layers.2.mlp.w_gate", 0), "0-32:0,3", "gate 0");
	is_str(chunk_desc(l, "layers.2.mlp.w_gate", 1), "32-64:0,4", "gate 1");
	is_str(chunk_desc(l, "layers.2.mlp.w_gate", 2), "64-96:1,5", "gate 2");
	is_str(chunk_desc(l, "layers.2.mlp.w_gate", 3), "96-128:1,6", "gate 3");
	is_str(chunk_desc(l, "layers.5.attn.wo", 0), "0-8:2,3",
	       "wo l5 chunk 0");
	is_str(chunk_desc(l, "layers.5.attn.wo", 3), "32-48:2,6",
	       "wo l5 chunk 3");
	is_str(chunk_desc(l, "layers.3.mlp.w_up", 2), "64-96:2,5",
	       "up l3 chunk 2");
	is_str(chunk_desc(l, "layers.0.attn_norm.weight", 0),
	       "0-48:0,1,3,4,5,6", "replicated norm: one chunk, all holders");
	is_str(chunk_desc(l, "layers.7.mlp_norm.weight", 0), "0-48:2,3,4,5,6",
	       "norm of layer 7");
	is_str(chunk_desc(l, "embed.weight", 0), "0-64:0,1,3,4,5,6",
	       "embedding: first stages");
	is_str(chunk_desc(l, "lm_head.weight", 0), "0-64:2,3,4,5,6",
	       "lm_head: last stages");
	is_str(chunk_desc(l, "final_norm.weight", 0), "0-48:2,3,4,5,6",
	       "final norm: last stages");
	is_int(l->nchunks, 1 + 8 * 30 + 2, "243 chunks in all");
	{
		int prev_t = -1, prev_e = 0, okay = 1;
		for (int i = 0; i < l->nchunks; i++) {
			const hexi_chunk *k = &l->chunks[i];
			if (k->tensor != prev_t)
				okay = okay && k->row_begin == 0 &&
				       (prev_t < 0 ||
					prev_e == l->tensors[prev_t].shape[0]);
			else
				okay = okay && k->row_begin == prev_e;
			for (int j = 1; j < k->nranks; j++)
				okay = okay && k->ranks[j - 1] < k->ranks[j];
			prev_t = k->tensor;
			prev_e = k->row_end;
		}
		ok(okay, "chunks tile every tensor in order, ranks ascending");
	}
	hexi_layout_destroy(l);
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
}

/* TP 2 and 3 mixed, GQA: tiny-gqa H = 6, KV = 3, d = 8 (q rows per KV head
 * 16); p0 = TP2 ranks 0,1; p1 = TP3 ranks 2,3,4. */
static void test_tp2_vs_tp3_gqa(void)
{
	hexi_cluster *c = tcluster(
	    "{\"nodes\":[{\"name\":\"c1\",\"gpu\":\"cpu\",\"count\":2},"
	    "{\"name\":\"c2\",\"gpu\":\"cpu\",\"count\":3}],"
	    "\"inter_bw_gbps\":10}");
	tpipe pp[2] = {{3, 3, {{0, 2, 0, 0, 4}}}, {5, 5, {{1, 3, 0, 0, 4}}}};
	hexi_plan *p = tplan(c, "tiny-gqa", 2, pp);
	hexi_layout *l = NULL;
	const hexi_tensor_layout *t;

	is_int(hexi_layout_create(p, &l), HEXI_OK, "layout of TP2 vs TP3");
	if (l == NULL)
		tap_bail("layout");
	t = &l->tensors[hexi_layout_find(l, "layers.0.attn.wq")];
	ok(t->shape[0] == 48 && t->shards[1].row_begin == 16 &&
	       t->shards[1].row_end == 48,
	   "TP2 rank 1 holds q rows 16-48 (KV heads 1,2)");
	t = &l->tensors[hexi_layout_find(l, "layers.0.attn.wv")];
	ok(t->shape[0] == 24 && t->shards[4].row_begin == 16 &&
	       t->shards[4].row_end == 24,
	   "TP3 rank 2 holds v rows 16-24");
	is_int(nchunks_of(l, "layers.0.attn.wq"), 3, "wq: 3 chunks");
	is_str(chunk_desc(l, "layers.0.attn.wq", 0), "0-16:0,2", "wq 0");
	is_str(chunk_desc(l, "layers.0.attn.wq", 1), "16-32:1,3", "wq 1");
	is_str(chunk_desc(l, "layers.0.attn.wq", 2), "32-48:1,4", "wq 2");
	is_str(chunk_desc(l, "layers.3.attn.wk", 0), "0-8:0,2", "wk 0");
	is_str(chunk_desc(l, "layers.3.attn.wk", 1), "8-16:1,3", "wk 1");
	is_str(chunk_desc(l, "layers.3.attn.wk", 2), "16-24:1,4", "wk 2");
	is_int(nchunks_of(l, "layers.1.mlp.w_down"), 4, "w_down: 4 chunks");
	is_str(chunk_desc(l, "layers.1.mlp.w_down", 0), "0-42:0,2", "down 0");
	is_str(chunk_desc(l, "layers.1.mlp.w_down", 1), "42-64:0,3", "down 1");
	is_str(chunk_desc(l, "layers.1.mlp.w_down", 2), "64-85:1,3", "down 2");
	is_str(chunk_desc(l, "layers.1.mlp.w_down", 3), "85-128:1,4", "down 3");
	is_str(chunk_desc(l, "layers.1.attn_norm.weight", 0), "0-48:0,1,2,3,4",
	       "replicated norm across both");
	hexi_layout_destroy(l);
	/* TP 4 > KV 3 is invalid */
	p->pipelines[1].stages[0].tp = 4;
	is_int(hexi_layout_create(p, &l), HEXI_ERR_INVAL,
	       "tp > kv_heads refused");
	ok(l == NULL, "no layout on error");
	p->pipelines[1].stages[0].tp = 3;
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
}

/* One pipeline: no sync partner, every chunk has one rank. */
static void test_single_pipeline(void)
{
	hexi_cluster *c = tcluster(
	    "{\"nodes\":[{\"name\":\"c1\",\"gpu\":\"cpu\",\"count\":4}]}");
	tpipe pp[1] = {{4, 4, {{0, 2, 0, 0, 2}, {0, 2, 2, 2, 4}}}};
	hexi_plan *p = tplan(c, "tiny-4l", 1, pp);
	hexi_layout *l = NULL;
	int maxr = 0;

	is_int(hexi_layout_create(p, &l), HEXI_OK, "single pipeline layout");
	for (int i = 0; l && i < l->nchunks; i++)
		if (l->chunks[i].nranks > maxr)
			maxr = l->chunks[i].nranks;
	is_int(maxr, 2, "largest chunk group is a TP pair (replicated)");
	is_str(chunk_desc(l, "layers.3.mlp.w_up", 1), "64-128:3",
	       "sharded chunk has its one holder");
	hexi_layout_destroy(l);
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
}

int main(void)
{
	test_split();
	test_tp2_tp1_vs_tp4();
	test_tp2_vs_tp3_gqa();
	test_single_pipeline();
	return tap_done();
}
