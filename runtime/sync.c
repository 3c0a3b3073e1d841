/*
 * sync.c - chunked asymmetric gradient synchronisation (doc/LAYOUT.md).
 *
 * hexi_layout_create() cuts every tensor at the union of all shard
 * boundaries of all pipelines; each chunk lists the ranks holding it.  A
 * rank packs the chunks it holds into one buffer per distinct rank set
 * (a "bucket", in layout chunk order, which every member sees alike), and
 * all-reduces each bucket once.
 *
 * Weighting: each pipeline computes the gradient of (sum of its sample
 * losses) / global_batch, so the plain sum over pipelines is the gradient of
 * the global mean loss, exactly, whatever the batch split.  A replicated
 * tensor is held by every TP rank of a stage with identical gradients; only
 * the lowest holder of each pipeline contributes (the others add zeros), so
 * every pipeline counts once without a rounding 1/t factor.
 *
 * A bucket whose chunks are contiguous in memory on every member (a plan of
 * TP-1 stages, where the model's gradients are one array in layout order)
 * is all-reduced in place without packing.
 *
 * Norm: after the sum every holder has the same chunk; the lowest rank of the
 * chunk counts its squares, so each global element is counted once.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_dist.h"
#include "rt_model.h"

typedef struct sync_piece {
	float *grad;	/* first element of the chunk in the local shard */
	size_t count;	/* elements */
	int contribute; /* 1: add my values, 0: add zeros */
	int count_norm; /* 1: this rank counts the chunk in the norm */
	float *w;	/* weights of the chunk in the local shard */
	int param;	/* index into the params[] of rt_sync_create */
	int row_begin;	/* global first row of the chunk */
	int64_t cols;
	int decay;
	int key;    /* ready after the backward's hook call with this value or
		       lower: layer index, embedding -1, head L (overlap) */
	float *acc; /* zero 2, a chunk no other rank holds: its gradient
		       summed over the backwards (grad is the model's
		       window, reused by the next unit) */
	int rounds; /* zero 2, solo: backwards added into acc this step */
} sync_piece;

/* Sharded sync: the rows of one piece this rank owns and updates. */
typedef struct sync_seg {
	float *w, *g; /* weights and summed gradient of the owned rows */
	float *m, *v; /* AdamW moments (in rt_sync.mom) */
	size_t count;
	int param, row_begin, row_end, decay;
} sync_seg;

/* Pieces [first, first + n) of a bucket, back to back in memory on every
 * member; all-reduced in place when long enough (or the whole bucket). */
typedef struct sync_run {
	int first, n;
	size_t total;
} sync_run;

typedef struct sync_bucket {
	rt_group *g;
	int npieces, cap;
	sync_piece *pieces;
	size_t total; /* elements */
	int nruns;    /* in-place runs */
	sync_run *runs;
	size_t packed; /* elements of the pieces outside runs (packed) */
	char *in_run;  /* [npieces] 1: the piece is in an in-place run */
	/* sharded (zero > 0): member i owns bucket elements [cut[i],
	 * cut[i+1]); blocks of blk elements per member in the staging buffer */
	size_t *cut; /* [n+1] */
	int flat;    /* gradients and weights of the bucket back to back on
			every member: reduce-scatter and all-gather in place */
	size_t blk;
	size_t win; /* staged (!flat, !ring): elements per member and window:
		       the blocks go through the staging win at a time */
	float *own; /* [blk] the summed gradient of my range */
	/* zero 2: the bucket holds the chunks of one backward unit (key) of
	 * its holder set; one reduce-scatter per backward (round), nround
	 * of them per step: the most micro-batches among the members'
	 * pipelines (members with fewer add rounds of zeros) */
	int key, rounds, nround;
	int ring;  /* sharded: reduce-scatter and all-gather as a ring */
	int *mmb;  /* zero 2: [n] micro-batches of each member's pipeline
		      (the ring skips the sums known to be zeros) */
	int accum; /* zero 2, a bucket of at most SYNC_ACC elements: its
		      pieces sum the backwards in their acc, one
		      reduce-scatter after the last */
} sync_bucket;

/* A contiguous run at least this long (elements, 1 MiB) is all-reduced in
 * place rather than packed: saves a copy in and out of the staging buffer
 * at the price of one more all-reduce (doc/DECISIONS.md 55). */
#ifndef SYNC_RUN_MIN /* -DSYNC_RUN_MIN=1 tests the run path on tiny models */
#define SYNC_RUN_MIN ((size_t)1 << 18)
#endif

/* Sharded sync (zero > 0) on host memory: a bucket whose blocks are more
 * than two segments reduce-scatters and all-gathers as a ring of sendrecv
 * steps over segments of at most SYNC_SEG elements (256 KiB) of each
 * member's block, staged in two segment-sized halves; smaller buckets
 * (and HEXI_RT_SYNC_SEG=0) pack their blocks for one
 * MPI_Reduce_scatter_block / MPI_Allgather (doc/DECISIONS.md 150).
 * HEXI_RT_SYNC_SEG=N sets the segment (tests: tiny models, many
 * segments). */
#ifndef SYNC_SEG
#define SYNC_SEG ((size_t)1 << 16)
#endif
#define SYNC_SEG_MAX (1L << 28) /* 1 GiB of fp32 per segment */
/* Zero 2: a (holder set, unit) bucket of at most this many elements (a
 * layer's norm weights, held by every TP rank; and at most 1/32 of the
 * largest backward unit of every member) keeps its full sum over
 * the micro-batches and is reduce-scattered once per step, not once per
 * micro-batch: a collective costs its latency at this size
 * (doc/DECISIONS.md 151). */
#ifndef SYNC_ACC
#define SYNC_ACC ((size_t)8192)
#endif

struct rt_sync {
	hexi_rt *rt;
	rt_comm *comm;	       /* where the chunk groups live */
	const rt_mem_ops *mem; /* NULL: host memory */
	int nb;
	sync_bucket *b;	  /* buckets with more than one member */
	sync_bucket solo; /* chunks held by this rank alone (norm only) */
	float *buf;	  /* staging: [bufcap] (allocated at first need) */
	size_t bufcap;
	size_t stage_max; /* sharded: elements the staged windows may take
			     (SYNC_SLOTS x the bucket cap, DECISIONS 183) */
	size_t packcap;	  /* elements the unsharded packed sync stages */
	int zero;	  /* 0: all-reduce; 1, 2: sharded */
	/* zero 2: buckets in backward order (key descending, then bucket
	 * order: the same on every member), the rounds of the longest
	 * bucket, the solo chunks' accumulators */
	int *order;
	int max_rounds;
	float *solo_acc;
	size_t solo_n;
	int nseg;
	sync_seg *seg; /* owned rows, bucket order, then solo pieces */
	float *mom;    /* [2 * owned elements] moments of the segments */
	size_t owned;
	/* ring (host memory, a backend with sendrecv): every bucket's
	 * reduce-scatter and all-gather as n - 1 steps per segment of at
	 * most seg elements of a block, through two seg-sized halves of
	 * buf; no bucket is staged whole */
	int ring;
	size_t rseg;
	/* overlap (rt_sync_overlap): bounded sub-buckets in launch order */
	int nsub;
	struct sync_sub *sub;
	float *obuf; /* staging of the packed sub-buckets: nslot slots */
	int next;    /* first sub not started yet */
	int nslot, slot_next; /* slots (0: each packed sub its own part),
				 packed subs started this step */
	size_t ostage;	      /* elements of obuf */
	size_t slotlen;	      /* elements per slot: the longest packed sub */
	int *slot_sub;	      /* [nslot] the sub staged there, or -1 */
	size_t *rcuts;	      /* zero 1: every sub's member cuts, one block */
};

/* Overlap: elements [e0, e1) of a bucket (bucket order), at most the cap,
 * all-reduced (zero 1: reduce-scattered into the members' owned sums)
 * with a non-blocking collective as soon as every piece they touch is
 * final (the watermark of the backward reached key). */
typedef struct sync_sub {
	sync_bucket *b;
	size_t e0, e1;
	int key;      /* min key of the pieces touched */
	int inplace;  /* contiguous in memory on every member */
	float *stage; /* packed, in flight: its slot of obuf */
	size_t *rcut; /* zero 1: [n+1] member i's part of the sub, relative
			 to e0: the bucket's cuts clamped to [e0, e1) */
	float *rdst;  /* zero 1: where my part lands in b->own */
	rt_req *req;
	int state; /* 0 idle, 1 in flight, 2 done, 3 retired (unpacked,
		      its slot free) */
} sync_sub;

/* The overlap's staging budget, in buckets of cap elements: packed
 * sub-buckets that need more together take turns in slots of the
 * longest one, at most SYNC_SLOTS x cap elements in all, not a copy of
 * every gradient; those that need no more each keep their own part
 * (doc/DECISIONS.md 180). */
#ifndef SYNC_SLOTS
#define SYNC_SLOTS 8
#endif

static hexi_rc bucket_add(sync_bucket *b, const sync_piece *p)
{
	if (b->npieces == b->cap) {
		int cap = b->cap ? 2 * b->cap : 16;
		void *q = realloc(b->pieces, sizeof(*b->pieces) * cap);
		if (q == NULL)
			return hexi_error(HEXI_ERR_NOMEM, "sync: chunk list");
		b->pieces = q;
		b->cap = cap;
	}
	b->pieces[b->npieces++] = *p;
	b->total += p->count;
	return HEXI_OK;
}

/* The bucket of group g (created on first use). */
static hexi_rc bucket_of(rt_sync *s, rt_group *g, sync_bucket **out)
{
	void *q;

	for (int i = 0; i < s->nb; i++)
		if (s->b[i].g == g) {
			*out = &s->b[i];
			return HEXI_OK;
		}
	q = realloc(s->b, sizeof(*s->b) * (size_t)(s->nb + 1));
	if (q == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "sync: buckets");
	s->b = q;
	memset(&s->b[s->nb], 0, sizeof(s->b[0]));
	s->b[s->nb].g = g;
	*out = &s->b[s->nb++];
	return HEXI_OK;
}

static int find_param(const rt_param_ref *params, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(params[i].name, name) == 0)
			return i;
	return -1;
}

/* Check that params[] is exactly this rank's share of the layout; map
 * layout tensor index -> param index in pidx[] (-1: not held here). */
static hexi_rc match_params(const hexi_rt *rt, const rt_param_ref *params,
			    int nparams, int *pidx)
{
	const hexi_layout *l = rt->layout;
	int held = 0;

	for (int t = 0; t < l->ntensors; t++) {
		const hexi_tensor_layout *tl = &l->tensors[t];
		const hexi_shard *mine = NULL;
		int i;
		for (int k = 0; k < tl->nshards; k++)
			if (tl->shards[k].rank == rt->rank)
				mine = &tl->shards[k];
		i = find_param(params, nparams, tl->name);
		pidx[t] = i;
		if (mine == NULL && i < 0)
			continue;
		if (mine == NULL || i < 0)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "rank %d: tensor %s is %s by the "
					  "model but %s by the plan layout",
					  rt->rank, tl->name,
					  i < 0 ? "not held" : "held",
					  i < 0 ? "held" : "not held");
		if (params[i].row_begin != mine->row_begin ||
		    params[i].row_end != mine->row_end)
			return hexi_error(
			    HEXI_ERR_MISMATCH,
			    "rank %d: tensor %s: model holds rows "
			    "[%d,%d), layout says [%d,%d)",
			    rt->rank, tl->name, params[i].row_begin,
			    params[i].row_end, mine->row_begin, mine->row_end);
		held++;
	}
	if (held != nparams)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "rank %d: the model has %d tensors, the "
				  "layout gives this rank %d",
				  rt->rank, nparams, held);
	return HEXI_OK;
}

/* 1 if rank r is the lowest rank of its pipeline among ranks[]. */
static int lowest_of_pipeline(const hexi_rt *rt, const int *pipe_of,
			      const hexi_chunk *c)
{
	int p = pipe_of[rt->rank];

	for (int i = 0; i < c->nranks; i++)
		if (pipe_of[c->ranks[i]] == p)
			return c->ranks[i] == rt->rank;
	return 0;
}

/* The backward order of a tensor: layers.N.* -> N, the embedding -1,
 * the head (final_norm, lm_head) L. */
static int piece_key(const char *name, int L)
{
	int n = 0;

	if (strncmp(name, "embed", 5) == 0)
		return -1;
	if (sscanf(name, "layers.%d.", &n) == 1)
		return n;
	return L;
}

static hexi_rc add_chunk(rt_sync *s, const rt_param_ref *pr, int param,
			 const hexi_chunk *c, const int *pipe_of,
			 size_t *covered)
{
	const size_t off = (size_t)(c->row_begin - pr->row_begin) * pr->cols;
	/* every field named: one added later starts zeroed (acc, rounds) */
	sync_piece pc = {
	    .grad = pr->grad + off,
	    .count = (size_t)(c->row_end - c->row_begin) * pr->cols,
	    .contribute = lowest_of_pipeline(s->rt, pipe_of, c),
	    .count_norm = c->ranks[0] == s->rt->rank,
	    .w = pr->w != NULL ? pr->w + off : NULL,
	    .param = param,
	    .row_begin = c->row_begin,
	    .cols = pr->cols,
	    .decay = pr->decay,
	    .key = piece_key(pr->name, s->rt->plan->model.layers),
	    .acc = NULL,
	    .rounds = 0,
	};
	sync_bucket *b = &s->solo;
	hexi_rc rc;

	if (c->row_begin < pr->row_begin || c->row_end > pr->row_end)
		return hexi_error(HEXI_ERR_INTERNAL,
				  "rank %d: chunk rows [%d,%d) of %s outside "
				  "the local shard",
				  s->rt->rank, c->row_begin, c->row_end,
				  pr->name);
	if (c->nranks > 1) {
		rt_group *g = NULL;
		rc = rt_comm_group_get(s->comm, c->ranks, c->nranks, &g);
		if (rc != HEXI_OK)
			return rc;
		if ((rc = bucket_of(s, g, &b)) != HEXI_OK)
			return rc;
	}
	*covered += pc.count;
	return bucket_add(b, &pc);
}

static hexi_rc pipeline_map(const hexi_rt *rt, int **out)
{
	const hexi_plan *p = rt->plan;
	int *m = malloc(sizeof(*m) * (size_t)rt->world_size);

	if (m == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "sync: rank map");
	for (int pi = 0; pi < p->npipelines; pi++)
		for (int si = 0; si < p->pipelines[pi].nstages; si++)
			for (int k = 0; k < p->pipelines[pi].stages[si].tp; k++)
				m[p->pipelines[pi].stages[si].devices[k].rank] =
				    pi;
	*out = m;
	return HEXI_OK;
}

static hexi_rc check_coverage(const rt_sync *s, const rt_param_ref *params,
			      int nparams, const size_t *covered)
{
	for (int i = 0; i < nparams; i++) {
		size_t want =
		    (size_t)(params[i].row_end - params[i].row_begin) *
		    params[i].cols;
		if (covered[i] != want)
			return hexi_error(HEXI_ERR_MISMATCH,
					  "rank %d: sync chunks of %s cover "
					  "%zu of its %zu local elements",
					  s->rt->rank, params[i].name,
					  covered[i], want);
	}
	return HEXI_OK;
}

/* Sum v[0..n) over the members of bucket b, through the host
 * communicator's group of the same ranks (b->g may be an NCCL group,
 * which needs device memory): how every member agrees on a setup flag. */
static hexi_rc host_sum(rt_sync *s, const sync_bucket *b, double *v, size_t n)
{
	rt_group *hg = NULL;
	hexi_rc rc = rt_comm_group_get(s->rt->comm, b->g->ranks, b->g->n, &hg);

	return rc == HEXI_OK ? hg->comm->ops->allreduce_sum(hg, v, n, RT_F64)
			     : rc;
}

/* Runs of pieces that lie back to back in memory, in chunk order, on every
 * member are all-reduced in place (no pack and unpack copies) when they are
 * the whole bucket or at least SYNC_RUN_MIN elements; the other pieces are
 * packed into one all-reduce.  Memory order is local, so the members agree
 * on the breaks collectively (in bucket order, which every member shares);
 * piece sizes are global, so every member derives the same runs. */
static hexi_rc agree_inplace(rt_sync *s)
{
	double *brk = NULL;
	hexi_rc rc = HEXI_OK;

	for (int i = 0; i < s->nb; i++) {
		sync_bucket *b = &s->b[i];
		int k0 = 0;
		free(brk);
		brk = calloc((size_t)b->npieces, sizeof(*brk));
		b->runs = calloc((size_t)b->npieces, sizeof(*b->runs));
		b->in_run = calloc((size_t)b->npieces, 1);
		if (brk == NULL || b->runs == NULL || b->in_run == NULL) {
			rc = hexi_error(HEXI_ERR_NOMEM, "sync: run list");
			goto out;
		}
		/* brk[k]: piece k+1 does not follow piece k in memory */
		for (int k = 0; k + 1 < b->npieces; k++)
			brk[k] = b->pieces[k].grad + b->pieces[k].count !=
				 b->pieces[k + 1].grad;
		rc = host_sum(s, b, brk, (size_t)b->npieces);
		if (rc != HEXI_OK) {
			rc = hexi_error_prefix(rc, "sync setup");
			goto out;
		}
		b->packed = 0;
		for (int k = 0; k < b->npieces; k++) {
			if (k + 1 < b->npieces && brk[k] == 0)
				continue;
			/* run [k0, k] */
			size_t tot = 0;
			for (int j = k0; j <= k; j++)
				tot += b->pieces[j].count;
			if (tot == b->total || tot >= SYNC_RUN_MIN) {
				sync_run *r = &b->runs[b->nruns++];
				r->first = k0;
				r->n = k - k0 + 1;
				r->total = tot;
				for (int j = k0; j <= k; j++)
					b->in_run[j] = 1;
			} else
				b->packed += tot;
			k0 = k + 1;
		}
	}
out:
	free(brk);
	return rc;
}

/* Host staging of at least n elements (n 0: one), counted as comm. */
static hexi_rc host_buf(rt_sync *s, size_t n)
{
	float *q;

	n = n ? n : 1;
	if (s->buf != NULL && s->bufcap >= n)
		return HEXI_OK;
	if ((q = realloc(s->buf, sizeof(float) * n)) == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "sync: %zu-element buffer",
				  n);
	rt_mem_count(s->rt, HEXI_MEM_COMM,
		     sizeof(float) * ((double)n - (double)s->bufcap));
	s->buf = q;
	s->bufcap = n;
	return HEXI_OK;
}

/* Staging of at least n elements in the sync's memory (host_buf, or a
 * device buffer replaced by a larger one: its contents are not kept). */
static hexi_rc stage_buf(rt_sync *s, size_t n)
{
	void *q = NULL;
	hexi_rc rc;

	if (s->mem == NULL)
		return host_buf(s, n);
	n = n ? n : 1;
	if (s->buf != NULL && s->bufcap >= n)
		return HEXI_OK;
	if ((rc = s->mem->alloc(s->mem->ctx, &q, sizeof(float) * n)) != HEXI_OK)
		return hexi_error_prefix(rc, "sync: %zu-element buffer", n);
	s->mem->free(s->mem->ctx, s->buf);
	rt_mem_count(s->rt, HEXI_MEM_COMM,
		     sizeof(float) * ((double)n - (double)s->bufcap));
	s->buf = q;
	s->bufcap = n;
	return HEXI_OK;
}

hexi_rc rt_sync_create(hexi_rt *rt, rt_comm *comm, const rt_mem_ops *mem,
		       const rt_param_ref *params, int nparams, rt_sync **out)
{
	const hexi_layout *l = rt->layout;
	rt_sync *s = calloc(1, sizeof(*s));
	int *pidx = NULL, *pipe_of = NULL;
	size_t *covered = NULL;
	hexi_rc rc = HEXI_ERR_NOMEM;

	*out = NULL;
	pidx = malloc(sizeof(*pidx) * (size_t)(l->ntensors + 1));
	covered = calloc((size_t)nparams + 1, sizeof(*covered));
	if (s == NULL || pidx == NULL || covered == NULL) {
		rc = hexi_error(rc, "sync: rank %d", rt->rank);
		goto out;
	}
	s->rt = rt;
	s->comm = comm;
	s->mem = mem;
	if ((rc = match_params(rt, params, nparams, pidx)) != HEXI_OK ||
	    (rc = pipeline_map(rt, &pipe_of)) != HEXI_OK)
		goto out;
	for (int k = 0; k < l->nchunks; k++) {
		const hexi_chunk *c = &l->chunks[k];
		int me = 0;
		for (int i = 0; i < c->nranks; i++)
			me |= c->ranks[i] == rt->rank;
		if (!me)
			continue;
		if (pidx[c->tensor] < 0) {
			rc =
			    hexi_error(HEXI_ERR_MISMATCH,
				       "rank %d: chunk %d of %s lists this "
				       "rank, which does not hold it",
				       rt->rank, k, l->tensors[c->tensor].name);
			goto out;
		}
		rc = add_chunk(s, &params[pidx[c->tensor]], pidx[c->tensor], c,
			       pipe_of, &covered[pidx[c->tensor]]);
		if (rc != HEXI_OK)
			goto out;
	}
	if ((rc = check_coverage(s, params, nparams, covered)) != HEXI_OK ||
	    (rc = agree_inplace(s)) != HEXI_OK)
		goto out;
	for (int i = 0; i < s->nb; i++)
		if (s->b[i].packed > s->packcap)
			s->packcap = s->b[i].packed;
	/* staging, host or device: at first need (rt_sync_run; rt_sync_shard
	 * sizes a sharded sync's; an overlapped sync stages in its own
	 * buffer and needs none: DECISIONS 183) */
	*out = s;
	s = NULL;
	rc = HEXI_OK;
out:
	rt_sync_destroy(s);
	free(pipe_of);
	free(covered);
	free(pidx);
	return rc;
}

/* Sum of squares of x[0..n) in double; four partial sums so that the
 * loop is not one long chain of dependent additions (the norm pass cost
 * about as much as the copies it replaced). */
static double sumsq_f32(const float *x, size_t n)
{
	double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
	size_t i = 0;

	for (; i + 4 <= n; i += 4) {
		a0 += (double)x[i] * x[i];
		a1 += (double)x[i + 1] * x[i + 1];
		a2 += (double)x[i + 2] * x[i + 2];
		a3 += (double)x[i + 3] * x[i + 3];
	}
	for (; i < n; i++)
		a0 += (double)x[i] * x[i];
	return (a0 + a1) + (a2 + a3);
}

/* Copy n floats from src to dst; the sum of squares of dst when sq. */
static double copy_sumsq(float *dst, const float *src, size_t n, int sq)
{
	memcpy(dst, src, sizeof(float) * n);
	return sq ? sumsq_f32(dst, n) : 0;
}

/* ---- memory operations: host inline, or the caller's (device) ---------- */

static hexi_rc mem_zero(const rt_sync *s, float *p, size_t n)
{
	if (s->mem == NULL) {
		memset(p, 0, sizeof(float) * n);
		return HEXI_OK;
	}
	return s->mem->zero(s->mem->ctx, p, sizeof(float) * n);
}

static hexi_rc mem_copy(const rt_sync *s, float *dst, const float *src,
			size_t n)
{
	if (s->mem == NULL) {
		memcpy(dst, src, sizeof(float) * n);
		return HEXI_OK;
	}
	return s->mem->copy(s->mem->ctx, dst, src, sizeof(float) * n);
}

static hexi_rc mem_fence(const rt_sync *s)
{
	return s->mem == NULL ? HEXI_OK : s->mem->fence(s->mem->ctx);
}

/* *acc += squares of x[0..n) (host), or into the device accumulator. */
static hexi_rc mem_sumsq(const rt_sync *s, const float *x, size_t n,
			 double *acc)
{
	if (s->mem == NULL) {
		*acc += sumsq_f32(x, n);
		return HEXI_OK;
	}
	return s->mem->sumsq_add(s->mem->ctx, x, n);
}

static hexi_rc piece_sumsq(const rt_sync *s, const sync_piece *p, double *acc)
{
	return p->count_norm ? mem_sumsq(s, p->grad, p->count, acc) : HEXI_OK;
}

/* The sharded sync's state (owned sums, moments, staging) in the sync's
 * memory: zeroed n elements (n 0: one); freed with mem_ffree. */
static hexi_rc mem_falloc(const rt_sync *s, float **p, size_t n)
{
	void *q = NULL;
	hexi_rc rc;

	n = n ? n : 1;
	if (s->mem == NULL) {
		*p = calloc(n, sizeof(float));
		return *p != NULL ? HEXI_OK
				  : hexi_error(HEXI_ERR_NOMEM,
					       "sync: %zu elements", n);
	}
	rc = s->mem->alloc(s->mem->ctx, &q, sizeof(float) * n);
	*p = q;
	return rc == HEXI_OK
		   ? HEXI_OK
		   : hexi_error_prefix(rc, "sync: %zu device elements", n);
}

static void mem_ffree(const rt_sync *s, float *p)
{
	if (s->mem == NULL)
		free(p);
	else if (p != NULL)
		s->mem->free(s->mem->ctx, p);
}

/* dst[0..n) += src[0..n) */
static hexi_rc mem_add(const rt_sync *s, float *dst, const float *src, size_t n)
{
	if (s->mem != NULL)
		return s->mem->add(s->mem->ctx, dst, src, n);
	for (size_t j = 0; j < n; j++)
		dst[j] += src[j];
	return HEXI_OK;
}

/* One bucket: in-place runs, then the other pieces packed into one
 * all-reduce; squares into *sumsq unless NULL (each run right after its
 * all-reduce, packed pieces right after unpacking, while they are in cache).
 * (Packing small pieces wins: per-chunk in-place all-reduces of the same
 * bytes measured 1.5-2.6x slower here.) */
static hexi_rc bucket_run(rt_sync *s, sync_bucket *b, double *sumsq)
{
	float *q = s->buf;
	hexi_rc rc = HEXI_OK;

	for (int r = 0; r < b->nruns; r++) {
		const sync_run *u = &b->runs[r];
		const sync_piece *p = &b->pieces[u->first];
		for (int i = 0; rc == HEXI_OK && i < u->n; i++)
			if (!p[i].contribute)
				rc = mem_zero(s, p[i].grad, p[i].count);
		if (rc == HEXI_OK)
			rc = mem_fence(s);
		if (rc == HEXI_OK)
			rc = rt_allreduce_f32(b->g, p[0].grad, u->total);
		if (rc != HEXI_OK)
			return hexi_error_prefix(rc,
						 "gradient sync (%zu "
						 "elements)",
						 u->total);
		for (int i = 0; sumsq != NULL && i < u->n; i++)
			if ((rc = piece_sumsq(s, &p[i], sumsq)) != HEXI_OK)
				return rc;
	}
	if (b->packed == 0)
		return HEXI_OK;
	for (int i = 0; rc == HEXI_OK && i < b->npieces; i++) {
		const sync_piece *p = &b->pieces[i];
		if (b->in_run[i])
			continue;
		rc = p->contribute ? mem_copy(s, q, p->grad, p->count)
				   : mem_zero(s, q, p->count);
		q += p->count;
	}
	if (rc == HEXI_OK)
		rc = mem_fence(s);
	if (rc == HEXI_OK)
		rc = rt_allreduce_f32(b->g, s->buf, b->packed);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "gradient sync (%zu elements)",
					 b->packed);
	q = s->buf;
	for (int i = 0; i < b->npieces; i++) {
		const sync_piece *p = &b->pieces[i];
		if (b->in_run[i])
			continue;
		if (s->mem == NULL) { /* host: copy and square in one pass */
			double a = copy_sumsq(p->grad, q, p->count,
					      sumsq != NULL && p->count_norm);
			if (sumsq != NULL)
				*sumsq += a;
		} else if ((rc = mem_copy(s, p->grad, q, p->count)) !=
			       HEXI_OK ||
			   (sumsq != NULL &&
			    (rc = piece_sumsq(s, p, sumsq)) != HEXI_OK))
			return rc;
		q += p->count;
	}
	return HEXI_OK;
}

/* The squared global norm: this rank's partial sum acc plus the device
 * accumulator's (after the queued work), summed over the world. */
static hexi_rc norm_world(rt_sync *s, double acc, double *sumsq)
{
	double dev = 0;
	hexi_rc rc;

	if (s->mem != NULL &&
	    ((rc = mem_fence(s)) != HEXI_OK ||
	     (rc = s->mem->sumsq_take(s->mem->ctx, &dev)) != HEXI_OK))
		return hexi_error_prefix(rc, "gradient norm");
	acc += dev;
	rc = s->rt->comm->ops->allreduce_sum(s->rt->groups.world, &acc, 1,
					     RT_F64);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "gradient norm");
	*sumsq = acc;
	return HEXI_OK;
}

static hexi_rc shard_run(rt_sync *s, double *sumsq);
static hexi_rc overlap_finish(rt_sync *s, double *sumsq);
static void obuf_free(rt_sync *s);

hexi_rc rt_sync_run(rt_sync *s, double *sumsq)
{
	double acc = 0;
	hexi_rc rc;

	if (s->nsub > 0) /* zero 0 or 1 */
		return overlap_finish(s, sumsq);
	if (s->zero > 0)
		return shard_run(s, sumsq);
	if ((rc = stage_buf(s, s->packcap)) != HEXI_OK)
		return rc;
	for (int i = 0; i < s->nb; i++) {
		if ((rc = bucket_run(s, &s->b[i], sumsq ? &acc : NULL)) !=
		    HEXI_OK)
			return rc;
		rt_watchdog_feed(s->rt); /* a bucket synced is progress */
	}
	if (sumsq == NULL)
		return mem_fence(s);
	for (int i = 0; i < s->solo.npieces; i++)
		if ((rc = piece_sumsq(s, &s->solo.pieces[i], &acc)) != HEXI_OK)
			return rc;
	return norm_world(s, acc, sumsq);
}

size_t rt_sync_bytes(const rt_sync *s)
{
	size_t n = 0;

	for (int i = 0; i < s->nb; i++)
		n += s->b[i].total;
	return n * sizeof(float);
}

int rt_sync_ngroups(const rt_sync *s)
{
	return s->nb;
}

void rt_sync_destroy(rt_sync *s)
{
	if (s == NULL)
		return;
	for (int i = 0; i < s->nb; i++) {
		free(s->b[i].pieces);
		free(s->b[i].runs);
		free(s->b[i].in_run);
		free(s->b[i].cut);
		mem_ffree(s, s->b[i].own);
		free(s->b[i].mmb);
	}
	free(s->seg);
	mem_ffree(s, s->mom);
	free(s->order);
	mem_ffree(s, s->solo_acc);
	free(s->sub);
	free(s->rcuts);
	free(s->slot_sub);
	obuf_free(s);
	free(s->b);
	free(s->solo.pieces);
	if (s->mem != NULL)
		s->mem->free(s->mem->ctx, s->buf);
	else
		free(s->buf);
	free(s);
}

/* ---- sharded data parallelism (zero 1, 2) -------------------------------- */

/* Cut points of bucket b among its n members: member i's range ends at the
 * first row boundary at or after (i+1)*total/n.  Pieces and their sizes are
 * the same on every member, so every member computes the same cuts. */
static hexi_rc bucket_cuts(sync_bucket *b)
{
	const int n = b->g->n;
	size_t start = 0;
	int k = 0;

	b->cut = calloc((size_t)n + 1, sizeof(*b->cut));
	if (b->cut == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "sync: owner cuts");
	for (int i = 1; i < n; i++) {
		size_t t = (size_t)((double)b->total * i / n);
		size_t c;
		while (k < b->npieces && start + b->pieces[k].count <= t)
			start += b->pieces[k++].count;
		if (k == b->npieces) {
			c = b->total;
		} else {
			size_t cols = (size_t)b->pieces[k].cols;
			c = start + (t - start + cols - 1) / cols * cols;
		}
		b->cut[i] = c > b->cut[i - 1] ? c : b->cut[i - 1];
	}
	b->cut[n] = b->total;
	b->blk = 1;
	for (int i = 0; i < n; i++)
		if (b->cut[i + 1] - b->cut[i] > b->blk)
			b->blk = b->cut[i + 1] - b->cut[i];
	return HEXI_OK;
}

static hexi_rc seg_add(rt_sync *s, const sync_piece *p, size_t off,
		       size_t count, float *g)
{
	sync_seg *sg = s->nseg > 0 ? &s->seg[s->nseg - 1] : NULL;
	void *q;

	/* the next rows of the same tensor, back to back in the weights and
	 * the gradient: one range (one checkpoint slice) */
	if (sg != NULL && sg->param == p->param &&
	    sg->row_end == p->row_begin + (int)(off / (size_t)p->cols) &&
	    sg->w + sg->count == p->w + off && sg->g + sg->count == g) {
		sg->count += count;
		sg->row_end += (int)(count / (size_t)p->cols);
		s->owned += count;
		return HEXI_OK;
	}
	q = realloc(s->seg, sizeof(*s->seg) * (size_t)(s->nseg + 1));
	if (q == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "sync: owned ranges");
	s->seg = q;
	sg = &s->seg[s->nseg++];
	*sg = (sync_seg){
	    .w = p->w + off,
	    .g = g,
	    .count = count,
	    .param = p->param,
	    .row_begin = p->row_begin + (int)(off / (size_t)p->cols),
	    .decay = p->decay,
	};
	sg->row_end = sg->row_begin + (int)(count / (size_t)p->cols);
	s->owned += count;
	return HEXI_OK;
}

/* My owned rows of bucket b (their gradient lands in b->own). */
static hexi_rc bucket_segs(rt_sync *s, sync_bucket *b)
{
	size_t lo = b->cut[b->g->me], hi = b->cut[b->g->me + 1], e = 0;
	hexi_rc rc = HEXI_OK;

	if ((rc = mem_falloc(s, &b->own, b->blk)) != HEXI_OK)
		return hexi_error_prefix(rc, "sync: owned gradient");
	for (int k = 0; rc == HEXI_OK && k < b->npieces; k++) {
		const sync_piece *p = &b->pieces[k];
		size_t a = e > lo ? e : lo;
		size_t z = e + p->count < hi ? e + p->count : hi;
		if (a < z)
			rc = seg_add(s, p, a - e, z - a, b->own + (a - lo));
		e += p->count;
	}
	return rc;
}

/* b->flat: every member has the bucket's gradients and weights back to
 * back in memory and the backend has variable-count collectives. */
static hexi_rc agree_flat(rt_sync *s, sync_bucket *b)
{
	const rt_comm_ops *ops = b->g->comm->ops;
	double bad = ops->reduce_scatterv_sum == NULL ||
		     ops->allgatherv == NULL || s->mem != NULL;
	hexi_rc rc;

	for (int k = 0; k + 1 < b->npieces; k++)
		if (b->pieces[k].grad + b->pieces[k].count !=
			b->pieces[k + 1].grad ||
		    b->pieces[k].w + b->pieces[k].count != b->pieces[k + 1].w)
			bad = 1;
	rc = host_sum(s, b, &bad, 1);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "sync setup (zero)");
	b->flat = bad == 0;
	return HEXI_OK;
}

/* zero 2: every bucket cut into one bucket per backward unit (key) of its
 * pieces, in piece order: (holder set, layer) buckets, which one backward
 * finishes together.  Every member derives the same ones. */
static hexi_rc split_by_key(rt_sync *s)
{
	sync_bucket *nb = NULL;
	int n = 0, k = 0;
	hexi_rc rc = HEXI_OK;

	for (int i = 0; i < s->nb; i++)
		for (int j = 0; j < s->b[i].npieces; j++)
			n += j == 0 ||
			     s->b[i].pieces[j].key != s->b[i].pieces[j - 1].key;
	if ((nb = calloc((size_t)n + 1, sizeof(*nb))) == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "sync: %d buckets", n);
	for (int i = 0; rc == HEXI_OK && i < s->nb; i++)
		for (int j = 0; rc == HEXI_OK && j < s->b[i].npieces; j++) {
			const sync_piece *p = &s->b[i].pieces[j];
			if (j == 0 || p->key != s->b[i].pieces[j - 1].key) {
				nb[k].g = s->b[i].g;
				nb[k++].key = p->key;
			}
			rc = bucket_add(&nb[k - 1], p);
		}
	for (int i = 0; i < (rc == HEXI_OK ? s->nb : k); i++) {
		sync_bucket *b = rc == HEXI_OK ? &s->b[i] : &nb[i];
		free(b->pieces);
		free(b->runs);
		free(b->in_run);
	}
	if (rc != HEXI_OK) {
		free(nb);
		return rc;
	}
	free(s->b);
	s->b = nb;
	s->nb = n;
	return HEXI_OK;
}

/* zero 2: each bucket's rounds per step (the most micro-batches among its
 * members' pipelines) and the backward order of the buckets. */
static hexi_rc bucket_order(rt_sync *s)
{
	const hexi_plan *p = s->rt->plan;
	int *pipe_of = NULL;
	hexi_rc rc = pipeline_map(s->rt, &pipe_of);

	if (rc != HEXI_OK)
		return rc;
	s->order = malloc(sizeof(*s->order) * (size_t)(s->nb + 1));
	if (s->order == NULL) {
		free(pipe_of);
		return hexi_error(HEXI_ERR_NOMEM, "sync: bucket order");
	}
	s->max_rounds = s->rt->role.micro_batches;
	for (int i = 0; i < s->nb; i++) {
		sync_bucket *b = &s->b[i];
		int j = i;
		b->nround = 0;
		b->mmb = malloc(sizeof(*b->mmb) * (size_t)b->g->n);
		if (b->mmb == NULL) {
			free(pipe_of);
			return hexi_error(HEXI_ERR_NOMEM, "sync: rounds");
		}
		for (int r = 0; r < b->g->n; r++) {
			int m =
			    p->pipelines[pipe_of[b->g->ranks[r]]].micro_batches;
			b->nround = m > b->nround ? m : b->nround;
			b->mmb[r] = m;
		}
		if (b->nround > s->max_rounds)
			s->max_rounds = b->nround;
		/* insertion: key descending, bucket order among equal keys */
		while (j > 0 && s->b[s->order[j - 1]].key < b->key) {
			s->order[j] = s->order[j - 1];
			j--;
		}
		s->order[j] = i;
	}
	free(pipe_of);
	return HEXI_OK;
}

/* zero 2: this rank's elements of backward unit key (its window's share
 * of that unit). */
static size_t unit_elems(const rt_sync *s, int key)
{
	size_t n = 0;

	for (int i = 0; i < s->nb; i++)
		n += s->b[i].key == key ? s->b[i].total : 0;
	for (int k = 0; k < s->solo.npieces; k++)
		n += s->solo.pieces[k].key == key ? s->solo.pieces[k].count : 0;
	return n;
}

/* zero 2: b->accum where every member finds the bucket small: at most
 * SYNC_ACC elements and at most 1/32 of its largest unit (a layer's norm
 * weights beside the layer's matrices), so that the full sums it keeps
 * stay a small part of what the window saves. */
static hexi_rc agree_accum(rt_sync *s, sync_bucket *b, size_t window, int units)
{
	double big = b->total > SYNC_ACC || 32 * b->total > window || units < 2;
	hexi_rc rc = host_sum(s, b, &big, 1);

	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "sync setup (zero 2)");
	b->accum = big == 0;
	return HEXI_OK;
}

/* zero 2: the chunks no other rank holds, and the pieces of the small
 * buckets (accum), keep their sum over the backwards in an array of their
 * own (a bucket's pieces back to back in piece order, as its gradients
 * would be in a flat bucket). */
static hexi_rc solo_accs(rt_sync *s)
{
	size_t off = 0, window = 0;
	int units = 0, L = s->rt->plan->model.layers;
	hexi_rc rc;

	for (int k = 0; k < s->solo.npieces; k++)
		s->solo_n += s->solo.pieces[k].count;
	/* units: -1 the embedding, layers, L the head; a rank of one unit
	 * (its window is all its gradient) keeps no full sums beside it */
	for (int key = -1; key <= L; key++) {
		size_t u = unit_elems(s, key);
		window = u > window ? u : window;
		units += u > 0;
	}
	for (int i = 0; i < s->nb; i++) {
		sync_bucket *b = &s->b[i];
		if ((rc = agree_accum(s, b, window, units)) != HEXI_OK)
			return rc;
		s->solo_n += b->accum ? b->total : 0;
	}
	if ((rc = mem_falloc(s, &s->solo_acc, s->solo_n + 1)) != HEXI_OK)
		return hexi_error_prefix(rc,
					 "sync: gradients of %zu unshared "
					 "elements",
					 s->solo_n);
	for (int k = 0; k < s->solo.npieces; k++) {
		s->solo.pieces[k].acc = s->solo_acc + off;
		off += s->solo.pieces[k].count;
	}
	for (int i = 0; i < s->nb; i++)
		for (int k = 0; s->b[i].accum && k < s->b[i].npieces; k++) {
			s->b[i].pieces[k].acc = s->solo_acc + off;
			off += s->b[i].pieces[k].count;
		}
	return HEXI_OK;
}

static hexi_rc shard_setup(rt_sync *s, int zero, size_t *cap)
{
	const char *e = getenv("HEXI_RT_SYNC_SEG");
	long seg = (long)SYNC_SEG;
	hexi_rc rc = HEXI_OK;

	if (e != NULL && *e != '\0' &&
	    hexi_parse_long(e, 0, SYNC_SEG_MAX, &seg) != HEXI_OK)
		return hexi_error(HEXI_ERR_USAGE,
				  "HEXI_RT_SYNC_SEG='%.40s': elements per ring "
				  "segment must be a whole number in 0..%ld "
				  "(0: no ring)",
				  e, SYNC_SEG_MAX);
	const size_t segmax = (size_t)seg;

	s->ring = s->mem == NULL && segmax > 0;
	for (int i = 0; i < s->nb; i++) {
		const sync_bucket *b = &s->b[i];
		s->ring = s->ring && b->g->comm->ops->sendrecv != NULL;
		if (b->g->comm->ops->reduce_scatter_sum == NULL ||
		    b->g->comm->ops->allgather == NULL)
			return hexi_error(HEXI_ERR_UNSUPPORTED,
					  "sync: zero %d: backend %s has no "
					  "reduce-scatter",
					  zero, b->g->comm->ops->name);
		for (int k = 0; k < b->npieces; k++)
			if (b->pieces[k].w == NULL)
				return hexi_error(HEXI_ERR_INTERNAL,
						  "sync: zero %d without "
						  "weights",
						  zero);
	}
	if (zero == 2 && ((rc = split_by_key(s)) != HEXI_OK ||
			  (rc = bucket_order(s)) != HEXI_OK ||
			  (rc = solo_accs(s)) != HEXI_OK))
		return rc;
	for (int i = 0; rc == HEXI_OK && i < s->nb; i++) {
		sync_bucket *b = &s->b[i];
		if ((rc = bucket_cuts(b)) == HEXI_OK)
			rc = bucket_segs(s, b);
		if (rc == HEXI_OK)
			rc = agree_flat(s, b);
		/* a bucket whose blocks stage in two ring segments or less
		 * runs the backend's collectives (fewer steps) */
		b->ring = s->ring && b->g->n > 1 &&
			  b->blk * (size_t)b->g->n > 2 * segmax;
		/* a staged bucket's window: n x win elements within the
		 * budget, at least one per member, at most the block */
		b->win = s->stage_max / (size_t)b->g->n;
		b->win = b->win < 1 ? 1 : b->win > b->blk ? b->blk : b->win;
		if (!b->ring && !b->flat && b->win * (size_t)b->g->n > *cap)
			*cap = b->win * (size_t)b->g->n;
		if (b->ring && b->blk > s->rseg)
			s->rseg = b->blk < segmax ? b->blk : segmax;
	}
	if (2 * s->rseg > *cap) /* the ring's two halves */
		*cap = 2 * s->rseg;
	for (int k = 0; rc == HEXI_OK && k < s->solo.npieces; k++) {
		sync_piece *p = &s->solo.pieces[k];
		rc = seg_add(s, p, 0, p->count, zero == 2 ? p->acc : p->grad);
	}
	return rc;
}

hexi_rc rt_sync_shard(rt_sync *s, int zero, size_t bucket)
{
	size_t cap = 0, own = 0;
	hexi_rc rc;

	if (zero < 0 || zero > 2)
		return hexi_error(HEXI_ERR_INVAL,
				  "sync: zero stage %d is out of range 0..2",
				  zero);
	if (zero == 0 || s->zero > 0)
		return HEXI_OK;
	if (bucket < 1 || bucket > ((size_t)1 << 30))
		return hexi_error(HEXI_ERR_INVAL,
				  "sync: zero %d: %zu elements per bucket is "
				  "out of range 1..2^30",
				  zero, bucket);
	s->stage_max = SYNC_SLOTS * bucket;
	if (s->nsub > 0) /* the sub-buckets would all-reduce */
		return hexi_error(HEXI_ERR_INTERNAL,
				  "sync: zero %d after the overlap's setup "
				  "(rt_sync_shard comes first)",
				  zero);
	if (s->mem != NULL && (s->mem->add == NULL || s->mem->scale == NULL ||
			       s->mem->optim == NULL))
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "sync: zero %d: the memory operations have "
				  "no add, scale or optimizer update",
				  zero);
	if ((rc = shard_setup(s, zero, &cap)) != HEXI_OK)
		return rc;
	if ((rc = mem_falloc(s, &s->mom, 2 * s->owned + 1)) != HEXI_OK)
		return hexi_error_prefix(rc, "sync: moments of %zu elements",
					 s->owned);
	for (size_t i = 0, off = 0; i < (size_t)s->nseg; i++) {
		s->seg[i].m = s->mom + off;
		s->seg[i].v = s->mom + s->owned + off;
		off += s->seg[i].count;
	}
	/* only the reduce-scatter's and all-gather's blocks are staged */
	if ((rc = stage_buf(s, cap)) != HEXI_OK)
		return rc;
	for (int i = 0; i < s->nb; i++)
		own += s->b[i].blk;
	rt_mem_count(s->rt, HEXI_MEM_OPTIM, 2.0 * sizeof(float) * s->owned);
	rt_mem_count(s->rt, HEXI_MEM_GRADS,
		     sizeof(float) * (double)(own + s->solo_n));
	s->zero = zero;
	return HEXI_OK;
}

int rt_sync_zero(const rt_sync *s)
{
	return s != NULL ? s->zero : 0;
}

/* The squared global norm from this rank's partial sum acc: the pieces no
 * other rank holds (solo) are added, then one world all-reduce. */
static hexi_rc norm_finish(rt_sync *s, double acc, double *sumsq)
{
	hexi_rc rc;

	for (int i = 0; i < s->solo.npieces; i++) {
		const sync_piece *p = &s->solo.pieces[i];
		if ((rc = mem_sumsq(s, p->acc != NULL ? p->acc : p->grad,
				    p->count, &acc)) != HEXI_OK)
			return rc;
	}
	return norm_world(s, acc, sumsq);
}

/* ---- the ring: reduce-scatter and all-gather without staging ------------- */

/* Elements of the part of member i's block at offset o, at most seg
 * long: a ring segment, or a staged bucket's window (pack_blocks). */
static size_t block_part(const sync_bucket *b, int i, size_t o, size_t seg)
{
	size_t len = b->cut[i + 1] - b->cut[i];

	return o >= len ? 0 : len - o < seg ? len - o : seg;
}

enum { IO_GET, IO_ADD, IO_WGET, IO_WPUT };

/* Bucket elements [e, e + n) against buf[0..n): IO_GET my gradient (zeros
 * where I do not contribute or the round is not live) into buf, IO_ADD
 * it onto buf, IO_WGET the weights into buf, IO_WPUT buf into the
 * weights. */
static void bucket_io(const sync_bucket *b, size_t e, size_t n, float *buf,
		      int op, int live)
{
	size_t at = 0; /* bucket offset of piece k */
	int k = 0;

	while (k < b->npieces && at + b->pieces[k].count <= e)
		at += b->pieces[k++].count;
	for (size_t done = 0; done < n; k++) {
		const sync_piece *p = &b->pieces[k];
		size_t off = e + done - at;
		size_t take =
		    p->count - off < n - done ? p->count - off : n - done;
		float *d = buf + done;
		int mine = p->contribute && live;
		if (op == IO_GET && mine)
			memcpy(d, p->grad + off, sizeof(float) * take);
		else if (op == IO_GET)
			memset(d, 0, sizeof(float) * take);
		else if (op == IO_ADD && mine)
			for (size_t j = 0; j < take; j++)
				d[j] += p->grad[off + j];
		else if (op == IO_WGET && p->w != NULL)
			memcpy(d, p->w + off, sizeof(float) * take);
		else if (op == IO_WPUT && p->w != NULL)
			memcpy(p->w + off, d, sizeof(float) * take);
		done += take;
		at += p->count;
	}
}

/* The weights (w) or my contributed live gradient (!w) of bucket elements
 * [e, e + n) where they are one array in memory; NULL otherwise. */
static float *bucket_span(const sync_bucket *b, size_t e, size_t n, int w,
			  int live)
{
	size_t at = 0;
	float *start = NULL, *next = NULL;
	int k = 0;

	if (n == 0 || (!w && !live))
		return NULL;
	while (k < b->npieces && at + b->pieces[k].count <= e)
		at += b->pieces[k++].count;
	for (size_t done = 0; done < n; k++) {
		const sync_piece *p = &b->pieces[k];
		float *base = (w ? p->w : p->grad) + (e + done - at);
		size_t left = p->count - (e + done - at);
		if ((!w && !p->contribute) || (next != NULL && base != next))
			return NULL;
		if (start == NULL)
			start = base;
		next = base + left;
		done += left < n - done ? left : n - done;
		at += p->count;
	}
	return start;
}

/* The ring's receive half: the one of buf's two halves that src is not. */
static float *ring_other(const rt_sync *s, const float *src)
{
	return src == s->buf ? s->buf + s->rseg : s->buf;
}

/* zero 2: member m adds only zeros in round (0-based) of bucket b: its
 * pipeline ran fewer backwards (every member knows every member's). */
static int ring_dead(const sync_bucket *b, int m, int round)
{
	return round >= 0 && b->mmb != NULL && round >= b->mmb[m];
}

/* Ring reduce-scatter of bucket b: per segment of the blocks, n - 1
 * steps; at step t member me sends its partial sum of block me - t - 1 to
 * member me + 1, receives block me - t - 2 from member me - 1 and adds its
 * own values; the last step's block is its own, which lands in b->own
 * (add_own: added to b->own, zero 2's earlier rounds).  Each element is
 * summed in ring order from the owner's successor: the same on every run,
 * the same for both members of a pair (a + b = b + a).  A partial sum of
 * members that all add zeros this round (zero 2, round >= 0: pipelines
 * with fewer micro-batches) is not sent: both ends know it is zero. */
static hexi_rc ring_scatter(rt_sync *s, sync_bucket *b, int live, int add_own,
			    int round)
{
	const int n = b->g->n, me = b->g->me;
	hexi_rc rc = HEXI_OK;

	if (n < 2) /* b->ring is set only for two members or more */
		return hexi_error(
		    HEXI_ERR_INVAL,
		    "gradient reduce-scatter: a ring of %d member", n);
	for (size_t o = 0; rc == HEXI_OK && o < b->blk; o += s->rseg) {
		const float *src = s->buf;
		int zs = !live, zr = 1; /* my partial, the incoming: zeros */
		for (int t = 0; rc == HEXI_OK && t < n - 1; t++) {
			int is = ((me - t - 1) % n + n) % n;
			int ir = ((me - t - 2) % n + n) % n;
			size_t ks = block_part(b, is, o, s->rseg);
			size_t kr = block_part(b, ir, o, s->rseg);
			float *dst;
			zr = zr && ring_dead(b, (me - t - 1 + n) % n, round);
			ks = zs ? 0 : ks;
			kr = zr ? 0 : kr;
			if (t == 0 && zs) {
				src = s->buf;
			} else if (t == 0) {
				src =
				    bucket_span(b, b->cut[is] + o, ks, 0, live);
				if (src == NULL) {
					bucket_io(b, b->cut[is] + o, ks, s->buf,
						  IO_GET, live);
					src = s->buf;
				}
			}
			dst = t == n - 2 && !add_own ? b->own + o
						     : ring_other(s, src);
			rc = b->g->comm->ops->sendrecv(
			    b->g, src, ks, (me + 1) % n, dst, kr,
			    (me + n - 1) % n, RT_F32);
			if (rc == HEXI_OK)
				bucket_io(b, b->cut[ir] + o,
					  block_part(b, ir, o, s->rseg), dst,
					  zr ? IO_GET : IO_ADD, live);
			src = dst;
			zs = zr && !live; /* what I pass on next */
		}
		for (size_t j = 0; rc == HEXI_OK && add_own && !zs &&
				   j < block_part(b, me, o, s->rseg);
		     j++)
			b->own[o + j] += src[j];
	}
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc,
					 "gradient reduce-scatter (ring, %zu "
					 "elements per member)",
					 b->blk);
	return HEXI_OK;
}

/* Ring all-gather of the updated weights: per segment, n - 1 steps; at
 * step t member me passes block me - t on and receives block me - t - 1,
 * straight into the weights where they are one array. */
static hexi_rc ring_gather(rt_sync *s, sync_bucket *b)
{
	const int n = b->g->n, me = b->g->me;
	hexi_rc rc = HEXI_OK;

	for (size_t o = 0; rc == HEXI_OK && o < b->blk; o += s->rseg) {
		const float *src = NULL;
		for (int t = 0; rc == HEXI_OK && t < n - 1; t++) {
			int is = ((me - t) % n + n) % n;
			int ir = ((me - t - 1) % n + n) % n;
			size_t ks = block_part(b, is, o, s->rseg);
			size_t kr = block_part(b, ir, o, s->rseg);
			float *dst;
			if (t == 0) {
				src = bucket_span(b, b->cut[is] + o, ks, 1, 1);
				if (src == NULL) {
					bucket_io(b, b->cut[is] + o, ks, s->buf,
						  IO_WGET, 1);
					src = s->buf;
				}
			}
			dst = bucket_span(b, b->cut[ir] + o, kr, 1, 1);
			int direct = dst != NULL;
			if (!direct)
				dst = ring_other(s, src);
			rc = b->g->comm->ops->sendrecv(
			    b->g, src, ks, (me + 1) % n, dst, kr,
			    (me + n - 1) % n, RT_F32);
			if (rc == HEXI_OK && !direct)
				bucket_io(b, b->cut[ir] + o, kr, dst, IO_WPUT,
					  1);
			src = dst;
		}
	}
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc,
					 "weight all-gather (ring, %zu "
					 "elements per member)",
					 b->blk);
	return HEXI_OK;
}

/* One run where a piece of a bucket meets one member's block: take
 * elements of piece k from its element off, at element pos of member
 * mem's block (e: where piece k starts in the bucket). */
typedef struct {
	int k, mem;
	size_t off, pos, take, e;
} block_run;

/* The run of bucket b after r, in bucket order (start from {0}); 0 when
 * none is left.  Pieces without elements are passed over. */
static int block_next(const sync_bucket *b, block_run *r)
{
	r->off += r->take;
	r->take = 0;
	while (r->k < b->npieces && r->off >= b->pieces[r->k].count) {
		r->e += b->pieces[r->k].count;
		r->k++;
		r->off = 0;
	}
	if (r->k >= b->npieces)
		return 0;
	const size_t at = r->e + r->off;
	while (r->mem + 1 < b->g->n && b->cut[r->mem + 1] <= at)
		r->mem++;
	const size_t lim = b->cut[r->mem + 1] - at;
	const size_t left = b->pieces[r->k].count - r->off;
	r->take = left < lim ? left : lim;
	r->pos = at - b->cut[r->mem];
	return 1;
}

/* The part [a, z) of run r that falls in the window [o, o + w) of its
 * member's block; 0 when none. */
static int run_window(const block_run *r, size_t o, size_t w, size_t *a,
		      size_t *z)
{
	*a = r->pos > o ? r->pos : o;
	*z = r->pos + r->take < o + w ? r->pos + r->take : o + w;
	return *a < *z;
}

/* Window [o, o + w) of every member's block of bucket b into the staging
 * buffer, member i's at i x w (the tail past a shorter range zero): my
 * values where I contribute and live, zeros otherwise. */
static hexi_rc pack_blocks(rt_sync *s, sync_bucket *b, int live, size_t o,
			   size_t w)
{
	const int n = b->g->n;
	block_run r = {0};
	size_t a, z;
	hexi_rc rc = HEXI_OK;

	while (rc == HEXI_OK && block_next(b, &r)) {
		const sync_piece *p = &b->pieces[r.k];
		if (!run_window(&r, o, w, &a, &z))
			continue;
		float *dst = s->buf + (size_t)r.mem * w + (a - o);
		rc =
		    p->contribute && live
			? mem_copy(s, dst, p->grad + r.off + (a - r.pos), z - a)
			: mem_zero(s, dst, z - a);
	}
	for (int i = 0; rc == HEXI_OK && i < n; i++) {
		size_t len = block_part(b, i, o, w);
		if (len < w)
			rc = mem_zero(s, s->buf + (size_t)i * w + len, w - len);
	}
	return rc;
}

/* Reduce-scatter of bucket b: member i's range of the send data (the
 * staging window [o, o + w) of the blocks, or with b->flat the gradients
 * in place, o 0 and w blk) sums into its b->own + o.  add_own: my own
 * range first gets b->own added (zero 2: the sum of the earlier rounds
 * rides along). */
static hexi_rc scatter_bucket(rt_sync *s, sync_bucket *b, int add_own, size_t o,
			      size_t w)
{
	const int me = b->g->me;
	const size_t len =
	    b->flat ? b->cut[me + 1] - b->cut[me] : block_part(b, me, o, w);
	float *mine =
	    b->flat ? b->pieces[0].grad + b->cut[me] : s->buf + (size_t)me * w;
	hexi_rc rc = HEXI_OK;

	if (add_own)
		rc = mem_add(s, mine, b->own + o, len);
	if (rc == HEXI_OK)
		rc = mem_fence(s); /* the send data complete (device) */
	if (rc != HEXI_OK)
		return rc;
	if (b->flat)
		rc = b->g->comm->ops->reduce_scatterv_sum(
		    b->g, b->pieces[0].grad, b->own, b->cut, RT_F32);
	else
		rc = b->g->comm->ops->reduce_scatter_sum(b->g, s->buf,
							 b->own + o, w, RT_F32);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc,
					 "gradient reduce-scatter (%zu "
					 "elements per member)",
					 w);
	return HEXI_OK;
}

/* The staged reduce-scatter of bucket b, a window at a time (the
 * staging holds n x b->win elements, not the bucket). */
static hexi_rc scatter_staged(rt_sync *s, sync_bucket *b, int live, int add_own)
{
	hexi_rc rc = HEXI_OK;

	for (size_t o = 0; rc == HEXI_OK && o < b->blk; o += b->win) {
		size_t w = b->blk - o < b->win ? b->blk - o : b->win;
		rc = pack_blocks(s, b, live, o, w);
		if (rc == HEXI_OK)
			rc = scatter_bucket(s, b, add_own, o, w);
	}
	return rc;
}

/* Zero the pieces I add nothing to (in place: the local gradient is not
 * needed after), or every piece (a round of zeros). */
static void zero_flat(sync_bucket *b, int live)
{
	for (int k = 0; k < b->npieces; k++)
		if (!b->pieces[k].contribute || !live)
			memset(b->pieces[k].grad, 0,
			       sizeof(float) * b->pieces[k].count);
}

/* zero 1: reduce-scatter bucket b once, after the backwards; my range's
 * sum lands in b->own. */
static hexi_rc shard_bucket(rt_sync *s, sync_bucket *b, double *acc)
{
	hexi_rc rc = HEXI_OK;

	if (b->ring)
		rc = ring_scatter(s, b, 1, 0, -1);
	else if (b->flat) {
		zero_flat(b, 1);
		rc = scatter_bucket(s, b, 0, 0, b->blk);
	} else
		rc = scatter_staged(s, b, 1, 0);
	if (rc != HEXI_OK)
		return rc;
	if (acc != NULL)
		return mem_sumsq(s, b->own,
				 b->cut[b->g->me + 1] - b->cut[b->g->me], acc);
	return HEXI_OK;
}

/* zero 2: one round of bucket b (live: this backward's gradient in the
 * model's window; 0: zeros), summed with the earlier rounds into b->own. */
static hexi_rc round_bucket(rt_sync *s, sync_bucket *b, int live)
{
	hexi_rc rc = HEXI_OK;

	if (b->ring)
		rc = ring_scatter(s, b, live, b->rounds > 0, b->rounds);
	else if (b->flat) {
		zero_flat(b, live);
		rc = scatter_bucket(s, b, b->rounds > 0, 0, b->blk);
	} else
		rc = scatter_staged(s, b, live, b->rounds > 0);
	b->rounds++;
	return rc;
}

static hexi_rc round_solo(const rt_sync *s, sync_piece *p)
{
	if (p->rounds++ == 0)
		return mem_copy(s, p->acc, p->grad, p->count);
	return mem_add(s, p->acc, p->grad, p->count);
}

hexi_rc rt_sync_grad_ready(rt_sync *s, int round, int layer)
{
	hexi_rc rc;

	if (s == NULL || s->zero != 2)
		return HEXI_OK;
	for (int i = 0; i < s->nb; i++) {
		sync_bucket *b = &s->b[s->order[i]];
		if (b->key < layer || b->rounds > round)
			continue;
		if (b->rounds < round)
			return hexi_error(HEXI_ERR_INTERNAL,
					  "sync: rank %d: the chunks of layer "
					  "%d missed backward %d",
					  s->rt->rank, b->key, b->rounds);
		if (b->accum) { /* summed here, reduce-scattered at the end */
			for (int k = 0; k < b->npieces; k++) {
				b->pieces[k].rounds = b->rounds;
				if ((rc = round_solo(s, &b->pieces[k])) !=
				    HEXI_OK)
					return rc;
			}
			b->rounds++;
			continue;
		}
		if ((rc = round_bucket(s, b, 1)) != HEXI_OK)
			return rc;
		rt_watchdog_feed(s->rt);
	}
	for (int k = 0; k < s->solo.npieces; k++) {
		sync_piece *p = &s->solo.pieces[k];
		if (p->key >= layer && p->rounds == round &&
		    (rc = round_solo(s, p)) != HEXI_OK)
			return rc;
	}
	return HEXI_OK;
}

void rt_sync_zero_grad(rt_sync *s)
{
	for (int i = 0; s != NULL && s->zero == 2 && i < s->nb; i++)
		s->b[i].rounds = 0;
	for (int k = 0; s != NULL && s->zero == 2 && k < s->solo.npieces; k++)
		s->solo.pieces[k].rounds = 0;
}

static hexi_rc shard_bucket(rt_sync *s, sync_bucket *b, double *acc);

/* zero 2: a small bucket's sum over this rank's backwards (its pieces'
 * acc) reduce-scattered as zero 1 does the gradients: the pieces point at
 * their sums for the call. */
static hexi_rc accum_bucket(rt_sync *s, sync_bucket *b)
{
	hexi_rc rc;

	for (int k = 0; k < b->npieces; k++) {
		float *g = b->pieces[k].grad;
		b->pieces[k].grad = b->pieces[k].acc;
		b->pieces[k].acc = g;
	}
	rc = shard_bucket(s, b, NULL);
	for (int k = 0; k < b->npieces; k++) {
		float *g = b->pieces[k].grad;
		b->pieces[k].grad = b->pieces[k].acc;
		b->pieces[k].acc = g;
	}
	return rc;
}

/* zero 2, after the backwards: the rounds of zeros this rank owes the
 * buckets whose other members ran more micro-batches (rounds in order,
 * each in backward order: what the members' backwards do), then the norm
 * of the owned sums. */
static hexi_rc shard2_run(rt_sync *s, double *sumsq)
{
	const int mine = s->rt->role.micro_batches;
	double acc = 0;
	hexi_rc rc;

	for (int i = 0; i < s->nb; i++)
		if (s->b[i].rounds != mine)
			return hexi_error(HEXI_ERR_INTERNAL,
					  "sync: rank %d: the chunks of layer "
					  "%d got %d of %d backwards",
					  s->rt->rank, s->b[i].key,
					  s->b[i].rounds, mine);
	for (int r = mine; r < s->max_rounds; r++)
		for (int i = 0; i < s->nb; i++) {
			sync_bucket *b = &s->b[s->order[i]];
			if (r < b->nround && !b->accum &&
			    (rc = round_bucket(s, b, 0)) != HEXI_OK)
				return rc;
			rt_watchdog_feed(s->rt);
		}
	/* the small buckets' sums, once, in bucket order (every member) */
	for (int i = 0; i < s->nb; i++) {
		if (s->b[i].accum &&
		    (rc = accum_bucket(s, &s->b[i])) != HEXI_OK)
			return rc;
		rt_watchdog_feed(s->rt);
	}
	if (sumsq == NULL)
		return HEXI_OK;
	for (int i = 0; i < s->nb; i++) {
		const sync_bucket *b = &s->b[i];
		rc = mem_sumsq(s, b->own,
			       b->cut[b->g->me + 1] - b->cut[b->g->me], &acc);
		if (rc != HEXI_OK)
			return rc;
	}
	return norm_finish(s, acc, sumsq);
}

static hexi_rc shard_run(rt_sync *s, double *sumsq)
{
	double acc = 0;
	hexi_rc rc;

	if (s->zero == 2)
		return shard2_run(s, sumsq);
	for (int i = 0; i < s->nb; i++) {
		if ((rc = shard_bucket(s, &s->b[i], sumsq ? &acc : NULL)) !=
		    HEXI_OK)
			return rc;
		rt_watchdog_feed(s->rt);
	}
	if (sumsq == NULL)
		return HEXI_OK;
	return norm_finish(s, acc, sumsq);
}

/* The updated weights of every member's range back to every holder. */
static hexi_rc gather_weights(rt_sync *s, sync_bucket *b)
{
	const int me = b->g->me;
	hexi_rc rc = HEXI_OK;

	if (b->ring)
		return ring_gather(s, b);
	if (b->flat) { /* my range is in place already */
		rc = b->g->comm->ops->allgatherv(b->g, b->pieces[0].w, b->cut,
						 RT_F32);
		return rc == HEXI_OK
			   ? HEXI_OK
			   : hexi_error_prefix(rc, "weight all-gather");
	}
	/* a window at a time: my range's part into my block, the
	 * all-gather, the others' parts out of theirs */
	for (size_t o = 0; rc == HEXI_OK && o < b->blk; o += b->win) {
		size_t w = b->blk - o < b->win ? b->blk - o : b->win, a, z;
		block_run r = {0};
		while (rc == HEXI_OK && block_next(b, &r))
			if (r.mem == me && run_window(&r, o, w, &a, &z))
				rc = mem_copy(
				    s, s->buf + (size_t)me * w + (a - o),
				    b->pieces[r.k].w + r.off + (a - r.pos),
				    z - a);
		if (rc == HEXI_OK)
			rc = mem_fence(s);
		if (rc == HEXI_OK && (rc = b->g->comm->ops->allgather(
					  b->g, s->buf, w, RT_F32)) != HEXI_OK)
			return hexi_error_prefix(rc,
						 "weight all-gather (%zu "
						 "elements per member)",
						 w);
		r = (block_run){0};
		while (rc == HEXI_OK && block_next(b, &r))
			if (r.mem != me && run_window(&r, o, w, &a, &z))
				rc = mem_copy(
				    s, b->pieces[r.k].w + r.off + (a - r.pos),
				    s->buf + (size_t)r.mem * w + (a - o),
				    z - a);
	}
	return rc;
}

/* Clipping and the optimizer on one owned range: inline on the host,
 * the caller's scale and optim (device kernels) otherwise. */
static hexi_rc seg_update(const rt_sync *s, sync_seg *g, float scale, float lr,
			  const struct rt_adamw_opts *ao, int step)
{
	hexi_rc rc;

	if (s->mem != NULL) {
		if (scale != 1.0f &&
		    (rc = s->mem->scale(s->mem->ctx, g->g, scale, g->count)) !=
			HEXI_OK)
			return rc;
		return s->mem->optim(s->mem->ctx, g->w, g->g, g->m, g->v,
				     g->count, lr, ao, step, g->decay);
	}
	if (scale != 1.0f)
		for (size_t j = 0; j < g->count; j++)
			g->g[j] *= scale;
	if (ao != NULL)
		rt_adamw_span(g->w, g->g, g->m, g->v, g->count, ao, step,
			      g->decay);
	else
		for (size_t j = 0; j < g->count; j++)
			g->w[j] -= lr * g->g[j];
	return HEXI_OK;
}

hexi_rc rt_sync_step(rt_sync *s, float scale, float lr,
		     const struct rt_adamw_opts *ao, int step)
{
	hexi_rc rc;

	if (s->zero == 0)
		return hexi_error(HEXI_ERR_INTERNAL, "sync: step unsharded");
	if (ao != NULL && (rc = rt_adamw_check(ao, step)) != HEXI_OK)
		return rc;
	for (int i = 0; i < s->nseg; i++)
		if ((rc = seg_update(s, &s->seg[i], scale, lr, ao, step)) !=
		    HEXI_OK)
			return hexi_error_prefix(rc, "sharded optimizer");
	for (int i = 0; i < s->nb; i++) {
		if ((rc = gather_weights(s, &s->b[i])) != HEXI_OK)
			return rc;
		rt_watchdog_feed(s->rt);
	}
	rt_sync_zero_grad(s);
	return mem_fence(s);
}

int rt_sync_nsegs(const rt_sync *s)
{
	return s != NULL && s->zero > 0 ? s->nseg : 0;
}

void rt_sync_seg_get(const rt_sync *s, int i, rt_sync_seg *out)
{
	const sync_seg *g = &s->seg[i];

	out->param = g->param;
	out->row_begin = g->row_begin;
	out->row_end = g->row_end;
	out->m = g->m;
	out->v = g->v;
	out->n = g->count;
}

int rt_sync_flat(const rt_sync *s)
{
	int n = 0;

	for (int i = 0; s->zero > 0 && i < s->nb; i++)
		n += s->b[i].flat;
	return n;
}

int rt_sync_rings(const rt_sync *s)
{
	int n = 0;

	for (int i = 0; s->zero > 0 && i < s->nb; i++)
		n += s->b[i].ring;
	return n;
}

size_t rt_sync_owned(const rt_sync *s)
{
	return s->zero > 0 ? s->owned : 0;
}

size_t rt_sync_shard_bytes(const rt_sync *s)
{
	size_t n = 2 * s->owned + s->bufcap + s->solo_n;

	for (int i = 0; i < s->nb; i++)
		n += s->b[i].blk;
	return s->zero > 0 ? n * sizeof(float) : 0;
}

/* ---- overlap: bounded buckets started during the backward ---------------- */

/* Calls fn(piece, offset in piece, count, offset in the sub) for every
 * piece part inside elements [e0, e1) of bucket b. */
typedef hexi_rc (*part_fn)(rt_sync *s, const sync_piece *p, size_t off,
			   size_t n, size_t at, void *arg);

static hexi_rc sub_parts(rt_sync *s, const sync_sub *u, part_fn fn, void *arg)
{
	const sync_bucket *b = u->b;
	size_t e = 0;
	hexi_rc rc = HEXI_OK;

	for (int k = 0; rc == HEXI_OK && k < b->npieces && e < u->e1; k++) {
		const sync_piece *p = &b->pieces[k];
		size_t a = e > u->e0 ? e : u->e0;
		size_t z = e + p->count < u->e1 ? e + p->count : u->e1;
		if (a < z)
			rc = fn(s, p, a - e, z - a, a - u->e0, arg);
		e += p->count;
	}
	return rc;
}

typedef struct sub_scan {
	int key;
	const float *next; /* where the next part must start to be contiguous */
	int contig;
	const float *first;
} sub_scan;

static hexi_rc scan_part(rt_sync *s, const sync_piece *p, size_t off, size_t n,
			 size_t at, void *arg)
{
	sub_scan *c = arg;

	(void)s;
	if (at == 0) {
		c->first = p->grad + off;
		c->key = p->key;
	} else if (c->next != p->grad + off) {
		c->contig = 0;
	}
	if (p->key < c->key)
		c->key = p->key;
	c->next = p->grad + off + n;
	return HEXI_OK;
}

static int cmp_sub(const void *x, const void *y)
{
	const sync_sub *a = x, *b = y;

	if (a->key != b->key)
		return a->key > b->key ? -1 : 1; /* finished first */
	if (a->b != b->b)
		return a->b < b->b ? -1 : 1;
	return a->e0 > b->e0 ? -1 : a->e0 < b->e0; /* later elements first */
}

/* Cut bucket b into sub-buckets (into out unless NULL; returns how many):
 * at most cap elements each, and a new one wherever the layer key of the
 * pieces changes, so each starts as soon as the backward has finished
 * its own layer (a sub straddling two layers would wait for the lower
 * one).  Pieces are in layout order, a layer's pieces consecutive. */
static int cut_subs(sync_bucket *b, size_t cap, sync_sub *out)
{
	size_t e = 0, e0 = 0;
	int n = 0, key = 0;

#define EMIT()                                                                 \
	do {                                                                   \
		if (out != NULL)                                               \
			out[n] = (sync_sub){.b = b, .e0 = e0, .e1 = e};        \
		n++;                                                           \
		e0 = e;                                                        \
	} while (0)
	for (int k = 0; k < b->npieces; k++) {
		const sync_piece *p = &b->pieces[k];
		size_t left = p->count;
		if (e > e0 && p->key != key && left > 0)
			EMIT();
		while (left > 0) {
			size_t take = cap - (e - e0);
			take = left < take ? left : take;
			e += take;
			left -= take;
			key = p->key;
			if (e - e0 == cap)
				EMIT();
		}
	}
	if (e > e0)
		EMIT();
#undef EMIT
	return n;
}

/* zero 1: member i's part of sub u is bucket elements [cut[i], cut[i+1])
 * within [e0, e1); mine lands at its place in my owned range. */
static void sub_cuts(sync_sub *u, size_t *rcut)
{
	const sync_bucket *b = u->b;
	const int me = b->g->me;

	for (int i = 0; i <= b->g->n; i++) {
		size_t c = b->cut[i] < u->e0   ? u->e0
			   : b->cut[i] > u->e1 ? u->e1
					       : b->cut[i];
		rcut[i] = c - u->e0;
	}
	u->rcut = rcut;
	/* an empty part (the sub lies outside my range) receives nothing */
	u->rdst = rcut[me + 1] > rcut[me]
		      ? b->own + (u->e0 + rcut[me] - b->cut[me])
		      : b->own;
}

static void obuf_free(rt_sync *s)
{
	if (s->mem != NULL && s->obuf != NULL)
		s->mem->free(s->mem->ctx, s->obuf);
	else
		free(s->obuf);
	s->obuf = NULL;
}

/* Sub-buckets of every bucket, their contiguity agreed over the members
 * (host group of the same ranks), in launch order.  A device sync (mem
 * set) stages in device memory and packs with the caller's asynchronous
 * copies; the backend orders its non-blocking collective after them
 * (nccl: an event on the compute stream, rt_comm_nccl_order_after). */
hexi_rc rt_sync_overlap(rt_sync *s, size_t cap)
{
	double *flag = NULL;
	size_t packed = 0, ncut = 0; /* zero 1: cuts per sub, the most */
	int n = 0;
	hexi_rc rc = HEXI_OK;

	if (s->zero > 1 || s->nb == 0 || s->nsub > 0)
		return HEXI_OK; /* zero 2: reduce-scatters every backward */
	if (cap < 1)
		cap = 1;
	for (int i = 0; i < s->nb; i++) {
		const rt_comm_ops *ops = s->b[i].g->comm->ops;
		if ((s->zero == 0 && ops->iallreduce_sum == NULL) ||
		    (s->zero == 1 && ops->ireduce_scatterv_sum == NULL))
			return HEXI_OK;
		n += cut_subs(&s->b[i], cap, NULL);
		if ((size_t)s->b[i].g->n + 1 > ncut)
			ncut = (size_t)s->b[i].g->n + 1;
	}
	if (n == 0)
		return HEXI_OK;
	s->sub = calloc((size_t)n, sizeof(*s->sub));
	flag = calloc((size_t)n, sizeof(*flag));
	if (s->zero == 1)
		s->rcuts = calloc(ncut * (size_t)n, sizeof(*s->rcuts));
	if (s->sub == NULL || flag == NULL ||
	    (s->zero == 1 && s->rcuts == NULL)) {
		rc = hexi_error(HEXI_ERR_NOMEM, "sync: %d buckets", n);
		goto out;
	}
	n = 0;
	for (int i = 0; rc == HEXI_OK && i < s->nb; i++) {
		sync_bucket *b = &s->b[i];
		int n0 = n;
		n += cut_subs(b, cap, &s->sub[n]);
		for (int k = n0; k < n; k++) {
			sync_sub *u = &s->sub[k];
			sub_scan c = {.contig = 1};
			sub_parts(s, u, scan_part, &c);
			u->key = c.key;
			flag[k] = !c.contig;
			if (s->zero == 1)
				sub_cuts(u, s->rcuts + (size_t)k * ncut);
		}
		rc = host_sum(s, b, flag + n0, (size_t)(n - n0));
		for (int k = n0; k < n; k++)
			s->sub[k].inplace = flag[k] == 0;
	}
	if (rc != HEXI_OK) {
		rc = hexi_error_prefix(rc, "sync setup (overlap)");
		goto out;
	}
	for (int k = 0; k < n; k++)
		if (!s->sub[k].inplace) {
			size_t len = s->sub[k].e1 - s->sub[k].e0;
			s->slotlen = len > s->slotlen ? len : s->slotlen;
			packed += len;
		}
	/* every packed sub its own part when they fit the budget; else as
	 * many slots of the longest as fit it (at least SYNC_SLOTS: a sub
	 * is at most cap) */
	if (packed > SYNC_SLOTS * cap) {
		s->nslot = (int)(SYNC_SLOTS * cap / s->slotlen);
		packed = s->slotlen * (size_t)s->nslot;
	}
	if (s->nslot > 0 &&
	    (s->slot_sub = malloc(sizeof(int) * (size_t)s->nslot)) == NULL)
		rc = hexi_error(HEXI_ERR_NOMEM, "sync: %d slots", s->nslot);
	else if (s->mem != NULL)
		rc = s->mem->alloc(s->mem->ctx, (void **)&s->obuf,
				   sizeof(float) * (packed ? packed : 1));
	else if ((s->obuf = malloc(sizeof(float) * (packed ? packed : 1))) ==
		 NULL)
		rc = hexi_error(HEXI_ERR_NOMEM, "sync: %zu-element buffer",
				packed);
	if (rc != HEXI_OK)
		goto out;
	rt_mem_count(s->rt, HEXI_MEM_COMM,
		     sizeof(float) * (double)(packed ? packed : 1));
	s->ostage = packed;
	for (int k = 0; k < s->nslot; k++)
		s->slot_sub[k] = -1;
	for (size_t k = 0, at = 0; s->nslot == 0 && k < (size_t)n; k++)
		if (!s->sub[k].inplace) {
			s->sub[k].stage = s->obuf + at;
			at += s->sub[k].e1 - s->sub[k].e0;
		}
	/* the same order on every member: key, bucket (in creation order,
	 * alike on the members), elements */
	qsort(s->sub, (size_t)n, sizeof(*s->sub), cmp_sub);
	s->nsub = n;
out:
	free(flag);
	if (rc != HEXI_OK) {
		free(s->sub);
		s->sub = NULL;
		free(s->rcuts);
		s->rcuts = NULL;
		free(s->slot_sub);
		s->slot_sub = NULL;
		s->nslot = 0;
		obuf_free(s);
	}
	return rc;
}

int rt_sync_overlapped(const rt_sync *s)
{
	return s != NULL ? s->nsub : 0;
}

int rt_sync_overlap_slots(const rt_sync *s, int *packed, size_t *bytes)
{
	*packed = 0;
	for (int k = 0; s != NULL && k < s->nsub; k++)
		*packed += !s->sub[k].inplace;
	*bytes = s != NULL ? sizeof(float) * s->ostage : 0;
	return s != NULL ? s->nslot : 0;
}

static hexi_rc pack_part(rt_sync *s, const sync_piece *p, size_t off, size_t n,
			 size_t at, void *arg)
{
	sync_sub *u = arg;

	if (u->inplace)
		return p->contribute ? HEXI_OK : mem_zero(s, p->grad + off, n);
	return p->contribute ? mem_copy(s, u->stage + at, p->grad + off, n)
			     : mem_zero(s, u->stage + at, n);
}

static hexi_rc unpack_copy(rt_sync *s, const sync_piece *p, size_t off,
			   size_t n, size_t at, void *arg);

/* A packed sub done: complete it (a wait if still in flight), zero 0
 * copies the sums back into the gradients, its slot (if it has one) is
 * free. */
static hexi_rc sub_retire(rt_sync *s, sync_sub *u)
{
	hexi_rc rc = HEXI_OK;

	if (u->state == 1) {
		rc = u->b->g->comm->ops->wait(u->req);
		u->req = NULL;
		if (rc != HEXI_OK)
			rc = hexi_error_prefix(rc, "gradient sync");
		else /* an overlapped sub-bucket done */
			rt_watchdog_feed(s->rt);
	}
	u->state = 3;
	if (rc == HEXI_OK && s->zero == 0)
		rc = sub_parts(s, u, unpack_copy, u);
	if (s->nslot > 0 && u->stage != NULL) { /* its slot, from where */
		const size_t k = (size_t)(u->stage - s->obuf) / s->slotlen;

		if (s->slot_sub[k] == (int)(u - s->sub))
			s->slot_sub[k] = -1;
		u->stage = NULL;
	}
	return rc;
}

/* The next slot, round robin: its sub, started nslot packed subs ago,
 * is the oldest in flight; retired first if it still holds it. */
static hexi_rc slot_take(rt_sync *s, sync_sub *u)
{
	const int k = s->slot_next++ % s->nslot;
	hexi_rc rc;

	if (s->slot_sub[k] >= 0 &&
	    (rc = sub_retire(s, &s->sub[s->slot_sub[k]])) != HEXI_OK)
		return rc;
	s->slot_sub[k] = (int)(u - s->sub);
	u->stage = s->obuf + (size_t)k * s->slotlen;
	return HEXI_OK;
}

static hexi_rc sub_start(rt_sync *s, sync_sub *u)
{
	float *buf;
	hexi_rc rc;

	if (!u->inplace && s->nslot > 0 && (rc = slot_take(s, u)) != HEXI_OK)
		return rc;
	if ((rc = sub_parts(s, u, pack_part, u)) != HEXI_OK)
		return hexi_error_prefix(rc, "gradient sync: packing");
	if (u->inplace) {
		sub_scan c = {.contig = 1};
		sub_parts(s, u, scan_part, &c);
		buf = (float *)c.first;
	} else
		buf = u->stage;
	if (u->rcut != NULL)
		rc = u->b->g->comm->ops->ireduce_scatterv_sum(
		    u->b->g, buf, u->rdst, u->rcut, RT_F32, &u->req);
	else
		rc = u->b->g->comm->ops->iallreduce_sum(
		    u->b->g, buf, u->e1 - u->e0, RT_F32, &u->req);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "gradient sync (%zu elements)",
					 u->e1 - u->e0);
	u->state = 1;
	return HEXI_OK;
}

/* Let the collectives in flight progress (MPI progresses inside calls). */
static hexi_rc overlap_poll(rt_sync *s)
{
	for (int k = 0; k < s->next; k++) {
		sync_sub *u = &s->sub[k];
		int done = 0;
		hexi_rc rc;
		if (u->state != 1)
			continue;
		if ((rc = u->b->g->comm->ops->test(u->req, &done)) != HEXI_OK)
			return hexi_error_prefix(rc, "gradient sync");
		if (done) {
			u->req = NULL;
			u->state = 2;
		}
	}
	return HEXI_OK;
}

hexi_rc rt_sync_poll(rt_sync *s)
{
	if (s == NULL || s->nsub == 0 || s->next == 0)
		return HEXI_OK;
	return overlap_poll(s);
}

hexi_rc rt_sync_ready(rt_sync *s, int layer)
{
	hexi_rc rc;

	if (s == NULL || s->nsub == 0)
		return HEXI_OK;
	while (s->next < s->nsub && s->sub[s->next].key >= layer)
		if ((rc = sub_start(s, &s->sub[s->next++])) != HEXI_OK)
			return rc;
	return overlap_poll(s);
}

/* zero 0: a packed sub's sums back into the gradients. */
static hexi_rc unpack_copy(rt_sync *s, const sync_piece *p, size_t off,
			   size_t n, size_t at, void *arg)
{
	const sync_sub *u = arg;

	return u->inplace ? HEXI_OK
			  : mem_copy(s, p->grad + off, u->stage + at, n);
}

/* zero 0: the squares of the summed gradients this rank counts. */
static hexi_rc norm_part(rt_sync *s, const sync_piece *p, size_t off, size_t n,
			 size_t at, void *arg)
{
	(void)at;
	return p->count_norm ? mem_sumsq(s, p->grad + off, n, arg) : HEXI_OK;
}

/* Device sync: the squares went into the caller's accumulator; add the
 * solo chunks', take it, sum over the world (as rt_sync_run). */
static hexi_rc overlap_norm_dev(rt_sync *s, double *sumsq)
{
	double acc = 0;
	hexi_rc rc = HEXI_OK;

	if (sumsq == NULL)
		return mem_fence(s);
	for (int i = 0; rc == HEXI_OK && i < s->solo.npieces; i++)
		rc = piece_sumsq(s, &s->solo.pieces[i], &acc);
	if (rc == HEXI_OK && (rc = mem_fence(s)) == HEXI_OK)
		rc = s->mem->sumsq_take(s->mem->ctx, &acc);
	if (rc == HEXI_OK)
		rc = s->rt->comm->ops->allreduce_sum(s->rt->groups.world, &acc,
						     1, RT_F64);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "gradient norm");
	*sumsq = acc;
	return HEXI_OK;
}

/* zero 1 overlapped: the norm of the owned sums, as shard_run. */
static hexi_rc own_norm(rt_sync *s, double *sumsq)
{
	double acc = 0;
	hexi_rc rc;

	for (int i = 0; sumsq != NULL && i < s->nb; i++) {
		const sync_bucket *b = &s->b[i];
		rc = mem_sumsq(s, b->own,
			       b->cut[b->g->me + 1] - b->cut[b->g->me], &acc);
		if (rc != HEXI_OK)
			return rc;
	}
	return sumsq == NULL ? HEXI_OK : norm_finish(s, acc, sumsq);
}

/* Start what the backward did not (a stage that ran no hook), wait for
 * every sub-bucket in launch order, unpack the packed ones still in
 * their slots (zero 0), norm. */
static hexi_rc overlap_finish(rt_sync *s, double *sumsq)
{
	double acc = 0;
	hexi_rc rc = HEXI_OK;

	while (rc == HEXI_OK && s->next < s->nsub)
		rc = sub_start(s, &s->sub[s->next++]);
	for (int k = 0; k < s->nsub; k++) {
		sync_sub *u = &s->sub[k];
		hexi_rc w = HEXI_OK;
		if (!u->inplace && (u->state == 1 || u->state == 2))
			w = sub_retire(s, u); /* waits, unpacks (zero 0) */
		else if (u->state == 1 &&
			 (w = u->b->g->comm->ops->wait(u->req)) != HEXI_OK)
			w = hexi_error_prefix(w, "gradient sync");
		if (w != HEXI_OK && rc == HEXI_OK)
			rc = w;
		u->req = NULL;
		u->state = 0;
	}
	for (int k = 0; k < s->nslot; k++)
		s->slot_sub[k] = -1;
	s->next = 0;
	s->slot_next = 0;
	if (rc != HEXI_OK)
		return rc;
	for (int k = 0; sumsq != NULL && s->zero == 0 && k < s->nsub; k++)
		if ((rc = sub_parts(s, &s->sub[k], norm_part, &acc)) != HEXI_OK)
			return rc;
	if (s->zero == 1) /* my owned sums are complete: their norm */
		return own_norm(s, sumsq);
	if (s->mem == NULL)
		return sumsq == NULL ? HEXI_OK : norm_finish(s, acc, sumsq);
	return overlap_norm_dev(s, sumsq);
}
