/*
 * runtime.c (tests/simt) - the CUDA runtime and cuBLAS calls of
 * runtime/cuda on host memory.  Device memory is malloc'd with GUARD bytes
 * of 0xff on both sides and its contents start as 0xff too (a NaN in fp32
 * and bf16: what a kernel reads before anyone wrote shows up in its
 * result); every allocation is registered, so copies, memsets and kernel
 * arguments are checked to be device memory of the right extent, and the
 * guards are checked after every kernel (a write past either end is
 * reported with the kernel's name).  Streams: by default every call
 * completes before it returns (SIMT_STREAMS=immediate).  With
 * SIMT_STREAMS=deferred (or simt_set_streams) kernels, GEMMs, memsets and
 * device copies wait in their stream's queue, as on a GPU, until the host
 * synchronises (cudaStreamSynchronize, cudaDeviceSynchronize, cudaFree, a
 * device-to-host copy on that stream), so a host read that skips the
 * synchronisation reads stale memory, and a stream that uses another's
 * results without an event wait runs before them.  Diagnostics go to
 * stderr, prefixed "simt:"; tests/simt/simt.sh fails on any.
 */
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cublas_v2.h"
#include "hexi_bf16.h"
#include "simt_asan.h"
#include "simt_stream.h"
#include "cuda_runtime_api.h"

#define GUARD 64

/* Under AddressSanitizer the guards are poisoned instead of checked after
 * each kernel: a read or write into them is then reported at once, with
 * the kernel's stack. */
#ifdef SIMT_ASAN
#include <sanitizer/asan_interface.h>
#define guard_poison(p, n)   ASAN_POISON_MEMORY_REGION(p, n)
#define guard_unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define guard_poison(p, n)   ((void)(p), (void)(n))
#define guard_unpoison(p, n) ((void)(p), (void)(n))
#endif

typedef struct block {
	unsigned char *base; /* GUARD, then size bytes, then GUARD */
	size_t size;
	struct block *next;
} block;

static block *blocks;
static cudaError_t last_error;
/* The CUDA runtime's per-thread "last error" also keeps what an API call
 * returned that was not cudaSuccess, cudaErrorNotReady of a query
 * included, until cudaGetLastError reads it: a kernel launch checked with
 * cudaGetLastError after a not-ready query fails (PyTorch clears it after
 * each such query).  Modelled here, so a caller that does not clear it
 * fails on the emulation as on a GPU. */
static cudaError_t api_error;

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int nreports; /* simt_reports() */

static void report(const char *fmt, ...)
{
	va_list ap;

	nreports++;
	fputs("simt: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static block *find(const void *p)
{
	const unsigned char *c = p;

	for (block *b = blocks; b != NULL; b = b->next)
		if (c >= b->base + GUARD && c < b->base + GUARD + b->size)
			return b;
	return NULL;
}

int simt_is_device(const void *p)
{
	return find(p) != NULL;
}

/* [p, p + n) inside one device allocation. */
static int dev_range(const void *p, size_t n, const char *what)
{
	block *b = find(p);

	if (b == NULL) {
		report("%p (%zu bytes): not device memory (%s)", p, n, what);
		return 0;
	}
	if ((size_t)((const unsigned char *)p - (b->base + GUARD)) + n >
	    b->size) {
		report("%p + %zu bytes: past the end of its allocation (%s)", p,
		       n, what);
		return 0;
	}
	return 1;
}

int simt_dev_range(const void *p, size_t n, const char *what)
{
	return dev_range(p, n, what);
}

static int host_range(const void *p, size_t n, const char *what)
{
	if (n > 0 && find(p) != NULL) {
		report("%p (%zu bytes): device memory where host memory is "
		       "expected (%s)",
		       p, n, what);
		return 0;
	}
	return 1;
}

void simt_launch_failed(void)
{
	last_error = cudaErrorLaunchFailure;
}

void simt_check_guards(const char *kernel)
{
#ifdef SIMT_ASAN
	(void)kernel; /* the guards are poisoned: ASan has reported already */
#else
	for (block *b = blocks; b != NULL; b = b->next)
		for (size_t i = 0; i < GUARD; i++)
			if (b->base[i] != 0xff ||
			    b->base[GUARD + b->size + i] != 0xff) {
				fprintf(stderr,
					"simt: kernel %s wrote %s the %zu-byte "
					"allocation at %p\n",
					kernel,
					b->base[i] != 0xff ? "before" : "past",
					b->size, (void *)(b->base + GUARD));
				last_error = cudaErrorLaunchFailure;
				memset(b->base, 0xff, GUARD);
				memset(b->base + GUARD + b->size, 0xff, GUARD);
				break;
			}
#endif
}

const char *cudaGetErrorName(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return "cudaSuccess";
	case cudaErrorInvalidValue:
		return "cudaErrorInvalidValue";
	case cudaErrorMemoryAllocation:
		return "cudaErrorMemoryAllocation";
	case cudaErrorInvalidConfiguration:
		return "cudaErrorInvalidConfiguration";
	case cudaErrorNoDevice:
		return "cudaErrorNoDevice";
	case cudaErrorInvalidDevice:
		return "cudaErrorInvalidDevice";
	case cudaErrorNotReady:
		return "cudaErrorNotReady";
	case cudaErrorLaunchFailure:
		return "cudaErrorLaunchFailure";
	}
	return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return "no error";
	case cudaErrorInvalidValue:
		return "invalid argument";
	case cudaErrorMemoryAllocation:
		return "out of memory";
	case cudaErrorInvalidConfiguration:
		return "invalid configuration argument";
	case cudaErrorNoDevice:
		return "no CUDA-capable device is detected";
	case cudaErrorInvalidDevice:
		return "invalid device ordinal";
	case cudaErrorNotReady:
		return "device not ready";
	case cudaErrorLaunchFailure:
		return "unspecified launch failure (see the simt: line)";
	}
	return "unknown error";
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error != cudaSuccess ? last_error : api_error;

	last_error = cudaSuccess;
	api_error = cudaSuccess;
	return e;
}

/* $SIMT_DEVICES (1..16, default 1): how many devices a process sees, so
 * ranks of one node under mpirun each pick their own (nccl_mpi.c); each
 * process is its own emulation whatever index it picks. */
static int ndevices(void)
{
	const char *s = getenv("SIMT_DEVICES");
	int n = s != NULL ? atoi(s) : 1;

	if (n < 1 || n > 16) {
		report("SIMT_DEVICES='%.16s': want 1..16; using 1", s);
		n = 1;
	}
	return n;
}

cudaError_t cudaGetDeviceCount(int *n)
{
	*n = ndevices();
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
	return d >= 0 && d < ndevices() ? cudaSuccess : cudaErrorInvalidDevice;
}

/* $HEXI_SIMT_CC (e.g. 80) sets the compute capability; 90 by default. */
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
	const char *cc = getenv("HEXI_SIMT_CC");
	int v = cc != NULL ? atoi(cc) : 90;

	char uuid[17] = "hexiscale-simt00";

	if (d < 0 || d >= ndevices())
		return cudaErrorInvalidDevice;
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "SIMT emulation on the CPU");
	uuid[14] = (char)('0' + d / 10);
	uuid[15] = (char)('0' + d % 10);
	memcpy(p->uuid.bytes, uuid, 16);
	p->totalGlobalMem = (size_t)1 << 32;
	p->multiProcessorCount = 1;
	p->major = v / 10;
	p->minor = v % 10;
	return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
	*least = 0;
	*greatest = -5;
	return cudaSuccess;
}

/* ---- streams and events ------------------------------------------------- */

/*
 * A stream is a queue of operations.  In immediate mode each runs as it is
 * enqueued.  In deferred mode it runs when the host waits for it: the
 * stream is drained up to that point, and an event wait at the head of a
 * queue first drains the stream the event was recorded on, up to the
 * record; nothing else orders two streams.  The legacy stream (NULL,
 * cudaStreamLegacy) is ordered with the blocking streams, as in CUDA, not
 * with those created cudaStreamNonBlocking, which runtime/cuda uses.
 */
typedef struct sstream sstream;
typedef struct op {
	void (*run)(
	    void *); /* NULL (and no poll): wait until on->done >= seq */
	int (*poll)(void *); /* a communication: 1 once complete (simt_enqueue_
				poll); it starts at its first poll */
	void (*drop)(void *);
	void *arg;
	sstream *on;
	unsigned long seq;
	struct op *next;
} op;

struct sstream {
	op *head, **tail;
	unsigned long issued, done; /* operations enqueued, run */
	int live, blocking;
	int busy;  /* its head is being run: progress() leaves it alone */
	int polls; /* communications in its queue */
	int held;  /* NCCL is still enqueuing on it (simt_stream_hold) */
};

typedef struct sevent {
	sstream *on; /* NULL until recorded */
	unsigned long seq;
	int live;
} sevent;

#define NSTREAMS 16
#define NEVENTS	 1024
static sstream streams[NSTREAMS]; /* [0]: the legacy stream */
static sevent events[NEVENTS];
static int stream_mode = -1; /* -1 unread, 0 immediate, 1 deferred, 2 bad */

int simt_set_streams(const char *mode)
{
	if (mode == NULL || strcmp(mode, "immediate") == 0)
		stream_mode = 0;
	else if (strcmp(mode, "deferred") == 0)
		stream_mode = 1;
	else {
		report("SIMT_STREAMS='%s' is not a mode (immediate, deferred)",
		       mode);
		stream_mode = 2;
		return 0;
	}
	return 1;
}

static int deferred(void)
{
	if (stream_mode < 0) {
		const char *m = getenv("SIMT_STREAMS");

		simt_set_streams(m);
		if (stream_mode == 1)
			fprintf(stderr, "# simt: streams deferred until the "
					"host waits\n");
	}
	return stream_mode == 1;
}

static sstream *get_stream(cudaStream_t s)
{
	sstream *st = (sstream *)s;

	if (s == NULL || s == cudaStreamLegacy)
		st = &streams[0];
	else if (st < streams + 1 || st >= streams + NSTREAMS ||
		 ((char *)st - (char *)streams) % sizeof(*st) != 0 || !st->live)
		return NULL;
	if (st->tail == NULL)
		st->tail = &st->head, st->live = 1, st->blocking = 1;
	return st;
}

/* Work on a stream whose NCCL enqueue has not settled (ncclInProgress not
 * yet awaited): on a GPU it would run before the collective, or a query
 * would see the stream idle while the collective never ran. */
static int held(const sstream *st, const char *what)
{
	if (st == NULL || !st->held)
		return 0;
	report("stream %p: %s while NCCL is still enqueuing on it "
	       "(ncclInProgress not awaited with ncclCommGetAsyncError)",
	       (const void *)st, what);
	return 1;
}

int simt_reports(void)
{
	return nreports;
}

void simt_stream_hold(const void *s, int on)
{
	sstream *st = get_stream((cudaStream_t)s);

	if (st != NULL)
		st->held = on;
}

/* Remove st's head after it ran. */
static void pop(sstream *st)
{
	op *o = st->head;

	if (o->drop != NULL)
		o->drop(o->arg);
	if (o->poll != NULL)
		st->polls--;
	st->head = o->next;
	if (st->head == NULL)
		st->tail = &st->head;
	st->done++;
	free(o);
}

static void progress(void);

/*
 * Run st's operations until done >= seq.  A communication at the head is
 * polled until complete; meanwhile every other stream's communications
 * progress (progress()), as a GPU's streams run on their own: a peer
 * waiting for one of them is never held up by this host's wait.
 */
static void advance(sstream *st, unsigned long seq)
{
	while (st->done < seq) {
		op *o = st->head;

		st->busy = 1;
		if (o->poll != NULL) {
			while (!o->poll(o->arg)) {
				progress();
				sched_yield();
			}
		} else if (o->run == NULL)
			advance(o->on, o->seq);
		else
			o->run(o->arg);
		st->busy = 0;
		pop(st);
	}
}

/*
 * The same without blocking: stop at a communication that is not complete
 * (after polling it once, which starts it), or at a wait for another
 * stream that stops so.  1 once done >= seq.  Kernels and copies met on
 * the way run: the communication behind them needs their results.
 */
static int try_advance(sstream *st, unsigned long seq)
{
	while (st->done < seq) {
		op *o = st->head;
		int ok = 1;

		if (st->busy)
			return 0; /* the host is inside it (advance above) */
		st->busy = 1;
		if (o->poll != NULL)
			ok = o->poll(o->arg);
		else if (o->run == NULL)
			ok = try_advance(o->on, o->seq);
		else
			o->run(o->arg);
		st->busy = 0;
		if (!ok)
			return 0;
		pop(st);
	}
	return 1;
}

/*
 * Communications move on their own: every stream with one queued runs as
 * far as it can without blocking (try_advance), including the kernels
 * before it.  Streams with no communication queued are left alone, so a
 * host read that skips its synchronisation still reads stale memory.
 */
static void progress(void)
{
	for (int i = 1; i < NSTREAMS; i++)
		if (streams[i].live && streams[i].polls > 0 && !streams[i].busy)
			try_advance(&streams[i], streams[i].issued);
}

static void push(sstream *st, void (*run)(void *), void (*drop)(void *),
		 void *arg, sstream *on, unsigned long seq)
{
	op *o;

	held(st,
	     run != NULL ? "a kernel or copy queued" : "an event wait queued");
	o = calloc(1, sizeof(*o));
	if (o == NULL) { /* out of memory: run it now */
		if (run == NULL)
			advance(on, seq);
		else
			run(arg);
		if (drop != NULL)
			drop(arg);
		return;
	}
	o->run = run, o->drop = drop, o->arg = arg, o->on = on, o->seq = seq;
	o->poll = NULL;
	*st->tail = o;
	st->tail = &o->next;
	st->issued++;
}

/* Queue run(arg) on stream s (drop(arg) after it, or if it cannot run).
 * -1 for a stream that does not exist. */
int simt_enqueue(const void *s, void (*run)(void *), void (*drop)(void *),
		 void *arg)
{
	sstream *st = get_stream((cudaStream_t)s);
	int later = deferred();

	if (st == NULL || stream_mode == 2) {
		if (st == NULL)
			report("stream %p: not a stream", s);
		if (drop != NULL)
			drop(arg);
		return -1;
	}
	if (!later) {
		run(arg);
		if (drop != NULL)
			drop(arg);
		return 0;
	}
	/* the legacy stream waits for the blocking streams, and they for it */
	if (st == &streams[0]) {
		for (int i = 1; i < NSTREAMS; i++)
			if (streams[i].live && streams[i].blocking &&
			    streams[i].issued > streams[i].done)
				push(st, NULL, NULL, NULL, &streams[i],
				     streams[i].issued);
	} else if (st->blocking && streams[0].issued > streams[0].done)
		push(st, NULL, NULL, NULL, &streams[0], streams[0].issued);
	push(st, run, drop, arg, NULL, 0);
	return 0;
}

int simt_streams_deferred(void)
{
	return deferred();
}

/* Queue a communication on stream s: poll(arg) starts it at its first
 * call, and says 1 once it is complete; drop(arg) after.  Deferred streams
 * only (a communication cannot complete at its call: its peers have not
 * started theirs); -1 otherwise, or for a stream that does not exist. */
int simt_enqueue_poll(const void *s, int (*poll)(void *), void (*drop)(void *),
		      void *arg)
{
	sstream *st = get_stream((cudaStream_t)s);
	op *o;

	if (st == NULL || !deferred()) {
		report(st == NULL ? "stream %p: not a stream"
				  : "stream %p: a communication needs "
				    "SIMT_STREAMS=deferred",
		       s);
		if (drop != NULL)
			drop(arg);
		return -1;
	}
	held(st, "another NCCL operation queued");
	if (st == &streams[0]) {
		report("a communication on the legacy stream: not supported");
		if (drop != NULL)
			drop(arg);
		return -1;
	}
	if (st->blocking && streams[0].issued > streams[0].done)
		push(st, NULL, NULL, NULL, &streams[0], streams[0].issued);
	if ((o = calloc(1, sizeof(*o))) == NULL) {
		report("no memory to queue a communication");
		if (drop != NULL)
			drop(arg);
		return -1;
	}
	o->poll = poll, o->drop = drop, o->arg = arg;
	*st->tail = o;
	st->tail = &o->next;
	st->issued++;
	st->polls++;
	/* it starts at once when nothing is queued before it */
	progress();
	return 0;
}

/* The error of what ran, if any (execution errors surface at a wait). */
static cudaError_t wait_result(void)
{
	cudaError_t e = last_error;

	last_error = cudaSuccess;
	return e;
}

static void drain_all(void)
{
	for (int i = 0; i < NSTREAMS; i++)
		if (streams[i].tail != NULL)
			advance(&streams[i], streams[i].issued);
}

cudaError_t cudaDeviceSynchronize(void)
{
	drain_all();
	return wait_result();
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags,
					 int priority)
{
	(void)priority;
	get_stream(NULL); /* the legacy stream exists first */
	for (int i = 1; i < NSTREAMS; i++)
		if (!streams[i].live) {
			memset(&streams[i], 0, sizeof(streams[i]));
			streams[i].tail = &streams[i].head;
			streams[i].live = 1;
			streams[i].blocking = !(flags & cudaStreamNonBlocking);
			*s = (cudaStream_t)&streams[i];
			return cudaSuccess;
		}
	return cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	sstream *st = get_stream(s);

	if (st == NULL || st == &streams[0])
		return cudaErrorInvalidValue;
	advance(st, st->issued); /* its work still completes */
	st->live = 0;
	return cudaSuccess;
}

/* cudaSuccess when what was queued on st up to seq has run (cudaStream-
 * Query: all of it; cudaEventQuery: what the event was recorded behind).
 * Polling moves every stream's communications along (progress()); st then
 * runs up to seq unless a communication in it is still in flight
 * (cudaErrorNotReady, as on a GPU; the host polls again).  A stream of
 * kernels alone completes at the query: a GPU would finish it, and only
 * later. */
static cudaError_t query_to(sstream *st, unsigned long seq)
{
	if (st == NULL || !deferred())
		return wait_result();
	progress();
	if (st->done < seq && st->polls > 0) {
		api_error =
		    cudaErrorNotReady; /* as the CUDA runtime keeps it */
		return cudaErrorNotReady;
	}
	if (st->done < seq)
		advance(st, seq);
	return wait_result();
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
	sstream *st = get_stream(s);

	if (st == NULL)
		return cudaErrorInvalidValue;
	held(st, "cudaStreamQuery");
	return query_to(st, st->issued);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
	return cudaStreamCreateWithPriority(s, flags, 0);
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	sstream *st = get_stream(s);

	if (st == NULL)
		return cudaErrorInvalidValue;
	held(st, "cudaStreamSynchronize");
	advance(st, st->issued);
	return wait_result();
}

static sevent *get_event(cudaEvent_t e)
{
	sevent *ev = (sevent *)e;

	if (ev < events || ev >= events + NEVENTS ||
	    ((char *)ev - (char *)events) % sizeof(*ev) != 0 || !ev->live)
		return NULL;
	return ev;
}

/* SIMT_IGNORE_EVENT_WAITS=1: cudaStreamWaitEvent orders nothing, as if
 * the code forgot it (the negative control of simt_nccl.sh: the run must
 * then differ from the CPU reference). */
static int ignore_waits(void)
{
	static int v = -1;

	if (v < 0) {
		const char *s = getenv("SIMT_IGNORE_EVENT_WAITS");

		v = s != NULL && strcmp(s, "1") == 0;
		if (v)
			fprintf(stderr, "# simt: cudaStreamWaitEvent ignored "
					"(SIMT_IGNORE_EVENT_WAITS=1)\n");
	}
	return v;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f)
{
	sstream *st = get_stream(s);
	sevent *ev = get_event(e);

	(void)f;
	if (st == NULL || ev == NULL)
		return cudaErrorInvalidValue;
	if (ev->on != NULL && ev->on != st && deferred() && !ignore_waits())
		push(st, NULL, NULL, NULL, ev->on, ev->seq);
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	for (int i = 0; i < NEVENTS; i++)
		if (!events[i].live) {
			memset(&events[i], 0, sizeof(events[i]));
			events[i].live = 1;
			*e = (cudaEvent_t)&events[i];
			return cudaSuccess;
		}
	return cudaErrorMemoryAllocation;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
	(void)flags;
	return cudaEventCreate(e);
}

/* The event completes when st has run what was enqueued before it. */
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	sstream *st = get_stream(s);
	sevent *ev = get_event(e);

	if (st == NULL || ev == NULL)
		return cudaErrorInvalidValue;
	held(st, "cudaEventRecord");
	ev->on = st;
	ev->seq = st->issued;
	return cudaSuccess;
}

/* cudaSuccess when what the event covers has run (never recorded: at
 * once). */
cudaError_t cudaEventQuery(cudaEvent_t e)
{
	sevent *ev = get_event(e);

	if (ev == NULL)
		return cudaErrorInvalidValue;
	return query_to(ev->on, ev->seq);
}

/* A wait already enqueued keeps its stream and position. */
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	sevent *ev = get_event(e);

	if (ev == NULL)
		return cudaErrorInvalidValue;
	ev->live = 0;
	return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
	block *b = malloc(sizeof(*b));

	*p = NULL;
	if (b == NULL || bytes > ((size_t)1 << 40) ||
	    (b->base = malloc(bytes + 2 * GUARD)) == NULL) {
		free(b);
		return cudaErrorMemoryAllocation;
	}
	memset(b->base, 0xff, bytes + 2 * GUARD);
	guard_poison(b->base, GUARD);
	guard_poison(b->base + GUARD + bytes, GUARD);
	b->size = bytes;
	b->next = blocks;
	blocks = b;
	*p = b->base + GUARD;
	return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
	if (p == NULL)
		return cudaSuccess;
	drain_all(); /* cudaFree waits for the device, as in CUDA */
	for (block **bp = &blocks; *bp != NULL; bp = &(*bp)->next)
		if ((*bp)->base + GUARD == p) {
			block *b = *bp;

			*bp = b->next;
			guard_unpoison(b->base, b->size + 2 * GUARD);
			free(b->base);
			free(b);
			return cudaSuccess;
		}
	report("cudaFree(%p): not the start of a device allocation", p);
	return cudaErrorInvalidValue;
}

typedef struct copy_op {
	void *dst;
	const void *src;
	size_t bytes;
	int v;		      /* memset: the byte */
	unsigned char data[]; /* host-to-device: the bytes, taken at the call */
} copy_op;

static void run_memset(void *a)
{
	copy_op *c = a;

	memset(c->dst, c->v, c->bytes);
}

static void run_copy(void *a)
{
	copy_op *c = a;

	memmove(c->dst, c->src != NULL ? c->src : c->data, c->bytes);
}

static cudaError_t enqueue_copy(cudaStream_t s, void (*run)(void *), copy_op *c)
{
	if (c == NULL)
		return cudaErrorMemoryAllocation;
	return simt_enqueue(s, run, free, c) == 0 ? cudaSuccess
						  : cudaErrorInvalidValue;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s)
{
	copy_op *c;

	if (bytes == 0)
		return cudaSuccess;
	if (!dev_range(p, bytes, "cudaMemset"))
		return cudaErrorInvalidValue;
	if ((c = calloc(1, sizeof(*c))) != NULL)
		c->dst = p, c->v = v, c->bytes = bytes;
	return enqueue_copy(s, run_memset, c);
}

cudaError_t cudaMemset(void *p, int v, size_t bytes)
{
	return cudaMemsetAsync(p, v, bytes, NULL);
}

/*
 * Host memory here is pageable (malloc), so CUDA's rules for it apply: a
 * host-to-device copy takes the bytes at the call (the host may reuse its
 * buffer at once) and lands in stream order; a device-to-host copy returns
 * once it is done, after what its stream enqueued before it (and nothing
 * of any other non-blocking stream).  Device-to-device copies are queued.
 */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
			    enum cudaMemcpyKind kind, cudaStream_t s)
{
	copy_op *c = NULL;
	cudaError_t e;
	int ok;

	if (bytes == 0)
		return cudaSuccess;
	switch (kind) {
	case cudaMemcpyHostToDevice:
		ok = dev_range(dst, bytes, "cudaMemcpy to device") &&
		     host_range(src, bytes, "cudaMemcpy from host");
		if (ok && (c = malloc(sizeof(*c) + bytes)) != NULL) {
			c->dst = dst, c->src = NULL, c->bytes = bytes;
			memcpy(c->data, src, bytes);
		}
		break;
	case cudaMemcpyDeviceToHost:
		ok = dev_range(src, bytes, "cudaMemcpy from device") &&
		     host_range(dst, bytes, "cudaMemcpy to host");
		goto by_pointer;
	case cudaMemcpyDeviceToDevice:
		ok = dev_range(src, bytes, "cudaMemcpy from device") &&
		     dev_range(dst, bytes, "cudaMemcpy to device");
	by_pointer:
		if (ok && (c = malloc(sizeof(*c))) != NULL)
			c->dst = dst, c->src = src, c->bytes = bytes;
		break;
	default:
		ok = 0;
		report("cudaMemcpy kind %d: not used by runtime/cuda",
		       (int)kind);
	}
	if (!ok)
		return cudaErrorInvalidValue;
	if ((e = enqueue_copy(s, run_copy, c)) != cudaSuccess)
		return e;
	if (kind == cudaMemcpyDeviceToHost) {
		sstream *st = get_stream(s);

		advance(st, st->issued);
	}
	return cudaSuccess;
}

/* On the legacy stream, and returns when it is done. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
		       enum cudaMemcpyKind kind)
{
	cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, NULL);

	if (e == cudaSuccess)
		advance(&streams[0], streams[0].issued);
	return e;
}

/* ---- cuBLAS ----------------------------------------------------------------
 */

static int blas_obj;
static cudaStream_t blas_stream; /* NULL: the legacy stream */

const char *cublasGetStatusName(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_SUCCESS:
		return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED:
		return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_ALLOC_FAILED:
		return "CUBLAS_STATUS_ALLOC_FAILED";
	case CUBLAS_STATUS_INVALID_VALUE:
		return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_NOT_SUPPORTED:
		return "CUBLAS_STATUS_NOT_SUPPORTED";
	}
	return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
	blas_stream = NULL;
	*h = (cublasHandle_t)&blas_obj;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
	return h == (cublasHandle_t)&blas_obj ? CUBLAS_STATUS_SUCCESS
					      : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
	if (h != (cublasHandle_t)&blas_obj)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (get_stream(s) == NULL)
		return CUBLAS_STATUS_INVALID_VALUE;
	blas_stream = s;
	return CUBLAS_STATUS_SUCCESS;
}

static float elem(const void *p, cudaDataType_t t, size_t i)
{
	return t == CUDA_R_16BF ? hexi_bf16_to_float(((const uint16_t *)p)[i])
				: ((const float *)p)[i];
}

static size_t esize(cudaDataType_t t)
{
	return t == CUDA_R_16BF ? 2 : 4;
}

/* Elements a column-major (rows x cols, ld) operand spans. */
static size_t span(int rows, int cols, int ld)
{
	return cols == 0 ? 0 : (size_t)ld * (cols - 1) + rows;
}

typedef struct gemm_op {
	cublasOperation_t ta, tb;
	int m, n, k;
	float al, be;
	const void *A;
	cudaDataType_t Atype;
	int lda;
	const void *B;
	int ldb;
	void *C;
	cudaDataType_t Ctype;
	int ldc;
} gemm_op;

/* C = al op(A) op(B) + be C, column-major, fp32 accumulation. */
static void run_gemm(void *arg)
{
	const gemm_op *g = arg;
	const void *A = g->A, *B = g->B;
	void *C = g->C;
	cudaDataType_t Atype = g->Atype, Btype = g->Atype, Ctype = g->Ctype;
	int lda = g->lda, ldb = g->ldb, ldc = g->ldc;
	float al = g->al, be = g->be;

	for (int j = 0; j < g->n; j++)
		for (int i = 0; i < g->m; i++) {
			float acc = 0.0f, r;
			size_t c = (size_t)j * ldc + i;

			for (int p = 0; p < g->k; p++) {
				size_t ai = g->ta == CUBLAS_OP_N
						? (size_t)p * lda + i
						: (size_t)i * lda + p;
				size_t bi = g->tb == CUBLAS_OP_N
						? (size_t)j * ldb + p
						: (size_t)p * ldb + j;
#ifdef SIMT_FMA
				/* cuBLAS accumulates with FMA (simt_fma.sh) */
				acc = fmaf(elem(A, Atype, ai),
					   elem(B, Btype, bi), acc);
#else
				acc += elem(A, Atype, ai) * elem(B, Btype, bi);
#endif
			}
			/* beta 0: C is not read (it may hold NaN) */
			r = al * acc +
			    (be != 0.0f ? be * elem(C, Ctype, c) : 0.0f);
			if (Ctype == CUDA_R_16BF)
				((uint16_t *)C)[c] = hexi_bf16_from_float(r);
			else
				((float *)C)[c] = r;
		}
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
			    cublasOperation_t tb, int m, int n, int k,
			    const void *alpha, const void *A,
			    cudaDataType_t Atype, int lda, const void *B,
			    cudaDataType_t Btype, int ldb, const void *beta,
			    void *C, cudaDataType_t Ctype, int ldc,
			    cublasComputeType_t ct, cublasGemmAlgo_t algo)
{
	int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
	int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
	gemm_op *g;

	(void)algo;
	if (h != (cublasHandle_t)&blas_obj)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	/* cuBLAS's own checks */
	if (m < 0 || n < 0 || k < 0 ||
	    (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) ||
	    (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) ||
	    lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) ||
	    ldc < (m > 1 ? m : 1))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (ct != CUBLAS_COMPUTE_32F || Atype != Btype ||
	    (Atype != CUDA_R_32F && Atype != CUDA_R_16BF) ||
	    (Ctype != CUDA_R_32F && Ctype != Atype))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	if ((k > 0 && (!dev_range(A, span(ar, ac, lda) * esize(Atype),
				  "cublasGemmEx A") ||
		       !dev_range(B, span(br, bc, ldb) * esize(Btype),
				  "cublasGemmEx B"))) ||
	    !dev_range(C, span(m, n, ldc) * esize(Ctype), "cublasGemmEx C"))
		return CUBLAS_STATUS_INVALID_VALUE;
	if ((g = malloc(sizeof(*g))) == NULL)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*g = (gemm_op){ta,    tb,  m, n,   k, 0,     0,	 A,
		       Atype, lda, B, ldb, C, Ctype, ldc};
	/* host scalars are read at the call, as cuBLAS's host pointer mode */
	memcpy(&g->al, alpha, sizeof(g->al));
	memcpy(&g->be, beta, sizeof(g->be));
	if (simt_enqueue(blas_stream, run_gemm, free, g) != 0)
		return CUBLAS_STATUS_INVALID_VALUE;
	return CUBLAS_STATUS_SUCCESS;
}
