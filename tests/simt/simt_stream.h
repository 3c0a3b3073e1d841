/*
 * simt_stream.h (tests/simt) - what runtime.c offers beside the CUDA API:
 * device-memory checks for the kernels (simt.h) and the stream queues that
 * the kernels (simt.h) and the NCCL emulation (nccl_mpi.c) put work on.
 */
#ifndef SIMT_STREAM_H
#define SIMT_STREAM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kernel pointer arguments must be device memory. */
int simt_is_device(const void *p);
/* 1 when [p, p + n) lies inside one device allocation; else 0 and a
 * "simt:" report naming what. */
int simt_dev_range(const void *p, size_t n, const char *what);
void simt_launch_failed(void);
void simt_check_guards(const char *kernel);
/* Queue run(arg) on a stream (at once unless SIMT_STREAMS=deferred), then
 * drop(arg); -1 for no such stream. */
int simt_enqueue(const void *stream, void (*run)(void *),
		 void (*drop)(void *), void *arg);
/* simt_set_streams("immediate" or "deferred"): 0 and a report otherwise. */
int simt_set_streams(const char *mode);
/* 1 when stream work waits until the host waits (SIMT_STREAMS=deferred). */
int simt_streams_deferred(void);
/* A communication: poll(arg) starts it at its first call and says 1 once
 * it is complete, then drop(arg).  Deferred streams only: it cannot
 * complete at its call, since its peers have not started theirs.
 * Communications progress on their own (runtime.c's progress()). */
int simt_enqueue_poll(const void *stream, int (*poll)(void *),
		      void (*drop)(void *), void *arg);

/* on 1: NCCL is still enqueuing on the stream (an ncclInProgress not yet
 * awaited): any work queued on it, a record of an event on it, a query or
 * a synchronisation is reported ("simt:"); on 0: released. */
void simt_stream_hold(const void *stream, int on);
/* How many "simt:" reports the device side has printed so far. */
int simt_reports(void);

#ifdef __cplusplus
}
#endif

#endif
