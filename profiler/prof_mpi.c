/*
 * prof_mpi.c - link benchmarks between the ranks of a job over MPI:
 * ping-pong latency and bandwidth to a rank on the same node and to one on
 * another node, and all-reduce / sendrecv bus bandwidth over all ranks with
 * nccl-tests' definitions (allreduce busbw = algbw * 2(n-1)/n; sendrecv
 * busbw = algbw; algbw = bytes / time).
 *
 * Only rank 0 times the ping-pongs (its peer mirrors the loop); every rank
 * runs the same number of collectives and rank 0's statistics are reported.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hexi_prof.h"

int hexi_prof_mpi_launched(void)
{
	static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
				     "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (getenv(vars[i]) != NULL)
			return 1;
	return 0;
}

#ifdef HAVE_MPI
#include <mpi.h>

#define LAT_BYTES 8
#define TAG	  4242

struct hexi_prof_mpi {
	int rank, size;
	int local_rank, local_size;
	int intra_peer; /* a rank != 0 on rank 0's node, or -1 */
	int inter_peer; /* a rank on another node, or -1 */
	int nnodes;
	MPI_Comm node;
};

static hexi_rc mpi_err(int code, const char *what)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (code == MPI_SUCCESS)
		return HEXI_OK;
	if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS)
		snprintf(msg, sizeof(msg), "code %d", code);
	return hexi_error(HEXI_ERR_MPI, "%s: %s", what, msg);
}

static hexi_rc topology(hexi_prof_mpi *m)
{
	int leader, *leaders = NULL, rc;
	hexi_rc rv = HEXI_ERR_MPI;

	rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
				 MPI_INFO_NULL, &m->node);
	if ((rv = mpi_err(rc, "MPI_Comm_split_type")) != HEXI_OK)
		goto out;
	MPI_Comm_rank(m->node, &m->local_rank);
	MPI_Comm_size(m->node, &m->local_size);
	rc = MPI_Allreduce(&m->rank, &leader, 1, MPI_INT, MPI_MIN, m->node);
	if ((rv = mpi_err(rc, "node leader")) != HEXI_OK)
		goto out;
	leaders = malloc((size_t)m->size * sizeof(*leaders));
	if (leaders == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "MPI topology of %d ranks",
				m->size);
		goto out;
	}
	rc = MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT,
			   MPI_COMM_WORLD);
	if ((rv = mpi_err(rc, "node leaders")) != HEXI_OK)
		goto out;
	m->intra_peer = m->inter_peer = -1;
	m->nnodes = 0;
	for (int r = 0; r < m->size; r++) {
		if (leaders[r] == r)
			m->nnodes++;
		if (r > 0 && leaders[r] == leaders[0] && m->intra_peer < 0)
			m->intra_peer = r;
		if (leaders[r] != leaders[0] && m->inter_peer < 0)
			m->inter_peer = r;
	}
	rv = HEXI_OK;
out:
	free(leaders);
	return rv;
}

hexi_rc hexi_prof_mpi_init(int *argc, char ***argv, hexi_prof_mpi **out)
{
	hexi_prof_mpi *m = NULL;
	int rc, inited = 0;
	hexi_rc rv;

	MPI_Initialized(&inited);
	if (!inited && (rc = MPI_Init(argc, argv)) != MPI_SUCCESS)
		return hexi_error(HEXI_ERR_MPI, "MPI_Init failed (code %d)",
				  rc);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "MPI context");
	m->node = MPI_COMM_NULL;
	MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &m->size);
	if ((rv = topology(m)) != HEXI_OK) {
		hexi_prof_mpi_fini(m);
		return rv;
	}
	*out = m;
	return HEXI_OK;
}

int hexi_prof_mpi_rank(const hexi_prof_mpi *m)
{
	return m ? m->rank : 0;
}

int hexi_prof_mpi_size(const hexi_prof_mpi *m)
{
	return m ? m->size : 1;
}

int hexi_prof_mpi_local_rank(const hexi_prof_mpi *m)
{
	return m ? m->local_rank : 0;
}

/* A barrier that sleeps while it waits: ranks wait here while another
 * rank measures, and Open MPI's MPI_Barrier polls, taking a core from the
 * rank at work (on a 2-core node half of its CPU GEMM rate).  The ranks
 * leave up to a poll (1 ms) apart; every benchmark after a barrier
 * validates and warms up before it times. */
static hexi_rc idle_barrier(MPI_Comm comm, const char *what)
{
	const struct timespec nap = {0, 1000000}; /* 1 ms */
	MPI_Request req = MPI_REQUEST_NULL;
	int done = 0, rc;

	rc = MPI_Ibarrier(comm, &req);
	while (rc == MPI_SUCCESS && !done) {
		rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
		if (rc == MPI_SUCCESS && !done)
			nanosleep(&nap, NULL);
	}
	return mpi_err(rc, what);
}

hexi_rc hexi_prof_mpi_barrier(hexi_prof_mpi *m)
{
	if (m == NULL)
		return HEXI_OK;
	return idle_barrier(MPI_COMM_WORLD, "MPI_Ibarrier");
}

hexi_rc hexi_prof_mpi_bcast(hexi_prof_mpi *m, void *buf, size_t bytes, int root)
{
	if (m == NULL)
		return HEXI_OK;
	if (bytes > (size_t)1 << 30)
		return hexi_error(HEXI_ERR_RANGE, "MPI_Bcast of %zu bytes",
				  bytes);
	return mpi_err(
	    MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD),
	    "MPI_Bcast");
}

hexi_rc hexi_prof_mpi_reduce_double(hexi_prof_mpi *m, double *v, int op)
{
	double in;

	if (m == NULL)
		return HEXI_OK;
	in = *v;
	return mpi_err(MPI_Allreduce(&in, v, 1, MPI_DOUBLE,
				     op ? MPI_MAX : MPI_MIN, MPI_COMM_WORLD),
		       "MPI_Allreduce(double)");
}

int hexi_prof_mpi_nnodes(const hexi_prof_mpi *m)
{
	return m ? m->nnodes : 1;
}

#define GATHER_MAX 8

hexi_rc hexi_prof_mpi_gather_gpus(hexi_prof_mpi *m, const hexi_prof_gpu *mine,
				  int nmine, hexi_profile *p)
{
	hexi_prof_gpu *all = NULL, send[GATHER_MAX];
	int *counts = NULL, rc;
	hexi_rc rv = HEXI_ERR_NOMEM;
	size_t sz = sizeof(hexi_prof_gpu) * GATHER_MAX;

	if (m == NULL)
		return HEXI_OK;
	if (nmine < 0 || nmine > GATHER_MAX)
		return hexi_error(HEXI_ERR_RANGE, "gather: %d GPUs per rank",
				  nmine);
	memset(send, 0, sizeof(send));
	memcpy(send, mine, (size_t)nmine * sizeof(*mine));
	/* ranks that finished their GPUs first wait asleep for the others */
	if ((rv = idle_barrier(m->node, "node barrier before the gather")) !=
	    HEXI_OK)
		return rv;
	counts = malloc((size_t)m->local_size * sizeof(*counts));
	all = malloc((size_t)m->local_size * sz);
	if (counts == NULL || all == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "gather of GPU entries");
		goto out;
	}
	rc = MPI_Gather(&nmine, 1, MPI_INT, counts, 1, MPI_INT, 0, m->node);
	if ((rv = mpi_err(rc, "gather GPU counts")) != HEXI_OK)
		goto out;
	rc = MPI_Gather(send, (int)sz, MPI_BYTE, all, (int)sz, MPI_BYTE, 0,
			m->node);
	if ((rv = mpi_err(rc, "gather GPU entries")) != HEXI_OK)
		goto out;
	if (m->local_rank != 0)
		goto out;
	p->ngpus = 0;
	for (int r = 0; r < m->local_size; r++)
		for (int i = 0; i < counts[r] && p->ngpus < HEXI_PROF_MAX_GPUS;
		     i++)
			p->gpus[p->ngpus++] = all[r * GATHER_MAX + i];
out:
	free(counts);
	free(all);
	return rv;
}

void hexi_prof_mpi_abort(hexi_prof_mpi *m, int code)
{
	if (m != NULL && m->size > 1)
		MPI_Abort(MPI_COMM_WORLD, code);
}

void hexi_prof_mpi_fini(hexi_prof_mpi *m)
{
	int fin = 0;

	if (m == NULL)
		return;
	if (m->node != MPI_COMM_NULL)
		MPI_Comm_free(&m->node);
	free(m);
	MPI_Finalized(&fin);
	if (!fin)
		MPI_Finalize();
}

/* ---- ping-pong ---------------------------------------------------------- */

typedef struct pp_arg {
	int peer, initiator;
	size_t bytes;
	unsigned char *buf;
} pp_arg;

static hexi_rc pp_once(void *p)
{
	pp_arg *a = p;
	int rc;

	if (a->initiator) {
		rc = MPI_Send(a->buf, (int)a->bytes, MPI_BYTE, a->peer, TAG,
			      MPI_COMM_WORLD);
		if (rc == MPI_SUCCESS)
			rc = MPI_Recv(a->buf, (int)a->bytes, MPI_BYTE, a->peer,
				      TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	} else {
		rc = MPI_Recv(a->buf, (int)a->bytes, MPI_BYTE, a->peer, TAG,
			      MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		if (rc == MPI_SUCCESS)
			rc = MPI_Send(a->buf, (int)a->bytes, MPI_BYTE, a->peer,
				      TAG, MPI_COMM_WORLD);
	}
	return mpi_err(rc, "ping-pong");
}

static void pattern(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)((i * 131u + seed) & 0xff);
}

static int pattern_ok(const unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (unsigned char)((i * 131u + seed) & 0xff))
			return 0;
	return 1;
}

/* Validate (the initiator's pattern comes back intact), then time.
 * Only the initiator gets statistics. */
static hexi_rc pingpong(hexi_prof_mpi *m, const hexi_prof_opts *o, int peer,
			int initiator, size_t bytes, hexi_prof_stat *st)
{
	pp_arg a = {peer, initiator, bytes, NULL};
	hexi_rc rv;
	int reps = o->repeats;

	a.buf = malloc(bytes);
	if (a.buf == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "ping-pong buffer %zu",
				  bytes);
	pattern(a.buf, bytes, initiator ? 7u : 99u);
	if ((rv = pp_once(&a)) != HEXI_OK)
		goto out;
	if (initiator && !pattern_ok(a.buf, bytes, 7u)) {
		rv = hexi_error(HEXI_ERR_MISMATCH,
				"ping-pong with rank %d: %zu bytes came back "
				"changed",
				peer, bytes);
		goto out;
	}
	/* Latency runs are cheap: more repeats give a steadier median. */
	if (bytes <= LAT_BYTES)
		reps = reps * 10 > 10000 ? 10000 : reps * 10;
	if (initiator)
		rv = hexi_prof_time(pp_once, &a, o->warmup, reps, st);
	else
		for (int i = 0; i < o->warmup + reps && rv == HEXI_OK; i++)
			rv = pp_once(&a);
out:
	free(a.buf);
	return rv;
}

static void meas_init(hexi_prof_meas *m, const char *name, size_t bytes,
		      const char *unit)
{
	memset(m, 0, sizeof(*m));
	m->device = -1;
	snprintf(m->name, sizeof(m->name), "%s", name);
	snprintf(m->shape, sizeof(m->shape), "%zuB", bytes);
	snprintf(m->unit, sizeof(m->unit), "%s", unit);
}

/* Latency and bandwidth between rank 0 and peer; fills bw/lat on rank 0. */
static hexi_rc link_pair(hexi_prof_mpi *m, const hexi_prof_opts *o, int peer,
			 const char *what, double *bw_gbps, double *lat_s,
			 hexi_prof_report *r)
{
	size_t sizes[2] = {LAT_BYTES, o->max_msg_bytes};
	int me = m->rank == 0 ? 1 : (m->rank == peer ? 0 : -1);
	char name[HEXI_PROF_NAME_MAX];
	hexi_rc rv = HEXI_OK;

	if (me < 0)
		return HEXI_OK;
	for (int i = 0; i < 2 && rv == HEXI_OK; i++) {
		hexi_prof_stat st;
		hexi_prof_meas ms;

		rv = pingpong(m, o, me ? peer : 0, me, sizes[i], &st);
		if (rv != HEXI_OK || !me)
			continue;
		snprintf(name, sizeof(name), "mpi.pingpong.%s", what);
		meas_init(&ms, name, sizes[i], i == 0 ? "s" : "GB/s");
		ms.stat = st;
		/* one way = half a round trip */
		if (i == 0) {
			ms.value = st.median_s / 2;
			ms.best = st.min_s / 2;
			*lat_s = ms.value;
		} else {
			ms.value = (double)sizes[i] / (st.median_s / 2) / 1e9;
			ms.best = (double)sizes[i] / (st.min_s / 2) / 1e9;
			if (sizes[i] >= HEXI_PROF_BW_MIN_BYTES)
				*bw_gbps = ms.value;
			else
				hexi_log(HEXI_LOG_WARN,
					 "%s link: --max-msg %zu bytes is "
					 "below 1M, mostly latency: its "
					 "bandwidth is reported, not "
					 "recorded in the profile",
					 what, sizes[i]);
		}
		rv = hexi_prof_report_add(r, &ms);
	}
	return rv;
}

/* ---- collectives ------------------------------------------------------- */

typedef struct coll_arg {
	hexi_prof_mpi *m;
	size_t count; /* floats */
	float *send, *recv;
	int sendrecv; /* 0: all-reduce; 1: ring sendrecv */
} coll_arg;

static hexi_rc coll_once(void *p)
{
	coll_arg *a = p;
	int n = a->m->size, r = a->m->rank;

	if (!a->sendrecv)
		return mpi_err(MPI_Allreduce(a->send, a->recv, (int)a->count,
					     MPI_FLOAT, MPI_SUM,
					     MPI_COMM_WORLD),
			       "MPI_Allreduce");
	return mpi_err(MPI_Sendrecv(a->send, (int)a->count, MPI_FLOAT,
				    (r + 1) % n, TAG, a->recv, (int)a->count,
				    MPI_FLOAT, (r - 1 + n) % n, TAG,
				    MPI_COMM_WORLD, MPI_STATUS_IGNORE),
		       "MPI_Sendrecv");
}

/* Expected value of element i on rank r after one collective. */
static float coll_want(const coll_arg *a, size_t i)
{
	int n = a->m->size, r = a->m->rank;

	if (!a->sendrecv)
		return (float)(n * (n + 1) / 2) + (float)n * (float)(i % 7);
	return (float)((r - 1 + n) % n + 1) + (float)(i % 7);
}

static hexi_rc collective(hexi_prof_mpi *m, const hexi_prof_opts *o,
			  int sendrecv, hexi_prof_report *r)
{
	coll_arg a = {m, o->max_msg_bytes / sizeof(float), NULL, NULL,
		      sendrecv};
	hexi_prof_meas ms;
	hexi_rc rv = HEXI_ERR_NOMEM;
	double bytes = (double)(a.count * sizeof(float));
	double factor = sendrecv ? 1.0 : 2.0 * (m->size - 1) / m->size;
	int bad = 0;

	a.send = malloc(a.count * sizeof(float));
	a.recv = malloc(a.count * sizeof(float));
	if (a.send == NULL || a.recv == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "collective buffers");
		goto out;
	}
	for (size_t i = 0; i < a.count; i++)
		a.send[i] = (float)(m->rank + 1) + (float)(i % 7);
	if ((rv = coll_once(&a)) != HEXI_OK)
		goto out;
	for (size_t i = 0; i < a.count && !bad; i++)
		bad = a.recv[i] != coll_want(&a, i);
	if ((rv = mpi_err(MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX,
					MPI_COMM_WORLD),
			  "result check")) != HEXI_OK)
		goto out;
	if (bad) {
		rv = hexi_error(HEXI_ERR_MISMATCH,
				"MPI %s of %zu floats: wrong result on some "
				"rank",
				sendrecv ? "sendrecv" : "all-reduce", a.count);
		goto out;
	}
	meas_init(&ms, sendrecv ? "mpi.sendrecv.busbw" : "mpi.allreduce.busbw",
		  (size_t)bytes, "GB/s");
	if ((rv = hexi_prof_time(coll_once, &a, o->warmup, o->repeats,
				 &ms.stat)) != HEXI_OK)
		goto out;
	ms.value = bytes / ms.stat.median_s / 1e9 * factor;
	ms.best = bytes / ms.stat.min_s / 1e9 * factor;
	rv = m->rank == 0 ? hexi_prof_report_add(r, &ms) : HEXI_OK;
out:
	free(a.send);
	free(a.recv);
	return rv;
}

hexi_rc hexi_prof_mpi_links(hexi_prof_mpi *m, const hexi_prof_opts *o,
			    hexi_profile *p, hexi_prof_report *r)
{
	hexi_rc rv;

	if (m == NULL || m->size < 2)
		return HEXI_OK;
	if (m->intra_peer >= 0 &&
	    (rv = link_pair(m, o, m->intra_peer, "intra", &p->intra_bw_gbps,
			    &p->intra_lat_s, r)) != HEXI_OK)
		return rv;
	if ((rv = hexi_prof_mpi_barrier(m)) != HEXI_OK)
		return rv;
	if (m->inter_peer >= 0 &&
	    (rv = link_pair(m, o, m->inter_peer, "inter", &p->inter_bw_gbps,
			    &p->inter_lat_s, r)) != HEXI_OK)
		return rv;
	if ((rv = hexi_prof_mpi_barrier(m)) != HEXI_OK)
		return rv;
	if ((rv = collective(m, o, 0, r)) != HEXI_OK)
		return rv;
	return collective(m, o, 1, r);
}

#else /* !HAVE_MPI */

struct hexi_prof_mpi {
	int unused;
};

hexi_rc hexi_prof_mpi_init(int *argc, char ***argv, hexi_prof_mpi **out)
{
	return hexi_error(HEXI_ERR_UNSUPPORTED,
			  "started by an MPI launcher but built without MPI");
}

int hexi_prof_mpi_rank(const hexi_prof_mpi *m)
{
	return 0;
}

int hexi_prof_mpi_size(const hexi_prof_mpi *m)
{
	return 1;
}

int hexi_prof_mpi_local_rank(const hexi_prof_mpi *m)
{
	return 0;
}

hexi_rc hexi_prof_mpi_barrier(hexi_prof_mpi *m)
{
	return HEXI_OK;
}

hexi_rc hexi_prof_mpi_bcast(hexi_prof_mpi *m, void *buf, size_t bytes, int root)
{
	return HEXI_OK;
}

hexi_rc hexi_prof_mpi_reduce_double(hexi_prof_mpi *m, double *v, int op)
{
	return HEXI_OK;
}

hexi_rc hexi_prof_mpi_links(hexi_prof_mpi *m, const hexi_prof_opts *o,
			    hexi_profile *p, hexi_prof_report *r)
{
	return HEXI_OK;
}

int hexi_prof_mpi_nnodes(const hexi_prof_mpi *m)
{
	return 1;
}

hexi_rc hexi_prof_mpi_gather_gpus(hexi_prof_mpi *m, const hexi_prof_gpu *mine,
				  int nmine, hexi_profile *p)
{
	return HEXI_OK;
}

void hexi_prof_mpi_abort(hexi_prof_mpi *m, int code)
{
}

void hexi_prof_mpi_fini(hexi_prof_mpi *m)
{
}

#endif
