/*
 * comm_mpi.c - the MPI backend of rt_comm.h, the single-process backend,
 * and the group cache shared by every backend.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif

#include "rt_comm.h"

struct rt_group_entry {
	int n;
	int *ranks;
	rt_group *group;
};

/* ---- group cache -------------------------------------------------------- */

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Sort and deduplicate into a fresh array; *n updated. */
static hexi_rc canon_ranks(const int *ranks, int *n, int **out)
{
	int *r = malloc(sizeof(*r) * (size_t)(*n > 0 ? *n : 1));
	int k = 0;

	if (r == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "rt_comm: group of %d ranks",
				  *n);
	memcpy(r, ranks, sizeof(*r) * (size_t)*n);
	qsort(r, (size_t)*n, sizeof(*r), cmp_int);
	for (int i = 0; i < *n; i++)
		if (k == 0 || r[k - 1] != r[i])
			r[k++] = r[i];
	*n = k;
	*out = r;
	return HEXI_OK;
}

hexi_rc rt_comm_group_get(rt_comm *c, const int *ranks, int n, rt_group **out)
{
	int *r = NULL, member = 0;
	hexi_rc rc;

	*out = NULL;
	rc = canon_ranks(ranks, &n, &r);
	if (rc != HEXI_OK)
		return rc;
	for (int i = 0; i < n; i++) {
		if (r[i] < 0 || r[i] >= c->size) {
			rc = hexi_error(HEXI_ERR_RANGE,
					"rt_comm: group rank %d outside world "
					"of %d",
					r[i], c->size);
			goto out;
		}
		member |= r[i] == c->rank;
	}
	if (!member)
		goto out_ok;
	for (int i = 0; i < c->ngroups; i++) {
		struct rt_group_entry *e = &c->groups[i];
		if (e->n == n && memcmp(e->ranks, r, sizeof(*r) * n) == 0) {
			*out = e->group;
			goto out_ok;
		}
	}
	if (c->ngroups == c->cap_groups) {
		int cap = c->cap_groups ? 2 * c->cap_groups : 16;
		void *p = realloc(c->groups, sizeof(*c->groups) * cap);
		if (p == NULL) {
			rc = hexi_error(HEXI_ERR_NOMEM, "rt_comm: group cache");
			goto out;
		}
		c->groups = p;
		c->cap_groups = cap;
	}
	rc = c->ops->group_create(c, r, n, out);
	if (rc != HEXI_OK)
		goto out;
	c->groups[c->ngroups].n = n;
	c->groups[c->ngroups].ranks = r;
	c->groups[c->ngroups].group = *out;
	c->ngroups++;
	return HEXI_OK;
out_ok:
	rc = HEXI_OK;
out:
	free(r);
	return rc;
}

void rt_comm_destroy(rt_comm *c)
{
	if (c == NULL)
		return;
	for (int i = c->ngroups - 1; i >= 0; i--) {
		c->ops->group_destroy(c->groups[i].group);
		free(c->groups[i].ranks);
	}
	free(c->groups);
	c->groups = NULL;
	c->ngroups = 0;
	c->ops->destroy(c);
}

/* Fill the common group head; ranks copied. */
static hexi_rc group_head_init(rt_group *g, rt_comm *c, const int *ranks, int n)
{
	g->comm = c;
	g->n = n;
	g->me = -1;
	g->ranks = malloc(sizeof(int) * (size_t)n);
	if (g->ranks == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "rt_comm: group of %d", n);
	memcpy(g->ranks, ranks, sizeof(int) * (size_t)n);
	for (int i = 0; i < n; i++)
		if (ranks[i] == c->rank)
			g->me = i;
	return HEXI_OK;
}

/* ---- single process ----------------------------------------------------- */

static hexi_rc self_group_create(rt_comm *c, const int *ranks, int n,
				 rt_group **out)
{
	rt_group *g = calloc(1, sizeof(*g));
	hexi_rc rc;

	if (g == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "rt_comm self: group");
	rc = group_head_init(g, c, ranks, n);
	if (rc != HEXI_OK) {
		free(g);
		return rc;
	}
	*out = g;
	return HEXI_OK;
}

static void self_group_destroy(rt_group *g)
{
	if (g == NULL)
		return;
	free(g->ranks);
	free(g);
}

static hexi_rc self_allreduce(rt_group *g, void *buf, size_t count, rt_dtype dt)
{
	(void)g;
	(void)buf;
	(void)count;
	(void)dt;
	return HEXI_OK;
}

static hexi_rc self_reduce_scatter(rt_group *g, const void *send, void *recv,
				   size_t count, rt_dtype dt)
{
	(void)g;
	memcpy(recv, send,
	       count * (dt == RT_F64 ? sizeof(double) : sizeof(float)));
	return HEXI_OK;
}

static hexi_rc self_allgather(rt_group *g, void *buf, size_t count, rt_dtype dt)
{
	(void)g;
	(void)buf;
	(void)count;
	(void)dt;
	return HEXI_OK;
}

/* A finished request: the one-process backend completes at once. */
static rt_req self_done_req = {.root = 0};

static hexi_rc self_iallreduce(rt_group *g, void *buf, size_t count,
			       rt_dtype dt, rt_req **req)
{
	(void)g;
	(void)buf;
	(void)count;
	(void)dt;
	*req = &self_done_req;
	return HEXI_OK;
}

static hexi_rc self_ireduce_scatterv(rt_group *g, const void *send, void *recv,
				     const size_t *cut, rt_dtype dt,
				     rt_req **req)
{
	size_t es = dt == RT_F64 ? sizeof(double) : sizeof(float);

	(void)g;
	memcpy(recv, (const char *)send + cut[0] * es, (cut[1] - cut[0]) * es);
	*req = &self_done_req;
	return HEXI_OK;
}

static hexi_rc self_test(rt_req *req, int *done)
{
	(void)req;
	*done = 1;
	return HEXI_OK;
}

static hexi_rc self_wait(rt_req *req)
{
	(void)req;
	return HEXI_OK;
}

static hexi_rc self_bcast(rt_group *g, void *buf, size_t bytes, int root)
{
	(void)g;
	(void)buf;
	(void)bytes;
	(void)root;
	return HEXI_OK;
}

static hexi_rc self_p2p(rt_comm *c, const void *buf, size_t bytes, int peer,
			int tag)
{
	(void)c;
	(void)buf;
	(void)bytes;
	(void)tag;
	return hexi_error(HEXI_ERR_INTERNAL,
			  "rt_comm self: point-to-point with rank %d in a "
			  "single-process run",
			  peer);
}

static hexi_rc self_recv(rt_comm *c, void *buf, size_t bytes, int peer, int tag)
{
	return self_p2p(c, buf, bytes, peer, tag);
}

static hexi_rc self_flush(rt_comm *c)
{
	(void)c;
	return HEXI_OK;
}

static hexi_rc self_barrier(rt_comm *c, rt_group *g)
{
	(void)c;
	(void)g;
	return HEXI_OK;
}

static void self_abort(rt_comm *c, int code)
{
	(void)c;
	fflush(NULL);
	_exit(code);
}

static void self_destroy(rt_comm *c)
{
	free(c);
}

static const rt_comm_ops self_ops = {
    .name = "self",
    .group_create = self_group_create,
    .group_destroy = self_group_destroy,
    .allreduce_sum = self_allreduce,
    .reduce_scatter_sum = self_reduce_scatter,
    .allgather = self_allgather,
    .iallreduce_sum = self_iallreduce,
    .ireduce_scatterv_sum = self_ireduce_scatterv,
    .test = self_test,
    .wait = self_wait,
    .bcast = self_bcast,
    .send = self_p2p,
    .recv = self_recv,
    .flush = self_flush,
    .barrier = self_barrier,
    .abort_all = self_abort,
    .destroy = self_destroy,
};

hexi_rc rt_comm_self_create(rt_comm **out)
{
	rt_comm *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "rt_comm self");
	c->ops = &self_ops;
	c->rank = 0;
	c->size = 1;
	*out = c;
	return HEXI_OK;
}

/* ---- MPI ---------------------------------------------------------------- */
#ifdef HAVE_MPI

/* A queued send: the data is copied so the caller may reuse its buffer. */
typedef struct mpi_pending {
	MPI_Request req;
	void *data;
} mpi_pending;

typedef struct rt_comm_mpi {
	rt_comm base;
	MPI_Comm world; /* MPI_COMM_WORLD reordered so rank = plan rank */
	mpi_pending *pend;
	int npend, cap_pend;
} rt_comm_mpi;

typedef struct rt_group_mpi {
	rt_group base;
	MPI_Comm comm;
} rt_group_mpi;

typedef struct mpi_req {
	rt_req base;
	MPI_Request req;
	int *cnt; /* Ireduce_scatter's counts, alive until completion */
	const char *what;
} mpi_req;

static hexi_rc mpi_err(int err, const char *what, int peer)
{
	char s[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(err, s, &len) != MPI_SUCCESS)
		snprintf(s, sizeof(s), "MPI error %d", err);
	return hexi_error(HEXI_ERR_MPI, "MPI %s (peer/root %d): %s", what, peer,
			  s);
}

static int set_tag(const int *ranks, int n)
{
	uint32_t h = 2166136261u;

	for (int i = 0; i < n; i++) {
		h ^= (uint32_t)ranks[i];
		h *= 16777619u;
	}
	return (int)(h & 0x7fff);
}

static hexi_rc mpi_group_create(rt_comm *c, const int *ranks, int n,
				rt_group **out)
{
	rt_group_mpi *g = calloc(1, sizeof(*g));
	MPI_Group world = MPI_GROUP_NULL, sub = MPI_GROUP_NULL;
	hexi_rc rc = HEXI_ERR_MPI;
	int err;

	if (g == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "rt_comm mpi: group");
	g->comm = MPI_COMM_NULL;
	rc = group_head_init(&g->base, c, ranks, n);
	if (rc != HEXI_OK)
		goto out;
	MPI_Comm_group(((rt_comm_mpi *)c)->world, &world);
	MPI_Group_incl(world, n, ranks, &sub);
	/* The tag keeps overlapping creations apart: a hash of the rank
	 * set, which every member computes alike (no shared counter). */
	err = MPI_Comm_create_group(((rt_comm_mpi *)c)->world, sub,
				    set_tag(ranks, n), &g->comm);
	if (err != MPI_SUCCESS) {
		rc = mpi_err(err, "Comm_create_group", ranks[0]);
		goto out;
	}
	MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
	*out = &g->base;
	g = NULL;
	rc = HEXI_OK;
out:
	if (sub != MPI_GROUP_NULL)
		MPI_Group_free(&sub);
	if (world != MPI_GROUP_NULL)
		MPI_Group_free(&world);
	if (g != NULL) {
		free(g->base.ranks);
		free(g);
	}
	return rc;
}

static void mpi_group_destroy(rt_group *gb)
{
	rt_group_mpi *g = (rt_group_mpi *)gb;

	if (g == NULL)
		return;
	if (g->comm != MPI_COMM_NULL)
		MPI_Comm_free(&g->comm);
	free(g->base.ranks);
	free(g);
}

static hexi_rc mpi_allreduce(rt_group *gb, void *buf, size_t count, rt_dtype dt)
{
	rt_group_mpi *g = (rt_group_mpi *)gb;
	MPI_Datatype t = dt == RT_F64 ? MPI_DOUBLE : MPI_FLOAT;
	size_t esz = dt == RT_F64 ? sizeof(double) : sizeof(float);
	char *p = buf;

	if (gb->n == 1)
		return HEXI_OK;
	/* MPI counts are int: split huge buffers. */
	while (count > 0) {
		int k = count > (size_t)1 << 30 ? 1 << 30 : (int)count;
		int err =
		    MPI_Allreduce(MPI_IN_PLACE, p, k, t, MPI_SUM, g->comm);
		if (err != MPI_SUCCESS)
			return mpi_err(err, "Allreduce", gb->ranks[0]);
		p += (size_t)k * esz;
		count -= (size_t)k;
	}
	return HEXI_OK;
}

/* Block collectives of the sharded sync: one call (a block beyond the int
 * range of MPI counts is refused; the sync's blocks are a bucket / n). */
static hexi_rc mpi_block_count(const rt_group *gb, size_t count,
			       const char *what, int *k)
{
	if (count > (size_t)1 << 30)
		return hexi_error(HEXI_ERR_RANGE,
				  "MPI %s (group of rank %d): %zu elements "
				  "per member, at most 2^30",
				  what, gb->ranks[0], count);
	*k = (int)count;
	return HEXI_OK;
}

static hexi_rc mpi_reduce_scatter(rt_group *gb, const void *send, void *recv,
				  size_t count, rt_dtype dt)
{
	rt_group_mpi *g = (rt_group_mpi *)gb;
	MPI_Datatype t = dt == RT_F64 ? MPI_DOUBLE : MPI_FLOAT;
	hexi_rc rc;
	int k = 0, err;

	if (gb->n == 1) {
		memcpy(recv, send,
		       count * (dt == RT_F64 ? sizeof(double) : sizeof(float)));
		return HEXI_OK;
	}
	if ((rc = mpi_block_count(gb, count, "Reduce_scatter", &k)) != HEXI_OK)
		return rc;
	err = MPI_Reduce_scatter_block(send, recv, k, t, MPI_SUM, g->comm);
	return err == MPI_SUCCESS
		   ? HEXI_OK
		   : mpi_err(err, "Reduce_scatter_block", gb->ranks[0]);
}

static hexi_rc mpi_allgather(rt_group *gb, void *buf, size_t count, rt_dtype dt)
{
	rt_group_mpi *g = (rt_group_mpi *)gb;
	MPI_Datatype t = dt == RT_F64 ? MPI_DOUBLE : MPI_FLOAT;
	hexi_rc rc;
	int k = 0, err;

	if (gb->n == 1)
		return HEXI_OK;
	if ((rc = mpi_block_count(gb, count, "Allgather", &k)) != HEXI_OK)
		return rc;
	err = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, k, t,
			    g->comm);
	return err == MPI_SUCCESS ? HEXI_OK
				  : mpi_err(err, "Allgather", gb->ranks[0]);
}

/* counts and displacements of cut[0..n] as MPI ints */
static hexi_rc mpi_cuts(const rt_group *gb, const size_t *cut, const char *what,
			int **cnt, int **dsp)
{
	*cnt = malloc(sizeof(int) * (size_t)gb->n);
	*dsp = malloc(sizeof(int) * (size_t)gb->n);
	if (*cnt == NULL || *dsp == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "MPI %s: counts", what);
	if (cut[gb->n] > (size_t)1 << 30)
		return hexi_error(HEXI_ERR_RANGE,
				  "MPI %s (group of rank %d): %zu elements, "
				  "at most 2^30",
				  what, gb->ranks[0], cut[gb->n]);
	for (int i = 0; i < gb->n; i++) {
		(*cnt)[i] = (int)(cut[i + 1] - cut[i]);
		(*dsp)[i] = (int)cut[i];
	}
	return HEXI_OK;
}

static hexi_rc mpi_reduce_scatterv(rt_group *gb, const void *send, void *recv,
				   const size_t *cut, rt_dtype dt)
{
	rt_group_mpi *g = (rt_group_mpi *)gb;
	MPI_Datatype t = dt == RT_F64 ? MPI_DOUBLE : MPI_FLOAT;
	int *cnt = NULL, *dsp = NULL, err;
	hexi_rc rc = mpi_cuts(gb, cut, "Reduce_scatter", &cnt, &dsp);

	if (rc == HEXI_OK) {
		err = MPI_Reduce_scatter(send, recv, cnt, t, MPI_SUM, g->comm);
		if (err != MPI_SUCCESS)
			rc = mpi_err(err, "Reduce_scatter", gb->ranks[0]);
	}
	free(cnt);
	free(dsp);
	return rc;
}

static hexi_rc mpi_allgatherv(rt_group *gb, void *buf, const size_t *cut,
			      rt_dtype dt)
{
	rt_group_mpi *g = (rt_group_mpi *)gb;
	MPI_Datatype t = dt == RT_F64 ? MPI_DOUBLE : MPI_FLOAT;
	int *cnt = NULL, *dsp = NULL, err;
	hexi_rc rc = mpi_cuts(gb, cut, "Allgatherv", &cnt, &dsp);

	if (rc == HEXI_OK) {
		err = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf,
				     cnt, dsp, t, g->comm);
		if (err != MPI_SUCCESS)
			rc = mpi_err(err, "Allgatherv", gb->ranks[0]);
	}
	free(cnt);
	free(dsp);
	return rc;
}

/* One ring step of the sharded sync, on the group's own communicator (no
 * tag can meet a pipeline message of the world communicator). */
static hexi_rc mpi_sendrecv(rt_group *gb, const void *send, size_t scount,
			    int dst, void *recv, size_t rcount, int src,
			    rt_dtype dt)
{
	rt_group_mpi *g = (rt_group_mpi *)gb;
	MPI_Datatype t = dt == RT_F64 ? MPI_DOUBLE : MPI_FLOAT;
	hexi_rc rc;
	int ks = 0, kr = 0, err;

	if ((rc = mpi_block_count(gb, scount, "Sendrecv", &ks)) != HEXI_OK ||
	    (rc = mpi_block_count(gb, rcount, "Sendrecv", &kr)) != HEXI_OK)
		return rc;
	err = MPI_Sendrecv(send, ks, t, dst, 0, recv, kr, t, src, 0, g->comm,
			   MPI_STATUS_IGNORE);
	return err == MPI_SUCCESS ? HEXI_OK
				  : mpi_err(err, "Sendrecv", gb->ranks[0]);
}

/* Non-blocking all-reduce (MPI_Iallreduce); one request per call. */
static hexi_rc mpi_iallreduce(rt_group *gb, void *buf, size_t count,
			      rt_dtype dt, rt_req **req)
{
	rt_group_mpi *g = (rt_group_mpi *)gb;
	MPI_Datatype t = dt == RT_F64 ? MPI_DOUBLE : MPI_FLOAT;
	mpi_req *r;
	hexi_rc rc;
	int k = 0, err;

	*req = NULL;
	if ((rc = mpi_block_count(gb, count, "Iallreduce", &k)) != HEXI_OK)
		return rc;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "MPI Iallreduce: request");
	r->base.root = gb->ranks[0];
	r->req = MPI_REQUEST_NULL;
	r->what = "Iallreduce";
	if (gb->n > 1 &&
	    (err = MPI_Iallreduce(MPI_IN_PLACE, buf, k, t, MPI_SUM, g->comm,
				  &r->req)) != MPI_SUCCESS) {
		free(r);
		return mpi_err(err, "Iallreduce", gb->ranks[0]);
	}
	*req = &r->base;
	return HEXI_OK;
}

/* Non-blocking reduce-scatter with variable counts (MPI_Ireduce_scatter):
 * the counts live in the request until it completes, as MPI requires. */
static hexi_rc mpi_ireduce_scatterv(rt_group *gb, const void *send, void *recv,
				    const size_t *cut, rt_dtype dt,
				    rt_req **req)
{
	rt_group_mpi *g = (rt_group_mpi *)gb;
	MPI_Datatype t = dt == RT_F64 ? MPI_DOUBLE : MPI_FLOAT;
	size_t es = dt == RT_F64 ? sizeof(double) : sizeof(float);
	const char *from = (const char *)send + cut[0] * es;
	int *dsp = NULL, err;
	mpi_req *r;
	hexi_rc rc;

	*req = NULL;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "MPI Ireduce_scatter: request");
	r->base.root = gb->ranks[0];
	r->req = MPI_REQUEST_NULL;
	r->what = "Ireduce_scatter";
	if (gb->n == 1) {
		memcpy(recv, from, (cut[1] - cut[0]) * es);
		*req = &r->base;
		return HEXI_OK;
	}
	rc = mpi_cuts(gb, cut, "Ireduce_scatter", &r->cnt, &dsp);
	free(dsp);
	if (rc == HEXI_OK &&
	    (err = MPI_Ireduce_scatter(from, recv, r->cnt, t, MPI_SUM, g->comm,
				       &r->req)) != MPI_SUCCESS)
		rc = mpi_err(err, "Ireduce_scatter", gb->ranks[0]);
	if (rc != HEXI_OK) {
		free(r->cnt);
		free(r);
		return rc;
	}
	*req = &r->base;
	return HEXI_OK;
}

static void req_free(mpi_req *r)
{
	free(r->cnt);
	free(r);
}

static hexi_rc mpi_test(rt_req *rb, int *done)
{
	mpi_req *r = (mpi_req *)rb;
	int err = MPI_Test(&r->req, done, MPI_STATUS_IGNORE), root = rb->root;
	char what[48];

	snprintf(what, sizeof(what), "Test (%s)", r->what);
	if (err != MPI_SUCCESS)
		*done = 1;
	if (*done)
		req_free(r);
	return err == MPI_SUCCESS ? HEXI_OK : mpi_err(err, what, root);
}

static hexi_rc mpi_wait(rt_req *rb)
{
	mpi_req *r = (mpi_req *)rb;
	int err = MPI_Wait(&r->req, MPI_STATUS_IGNORE), root = rb->root;
	char what[48];

	snprintf(what, sizeof(what), "Wait (%s)", r->what);
	req_free(r);
	return err == MPI_SUCCESS ? HEXI_OK : mpi_err(err, what, root);
}

static hexi_rc mpi_bcast(rt_group *gb, void *buf, size_t bytes, int root)
{
	rt_group_mpi *g = (rt_group_mpi *)gb;
	char *p = buf;

	if (gb->n == 1)
		return HEXI_OK;
	while (bytes > 0) {
		int k = bytes > (size_t)1 << 30 ? 1 << 30 : (int)bytes;
		int err = MPI_Bcast(p, k, MPI_BYTE, root, g->comm);
		if (err != MPI_SUCCESS)
			return mpi_err(err, "Bcast", gb->ranks[root]);
		p += k;
		bytes -= (size_t)k;
	}
	return HEXI_OK;
}

/* Reap completed sends (non-blocking). */
static hexi_rc mpi_reap(rt_comm_mpi *m)
{
	int k = 0;

	for (int i = 0; i < m->npend; i++) {
		int done = 0;
		int err = MPI_Test(&m->pend[i].req, &done, MPI_STATUS_IGNORE);
		if (err != MPI_SUCCESS)
			return mpi_err(err, "Isend completion", -1);
		if (done)
			free(m->pend[i].data);
		else
			m->pend[k++] = m->pend[i];
	}
	m->npend = k;
	return HEXI_OK;
}

static hexi_rc mpi_send(rt_comm *c, const void *buf, size_t bytes, int peer,
			int tag)
{
	rt_comm_mpi *m = (rt_comm_mpi *)c;
	hexi_rc rc;
	void *copy;
	int err;

	if (bytes > INT32_MAX)
		return hexi_error(
		    HEXI_ERR_RANGE,
		    "rt_comm mpi: message of %zu bytes to rank %d", bytes,
		    peer);
	rc = mpi_reap(m);
	if (rc != HEXI_OK)
		return rc;
	if (m->npend == m->cap_pend) {
		int cap = m->cap_pend ? 2 * m->cap_pend : 16;
		void *p = realloc(m->pend, sizeof(*m->pend) * cap);
		if (p == NULL)
			return hexi_error(HEXI_ERR_NOMEM, "rt_comm mpi: sends");
		m->pend = p;
		m->cap_pend = cap;
	}
	copy = malloc(bytes ? bytes : 1);
	if (copy == NULL)
		return hexi_error(HEXI_ERR_NOMEM,
				  "rt_comm mpi: %zu bytes to rank %d", bytes,
				  peer);
	memcpy(copy, buf, bytes);
	err = MPI_Isend(copy, (int)bytes, MPI_BYTE, peer, tag, m->world,
			&m->pend[m->npend].req);
	if (err != MPI_SUCCESS) {
		free(copy);
		return mpi_err(err, "Isend", peer);
	}
	m->pend[m->npend++].data = copy;
	return HEXI_OK;
}

static hexi_rc mpi_recv(rt_comm *c, void *buf, size_t bytes, int peer, int tag)
{
	MPI_Status st;
	int err, got = 0;

	if (bytes > INT32_MAX)
		return hexi_error(HEXI_ERR_RANGE,
				  "rt_comm mpi: message of %zu bytes from rank "
				  "%d",
				  bytes, peer);
	err = MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, tag,
		       ((rt_comm_mpi *)c)->world, &st);
	if (err != MPI_SUCCESS)
		return mpi_err(err, "Recv", peer);
	MPI_Get_count(&st, MPI_BYTE, &got);
	if ((size_t)got != bytes)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "rt_comm mpi: rank %d sent %d bytes with tag "
				  "%d, expected %zu",
				  peer, got, tag, bytes);
	return HEXI_OK;
}

static hexi_rc mpi_flush(rt_comm *c)
{
	rt_comm_mpi *m = (rt_comm_mpi *)c;

	for (int i = 0; i < m->npend; i++) {
		int err = MPI_Wait(&m->pend[i].req, MPI_STATUS_IGNORE);
		free(m->pend[i].data);
		m->pend[i].data = NULL;
		if (err != MPI_SUCCESS) {
			m->npend = 0;
			return mpi_err(err, "Isend wait", -1);
		}
	}
	m->npend = 0;
	return HEXI_OK;
}

static hexi_rc mpi_barrier(rt_comm *c, rt_group *g)
{
	MPI_Comm comm =
	    g ? ((rt_group_mpi *)g)->comm : ((rt_comm_mpi *)c)->world;
	int err;

	(void)c;
	err = MPI_Barrier(comm);
	return err == MPI_SUCCESS ? HEXI_OK : mpi_err(err, "Barrier", -1);
}

static void mpi_abort(rt_comm *c, int code)
{
	(void)c;
	fflush(NULL);
	MPI_Abort(MPI_COMM_WORLD, code);
	_exit(code);
}

static void mpi_destroy(rt_comm *c)
{
	rt_comm_mpi *m = (rt_comm_mpi *)c;

	(void)mpi_flush(c);
	if (m->world != MPI_COMM_NULL)
		MPI_Comm_free(&m->world);
	free(m->pend);
	free(m);
}

static const rt_comm_ops mpi_ops = {
    .name = "mpi",
    .group_create = mpi_group_create,
    .group_destroy = mpi_group_destroy,
    .allreduce_sum = mpi_allreduce,
    .reduce_scatter_sum = mpi_reduce_scatter,
    .allgather = mpi_allgather,
    .reduce_scatterv_sum = mpi_reduce_scatterv,
    .allgatherv = mpi_allgatherv,
    .sendrecv = mpi_sendrecv,
    .iallreduce_sum = mpi_iallreduce,
    .ireduce_scatterv_sum = mpi_ireduce_scatterv,
    .test = mpi_test,
    .wait = mpi_wait,
    .bcast = mpi_bcast,
    .send = mpi_send,
    .recv = mpi_recv,
    .flush = mpi_flush,
    .barrier = mpi_barrier,
    .abort_all = mpi_abort,
    .destroy = mpi_destroy,
};

hexi_rc rt_comm_mpi_create(int plan_rank, int member, rt_comm **out)
{
	rt_comm_mpi *m;
	int inited = 0, err;

	*out = NULL;
	MPI_Initialized(&inited);
	if (!inited)
		return hexi_error(HEXI_ERR_INTERNAL,
				  "rt_comm mpi: MPI is not initialised");
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "rt_comm mpi");
	m->base.ops = &mpi_ops;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	/* Task ids need not be plan ranks (hexiscale-env(7)): renumber.  An
	 * idle task takes part in the split and gets no communicator. */
	err = MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED,
			     plan_rank, &m->world);
	if (err != MPI_SUCCESS) {
		free(m);
		return mpi_err(err, "Comm_split by plan rank", plan_rank);
	}
	if (!member) {
		if (m->world != MPI_COMM_NULL)
			MPI_Comm_free(&m->world);
		free(m);
		return HEXI_OK;
	}
	MPI_Comm_set_errhandler(m->world, MPI_ERRORS_RETURN);
	MPI_Comm_rank(m->world, &m->base.rank);
	MPI_Comm_size(m->world, &m->base.size);
	if (m->base.rank != plan_rank) {
		hexi_rc rc = hexi_error(HEXI_ERR_MISMATCH,
					"plan rank %d is not unique or not in "
					"0..%d (HEXISCALE_RANK of the tasks)",
					plan_rank, m->base.size - 1);
		mpi_destroy(&m->base);
		return rc;
	}
	*out = &m->base;
	return HEXI_OK;
}

void *rt_comm_mpi_handle(rt_comm *c)
{
	if (c == NULL || c->ops != &mpi_ops)
		return NULL;
	return &((rt_comm_mpi *)c)->world;
}

#else /* !HAVE_MPI */

hexi_rc rt_comm_mpi_create(int plan_rank, int member, rt_comm **out)
{
	(void)plan_rank;
	(void)member;
	*out = NULL;
	return hexi_error(HEXI_ERR_UNSUPPORTED,
			  "rt_comm: built without MPI (configure --with-mpi)");
}

void *rt_comm_mpi_handle(rt_comm *c)
{
	(void)c;
	return NULL;
}

#endif
