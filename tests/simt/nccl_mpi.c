/*
 * nccl_mpi.c (tests/simt) - the NCCL calls of runtime/comm_nccl.c over MPI,
 * on the emulated streams of runtime.c, FOR TESTS ONLY (DECISIONS 178).
 *
 * hexitrain_simt links the real comm_nccl.c and train_gpu.c against this
 * and the SIMT device, so the GPU trainer's communication runs as a GPU
 * runs it: every collective and send is queued on its stream behind the
 * kernels that produce its data (simt_enqueue_poll), starts when the
 * stream reaches it, completes while the host does other work, and is
 * seen complete only through cudaStreamQuery / cudaStreamSynchronize.
 * A missing event between the compute stream and a communication stream,
 * or a host read before the wait, then reads or sends stale memory, as on
 * a GPU, and the run differs from the CPU reference.
 *
 * A communicator is an MPI communicator of the same members, made at
 * ncclCommInitRankConfig: the members tell the id's drawer (its world rank
 * is in the id) their world ranks; it answers with the list in member
 * order; then MPI_Comm_create_group.  Operations map to MPI's non-blocking
 * ones: all-reduce to MPI_Iallreduce, reduce-scatter to
 * MPI_Ireduce_scatter_block, all-gather to MPI_Iallgather, broadcast to
 * MPI_Ibcast, send/recv to MPI_Isend/MPI_Irecv (matched in issue order, as
 * NCCL's are); an ncclGroupStart/End group is one stream operation.
 * SIMT_NCCL_INPROGRESS=N makes every enqueue on a non-blocking
 * communicator return ncclInProgress and reach its stream only at the N-th
 * ncclCommGetAsyncError after it, as NCCL may; meanwhile any use of that
 * stream or other call on that communicator is refused.
 * Refused, with a "simt:" line (which simt_nccl.sh fails on): host memory,
 * a buffer past its allocation, a reduction of a type other than fp32/fp64
 * or an operation other than sum, a group spanning two streams, and
 * immediate streams (SIMT_STREAMS=deferred is required: a collective cannot
 * complete when it is queued, since its peers have not queued theirs).
 *
 * Not emulated: NCCL's algorithms and their summation order (MPI's
 * reduction order is what the comparison sees), bf16/fp16 reductions,
 * timeouts of a dead peer (MPI aborts the job instead), several GPUs of
 * one process.
 */
#include "config.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"
#include "simt_stream.h"

#define ID_MAGIC "hexi-simt-nccl1"
#define TAG_BASE 16384 /* below MPI's guaranteed tag upper bound 32767 */

struct ncclComm {
	MPI_Comm mc;
	int n, me;
	int aborted; /* aborted or destroyed: operations are skipped */
	ncclResult_t async; /* an error met by an operation in flight */
	int nonblocking;    /* made with config.blocking = 0 */
	struct batch *pending; /* SIMT_NCCL_INPROGRESS: not yet on its stream */
	int pending_left;      /* ncclCommGetAsyncError polls until it is */
	char last[256];
	struct ncclComm *next; /* in all_comms */
};

typedef struct {
	char magic[16];
	int root_world; /* world rank of the drawer (member 0) */
	unsigned seq;	/* the drawer's count of ids */
} id_body;

typedef enum { K_AR, K_RS, K_RED, K_AG, K_BC, K_SEND, K_RECV } op_kind;

typedef struct {
	op_kind k;
	const void *send;
	void *recv;
	size_t count; /* elements: per member for RS and AG */
	ncclDataType_t type;
	int peer; /* root for K_BC */
	ncclComm_t comm;
	void *tmp; /* a copy of send where MPI cannot take it in place */
} op_rec;

/* One stream operation: one call, or an ncclGroupStart/End group. */
typedef struct batch {
	op_rec *r;
	int n, cap;
	MPI_Request *req;
	int nreq;
	int started;
	cudaStream_t stream;
	int stream_set;
} batch;

/* Every communicator made, never freed: a stream operation may still name
 * one after its Destroy or Abort (they only mark it), and the list keeps
 * them reachable for LeakSanitizer. */
static struct ncclComm *all_comms;
static unsigned id_seq;
static int group_depth;
static batch *group_b;		   /* the open group's operations */
static ncclResult_t group_err = ncclSuccess; /* first refusal inside it */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("simt: nccl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static size_t type_size(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8:
	case ncclUint8: return 1;
	case ncclFloat16:
	case ncclBfloat16: return 2;
	case ncclInt32:
	case ncclUint32:
	case ncclFloat32: return 4;
	case ncclInt64:
	case ncclUint64:
	case ncclFloat64: return 8;
	default: return 0;
	}
}

/* The MPI type of a reduction; MPI_DATATYPE_NULL where not emulated. */
static MPI_Datatype red_type(ncclDataType_t t)
{
	switch (t) {
	case ncclFloat32: return MPI_FLOAT;
	case ncclFloat64: return MPI_DOUBLE;
	case ncclInt32: return MPI_INT;
	default: return MPI_DATATYPE_NULL;
	}
}

const char *ncclGetErrorString(ncclResult_t r)
{
	switch (r) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error";
	case ncclSystemError: return "unhandled system error";
	case ncclInternalError: return "internal error";
	case ncclInvalidArgument: return "invalid argument";
	case ncclInvalidUsage: return "invalid usage";
	case ncclRemoteError: return "remote process exited or there was "
				     "a network error";
	case ncclInProgress: return "NCCL operation in progress";
	default: return "unknown result code";
	}
}

const char *ncclGetLastError(ncclComm_t comm)
{
	return comm != NULL ? comm->last : "";
}

static ncclResult_t fail(ncclComm_t c, ncclResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Refuse a call: a "simt:" line, and the comm's last error. */
static ncclResult_t fail(ncclComm_t c, ncclResult_t r, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	say("%s", msg);
	if (c != NULL)
		snprintf(c->last, sizeof(c->last), "%s", msg);
	return r;
}

/* ---- communicators ------------------------------------------------------ */

/* This process's world rank and size; 0 of 1 without MPI (a process not
 * started by mpirun: its communicators have one member and no MPI). */
static void world(int *rank, int *size)
{
	int inited = 0, fin = 0;

	MPI_Initialized(&inited);
	MPI_Finalized(&fin);
	if (rank != NULL)
		*rank = 0;
	if (size != NULL)
		*size = 1;
	if (!inited || fin)
		return;
	if (rank != NULL)
		MPI_Comm_rank(MPI_COMM_WORLD, rank);
	if (size != NULL)
		MPI_Comm_size(MPI_COMM_WORLD, size);
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	id_body b;

	if (id == NULL)
		return fail(NULL, ncclInvalidArgument, "ncclGetUniqueId: NULL");
	memset(id, 0, sizeof(*id));
	memset(&b, 0, sizeof(b));
	memcpy(b.magic, ID_MAGIC, sizeof(b.magic));
	world(&b.root_world, NULL);
	b.seq = id_seq++;
	memcpy(id->internal, &b, sizeof(b));
	return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
				    ncclUniqueId id, int rank,
				    ncclConfig_t *config)
{
	id_body b;
	int me_w, size_w, tag, *w = NULL, err = MPI_SUCCESS;
	MPI_Group wg = MPI_GROUP_NULL, g = MPI_GROUP_NULL;
	ncclComm_t c;

	if (comm == NULL)
		return fail(NULL, ncclInvalidArgument, "init: comm NULL");
	*comm = NULL;
	memcpy(&b, id.internal, sizeof(b));
	world(&me_w, &size_w);
	if (memcmp(b.magic, ID_MAGIC, sizeof(b.magic)) != 0 ||
	    b.root_world < 0 || b.root_world >= size_w)
		return fail(NULL, ncclInvalidArgument,
			    "init: not an id of ncclGetUniqueId");
	if (nranks < 1 || nranks > size_w || rank < 0 || rank >= nranks)
		return fail(NULL, ncclInvalidArgument, "init: rank %d of %d",
			    rank, nranks);
	if ((rank == 0) != (me_w == b.root_world))
		return fail(NULL, ncclInvalidUsage,
			    "init: member 0 must be the id's drawer");
	if (!simt_streams_deferred())
		return fail(NULL, ncclInvalidUsage,
			    "communicators need SIMT_STREAMS=deferred");
	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (w = calloc((size_t)nranks, sizeof(int))) == NULL) {
		free(c);
		return fail(NULL, ncclSystemError, "init: no memory");
	}
	c->n = nranks;
	c->me = rank;
	c->mc = MPI_COMM_NULL;
	if (nranks == 1) { /* no MPI needed: start() copies locally */
		free(w);
		goto made;
	}
	tag = TAG_BASE + (int)(b.seq % TAG_BASE);
	/* blocking: the members call this together, right after the id's
	 * broadcast, and nothing of theirs is in flight on a stream */
	if (rank == 0) {
		for (int i = 1; i < nranks; i++)
			w[i] = -1;
		w[0] = me_w;
		for (int i = 1; i < nranks && err == MPI_SUCCESS; i++) {
			int m[2];

			err = MPI_Recv(m, 2, MPI_INT, MPI_ANY_SOURCE, tag,
				       MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			if (err == MPI_SUCCESS &&
			    (m[0] < 1 || m[0] >= nranks || w[m[0]] != -1)) {
				free(w);
				free(c);
				return fail(NULL, ncclInternalError,
					    "init: member %d twice or out of "
					    "range",
					    m[0]);
			}
			w[m[0]] = m[1];
		}
		for (int i = 1; i < nranks && err == MPI_SUCCESS; i++)
			err = MPI_Send(w, nranks, MPI_INT, w[i], tag,
				       MPI_COMM_WORLD);
	} else {
		int m[2] = {rank, me_w};

		err = MPI_Send(m, 2, MPI_INT, b.root_world, tag,
			       MPI_COMM_WORLD);
		if (err == MPI_SUCCESS)
			err = MPI_Recv(w, nranks, MPI_INT, b.root_world, tag,
				       MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	}
	if (err == MPI_SUCCESS)
		err = MPI_Comm_group(MPI_COMM_WORLD, &wg);
	if (err == MPI_SUCCESS)
		err = MPI_Group_incl(wg, nranks, w, &g);
	if (err == MPI_SUCCESS)
		err = MPI_Comm_create_group(MPI_COMM_WORLD, g, tag, &c->mc);
	if (err == MPI_SUCCESS)
		err = MPI_Comm_set_errhandler(c->mc, MPI_ERRORS_RETURN);
	if (g != MPI_GROUP_NULL)
		MPI_Group_free(&g);
	if (wg != MPI_GROUP_NULL)
		MPI_Group_free(&wg);
	free(w);
	if (err != MPI_SUCCESS) {
		free(c);
		return fail(NULL, ncclSystemError,
			    "init: MPI error %d making the communicator", err);
	}
made:
	c->nonblocking = config != NULL && config->blocking == 0;
	c->next = all_comms;
	all_comms = c;
	*comm = c;
	return ncclSuccess;
}

static void settle(ncclComm_t c, int drop);

/* An enqueue held back by SIMT_NCCL_INPROGRESS reaches its stream after
 * this many polls; until then the state is ncclInProgress. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
	if (comm == NULL || err == NULL)
		return fail(comm, ncclInvalidArgument, "async error: NULL");
	if (comm->pending != NULL && --comm->pending_left <= 0)
		settle(comm, 0);
	*err = comm->aborted		? ncclInvalidUsage
	       : comm->pending != NULL ? ncclInProgress
				       : comm->async;
	return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	return comm != NULL ? ncclSuccess
			    : fail(NULL, ncclInvalidArgument, "finalize: NULL");
}

/* Both only mark the communicator: its MPI communicator is left to
 * MPI_Finalize, since freeing it would need every member's operations to
 * be complete, which neither call knows. */
ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	if (comm == NULL)
		return fail(NULL, ncclInvalidArgument, "destroy: NULL");
	settle(comm, 1);
	comm->aborted = 1;
	return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	if (comm != NULL) {
		settle(comm, 1);
		comm->aborted = 1;
	}
	return ncclSuccess;
}

/* ---- operations on the streams -------------------------------------------
 */

static void batch_free(void *arg)
{
	batch *b = arg;

	if (b == NULL)
		return;
	for (int i = 0; i < b->n; i++)
		free(b->r[i].tmp);
	free(b->r);
	free(b->req);
	free(b);
}

/* Start one operation: MPI's error code, and *req MPI_REQUEST_NULL where
 * it completed at once (a communicator of one: a local copy). */
static int start(op_rec *o, MPI_Request *req)
{
	size_t es = type_size(o->type), n = (size_t)o->comm->n;
	int cnt = (int)o->count, bytes = (int)(o->count * es);
	MPI_Comm mc = o->comm->mc;

	*req = MPI_REQUEST_NULL;
	if (n == 1) {
		/* sum, gather and broadcast of one member: recv = send;
		 * send/recv have no peer (refused by add) */
		if (o->k != K_SEND && o->k != K_RECV && o->send != o->recv)
			memmove(o->recv, o->send, o->count * es);
		return MPI_SUCCESS;
	}
	switch (o->k) {
	case K_AR:
		return MPI_Iallreduce(o->send == o->recv ? MPI_IN_PLACE
							 : o->send,
				      o->recv, cnt, red_type(o->type), MPI_SUM,
				      mc, req);
	case K_RS:
		/* NCCL's in-place form (recv inside send) has no MPI
		 * equivalent: reduce a copy taken when the stream gets here */
		if ((o->tmp = malloc(o->count * es * n)) == NULL)
			return MPI_ERR_NO_MEM;
		memcpy(o->tmp, o->send, o->count * es * n);
		return MPI_Ireduce_scatter_block(o->tmp, o->recv, cnt,
						 red_type(o->type), MPI_SUM,
						 mc, req);
	case K_RED:
		/* recv is used at the root only (NULL elsewhere is fine) */
		return MPI_Ireduce(o->comm->me == o->peer && o->send == o->recv
				       ? MPI_IN_PLACE
				       : o->send,
				   o->comm->me == o->peer ? o->recv : NULL, cnt,
				   red_type(o->type), MPI_SUM, o->peer, mc,
				   req);
	case K_AG:
		if ((const char *)o->send ==
		    (char *)o->recv + (size_t)o->comm->me * o->count * es)
			return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_BYTE,
					      o->recv, bytes, MPI_BYTE, mc,
					      req);
		if ((o->tmp = malloc(o->count * es)) == NULL)
			return MPI_ERR_NO_MEM;
		memcpy(o->tmp, o->send, o->count * es);
		return MPI_Iallgather(o->tmp, bytes, MPI_BYTE, o->recv, bytes,
				      MPI_BYTE, mc, req);
	case K_BC:
		if (o->comm->me == o->peer && o->send != o->recv)
			memmove(o->recv, o->send, o->count * es);
		return MPI_Ibcast(o->recv, bytes, MPI_BYTE, o->peer, mc, req);
	case K_SEND:
		return MPI_Isend(o->send, bytes, MPI_BYTE, o->peer, 0, mc, req);
	case K_RECV:
		return MPI_Irecv(o->recv, bytes, MPI_BYTE, o->peer, 0, mc, req);
	}
	return MPI_ERR_ARG;
}

static void async_fail(ncclComm_t c, int err, const char *what)
{
	char s[MPI_MAX_ERROR_STRING];
	int len = 0;

	MPI_Error_string(err, s, &len);
	c->async = ncclSystemError;
	snprintf(c->last, sizeof(c->last), "%s: MPI: %.200s", what, s);
}

/* The stream reached the batch: start it (first call), then 1 once every
 * request has completed.  An MPI error marks the communicator (the
 * runtime's wait sees it through ncclCommGetAsyncError) and completes the
 * batch, so the stream never hangs on it. */
static int batch_poll(void *arg)
{
	batch *b = arg;
	int flag = 0, err;

	if (!b->started) {
		b->started = 1;
		for (int i = 0; i < b->n; i++) {
			if (b->r[i].comm->aborted || b->r[i].count == 0)
				continue;
			err = start(&b->r[i], &b->req[b->nreq]);
			if (err != MPI_SUCCESS) {
				async_fail(b->r[i].comm, err, "start");
				continue;
			}
			if (b->req[b->nreq] != MPI_REQUEST_NULL)
				b->nreq++;
		}
	}
	if (b->nreq == 0)
		return 1;
	err = MPI_Testall(b->nreq, b->req, &flag, MPI_STATUSES_IGNORE);
	if (err != MPI_SUCCESS) {
		async_fail(b->r[0].comm, err, "test");
		return 1;
	}
	return flag;
}

/* SIMT_NCCL_INPROGRESS=N (1..1000): every enqueue on a non-blocking
 * communicator returns ncclInProgress and reaches its stream only at the
 * N-th ncclCommGetAsyncError, as a real one may (a first collective
 * setting up its connections).  Meanwhile its stream is held (any work
 * or query on it is reported) and any other call on the communicator is
 * refused, which is what NCCL requires of the caller.  0 or unset: at
 * once. */
static int inprogress_polls(void)
{
	static int v = -1;

	if (v < 0) {
		const char *e = getenv("SIMT_NCCL_INPROGRESS");
		char *end = NULL;
		long n = e != NULL ? strtol(e, &end, 10) : 0;

		v = 0;
		if (e != NULL && (end == e || *end != '\0' || n < 0 ||
				  n > 1000))
			say("SIMT_NCCL_INPROGRESS='%s': want 0..1000", e);
		else if (n > 0) {
			v = (int)n;
			fprintf(stderr, "# simt: nccl enqueues in progress "
					"for %d polls\n",
				v);
		}
	}
	return v;
}

/* The held enqueue of c reaches its stream (drop: discarded, at an abort
 * or destroy). */
static void settle(ncclComm_t c, int drop)
{
	batch *b = c->pending;

	if (b == NULL)
		return;
	c->pending = NULL;
	simt_stream_hold(b->stream, 0);
	if (drop)
		batch_free(b);
	else if (simt_enqueue_poll(b->stream, batch_poll, batch_free, b) != 0)
		c->async = ncclInvalidArgument; /* reported, b dropped */
}

static ncclResult_t submit(batch *b)
{
	ncclComm_t c = b->r[0].comm;

	if ((b->req = calloc((size_t)b->n, sizeof(MPI_Request))) == NULL) {
		batch_free(b);
		return fail(NULL, ncclSystemError, "no memory for requests");
	}
	if (c->nonblocking && inprogress_polls() > 0) {
		c->pending = b;
		c->pending_left = inprogress_polls();
		simt_stream_hold(b->stream, 1);
		return ncclInProgress;
	}
	if (simt_enqueue_poll(b->stream, batch_poll, batch_free, b) != 0)
		return ncclInvalidArgument; /* reported, b dropped */
	return ncclSuccess;
}

/* Check and queue one operation: in the open group, or alone. */
static ncclResult_t add(op_rec o, cudaStream_t s, const char *what)
{
	size_t es = type_size(o.type), n;
	ncclComm_t c = o.comm;
	batch *b;
	ncclResult_t r = ncclSuccess;

	if (c == NULL)
		r = fail(NULL, ncclInvalidArgument, "%s: comm NULL", what);
	else if (c->aborted)
		r = fail(c, ncclInvalidUsage, "%s: aborted comm", what);
	else if (c->pending != NULL)
		r = fail(c, ncclInvalidUsage,
			 "%s: the communicator's last enqueue is still in "
			 "progress (ncclInProgress not awaited with "
			 "ncclCommGetAsyncError)",
			 what);
	else if (es == 0)
		r = fail(c, ncclInvalidArgument, "%s: type %d", what, o.type);
	else if ((o.k == K_AR || o.k == K_RS || o.k == K_RED) &&
		 red_type(o.type) == MPI_DATATYPE_NULL)
		r = fail(c, ncclInvalidArgument,
			 "%s: reduction of type %d not emulated", what,
			 o.type);
	else if (o.count > (size_t)0x7fffffff / es / (size_t)c->n)
		r = fail(c, ncclInvalidArgument, "%s: %zu elements", what,
			 o.count);
	if (r == ncclSuccess && o.count > 0) {
		n = (size_t)c->n;
		switch (o.k) {
		case K_AR:
			if (!simt_dev_range(o.send, o.count * es, what) ||
			    !simt_dev_range(o.recv, o.count * es, what))
				r = ncclInvalidArgument;
			break;
		case K_RS:
			if (!simt_dev_range(o.send, o.count * es * n, what) ||
			    !simt_dev_range(o.recv, o.count * es, what))
				r = ncclInvalidArgument;
			break;
		case K_RED:
			if (o.peer < 0 || o.peer >= c->n)
				r = fail(c, ncclInvalidArgument,
					 "%s: root %d of %d", what, o.peer,
					 c->n);
			else if (!simt_dev_range(o.send, o.count * es, what) ||
				 (c->me == o.peer &&
				  !simt_dev_range(o.recv, o.count * es, what)))
				r = ncclInvalidArgument;
			break;
		case K_AG:
			if (!simt_dev_range(o.send, o.count * es, what) ||
			    !simt_dev_range(o.recv, o.count * es * n, what))
				r = ncclInvalidArgument;
			break;
		case K_BC:
			if (o.peer < 0 || o.peer >= c->n)
				r = fail(c, ncclInvalidArgument,
					 "%s: root %d of %d", what, o.peer,
					 c->n);
			else if ((c->me == o.peer &&
				  !simt_dev_range(o.send, o.count * es,
						  what)) ||
				 !simt_dev_range(o.recv, o.count * es, what))
				r = ncclInvalidArgument;
			break;
		case K_SEND:
		case K_RECV:
			if (o.peer < 0 || o.peer >= c->n || o.peer == c->me)
				r = fail(c, ncclInvalidArgument,
					 "%s: peer %d of %d (self %d)", what,
					 o.peer, c->n, c->me);
			else if (!simt_dev_range(o.k == K_SEND ? o.send
							       : o.recv,
						 o.count * es, what))
				r = ncclInvalidArgument;
			break;
		}
	}
	if (r != ncclSuccess) {
		if (group_depth > 0 && group_err == ncclSuccess)
			group_err = r;
		return r;
	}
	if (group_depth > 0) {
		b = group_b;
		if (b->stream_set && b->stream != s) {
			if (group_err == ncclSuccess)
				group_err = fail(c, ncclInvalidUsage,
						 "%s: a group on two streams",
						 what);
			return ncclInvalidUsage;
		}
	} else if ((b = calloc(1, sizeof(*b))) == NULL)
		return fail(c, ncclSystemError, "%s: no memory", what);
	b->stream = s;
	b->stream_set = 1;
	if (b->n == b->cap) {
		int cap = b->cap ? 2 * b->cap : 4;
		op_rec *p = realloc(b->r, sizeof(*p) * (size_t)cap);

		if (p == NULL) {
			if (group_depth == 0)
				batch_free(b);
			return fail(c, ncclSystemError, "%s: no memory", what);
		}
		b->r = p;
		b->cap = cap;
	}
	b->r[b->n++] = o;
	return group_depth > 0 ? ncclSuccess : submit(b);
}

ncclResult_t ncclGroupStart(void)
{
	if (group_depth++ == 0) {
		group_err = ncclSuccess;
		if ((group_b = calloc(1, sizeof(*group_b))) == NULL)
			group_err = fail(NULL, ncclSystemError,
					 "group: no memory");
	}
	return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
	batch *b = group_b;
	ncclResult_t r = group_err;

	if (group_depth == 0)
		return fail(NULL, ncclInvalidUsage, "ncclGroupEnd: no group");
	if (--group_depth > 0)
		return ncclSuccess;
	group_b = NULL;
	if (b == NULL)
		return r;
	if (r != ncclSuccess || b->n == 0) {
		batch_free(b);
		return r;
	}
	return submit(b);
}

ncclResult_t ncclAllReduce(const void *sendbuf, void *recvbuf, size_t count,
			   ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
			   cudaStream_t stream)
{
	op_rec o = {K_AR, sendbuf, recvbuf, count, type, 0, comm, NULL};

	if (op != ncclSum)
		return fail(comm, ncclInvalidArgument,
			    "all-reduce: op %d not emulated", op);
	return add(o, stream, "ncclAllReduce");
}

ncclResult_t ncclReduceScatter(const void *sendbuf, void *recvbuf,
			       size_t recvcount, ncclDataType_t type,
			       ncclRedOp_t op, ncclComm_t comm,
			       cudaStream_t stream)
{
	op_rec o = {K_RS, sendbuf, recvbuf, recvcount, type, 0, comm, NULL};

	if (op != ncclSum)
		return fail(comm, ncclInvalidArgument,
			    "reduce-scatter: op %d not emulated", op);
	return add(o, stream, "ncclReduceScatter");
}

ncclResult_t ncclReduce(const void *sendbuf, void *recvbuf, size_t count,
			ncclDataType_t type, ncclRedOp_t op, int root,
			ncclComm_t comm, cudaStream_t stream)
{
	op_rec o = {K_RED, sendbuf, recvbuf, count, type, root, comm, NULL};

	if (op != ncclSum)
		return fail(comm, ncclInvalidArgument,
			    "reduce: op %d not emulated", op);
	return add(o, stream, "ncclReduce");
}

ncclResult_t ncclAllGather(const void *sendbuf, void *recvbuf,
			   size_t sendcount, ncclDataType_t type,
			   ncclComm_t comm, cudaStream_t stream)
{
	op_rec o = {K_AG, sendbuf, recvbuf, sendcount, type, 0, comm, NULL};

	return add(o, stream, "ncclAllGather");
}

ncclResult_t ncclBroadcast(const void *sendbuf, void *recvbuf, size_t count,
			   ncclDataType_t type, int root, ncclComm_t comm,
			   cudaStream_t stream)
{
	op_rec o = {K_BC, sendbuf, recvbuf, count, type, root, comm, NULL};

	return add(o, stream, "ncclBroadcast");
}

ncclResult_t ncclSend(const void *sendbuf, size_t count, ncclDataType_t type,
		      int peer, ncclComm_t comm, cudaStream_t stream)
{
	op_rec o = {K_SEND, sendbuf, NULL, count, type, peer, comm, NULL};

	return add(o, stream, "ncclSend");
}

ncclResult_t ncclRecv(void *recvbuf, size_t count, ncclDataType_t type,
		      int peer, ncclComm_t comm, cudaStream_t stream)
{
	op_rec o = {K_RECV, NULL, recvbuf, count, type, peer, comm, NULL};

	return add(o, stream, "ncclRecv");
}
