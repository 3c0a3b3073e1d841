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
#include <stdlib.h>
#include <string.h>

#include "rt_dist.h"

typedef struct sync_piece {
	float *grad;	/* first element of the chunk in the local shard */
	size_t count;	/* elements */
	int contribute; /* 1: add my values, 0: add zeros */
	int count_norm; /* 1: this rank counts the chunk in the norm */
} sync_piece;

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
} sync_bucket;

/* A contiguous run at least this long (elements, 1 MiB) is all-reduced in
 * place rather than packed: saves a copy in and out of the staging buffer
 * at the price of one more all-reduce (doc/DECISIONS.md 55). */
#ifndef SYNC_RUN_MIN /* -DSYNC_RUN_MIN=1 tests the run path on tiny models */
#define SYNC_RUN_MIN ((size_t)1 << 18)
#endif

struct rt_sync {
	hexi_rt *rt;
	rt_comm *comm;		 /* where the chunk groups live */
	const rt_mem_ops *mem;	 /* NULL: host memory */
	int nb;
	sync_bucket *b;	  /* buckets with more than one member */
	sync_bucket solo; /* chunks held by this rank alone (norm only) */
	float *buf;	  /* [max bucket total] */
	size_t bufcap;
};

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

static hexi_rc add_chunk(rt_sync *s, const rt_param_ref *pr,
			 const hexi_chunk *c, const int *pipe_of,
			 size_t *covered)
{
	sync_piece pc;
	sync_bucket *b = &s->solo;
	hexi_rc rc;

	pc.grad = pr->grad + (size_t)(c->row_begin - pr->row_begin) * pr->cols;
	pc.count = (size_t)(c->row_end - c->row_begin) * pr->cols;
	pc.contribute = lowest_of_pipeline(s->rt, pipe_of, c);
	pc.count_norm = c->ranks[0] == s->rt->rank;
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
		rt_group *hg = NULL;
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
		/* host values: over the host communicator's group of the same
		 * ranks (b->g may be an NCCL group, which needs device memory) */
		rc = rt_comm_group_get(s->rt->comm, b->g->ranks, b->g->n, &hg);
		if (rc == HEXI_OK)
			rc = hg->comm->ops->allreduce_sum(
			    hg, brk, (size_t)b->npieces, RT_F64);
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
		rc = add_chunk(s, &params[pidx[c->tensor]], c, pipe_of,
			       &covered[pidx[c->tensor]]);
		if (rc != HEXI_OK)
			goto out;
	}
	if ((rc = check_coverage(s, params, nparams, covered)) != HEXI_OK ||
	    (rc = agree_inplace(s)) != HEXI_OK)
		goto out;
	for (int i = 0; i < s->nb; i++)
		if (s->b[i].packed > s->bufcap)
			s->bufcap = s->b[i].packed;
	if (mem != NULL) {
		void *p = NULL;
		rc = mem->alloc(mem->ctx, &p,
				sizeof(float) * (s->bufcap ? s->bufcap : 1));
		s->buf = p;
		if (rc != HEXI_OK) {
			rc = hexi_error_prefix(rc, "sync: %zu-element buffer",
					       s->bufcap);
			goto out;
		}
	} else if ((s->buf = malloc(sizeof(float) *
				    (s->bufcap ? s->bufcap : 1))) == NULL) {
		rc = hexi_error(HEXI_ERR_NOMEM, "sync: %zu-element buffer",
				s->bufcap);
		goto out;
	}
	rt_mem_count(rt, HEXI_MEM_COMM,
		     sizeof(float) * (double)(s->bufcap ? s->bufcap : 1));
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
		} else if ((rc = mem_copy(s, p->grad, q, p->count)) != HEXI_OK ||
			 (sumsq != NULL &&
			  (rc = piece_sumsq(s, p, sumsq)) != HEXI_OK))
			return rc;
		q += p->count;
	}
	return HEXI_OK;
}

hexi_rc rt_sync_run(rt_sync *s, double *sumsq)
{
	double acc = 0, dev = 0;
	hexi_rc rc;

	for (int i = 0; i < s->nb; i++)
		if ((rc = bucket_run(s, &s->b[i], sumsq ? &acc : NULL)) !=
		    HEXI_OK)
			return rc;
	if (sumsq == NULL)
		return mem_fence(s);
	for (int i = 0; i < s->solo.npieces; i++)
		if ((rc = piece_sumsq(s, &s->solo.pieces[i], &acc)) != HEXI_OK)
			return rc;
	if (s->mem != NULL) {
		if ((rc = mem_fence(s)) != HEXI_OK ||
		    (rc = s->mem->sumsq_take(s->mem->ctx, &dev)) != HEXI_OK)
			return hexi_error_prefix(rc, "gradient norm");
		acc += dev;
	}
	rc = s->rt->comm->ops->allreduce_sum(s->rt->groups.world, &acc, 1,
					     RT_F64);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "gradient norm");
	*sumsq = acc;
	return HEXI_OK;
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
	}
	free(s->b);
	free(s->solo.pieces);
	if (s->mem != NULL)
		s->mem->free(s->mem->ctx, s->buf);
	else
		free(s->buf);
	free(s);
}
