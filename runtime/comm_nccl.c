/*
 * comm_nccl.c - the NCCL backend of rt_comm.h (GPU runs).
 *
 * Communicators: one per group the runtime creates (TP groups, pipeline
 * neighbours, every chunk group of the gradient sync, the world), each made
 * from one ncclUniqueId that the group's first member draws and broadcasts
 * over the bootstrap (MPI) backend's group of the same ranks.  Point-to-
 * point messages use a world communicator of their own on a stream of
 * their own, so a queued send never sits in front of a collective.
 *
 * Failure policy: every communicator is non-blocking (config.blocking = 0).
 * Each call waits for its stream while polling ncclCommGetAsyncError; a
 * peer that died or an NCCL error aborts that communicator (ncclCommAbort,
 * which also releases the kernels stuck on it) and returns HEXI_ERR_PEER or
 * HEXI_ERR_NCCL naming the group or peer; no answer within
 * HEXISCALE_NCCL_TIMEOUT_S seconds (default 600) aborts the same way with
 * HEXI_ERR_TIMEOUT.  NCCL never aborts the process itself; the runtime
 * decides, normally through abort_all(), which aborts every communicator
 * and then ends the job through the bootstrap backend (MPI_Abort), so no
 * rank hangs on a dead peer.
 *
 * Sends: send() copies the message into a stream-ordered device buffer and
 * queues it; queued sends go out in one ncclGroup together with the next
 * recv() (so two neighbours sending to each other cannot deadlock) or at
 * flush().  NCCL has no tags: messages between two ranks match in the order
 * they are issued, which the runtime's fixed schedule guarantees; the tag
 * is only checked for range.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "rt_comm.h"

#define TAG_MAX		  (1 << 20)
#define TIMEOUT_DEFAULT_S 600.0

/* A queued send.  The staging buffer of queue slot i is kept from one
 * group to the next and only grows (to the largest send seen in that slot),
 * so a steady pipeline schedule allocates nothing per step. */
typedef struct nccl_pending {
	void *data; /* device copy of the send, cap bytes, owned */
	size_t cap;
	size_t bytes;
	int peer;
} nccl_pending;

typedef struct rt_comm_nccl {
	rt_comm base;
	rt_comm *boot; /* bootstrap (MPI) backend, not owned */
	int device;
	cudaStream_t coll;  /* collectives */
	cudaStream_t p2p;   /* sends and receives */
	cudaStream_t dp;    /* non-blocking collectives (gradient overlap) */
	cudaStream_t after; /* dp waits for its work (order_after), or NULL */
	cudaEvent_t ev;	    /* recorded on `after` at each iallreduce */
	ncclComm_t world;   /* point-to-point communicator, all ranks */
	float *scratch;	    /* one float for barriers */
	nccl_pending *pend;
	int npend, cap_pend;
	double timeout_s;
	int broken; /* a communicator was aborted: refuse further work */
	struct nccl_req *idle; /* finished requests, kept with their events */
	struct rt_group_nccl *live; /* every live group, for abort_all */
} rt_comm_nccl;

typedef struct nccl_req nccl_req;

typedef struct rt_group_nccl {
	rt_group base;
	ncclComm_t comm;
	struct rt_group_nccl *next; /* in rt_comm_nccl.live */
} rt_group_nccl;

static rt_comm_nccl *NC(rt_comm *c)
{
	return (rt_comm_nccl *)c;
}

/* ---- errors and waiting ---------------------------------------------------
 */

static hexi_rc cuda_fail(cudaError_t e, const char *what)
{
	return hexi_error(HEXI_ERR_CUDA, "nccl backend: %s: %s (%s)", what,
			  cudaGetErrorName(e), cudaGetErrorString(e));
}

/* Release a communicator: abort it when the backend is broken, else
 * finalize it (on a non-blocking communicator that returns ncclInProgress
 * and completes asynchronously: poll, at most the timeout) and destroy it;
 * whatever goes wrong on the way ends in an abort, never a hang. */
static void nap(void);

static void close_comm(rt_comm_nccl *nc, ncclComm_t c)
{
	double t0 = hexi_now_s();
	ncclResult_t r, ar = ncclInProgress;

	if (c == NULL)
		return;
	if (nc->broken) {
		ncclCommAbort(c);
		return;
	}
	r = ncclCommFinalize(c);
	if (r == ncclSuccess || r == ncclInProgress) {
		while (ncclCommGetAsyncError(c, &ar) == ncclSuccess &&
		       ar == ncclInProgress &&
		       hexi_now_s() - t0 < nc->timeout_s)
			nap();
	}
	if ((r == ncclSuccess || r == ncclInProgress) && ar == ncclSuccess)
		ncclCommDestroy(c);
	else
		ncclCommAbort(c);
}

/* Abort *comm (if any) and mark the backend broken. */
static void abort_comm(rt_comm_nccl *nc, ncclComm_t *comm)
{
	if (comm != NULL && *comm != NULL) {
		ncclCommAbort(*comm);
		*comm = NULL;
	}
	nc->broken = 1;
}

static hexi_rc nccl_fail(rt_comm_nccl *nc, ncclComm_t *comm, ncclResult_t r,
			 const char *what, const char *who)
{
	const char *last = comm && *comm ? ncclGetLastError(*comm) : "";
	hexi_rc rc = r == ncclRemoteError || r == ncclSystemError
			 ? HEXI_ERR_PEER
			 : HEXI_ERR_NCCL;

	hexi_error(rc, "NCCL %s (%s): %s%s%s", what, who, ncclGetErrorString(r),
		   last && *last ? ": " : "", last ? last : "");
	abort_comm(nc, comm);
	return rc;
}

static void nap(void)
{
	struct timespec ts = {0, 50 * 1000}; /* 50 us */

	nanosleep(&ts, NULL);
}

/* A query's cudaErrorNotReady stays in the CUDA runtime's per-thread
 * "last error" until cudaGetLastError reads it, and every kernel launch
 * is checked with cudaGetLastError (launch_check): the first launch after
 * a poll that found an NCCL operation still running failed with "device
 * not ready" (every TP, PP or DP run, at its first step).  Not an error:
 * cleared here, as PyTorch does after its queries. */
static cudaError_t not_ready_cleared(cudaError_t e)
{
	if (e == cudaErrorNotReady)
		(void)cudaGetLastError();
	return e;
}

/* cudaSuccess once what stream s (ev NULL) or event ev covers has run. */
static cudaError_t query(cudaStream_t s, cudaEvent_t ev)
{
	return not_ready_cleared(ev != NULL ? cudaEventQuery(ev)
					    : cudaStreamQuery(s));
}

/*
 * Wait until *comm has no operation in progress and what event ev covers
 * has run (ev NULL: all of stream s; both NULL: the communicator alone),
 * polling NCCL's asynchronous error state.  what/who name the operation
 * and the group or peer in messages.
 */
static hexi_rc wait_done(rt_comm_nccl *nc, ncclComm_t *comm, cudaStream_t s,
			 cudaEvent_t ev, const char *what, const char *who)
{
	double t0 = hexi_now_s();

	for (;;) {
		ncclResult_t ar = ncclSuccess, r;
		cudaError_t e = cudaSuccess;

		r = ncclCommGetAsyncError(*comm, &ar);
		if (r != ncclSuccess)
			return nccl_fail(nc, comm, r, what, who);
		if (ar != ncclSuccess && ar != ncclInProgress)
			return nccl_fail(nc, comm, ar, what, who);
		if (ar == ncclSuccess && (s != NULL || ev != NULL)) {
			e = query(s, ev);
			if (e != cudaSuccess && e != cudaErrorNotReady) {
				abort_comm(nc, comm);
				return cuda_fail(e, what);
			}
		}
		if (ar == ncclSuccess && e == cudaSuccess)
			return HEXI_OK;
		if (hexi_now_s() - t0 > nc->timeout_s) {
			abort_comm(nc, comm);
			return hexi_error(HEXI_ERR_TIMEOUT,
					  "NCCL %s (%s): no progress in %g s "
					  "(HEXISCALE_NCCL_TIMEOUT_S); "
					  "communicator aborted",
					  what, who, nc->timeout_s);
		}
		nap();
	}
}

/* An enqueue call on a non-blocking communicator: ncclInProgress is fine. */
static hexi_rc enqueued(rt_comm_nccl *nc, ncclComm_t *comm, ncclResult_t r,
			const char *what, const char *who)
{
	if (r == ncclSuccess || r == ncclInProgress)
		return HEXI_OK;
	return nccl_fail(nc, comm, r, what, who);
}

static hexi_rc usable(rt_comm_nccl *nc, const char *what)
{
	if (nc->broken)
		return hexi_error(HEXI_ERR_PEER,
				  "NCCL %s: a communicator of rank %d was "
				  "aborted after an earlier failure",
				  what, nc->base.rank);
	return HEXI_OK;
}

static void group_name(const rt_group *g, char *buf, size_t cap)
{
	size_t n = 0;

	n += (size_t)snprintf(buf, cap, "group of %d {", g->n);
	for (int i = 0; i < g->n && n + 16 < cap; i++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%d", i ? "," : "",
				      g->ranks[i]);
	if (n + 2 < cap)
		snprintf(buf + n, cap - n, "}");
}

/* ---- communicator creation ---------------------------------------------- */

/* A non-blocking communicator of ranks[0..n-1] (ascending, caller is
 * member me): the first member draws the id, the bootstrap broadcasts it. */
static hexi_rc make_comm(rt_comm_nccl *nc, const int *ranks, int n, int me,
			 ncclComm_t *out, const char *who)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	struct {
		ncclUniqueId id;
		int ok; /* the root got an id: the others must not wait */
	} msg;
	rt_group *bg = NULL;
	hexi_rc rc, idrc = HEXI_OK;

	memset(&msg, 0, sizeof(msg));
	*out = NULL;
	if (me == 0)
		idrc = enqueued(nc, NULL, ncclGetUniqueId(&msg.id),
				"ncclGetUniqueId", who);
	msg.ok = idrc == HEXI_OK;
	if ((rc = rt_comm_group_get(nc->boot, ranks, n, &bg)) != HEXI_OK)
		return hexi_error_prefix(rc, "NCCL id exchange (%s)", who);
	if (bg == NULL)
		return hexi_error(HEXI_ERR_INTERNAL,
				  "NCCL id exchange (%s): rank %d not a member",
				  who, nc->base.rank);
	if ((rc = bg->comm->ops->bcast(bg, &msg, sizeof(msg), 0)) != HEXI_OK)
		return hexi_error_prefix(rc, "NCCL id exchange (%s)", who);
	if (idrc != HEXI_OK)
		return idrc;
	if (!msg.ok)
		return hexi_error(HEXI_ERR_PEER,
				  "NCCL id exchange (%s): the group's first "
				  "rank could not get an id (see its message)",
				  who);
	cfg.blocking = 0;
	if ((rc = enqueued(nc, out,
			   ncclCommInitRankConfig(out, n, msg.id, me, &cfg),
			   "ncclCommInitRankConfig", who)) != HEXI_OK)
		return rc;
	return wait_done(nc, out, NULL, NULL, "ncclCommInitRankConfig", who);
}

static hexi_rc nccl_group_create(rt_comm *c, const int *ranks, int n,
				 rt_group **out)
{
	rt_comm_nccl *nc = NC(c);
	rt_group_nccl *g = calloc(1, sizeof(*g));
	char who[128];
	hexi_rc rc = HEXI_ERR_NOMEM;

	if (g == NULL ||
	    (g->base.ranks = malloc(sizeof(int) * (size_t)n)) == NULL) {
		rc = hexi_error(HEXI_ERR_NOMEM, "nccl backend: group of %d", n);
		goto fail;
	}
	if ((rc = usable(nc, "group create")) != HEXI_OK)
		goto fail;
	g->base.comm = c;
	g->base.n = n;
	g->base.me = -1;
	memcpy(g->base.ranks, ranks, sizeof(int) * (size_t)n);
	for (int i = 0; i < n; i++)
		if (ranks[i] == c->rank)
			g->base.me = i;
	group_name(&g->base, who, sizeof(who));
	if (g->base.me < 0) {
		rc = hexi_error(HEXI_ERR_INTERNAL, "nccl: rank %d not in %s",
				c->rank, who);
		goto fail;
	}
	if ((rc = make_comm(nc, ranks, n, g->base.me, &g->comm, who)) !=
	    HEXI_OK)
		goto fail;
	g->next = nc->live;
	nc->live = g;
	*out = &g->base;
	return HEXI_OK;
fail:
	if (g != NULL)
		free(g->base.ranks);
	free(g);
	return rc;
}

static void nccl_group_destroy(rt_group *g)
{
	rt_group_nccl *gn = (rt_group_nccl *)g;

	if (g == NULL)
		return;
	for (rt_group_nccl **p = &NC(g->comm)->live; *p; p = &(*p)->next)
		if (*p == gn) {
			*p = gn->next;
			break;
		}
	close_comm(NC(g->comm), gn->comm);
	free(g->ranks);
	free(gn);
}

/* ---- collectives ------------------------------------------------------- */

static ncclDataType_t nccl_type(rt_dtype dt)
{
	switch (dt) {
	case RT_F32:
		return ncclFloat32;
	case RT_F64:
		return ncclFloat64;
	}
	return ncclNumTypes; /* refused by nccl_allreduce */
}

static hexi_rc nccl_allreduce(rt_group *g, void *buf, size_t count, rt_dtype dt)
{
	rt_group_nccl *gn = (rt_group_nccl *)g;
	rt_comm_nccl *nc = NC(g->comm);
	char who[128];
	hexi_rc rc;

	if ((rc = usable(nc, "all-reduce")) != HEXI_OK || count == 0)
		return rc;
	group_name(g, who, sizeof(who));
	if (nccl_type(dt) == ncclNumTypes)
		return hexi_error(HEXI_ERR_INVAL,
				  "NCCL all-reduce (%s): type %d", who,
				  (int)dt);
	rc = enqueued(nc, &gn->comm,
		      ncclAllReduce(buf, buf, count, nccl_type(dt), ncclSum,
				    gn->comm, nc->coll),
		      "all-reduce", who);
	if (rc != HEXI_OK)
		return rc;
	return wait_done(nc, &gn->comm, nc->coll, NULL, "all-reduce", who);
}

/* Sharded sync: ncclReduceScatter (recvcount per member) and an in-place
 * ncclAllGather (member i's block at buf + i*count). */
static hexi_rc nccl_reduce_scatter(rt_group *g, const void *send, void *recv,
				   size_t count, rt_dtype dt)
{
	rt_group_nccl *gn = (rt_group_nccl *)g;
	rt_comm_nccl *nc = NC(g->comm);
	char who[128];
	hexi_rc rc;

	if ((rc = usable(nc, "reduce-scatter")) != HEXI_OK || count == 0)
		return rc;
	group_name(g, who, sizeof(who));
	if (nccl_type(dt) == ncclNumTypes)
		return hexi_error(HEXI_ERR_INVAL,
				  "NCCL reduce-scatter (%s): type %d", who,
				  (int)dt);
	rc = enqueued(nc, &gn->comm,
		      ncclReduceScatter(send, recv, count, nccl_type(dt),
					ncclSum, gn->comm, nc->coll),
		      "reduce-scatter", who);
	if (rc != HEXI_OK)
		return rc;
	return wait_done(nc, &gn->comm, nc->coll, NULL, "reduce-scatter", who);
}

static hexi_rc nccl_allgather(rt_group *g, void *buf, size_t count, rt_dtype dt)
{
	rt_group_nccl *gn = (rt_group_nccl *)g;
	rt_comm_nccl *nc = NC(g->comm);
	size_t esz = dt == RT_F64 ? sizeof(double) : sizeof(float);
	char who[128];
	hexi_rc rc;

	if ((rc = usable(nc, "all-gather")) != HEXI_OK || count == 0)
		return rc;
	group_name(g, who, sizeof(who));
	if (nccl_type(dt) == ncclNumTypes)
		return hexi_error(HEXI_ERR_INVAL,
				  "NCCL all-gather (%s): type %d", who,
				  (int)dt);
	rc = enqueued(
	    nc, &gn->comm,
	    ncclAllGather((const char *)buf + (size_t)g->me * count * esz, buf,
			  count, nccl_type(dt), gn->comm, nc->coll),
	    "all-gather", who);
	if (rc != HEXI_OK)
		return rc;
	return wait_done(nc, &gn->comm, nc->coll, NULL, "all-gather", who);
}

/* Non-blocking collectives: enqueued on the dp stream (apart from the
 * blocking collectives and the sends, so the backward's own TP sums never
 * wait behind a gradient bucket), after an event on the producer stream
 * (rt_comm_nccl_order_after: the backward's compute stream), so the
 * bucket is complete when NCCL reads it and the host never waits.  Every
 * rank enqueues the sync's requests in one global order (sync.c: layer
 * key, bucket, elements), so two ranks sharing two chunk groups never
 * queue them on dp in opposite orders.
 *
 * On a non-blocking communicator an enqueue may return ncclInProgress
 * before the operation is on the stream; until ncclCommGetAsyncError says
 * otherwise nothing may be queued on that stream and no other NCCL call
 * made, and the stream looks idle although the collective has not run.
 * So dp_end waits for the enqueue to settle (a host-side wait for NCCL's
 * own set-up, such as a first collective's connections, never for the
 * transfer), then records the request's own event on dp behind it: test
 * and wait look at that event, so a request completes when its own
 * collective has (and the ones queued on dp before it), not when all of
 * dp has drained.  Requests and their events are kept for reuse (idle),
 * so a steady step creates none. */
struct nccl_req {
	rt_req base;
	rt_group_nccl *g;
	cudaEvent_t done;      /* recorded on dp behind the collective */
	const char *what;      /* "all-reduce", "reduce-scatter" */
	char who[128];	       /* the group, for messages */
	struct nccl_req *next; /* in rt_comm_nccl.idle */
};

/* Back to the idle list (its event stays for the next request). */
static void req_put(nccl_req *r)
{
	rt_comm_nccl *nc = NC(r->g->base.comm);

	r->next = nc->idle;
	nc->idle = r;
}

/* The common start of a non-blocking collective: the communicator usable,
 * the type known, a request, and (work: something will be enqueued) dp
 * ordered after the producer stream. */
static hexi_rc dp_begin(rt_group *g, rt_dtype dt, int work, const char *what,
			nccl_req **out)
{
	rt_comm_nccl *nc = NC(g->comm);
	nccl_req *r = nc->idle;
	cudaError_t e;
	hexi_rc rc;

	*out = NULL;
	if ((rc = usable(nc, what)) != HEXI_OK)
		return rc;
	if (r != NULL)
		nc->idle = r->next;
	else if ((r = calloc(1, sizeof(*r))) == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "NCCL %s: request", what);
	else if ((e = cudaEventCreateWithFlags(
		      &r->done, cudaEventDisableTiming)) != cudaSuccess) {
		free(r);
		return cuda_fail(e, "request event");
	}
	group_name(g, r->who, sizeof(r->who));
	r->base.root = g->ranks[0];
	r->g = (rt_group_nccl *)g;
	r->what = what;
	r->next = NULL;
	if (nccl_type(dt) == ncclNumTypes)
		rc = hexi_error(HEXI_ERR_INVAL, "NCCL %s (%s): type %d", what,
				r->who, (int)dt);
	else if (work && nc->after != NULL &&
		 ((e = cudaEventRecord(nc->ev, nc->after)) != cudaSuccess ||
		  (e = cudaStreamWaitEvent(nc->dp, nc->ev, 0)) != cudaSuccess))
		rc = hexi_error_prefix(cuda_fail(e, what),
				       "%s (dp): ordering after the compute "
				       "stream",
				       r->who);
	if (rc != HEXI_OK) {
		req_put(r);
		return rc;
	}
	*out = r;
	return HEXI_OK;
}

/* The enqueue's result r0: settled (see above), the request's event
 * recorded, the request handed out; or put back. */
static hexi_rc dp_end(nccl_req *r, ncclResult_t r0, rt_req **req)
{
	rt_comm_nccl *nc = NC(r->g->base.comm);
	hexi_rc rc = enqueued(nc, &r->g->comm, r0, r->what, r->who);
	cudaError_t e;

	if (rc == HEXI_OK && r0 == ncclInProgress)
		rc = wait_done(nc, &r->g->comm, NULL, NULL, r->what, r->who);
	if (rc == HEXI_OK &&
	    (e = cudaEventRecord(r->done, nc->dp)) != cudaSuccess)
		rc =
		    hexi_error_prefix(cuda_fail(e, r->what), "%s (dp)", r->who);
	if (rc != HEXI_OK) {
		req_put(r);
		return rc;
	}
	*req = &r->base;
	return HEXI_OK;
}

static hexi_rc nccl_iallreduce(rt_group *g, void *buf, size_t count,
			       rt_dtype dt, rt_req **req)
{
	rt_group_nccl *gn = (rt_group_nccl *)g;
	nccl_req *r;
	hexi_rc rc;

	*req = NULL;
	if ((rc = dp_begin(g, dt, count > 0, "all-reduce", &r)) != HEXI_OK)
		return rc;
	return dp_end(r,
		      count > 0
			  ? ncclAllReduce(buf, buf, count, nccl_type(dt),
					  ncclSum, gn->comm, NC(g->comm)->dp)
			  : ncclSuccess,
		      req);
}

/* Non-blocking reduce-scatter with variable counts (NCCL has none): one
 * ncclReduce per member with a non-empty block, rooted at that member,
 * in one group on the dp stream, ordered after the compute stream as
 * nccl_iallreduce.  Every member issues the same reduces (the cuts are
 * the group's), so the group matches on all of them. */
static hexi_rc nccl_ireduce_scatterv(rt_group *g, const void *send, void *recv,
				     const size_t *cut, rt_dtype dt,
				     rt_req **req)
{
	rt_group_nccl *gn = (rt_group_nccl *)g;
	size_t es = dt == RT_F64 ? sizeof(double) : sizeof(float);
	const int work = cut[g->n] > cut[0];
	ncclResult_t r0 = ncclSuccess, r1;
	nccl_req *r;
	hexi_rc rc;

	*req = NULL;
	if ((rc = dp_begin(g, dt, work, "reduce-scatter", &r)) != HEXI_OK)
		return rc;
	if (work) {
		r0 = ncclGroupStart();
		for (int i = 0;
		     (r0 == ncclSuccess || r0 == ncclInProgress) && i < g->n;
		     i++)
			if (cut[i + 1] > cut[i])
				r0 = ncclReduce(
				    (const char *)send + cut[i] * es, recv,
				    cut[i + 1] - cut[i], nccl_type(dt), ncclSum,
				    i, gn->comm, NC(g->comm)->dp);
		r1 = ncclGroupEnd();
		if (r0 == ncclSuccess || r0 == ncclInProgress)
			r0 = r1;
	}
	return dp_end(r, r0, req);
}

static hexi_rc nccl_test(rt_req *rb, int *done)
{
	nccl_req *r = (nccl_req *)rb;
	rt_comm_nccl *nc = NC(r->g->base.comm);
	ncclResult_t ar = ncclSuccess, q;
	cudaError_t e;
	hexi_rc rc;

	*done = 0;
	/* an asynchronous error (a dead peer) ends the request now */
	q = ncclCommGetAsyncError(r->g->comm, &ar);
	if (q != ncclSuccess || (ar != ncclSuccess && ar != ncclInProgress)) {
		rc = nccl_fail(nc, &r->g->comm, q != ncclSuccess ? q : ar,
			       r->what, r->who);
		*done = 1;
		req_put(r);
		return rc;
	}
	e = not_ready_cleared(cudaEventQuery(r->done));
	if (e == cudaErrorNotReady)
		return HEXI_OK;
	*done = 1;
	rc = e == cudaSuccess ? HEXI_OK : cuda_fail(e, r->what);
	req_put(r);
	return rc;
}

static hexi_rc nccl_wait(rt_req *rb)
{
	nccl_req *r = (nccl_req *)rb;
	rt_comm_nccl *nc = NC(r->g->base.comm);
	hexi_rc rc = wait_done(nc, &r->g->comm, NULL, r->done, r->what, r->who);

	req_put(r);
	return rc;
}

static hexi_rc nccl_bcast(rt_group *g, void *buf, size_t bytes, int root)
{
	rt_group_nccl *gn = (rt_group_nccl *)g;
	rt_comm_nccl *nc = NC(g->comm);
	char who[128];
	hexi_rc rc;

	if ((rc = usable(nc, "broadcast")) != HEXI_OK || bytes == 0)
		return rc;
	group_name(g, who, sizeof(who));
	if (root < 0 || root >= g->n)
		return hexi_error(HEXI_ERR_INVAL,
				  "NCCL broadcast (%s): root %d", who, root);
	rc = enqueued(
	    nc, &gn->comm,
	    ncclBroadcast(buf, buf, bytes, ncclInt8, root, gn->comm, nc->coll),
	    "broadcast", who);
	if (rc != HEXI_OK)
		return rc;
	return wait_done(nc, &gn->comm, nc->coll, NULL, "broadcast", who);
}

static hexi_rc nccl_barrier(rt_comm *c, rt_group *g)
{
	rt_comm_nccl *nc = NC(c);
	int *all = NULL;
	hexi_rc rc;

	if (g == NULL) {
		all = malloc(sizeof(int) * (size_t)c->size);
		if (all == NULL)
			return hexi_error(HEXI_ERR_NOMEM, "NCCL barrier");
		for (int i = 0; i < c->size; i++)
			all[i] = i;
		rc = rt_comm_group_get(c, all, c->size, &g);
		free(all);
		if (rc != HEXI_OK)
			return rc;
	}
	/* an all-reduce of one float is NCCL's barrier */
	return nccl_allreduce(g, nc->scratch, 1, RT_F32);
}

/* ---- point to point ----------------------------------------------------- */

static hexi_rc check_p2p(rt_comm *c, int peer, int tag, const char *what)
{
	if (peer < 0 || peer >= c->size || peer == c->rank || tag < 0 ||
	    tag >= TAG_MAX)
		return hexi_error(HEXI_ERR_INVAL,
				  "NCCL %s: rank %d to peer %d tag %d", what,
				  c->rank, peer, tag);
	return usable(NC(c), what);
}

static hexi_rc nccl_send(rt_comm *c, const void *buf, size_t bytes, int peer,
			 int tag)
{
	rt_comm_nccl *nc = NC(c);
	nccl_pending *s;
	cudaError_t e;
	hexi_rc rc;

	if ((rc = check_p2p(c, peer, tag, "send")) != HEXI_OK)
		return rc;
	if (nc->npend == nc->cap_pend) {
		int cap = nc->cap_pend ? 2 * nc->cap_pend : 8;
		void *p = realloc(nc->pend, sizeof(*nc->pend) * (size_t)cap);

		if (p == NULL)
			return hexi_error(HEXI_ERR_NOMEM, "NCCL send queue");
		nc->pend = p;
		memset(nc->pend + nc->cap_pend, 0,
		       sizeof(*nc->pend) * (size_t)(cap - nc->cap_pend));
		nc->cap_pend = cap;
	}
	s = &nc->pend[nc->npend];
	/* copy now: the caller may reuse buf as soon as send() returns; the
	 * slot's buffer is idle (the previous group was waited for) */
	if (bytes > s->cap) {
		e = cudaFree(s->data);
		s->data = NULL;
		s->cap = 0;
		if (e == cudaSuccess)
			e = cudaMalloc(&s->data, bytes);
		if (e != cudaSuccess)
			return cuda_fail(e, "send staging buffer");
		s->cap = bytes;
	}
	s->bytes = bytes;
	s->peer = peer;
	if (bytes > 0) {
		e = cudaMemcpyAsync(s->data, buf, bytes,
				    cudaMemcpyDeviceToDevice, nc->p2p);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(nc->p2p);
		if (e != cudaSuccess)
			return cuda_fail(e, "send staging copy");
	}
	nc->npend++;
	return HEXI_OK;
}

/* Issue the queued sends and, if rbuf != NULL, one receive, as one group on
 * the point-to-point stream; wait for all of it. */
static hexi_rc p2p_group(rt_comm_nccl *nc, void *rbuf, size_t rbytes, int rpeer)
{
	char who[64];
	hexi_rc rc = HEXI_OK;
	ncclResult_t r;

	snprintf(who, sizeof(who), "rank %d, %d send%s%s%d", nc->base.rank,
		 nc->npend, nc->npend == 1 ? "" : "s",
		 rbuf ? ", receive from " : "", rbuf ? rpeer : 0);
	r = ncclGroupStart();
	for (int i = 0; i < nc->npend && r == ncclSuccess; i++)
		r = ncclSend(nc->pend[i].data, nc->pend[i].bytes, ncclInt8,
			     nc->pend[i].peer, nc->world, nc->p2p);
	if (rbuf != NULL && (r == ncclSuccess || r == ncclInProgress))
		r = ncclRecv(rbuf, rbytes, ncclInt8, rpeer, nc->world, nc->p2p);
	if (r == ncclSuccess || r == ncclInProgress)
		r = ncclGroupEnd();
	else
		ncclGroupEnd();
	rc = enqueued(nc, &nc->world, r, "send/recv", who);
	if (rc == HEXI_OK)
		rc = wait_done(nc, &nc->world, nc->p2p, NULL, "send/recv", who);
	nc->npend = 0; /* the staging buffers stay for the next group */
	return rc;
}

static hexi_rc nccl_recv(rt_comm *c, void *buf, size_t bytes, int peer, int tag)
{
	hexi_rc rc = check_p2p(c, peer, tag, "recv");

	if (rc != HEXI_OK)
		return rc;
	return p2p_group(NC(c), buf, bytes, peer);
}

static hexi_rc nccl_flush(rt_comm *c)
{
	hexi_rc rc = usable(NC(c), "flush");

	if (rc != HEXI_OK || NC(c)->npend == 0)
		return rc;
	return p2p_group(NC(c), NULL, 0, -1);
}

/* ---- teardown ----------------------------------------------------------- */

static void nccl_abort_all(rt_comm *c, int code)
{
	rt_comm_nccl *nc = NC(c);

	/* release every kernel that may wait on a dead peer, then end the
	 * job through the bootstrap (MPI_Abort) */
	for (rt_group_nccl *g = nc->live; g != NULL; g = g->next)
		abort_comm(nc, &g->comm);
	abort_comm(nc, &nc->world);
	nc->boot->ops->abort_all(nc->boot, code);
}

static void nccl_destroy(rt_comm *c)
{
	rt_comm_nccl *nc = NC(c);

	if (nc == NULL)
		return;
	for (int i = 0; i < nc->cap_pend; i++)
		cudaFree(nc->pend[i].data);
	free(nc->pend);
	close_comm(nc, nc->world);
	cudaFree(nc->scratch);
	if (nc->p2p != NULL)
		cudaStreamDestroy(nc->p2p);
	if (nc->coll != NULL)
		cudaStreamDestroy(nc->coll);
	if (nc->dp != NULL)
		cudaStreamDestroy(nc->dp);
	if (nc->ev != NULL)
		cudaEventDestroy(nc->ev);
	while (nc->idle != NULL) {
		nccl_req *r = nc->idle;

		nc->idle = r->next;
		cudaEventDestroy(r->done);
		free(r);
	}
	free(nc);
}

static const rt_comm_ops nccl_ops = {
    .name = "nccl",
    .group_create = nccl_group_create,
    .group_destroy = nccl_group_destroy,
    .allreduce_sum = nccl_allreduce,
    .reduce_scatter_sum = nccl_reduce_scatter,
    .allgather = nccl_allgather,
    .iallreduce_sum = nccl_iallreduce,
    .ireduce_scatterv_sum = nccl_ireduce_scatterv,
    .test = nccl_test,
    .wait = nccl_wait,
    .bcast = nccl_bcast,
    .send = nccl_send,
    .recv = nccl_recv,
    .flush = nccl_flush,
    .barrier = nccl_barrier,
    .abort_all = nccl_abort_all,
    .destroy = nccl_destroy,
};

void rt_comm_nccl_order_after(rt_comm *c, void *stream)
{
	rt_comm_nccl *nc;

	if (c == NULL || c->ops != &nccl_ops)
		return;
	nc = NC(c);
	nc->after = (cudaStream_t)stream;
}

static hexi_rc timeout_from_env(double *out)
{
	const char *s = getenv("HEXISCALE_NCCL_TIMEOUT_S");

	*out = TIMEOUT_DEFAULT_S;
	if (s == NULL)
		return HEXI_OK;
	if (hexi_parse_double(s, 1.0, 86400.0, out) != HEXI_OK)
		return hexi_error(HEXI_ERR_PARSE,
				  "HEXISCALE_NCCL_TIMEOUT_S='%.32s': want "
				  "seconds in 1..86400",
				  s);
	return HEXI_OK;
}

/* This rank's device, streams, event and scratch (no collective). */
static hexi_rc local_setup(rt_comm_nccl *nc, int device)
{
	cudaError_t e;
	hexi_rc rc;

	if ((e = cudaSetDevice(device)) != cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&nc->coll, cudaStreamNonBlocking)) !=
		cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&nc->p2p, cudaStreamNonBlocking)) !=
		cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&nc->dp, cudaStreamNonBlocking)) !=
		cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&nc->ev, cudaEventDisableTiming)) !=
		cudaSuccess ||
	    (e = cudaMalloc((void **)&nc->scratch, sizeof(float))) !=
		cudaSuccess) {
		rc = cuda_fail(e, "setup on the device");
		return hexi_error_prefix(rc, "rank %d, device %d",
					 nc->base.rank, device);
	}
	return HEXI_OK;
}

/* Collective over the bootstrap's ranks all[0..size-1]: rc when this rank
 * failed, HEXI_ERR_PEER when another did, else HEXI_OK.  The world group
 * it takes is the one make_comm uses next (rt_comm_group_get caches it). */
static hexi_rc agree_all(rt_comm_nccl *nc, const int *all, hexi_rc rc)
{
	rt_group *bg = NULL;
	double bad = rc != HEXI_OK;
	hexi_rc grc;

	if (nc->base.size == 1) /* no peer to leave waiting */
		return rc;
	grc = rt_comm_group_get(nc->boot, all, nc->base.size, &bg);
	if (grc == HEXI_OK && bg != NULL &&
	    bg->comm->ops->allreduce_sum == NULL)
		grc = hexi_error(HEXI_ERR_INTERNAL,
				 "the bootstrap backend has no all-reduce");
	else if (grc == HEXI_OK && bg != NULL)
		grc = bg->comm->ops->allreduce_sum(bg, &bad, 1, RT_F64);
	if (rc != HEXI_OK)
		return rc;
	if (grc != HEXI_OK)
		return hexi_error_prefix(grc, "rank %d: NCCL setup agreement",
					 nc->base.rank);
	if (bg == NULL)
		return hexi_error(HEXI_ERR_INTERNAL,
				  "NCCL setup agreement: rank %d not a member",
				  nc->base.rank);
	if (bad != 0)
		return hexi_error(HEXI_ERR_PEER,
				  "rank %d: another rank failed its NCCL "
				  "device setup (see its message)",
				  nc->base.rank);
	return HEXI_OK;
}

hexi_rc rt_comm_nccl_create(rt_comm *bootstrap, int device, rt_comm **out)
{
	rt_comm_nccl *nc = NULL;
	int *all = NULL;
	hexi_rc rc;

	if (bootstrap == NULL || out == NULL)
		return hexi_error(HEXI_ERR_INVAL, "nccl backend: no bootstrap");
	nc = calloc(1, sizeof(*nc));
	all = malloc(sizeof(int) * (size_t)bootstrap->size);
	if (nc == NULL || all == NULL) {
		rc = hexi_error(HEXI_ERR_NOMEM, "nccl backend");
		goto fail;
	}
	nc->base.ops = &nccl_ops;
	nc->base.rank = bootstrap->rank;
	nc->base.size = bootstrap->size;
	nc->boot = bootstrap;
	nc->device = device;
	for (int i = 0; i < nc->base.size; i++)
		all[i] = i;
	if ((rc = timeout_from_env(&nc->timeout_s)) == HEXI_OK)
		rc = local_setup(nc, device);
	/* every rank agrees before the communicators' collectives: a rank
	 * failing here must not leave the others waiting in them */
	if ((rc = agree_all(nc, all, rc)) != HEXI_OK)
		goto fail;
	if ((rc = make_comm(nc, all, nc->base.size, nc->base.rank, &nc->world,
			    "world (point-to-point)")) != HEXI_OK)
		goto fail;
	free(all);
	*out = &nc->base;
	return HEXI_OK;
fail:
	free(all);
	nccl_destroy(nc ? &nc->base : NULL);
	return rc;
}
