/*
 * pipeline.c - 1F1B schedule of one stage with the pipeline's own
 * micro-batch count.
 *
 * Stage s of S with m micro-batches runs min(S-s-1, m) warm-up forwards,
 * then alternates one forward and one backward, then drains the remaining
 * backwards.  Only stage leaders (TP rank 0) talk to neighbouring stages:
 * the sending leader's activations equal every TP rank's (the row-parallel
 * all-reduce made them equal), and the receiving leader broadcasts what it
 * got inside its TP group.  Sends are queued (rt_comm send semantics), so
 * neighbours sending to each other never deadlock.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "rt_pipe.h"

#define TAG_ACT	 0
#define TAG_GRAD 1

int rt_pipe_slots(int nstages, int stage, int micro_batches)
{
	int n = nstages - stage;

	return n < micro_batches ? n : micro_batches;
}

typedef struct pipe_ctx {
	hexi_rt *rt;
	const rt_pipe_io *io;
	const rt_stage_cb *cb;
	int nslots;
	int root; /* index of the leader in the TP group */
	double wait_s;
} pipe_ctx;

static int tag_of(int mb, int dir)
{
	return (mb << 1) | dir;
}

/* Leader receives from peer, then the TP group gets it by broadcast. */
static hexi_rc pipe_recv(pipe_ctx *c, int peer, int tag)
{
	hexi_rt *rt = c->rt;
	const rt_pipe_io *io = c->io;
	double t0 = hexi_now_s();
	hexi_rc rc = HEXI_OK;

	if (rt->rank == rt->groups.leader)
		rc = io->comm->ops->recv(io->comm, io->in, io->bytes, peer,
					 tag);
	if (rc == HEXI_OK && io->tp->n > 1)
		rc = io->comm->ops->bcast(io->tp, io->in, io->bytes, c->root);
	c->wait_s += hexi_now_s() - t0;
	if (rc != HEXI_OK)
		return hexi_error_prefix(
		    rc,
		    "rank %d: pipeline %s from rank "
		    "%d",
		    rt->rank, (tag & 1) ? "gradient" : "activation", peer);
	return HEXI_OK;
}

static hexi_rc pipe_send(pipe_ctx *c, int peer, int tag)
{
	hexi_rt *rt = c->rt;
	hexi_rc rc;

	if (rt->rank != rt->groups.leader)
		return HEXI_OK;
	rc = c->io->comm->ops->send(c->io->comm, c->io->out, c->io->bytes,
				    peer, tag);
	if (rc != HEXI_OK)
		return hexi_error_prefix(rc, "rank %d: pipeline send to %d",
					 rt->rank, peer);
	return HEXI_OK;
}

static hexi_rc do_forward(pipe_ctx *c, int mb, double *loss_sum)
{
	const rt_groups *g = &c->rt->groups;
	double l = 0;
	hexi_rc rc;

	if (g->prev_leader >= 0) {
		rc = pipe_recv(c, g->prev_leader, tag_of(mb, TAG_ACT));
		if (rc != HEXI_OK)
			return rc;
	}
	rc = c->cb->forward(c->cb->arg, mb, mb % c->nslots,
			    g->prev_leader >= 0 ? c->io->in : NULL,
			    g->next_leader >= 0 ? c->io->out : NULL, &l);
	if (rc != HEXI_OK)
		return rc;
	rt_watchdog_feed(c->rt); /* a micro-batch's forward is progress */
	*loss_sum += l;
	if (g->next_leader >= 0)
		return pipe_send(c, g->next_leader, tag_of(mb, TAG_ACT));
	return HEXI_OK;
}

static hexi_rc do_backward(pipe_ctx *c, int mb)
{
	const rt_groups *g = &c->rt->groups;
	hexi_rc rc;

	if (g->next_leader >= 0) {
		rc = pipe_recv(c, g->next_leader, tag_of(mb, TAG_GRAD));
		if (rc != HEXI_OK)
			return rc;
	}
	rc = c->cb->backward(c->cb->arg, mb, mb % c->nslots,
			     g->next_leader >= 0 ? c->io->in : NULL,
			     g->prev_leader >= 0 ? c->io->out : NULL);
	if (rc != HEXI_OK)
		return rc;
	rt_watchdog_feed(c->rt); /* and its backward */
	if (g->prev_leader >= 0)
		return pipe_send(c, g->prev_leader, tag_of(mb, TAG_GRAD));
	return HEXI_OK;
}

static hexi_rc run_schedule(pipe_ctx *c, int m, int warm, double *loss)
{
	hexi_rc rc = HEXI_OK;
	int f = 0, b = 0;

	for (; f < warm && rc == HEXI_OK; f++)
		rc = do_forward(c, f, loss);
	while (f < m && rc == HEXI_OK) {
		rc = do_forward(c, f++, loss);
		if (rc == HEXI_OK)
			rc = do_backward(c, b++);
	}
	while (b < m && rc == HEXI_OK)
		rc = do_backward(c, b++);
	return rc;
}

hexi_rc rt_pipe_run(hexi_rt *rt, const rt_pipe_io *io, const rt_stage_cb *cb,
		    double *loss_sum, rt_pipe_times *times)
{
	const hexi_role *r = &rt->role;
	pipe_ctx c = {.rt = rt, .io = io, .cb = cb};
	int warm = r->nstages - r->stage - 1;
	hexi_rc rc;

	*loss_sum = 0;
	if (warm > r->micro_batches)
		warm = r->micro_batches;
	c.nslots = rt_pipe_slots(r->nstages, r->stage, r->micro_batches);
	for (int i = 0; i < io->tp->n; i++)
		if (io->tp->ranks[i] == rt->groups.leader)
			c.root = i;
	rc = run_schedule(&c, r->micro_batches, warm, loss_sum);
	if (rc == HEXI_OK)
		rc = io->comm->ops->flush(io->comm);
	times->pp_wait_s = c.wait_s;
	return rc;
}
