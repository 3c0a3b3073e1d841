/*
 * rt_comm.h - internal communication interface of libhexirt.
 *
 * A backend (MPI on CPU: comm_mpi.c; NCCL on GPU: comm_nccl.c) fills a
 * small vtable.  The runtime never calls MPI or NCCL directly outside the
 * backend files, so the pipeline, the tensor-parallel callbacks and the
 * chunked gradient sync run unchanged on either.
 *
 * Conventions every backend keeps:
 *  - Ranks are global ranks of the plan (0..world_size-1).
 *  - Groups are created with rt_comm_group_create() from an ascending list of
 *    global ranks.  Only the members call it, and every rank creates the
 *    groups it belongs to in the same global order (the runtime walks the
 *    plan in one fixed order), so a backend may run a collective among the
 *    members inside group_create (MPI_Comm_create_group, ncclCommInitRank
 *    after exchanging a unique id).  A caller never creates the same rank
 *    set twice: groups are shared through rt_comm_group_get().
 *  - Inside a group, members are numbered 0..n-1 in ascending global rank.
 *  - Buffers are host memory for the MPI backend and device memory for NCCL
 *    (the runtime allocates them through the backend's owner, the model).
 *  - send() may return before the receiver posted its receive: it copies or
 *    queues, so two neighbours sending to each other never deadlock; flush()
 *    waits until every send of this rank has completed.
 *  - Every call returns hexi_rc with a message naming the peer or the group;
 *    a failed peer yields HEXI_ERR_PEER or HEXI_ERR_MPI/NCCL, never a hang
 *    the runtime could avoid (see abort_all and the watchdog in boot.c).
 */
#ifndef HEXI_RT_COMM_H
#define HEXI_RT_COMM_H

#include <stddef.h>

#include "hexi_common.h"

/* The GPU path (rt_cuda.h users: the nccl backend's trainer) is compiled
 * with the CUDA toolkit (HAVE_CUDA), or, in test programs only, against the
 * host-memory emulation of rt_cuda.h in tests/gpuemu (HEXI_GPU_EMU), which
 * runs the GPU trainer's host logic on CPUs (doc/DECISIONS.md 57), or
 * against the SIMT device and NCCL over MPI of tests/simt (HEXI_SIMT_NCCL,
 * DECISIONS 178). */
#if defined(HAVE_CUDA) || defined(HEXI_GPU_EMU) || defined(HEXI_SIMT_NCCL)
#define RT_GPU 1
#endif

typedef enum rt_dtype {
	RT_F32 = 0, /* float */
	RT_F64 = 1, /* double (loss and norm scalars) */
} rt_dtype;

typedef struct rt_comm rt_comm;
typedef struct rt_group rt_group;
typedef struct rt_req rt_req; /* a non-blocking collective in flight */

typedef struct rt_comm_ops {
	const char *name; /* "mpi", "nccl" */
	/* Collective among ranks[0..n-1] (ascending, includes the caller). */
	hexi_rc (*group_create)(rt_comm *c, const int *ranks, int n,
				rt_group **out);
	void (*group_destroy)(rt_group *g);
	/* In-place sum of count elements over the group. */
	hexi_rc (*allreduce_sum)(rt_group *g, void *buf, size_t count,
				 rt_dtype dt);
	/* Sum over the group of send[0..n*count): member i receives block i
	 * (elements [i*count, (i+1)*count)) in recv[0..count).  send and recv
	 * do not overlap.  NULL in a backend without it (sharded sync). */
	hexi_rc (*reduce_scatter_sum)(rt_group *g, const void *send, void *recv,
				      size_t count, rt_dtype dt);
	/* In place: buf[0..n*count) where member i filled block i; afterwards
	 * every member has every block. */
	hexi_rc (*allgather)(rt_group *g, void *buf, size_t count, rt_dtype dt);
	/* The same with member i's block at elements [cut[i], cut[i+1]) of
	 * send (reduce-scatter; recv gets the caller's block) or of buf
	 * (all-gather, in place): no padding, no staging copy.  NULL where
	 * the backend has no variable counts (NCCL). */
	hexi_rc (*reduce_scatterv_sum)(rt_group *g, const void *send,
				       void *recv, const size_t *cut,
				       rt_dtype dt);
	hexi_rc (*allgatherv)(rt_group *g, void *buf, const size_t *cut,
			      rt_dtype dt);
	/* Within group g, blocking: send scount elements to member dst and
	 * receive rcount elements from member src (members 0..n-1) at once;
	 * send and recv do not overlap (the sharded sync's ring, which
	 * needs no staging of whole buckets).  NULL in a backend without
	 * it (the sharded sync then packs blocks for reduce_scatter_sum). */
	hexi_rc (*sendrecv)(rt_group *g, const void *send, size_t scount,
			    int dst, void *recv, size_t rcount, int src,
			    rt_dtype dt);
	/* Non-blocking in-place sum (overlap of the gradient sync with the
	 * backward): starts the all-reduce and returns a request; test()
	 * sets *done (and lets the backend progress), wait() completes it;
	 * both free the request once done.  Every member starts the
	 * requests of one group in the same order.  NULL in a backend
	 * without it. */
	hexi_rc (*iallreduce_sum)(rt_group *g, void *buf, size_t count,
				  rt_dtype dt, rt_req **req);
	/* Non-blocking reduce-scatter with variable counts (the sharded
	 * sync's overlap): member i's block is elements [cut[i], cut[i+1])
	 * of send (cut[0..n] ascending, read during the call only); the sum
	 * over the group of the caller's block lands in recv, which does
	 * not overlap send.  Same request rules as iallreduce_sum; send
	 * and recv must stay untouched until the request is done.  NULL in
	 * a backend without it. */
	hexi_rc (*ireduce_scatterv_sum)(rt_group *g, const void *send,
					void *recv, const size_t *cut,
					rt_dtype dt, rt_req **req);
	hexi_rc (*test)(rt_req *req, int *done);
	hexi_rc (*wait)(rt_req *req);
	/* Broadcast bytes from group member root (0..n-1). */
	hexi_rc (*bcast)(rt_group *g, void *buf, size_t bytes, int root);
	/* Point to point with a global peer rank; tag < 2^20. */
	hexi_rc (*send)(rt_comm *c, const void *buf, size_t bytes, int peer,
			int tag);
	hexi_rc (*recv)(rt_comm *c, void *buf, size_t bytes, int peer, int tag);
	hexi_rc (*flush)(rt_comm *c);
	/* Barrier over all ranks (g == NULL) or one group. */
	hexi_rc (*barrier)(rt_comm *c, rt_group *g);
	/* Bring the whole job down now with exit status code (never returns).
	 */
	void (*abort_all)(rt_comm *c, int code);
	void (*destroy)(rt_comm *c);
} rt_comm_ops;

/* Common head of every backend object (backends embed it first). */
struct rt_comm {
	const rt_comm_ops *ops;
	int rank, size;
	/* cache of created groups, keyed by rank set (rt_comm_group_get) */
	struct rt_group_entry *groups;
	int ngroups, cap_groups;
};

/* Common head of every request object (backends embed it first). */
struct rt_req {
	int root; /* the group's first global rank, for messages */
};

/* Common head of every group object. */
struct rt_group {
	rt_comm *comm;
	int n;	    /* members */
	int me;	    /* caller's index among members */
	int *ranks; /* [n] ascending global ranks (owned by the group) */
};

/* ---- backends ----------------------------------------------------------- */

/* MPI backend; MPI must already be initialised (boot.c does it).  Collective
 * over MPI_COMM_WORLD: the members (member != 0: the plan's training ranks)
 * get a communicator renumbered by plan_rank (a task's plan rank,
 * HEXISCALE_RANK, may differ from its launcher rank); fails if their plan
 * ranks are not 0..size-1 once each.  A non-member (an idle task) takes
 * part and gets *out = NULL with HEXI_OK. */
hexi_rc rt_comm_mpi_create(int plan_rank, int member, rt_comm **out);
/* The MPI_Comm of an "mpi" communicator, as a pointer to it (void *, so
 * this header needs no mpi.h); NULL for any other backend. */
void *rt_comm_mpi_handle(rt_comm *c);
/* A single-process backend without MPI (collectives are copies). */
hexi_rc rt_comm_self_create(rt_comm **out);
#ifdef RT_GPU
/* NCCL backend (comm_nccl.c): needs an MPI comm for id exchange. */
hexi_rc rt_comm_nccl_create(rt_comm *bootstrap, int device, rt_comm **out);
/* The non-blocking collectives of an "nccl" communicator (iallreduce_sum,
 * ireduce_scatterv_sum, on its own stream dp) are ordered after the work queued on `stream` (a
 * cudaStream_t; NULL: none) when they start: an event recorded there, that
 * dp waits for, no host synchronisation.  The GPU trainer passes its
 * compute stream, so a gradient bucket packed or finished by the backward
 * is complete before NCCL reads it.  A no-op for another backend. */
void rt_comm_nccl_order_after(rt_comm *c, void *stream);
#endif

/* ---- helpers over the vtable (comm_common in comm_mpi.c) ---------------- */

/* The group of exactly ranks[0..n-1] (any order; sorted and deduplicated
 * here), created on first use and owned by c.  *out is NULL if the caller
 * is not a member.  Same ordering rule as group_create. */
hexi_rc rt_comm_group_get(rt_comm *c, const int *ranks, int n, rt_group **out);
/* Destroy c and every cached group (NULL is a no-op). */
void rt_comm_destroy(rt_comm *c);

static inline hexi_rc rt_allreduce_f32(rt_group *g, float *buf, size_t n)
{
	return g->comm->ops->allreduce_sum(g, buf, n, RT_F32);
}

#endif /* HEXI_RT_COMM_H */
