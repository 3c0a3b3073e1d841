/*
 * rt_pipe.h - internal: the 1F1B pipeline schedule of one stage
 * (pipeline.c).  The stage's model is reached through a small callback
 * table so the schedule does not depend on how the model stores its
 * activations (the trainer binds it to rt_model).
 */
#ifndef HEXI_RT_PIPE_H
#define HEXI_RT_PIPE_H

#include "rt_dist.h"

typedef struct rt_stage_cb {
	void *arg;
	/* Forward micro-batch mb in activation slot `slot`.  act_in
	 * (mbs,T,C) is NULL on the first stage (the callback reads tokens);
	 * act_out (mbs,T,C) is NULL on the last stage, where *loss_sum gets
	 * the sum of the token losses of the micro-batch.  act_out must be
	 * complete when the callback returns (a GPU model synchronises). */
	hexi_rc (*forward)(void *arg, int mb, int slot, const void *act_in,
			   void *act_out, double *loss_sum);
	/* Backward of micro-batch mb in slot: dact_out (mbs,T,C) NULL on the
	 * last stage; dact_in (mbs,T,C) NULL on the first stage, else SET
	 * (every element written) and complete on return. */
	hexi_rc (*backward)(void *arg, int mb, int slot, const void *dact_out,
			    void *dact_in);
} rt_stage_cb;

/* Where the activations travel: host buffers over the host communicator
 * (CPU path), or device buffers over the NCCL one (GPU path). */
typedef struct rt_pipe_io {
	rt_comm *comm;	/* point to point with the neighbouring leaders */
	rt_group *tp;	/* my stage's TP group on comm (leader broadcasts) */
	void *in, *out; /* [bytes] each: received / produced */
	size_t bytes;	/* one activation (mbs,T,C) */
} rt_pipe_io;

typedef struct rt_pipe_times {
	double pp_wait_s; /* receiving from neighbours + TP broadcast */
} rt_pipe_times;

/* Activation slots a stage needs for the 1F1B schedule. */
int rt_pipe_slots(int nstages, int stage, int micro_batches);

/* Run the pipeline's micro-batches of one step on this rank (collective
 * over the pipeline).  *loss_sum: sum of token losses of the pipeline's
 * samples on the last stage, 0 elsewhere. */
hexi_rc rt_pipe_run(hexi_rt *rt, const rt_pipe_io *io, const rt_stage_cb *cb,
		    double *loss_sum, rt_pipe_times *times);

#endif /* HEXI_RT_PIPE_H */
