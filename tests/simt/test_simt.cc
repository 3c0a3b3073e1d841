/*
 * test_simt.cc - the SIMT emulation itself (tests/simt/simt.h): warp and
 * block reductions of rt_cuda_int.cuh give exact sums for every block
 * shape the kernels use, shared memory is one per block, and what a GPU
 * would not forgive is refused: a shuffle in a divergent branch, a
 * barrier half a warp never reaches, a write past a cudaMalloc block, a
 * host pointer as kernel argument, a launch over CUDA's limits.  Also
 * cuBLAS's argument checks, bf16 rounding, the math functions' error,
 * the deferred streams (SIMT_STREAMS=deferred: a missing wait reads stale
 * memory), and the scheduling orders
 * (set_order): a race within a block, between warps and between blocks
 * shows in reverse and random order, a race-free kernel is exact in all.  The "simt:" lines these
 * refusals print on stderr are expected here.
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>

#include "cublas_v2.h"
#include "rt_cuda_int.cuh"
#include "tap.h"

#include "simt_asan.h"

/* out[block] = sum over the block of (t + 1) and max over t, via the
 * reductions the kernels use. */
__global__ void sum_kernel(float *sum, float *mx)
{
	__shared__ float sh[32];
	float v = (float)(threadIdx.x + 1);
	float s = block_sum(v, sh);
	float m = block_max(v, sh);

	if (threadIdx.x == 0) {
		sum[blockIdx.x] = s;
		mx[blockIdx.x] = m;
	}
}

/* *p = v (one thread), and *dst = *src: for the stream tests. */
__global__ void set_kernel(int *p, int v)
{
	if (threadIdx.x == 0)
		*p = v;
}

__global__ void copy_kernel(int *dst, const int *src)
{
	if (threadIdx.x == 0)
		*dst = *src;
}

/* Each thread reads its neighbour's value through shared memory. */
__global__ void rotate_kernel(int *out)
{
	__shared__ int sh[1024];
	unsigned n = blockDim.x, t = threadIdx.x;

	sh[t] = (int)(blockIdx.x * 10000 + t);
	__syncthreads();
	out[blockIdx.x * n + t] = sh[(t + 1) % n];
}

/* Reads shared memory no thread of this block wrote. */
__global__ void read_unwritten_shared(float *out)
{
	__shared__ float sh[64];

	out[threadIdx.x] = sh[threadIdx.x];
}

__global__ void half_warp_shuffle(float *out)
{
	float v = 1.0f;

	if ((threadIdx.x & 31) < 16)
		v = warp_sum(v);
	out[threadIdx.x] = v;
}

__global__ void split_barrier(float *out)
{
	float v = 1.0f;

	if ((threadIdx.x & 31) < 16)
		__syncthreads();
	else
		v = warp_sum(v);
	out[threadIdx.x] = v;
}

__global__ void write_one_past(float *p, int n)
{
	if (threadIdx.x == 0)
		p[n] = 1.0f;
}

__global__ void read_one_past(float *out, const float *p, int n)
{
	if (threadIdx.x == 0)
		out[0] = p[n];
}

__global__ void fill(float *p, float v)
{
	p[threadIdx.x] = v;
}

/* A race: each thread reads its left neighbour's shared slot with no
 * barrier between the write and the read. */
__global__ void race_left(int *out)
{
	__shared__ int sh[256];
	unsigned t = threadIdx.x;

	sh[t] = (int)t + 1;
	out[t] = t > 0 ? sh[t - 1] : 0;
}

/* A race between warps: the per-warp sums are read, then overwritten by
 * the next reduction with no __syncthreads between (block_sum without
 * its first barrier).  In lockstep every warp reads before any writes. */
__global__ void race_warp_ahead(float *out)
{
	__shared__ float sh[32];
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int nw = blockDim.x >> 5;
	float v = warp_sum(1.0f), a;

	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	a = warp_sum(lane < nw ? sh[lane] : 0.0f);
	if (lane == 0)
		sh[warp] = 2.0f * v;
	__syncthreads();
	out[threadIdx.x] = a;
}

/* A race between blocks: block b reads what block b - 1 wrote. */
__global__ void race_chain(int *p)
{
	if (threadIdx.x == 0)
		p[blockIdx.x] = blockIdx.x > 0 ? p[blockIdx.x - 1] + 1 : 1;
}

/* seq[linear block index] = the rank in which the block ran. */
__global__ void block_rank(unsigned *seq, unsigned *counter)
{
	unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);

	if (threadIdx.x == 0)
		seq[b] = atomicAdd(counter, 1u);
}

static float *dev_alloc(size_t n)
{
	void *p = nullptr;

	if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess)
		tap_bail("cudaMalloc");
	return static_cast<float *>(p);
}

static void test_reductions(void)
{
	static const unsigned blocks[] = {32, 64, 96, 128, 256, 512, 1024};

	for (unsigned b : blocks) {
		float *s = dev_alloc(3), *m = dev_alloc(3);

		SIMT_LAUNCH(sum_kernel, 3, b, 0, nullptr)(s, m);
		is_int(cudaGetLastError(), cudaSuccess, "block_sum/max, %u threads: launch", b);
		ok(s[0] == b * (b + 1) / 2.0f && s[2] == s[0],
		   "block_sum of 1..%u = %g (every block)", b, (double)s[0]);
		ok(m[1] == (float)b, "block_max = %u", b);
		cudaFree(s), cudaFree(m);
	}
}

static void test_shared(void)
{
	const unsigned n = 256, g = 2;
	int *out = nullptr;
	int bad = 0;

	cudaMalloc((void **)&out, n * g * sizeof(int));
	SIMT_LAUNCH(rotate_kernel, g, n, 0, nullptr)(out);
	is_int(cudaGetLastError(), cudaSuccess, "shared memory kernel: launch");
	for (unsigned b = 0; b < g; b++)
		for (unsigned t = 0; t < n; t++)
			bad += out[b * n + t] != (int)(b * 10000 + (t + 1) % n);
	is_int(bad, 0, "every thread sees its neighbour's write after __syncthreads");
	{
		float *o = dev_alloc(64);

		SIMT_LAUNCH(read_unwritten_shared, 2, 64, 0, nullptr)(o);
		ok(std::isnan(o[0]) && std::isnan(o[63]),
		   "shared memory starts every block as NaN (0xff bytes)");
		cudaFree(o);
	}
	cudaFree(out);
}

static void test_refusals(void)
{
	float *p = dev_alloc(64), host[64];

	std::fprintf(stderr, "test_simt: the simt: lines below are expected\n");
	SIMT_LAUNCH(half_warp_shuffle, 1, 64, 0, nullptr)(p);
	is_int(cudaGetLastError(), cudaErrorLaunchFailure,
	       "a shuffle in a branch half the warp skips is refused");
	SIMT_LAUNCH(split_barrier, 1, 64, 0, nullptr)(p);
	is_int(cudaGetLastError(), cudaErrorLaunchFailure,
	       "__syncthreads and a shuffle in one warp: deadlock reported");
#ifdef SIMT_ASAN
	/* the guards are poisoned: ASan ends the process at the access */
	for (int write = 0; write <= 1; write++) {
		pid_t pid = fork();
		int st = 0;

		if (pid == 0) {
			if (write)
				SIMT_LAUNCH(write_one_past, 1, 32, 0, nullptr)(p, 64);
			else
				SIMT_LAUNCH(read_one_past, 1, 32, 0, nullptr)(p, p, 64);
			_exit(0);
		}
		ok(pid > 0 && waitpid(pid, &st, 0) == pid &&
			   !(WIFEXITED(st) && WEXITSTATUS(st) == 0),
		   "ASan: a %s one past a cudaMalloc block ends the kernel's "
		   "process (status %#x)",
		   write ? "write" : "read", st);
	}
#else
	SIMT_LAUNCH(write_one_past, 1, 32, 0, nullptr)(p, 64);
	is_int(cudaGetLastError(), cudaErrorLaunchFailure,
	       "a write one past a cudaMalloc block is caught");
	SIMT_LAUNCH(fill, 1, 32, 0, nullptr)(p, 2.0f);
	is_int(cudaGetLastError(), cudaSuccess, "the guard is restored after a report");
#endif
	SIMT_LAUNCH(fill, 1, 32, 0, nullptr)(host, 2.0f);
	is_int(cudaGetLastError(), cudaErrorLaunchFailure,
	       "a host pointer as kernel argument is refused");
	SIMT_LAUNCH(fill, 1, 1025, 0, nullptr)(p, 1.0f);
	is_int(cudaGetLastError(), cudaErrorLaunchFailure, "1025 threads per block refused");
	SIMT_LAUNCH(fill, dim3(1, 65536), 32, 0, nullptr)(p, 1.0f);
	is_int(cudaGetLastError(), cudaErrorLaunchFailure, "grid.y 65536 refused");
	is_int(cudaGetLastError(), cudaSuccess, "cudaGetLastError clears the error");
	cudaFree(p);
	p = dev_alloc(4);
	ok(std::isnan(p[0]) && std::isnan(p[3]),
	   "fresh cudaMalloc memory reads as NaN (0xff bytes)");
	cudaFree(p);
	is_int(cudaMemcpy(host, host + 1, 4, cudaMemcpyHostToDevice),
	       cudaErrorInvalidValue, "cudaMemcpy to a host pointer as device refused");
}

static void test_blas(void)
{
	cublasHandle_t h;
	float *A = dev_alloc(6), *B = dev_alloc(6), *C = dev_alloc(4);
	float one = 1.0f, zero = 0.0f;

	cublasCreate(&h);
	for (int i = 0; i < 6; i++)
		A[i] = (float)(i + 1), B[i] = (float)(i + 1);
	/* column-major A 2x3 = [1 3 5; 2 4 6], B^T with B 2x3: C = A B^T */
	is_int(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, 2, 2, 3, &one, A,
			    CUDA_R_32F, 2, B, CUDA_R_32F, 2, &zero, C,
			    CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
			    CUBLAS_GEMM_DEFAULT),
	       CUBLAS_STATUS_SUCCESS, "cublasGemmEx N,T");
	ok(C[0] == 35 && C[1] == 44 && C[2] == 44 && C[3] == 56,
	   "A A^T = [35 44; 44 56] (beta 0 ignores C's NaN): %g %g %g %g",
	   (double)C[0], (double)C[1], (double)C[2], (double)C[3]);
	is_int(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A,
			    CUDA_R_32F, 1, B, CUDA_R_32F, 3, &zero, C,
			    CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
			    CUBLAS_GEMM_DEFAULT),
	       CUBLAS_STATUS_INVALID_VALUE, "lda < m refused as cuBLAS does");
	cublasDestroy(h);
	cudaFree(A), cudaFree(B), cudaFree(C);
}

static void test_bf16(void)
{
	ok(__bfloat162float(__float2bfloat16(1.00390625f)) == 1.0f,
	   "bf16: 1 + 2^-8 rounds to even (1)");
	ok(__bfloat162float(__float2bfloat16(1.01171875f)) == 1.015625f,
	   "bf16: 1 + 3*2^-8 rounds to even (1 + 2^-6)");
	ok(std::isnan(__bfloat162float(__float2bfloat16(NAN))), "bf16: NaN stays NaN");
}

/* How many float ulps r is from the correctly rounded exact value. */
static int ulps(float r, double exact)
{
	float c = (float)exact;
	int n = 0;

	while (r != c && n < 100) {
		c = std::nextafter(c, r);
		n++;
	}
	return n;
}

/* expf, logf and rsqrtf err as CUDA documents, no more, and do err. */
static void test_math_error(void)
{
	int worst_e = 0, worst_l = 0, worst_r = 0, off_e = 0;

	for (int i = 0; i < 4000; i++) {
		float x = -20.0f + i * 0.01f, y = 0.001f + i * 0.37f;
		int e = ulps(expf(x), std::exp((double)x));
		int l = ulps(logf(y), std::log((double)y));
		int r = ulps(rsqrtf(y), 1.0 / std::sqrt((double)y));

		worst_e = e > worst_e ? e : worst_e;
		worst_l = l > worst_l ? l : worst_l;
		worst_r = r > worst_r ? r : worst_r;
		off_e += e == 2;
	}
	is_int(worst_e, 2, "expf: at most 2 ulp from the exact value, as on a GPU");
	is_int(worst_l, 1, "logf: at most 1 ulp");
	is_int(worst_r, 2, "rsqrtf: at most 2 ulp");
	ok(off_e > 400, "expf: %d of 4000 results 2 ulp off", off_e);
	ok(expf(0.0f) == 1.0f && logf(1.0f) == 0.0f && rsqrtf(4.0f) == 0.5f &&
	   expf(-INFINITY) == 0.0f,
	   "exactly representable results are exact (expf(0), logf(1), rsqrtf(4), expf(-inf))");
	ok(expf(2.5f) == expf(2.5f), "the same argument, the same result");
}

/* set_order: a race shows in a result that depends on the order, and a
 * race-free kernel does not depend on it. */
static void test_order(void)
{
	static const char *const orders[] = {"forward", "reverse", "random:7"};
	int *out = nullptr, *chain = nullptr;
	float *warp_out = dev_alloc(256);
	unsigned *seq = nullptr, *counter = nullptr;

	cudaMalloc((void **)&out, 256 * sizeof(int));
	cudaMalloc((void **)&chain, 64 * sizeof(int));
	cudaMalloc((void **)&seq, 42 * sizeof(unsigned));
	cudaMalloc((void **)&counter, sizeof(unsigned));
	for (const char *o : orders) {
		int bad = 0, bad_chain = 0, bad_warp = 0, fwd = o[0] == 'f';
		unsigned seen[42] = {0}, in_order = 0, reversed = 0, perm = 1;

		ok(simt::set_order(o), "set_order(\"%s\")", o);
		SIMT_LAUNCH(race_left, 1, 256, 0, nullptr)(out);
		for (int t = 1; t < 256; t++)
			bad += out[t] != t;
		SIMT_LAUNCH(race_warp_ahead, 1, 256, 0, nullptr)(warp_out);
		for (int t = 0; t < 256; t++)
			bad_warp += warp_out[t] != 256.0f;
		cudaMemset(chain, 0xff, 64 * sizeof(int)); /* not yet written */
		SIMT_LAUNCH(race_chain, 64, 32, 0, nullptr)(chain);
		for (int b = 0; b < 64; b++)
			bad_chain += chain[b] != b + 1;
		if (fwd) {
			is_int(bad, 0, "forward: a left-neighbour race goes unseen");
			is_int(bad_chain, 0, "forward: a race between blocks goes unseen");
			is_int(bad_warp, 0, "forward: warps in lockstep, a race between warps goes unseen");
		} else {
			ok(bad > 0, "%s: the left-neighbour race shows (%d of 255 "
			   "threads read an unwritten slot)", o, bad);
			ok(bad_chain > 0, "%s: the race between blocks shows (%d of "
			   "64 blocks)", o, bad_chain);
			ok(bad_warp > 0, "%s: one warp runs ahead, the race between "
			   "warps shows (%d of 256 threads)", o, bad_warp);
		}
		*counter = 0;
		SIMT_LAUNCH(block_rank, dim3(7, 3, 2), 64, 0, nullptr)(seq, counter);
		for (unsigned b = 0; b < 42; b++) {
			perm &= seq[b] < 42 && !seen[seq[b]]++;
			in_order += seq[b] == b;
			reversed += seq[b] == 41 - b;
		}
		ok(perm && *counter == 42, "%s: each of the 7x3x2 blocks ran once", o);
		if (o[0] == 'r' && o[1] == 'e')
			is_int(reversed, 42, "reverse: blocks ran last to first");
		else if (fwd)
			is_int(in_order, 42, "forward: blocks ran first to last");
		else
			ok(in_order < 42 && reversed < 42, "random: blocks ran in "
			   "another order (%u in place)", in_order);
		test_reductions(); /* race-free: exact in every order */
		test_shared();
	}
	ok(!simt::set_order("sideways"), "set_order refuses an unknown order");
	ok(!simt::set_order("random:"), "set_order refuses an empty seed");
	ok(!simt::set_order("random:-3"), "set_order refuses a seed that is not a number");
	simt::set_order("forward");
	cudaFree(out), cudaFree(chain), cudaFree(seq), cudaFree(counter);
	cudaFree(warp_out);
}

/*
 * SIMT_STREAMS=deferred: work waits in its stream until the host waits, so
 * a missing synchronisation shows as a stale read.  Device memory is host
 * memory here, so the tests also look at it directly ("peek").
 */
static void test_streams(void)
{
	cudaStream_t a = nullptr, b = nullptr, blk = nullptr;
	cudaEvent_t e = nullptr;
	int *d = nullptr, *d2 = nullptr, *tmp = nullptr, h = 0;
	float *p = dev_alloc(64);

	ok(!simt::simt_set_streams("sideways"), "simt_set_streams refuses an unknown mode");
	ok(simt::simt_set_streams("deferred"), "simt_set_streams(\"deferred\")");
	cudaStreamCreateWithPriority(&a, cudaStreamNonBlocking, 0);
	cudaStreamCreateWithPriority(&b, cudaStreamNonBlocking, 0);
	cudaStreamCreateWithPriority(&blk, 0, 0);
	ok(a != nullptr && b != nullptr && blk != nullptr && a != b,
	   "three distinct streams");
	cudaMalloc((void **)&d, sizeof(int));
	cudaMalloc((void **)&d2, sizeof(int));

	/* a kernel on a non-blocking stream, read without and with a wait */
	SIMT_LAUNCH(set_kernel, 1, 32, 0, a)(d, 42);
	ok(*d != 42, "deferred: the kernel has not run at its launch (peek %d)", *d);
	cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost);
	ok(h != 42, "a cudaMemcpy on the legacy stream does not wait for a "
		    "non-blocking stream: stale %d", h);
	is_int(cudaStreamSynchronize(a), cudaSuccess, "cudaStreamSynchronize");
	cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost);
	is_int(h, 42, "after cudaStreamSynchronize the copy sees the result");

	/* a device-to-host copy on the kernel's own stream waits for it */
	SIMT_LAUNCH(set_kernel, 1, 32, 0, a)(d, 43);
	cudaMemcpyAsync(&h, d, sizeof(h), cudaMemcpyDeviceToHost, a);
	is_int(h, 43, "a device-to-host copy on the same stream sees the result");

	/* two streams: ordered only by an event */
	SIMT_LAUNCH(set_kernel, 1, 32, 0, a)(d, 7);
	SIMT_LAUNCH(copy_kernel, 1, 32, 0, b)(d2, d);
	cudaStreamSynchronize(b);
	ok(*d2 == 43, "without an event wait, stream b ran before a's write "
		      "(b read %d)", *d2);
	cudaStreamSynchronize(a);
	SIMT_LAUNCH(set_kernel, 1, 32, 0, a)(d, 8);
	cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
	cudaEventRecord(e, a);
	cudaStreamWaitEvent(b, e, 0);
	cudaEventDestroy(e); /* the wait keeps its place */
	SIMT_LAUNCH(copy_kernel, 1, 32, 0, b)(d2, d);
	cudaStreamSynchronize(b);
	is_int(*d2, 8, "with cudaEventRecord + cudaStreamWaitEvent, b reads a's write");

	/* a blocking stream is ordered with the legacy stream */
	SIMT_LAUNCH(set_kernel, 1, 32, 0, blk)(d, 9);
	cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost);
	is_int(h, 9, "a blocking stream's kernel runs before a later legacy copy");

	/* host-to-device copies take the bytes at the call */
	h = 5;
	cudaMemcpyAsync(d, &h, sizeof(h), cudaMemcpyHostToDevice, a);
	h = 6;
	cudaStreamSynchronize(a);
	is_int(*d, 5, "a host-to-device copy took the host bytes at the call");

	/* cudaFree waits for the device */
	SIMT_LAUNCH(set_kernel, 1, 32, 0, a)(d, 11);
	cudaMalloc((void **)&tmp, 4);
	cudaFree(tmp);
	is_int(*d, 11, "cudaFree waits for every stream");

	/* an execution error surfaces at the wait, a bad launch at once */
	SIMT_LAUNCH(half_warp_shuffle, 1, 64, 0, a)(p);
	is_int(cudaGetLastError(), cudaSuccess, "a faulting kernel: its launch succeeds");
	is_int(cudaStreamSynchronize(a), cudaErrorLaunchFailure,
	       "its fault is returned by cudaStreamSynchronize");
	SIMT_LAUNCH(set_kernel, 1, 1025, 0, a)(d, 1);
	is_int(cudaGetLastError(), cudaErrorLaunchFailure,
	       "an invalid configuration fails at the launch");
	is_int(cudaStreamDestroy(b), cudaSuccess, "cudaStreamDestroy");
	is_int(cudaStreamSynchronize(b), cudaErrorInvalidValue,
	       "a destroyed stream is refused");
	cudaStreamDestroy(a), cudaStreamDestroy(blk);
	cudaFree(d), cudaFree(d2), cudaFree(p);
	simt::simt_set_streams("immediate");
}

/*
 * Communications on the streams (simt_enqueue_poll, what nccl_mpi.c
 * queues): one starts when its stream reaches it, after the kernels before
 * it; it completes over several polls; cudaStreamQuery says NotReady
 * meanwhile and runs nothing behind it; and communications progress on
 * their own, so one whose completion needs a peer's (another stream's)
 * completes while the host waits for it.
 */
struct fake_comm {
	int polls_left; /* polls until complete */
	const int *src; /* read at the start */
	int seen, started, dropped;
	const fake_comm *needs; /* complete only once that one started */
};

static int fake_poll(void *arg)
{
	fake_comm *c = (fake_comm *)arg;

	if (!c->started) {
		c->started = 1;
		c->seen = c->src != nullptr ? *c->src : 0;
	}
	if (c->needs != nullptr && !c->needs->started)
		return 0;
	return --c->polls_left <= 0;
}

static void fake_drop(void *arg)
{
	((fake_comm *)arg)->dropped++;
}

static void test_comms(void)
{
	cudaStream_t a = nullptr, b = nullptr;
	cudaEvent_t e = nullptr;
	int *d = nullptr;
	fake_comm c1 = {3, nullptr, 0, 0, 0, nullptr};

	simt::simt_set_streams("immediate");
	cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
	cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
	cudaMalloc((void **)&d, sizeof(int));
	is_int(simt::simt_enqueue_poll(a, fake_poll, fake_drop, &c1), -1,
	       "a communication on an immediate stream is refused");
	ok(c1.dropped == 1 && !c1.started, "the refused one is dropped, not run");

	simt::simt_set_streams("deferred");
	c1 = {3, d, 0, 0, 0, nullptr};
	SIMT_LAUNCH(set_kernel, 1, 32, 0, a)(d, 21);
	is_int(simt::simt_enqueue_poll(a, fake_poll, fake_drop, &c1), 0,
	       "simt_enqueue_poll on a deferred stream");
	ok(c1.started && c1.seen == 21,
	   "it starts at once, after the kernel before it (saw %d)", c1.seen);
	is_int(cudaStreamQuery(a), cudaErrorNotReady,
	       "cudaStreamQuery: NotReady while it is in flight");
	is_int(cudaStreamQuery(a), cudaSuccess,
	       "cudaStreamQuery: cudaSuccess once it completed");
	is_int(c1.dropped, 1, "dropped once, after completing");

	/* nothing behind an incomplete communication runs at a query */
	c1 = {100, nullptr, 0, 0, 0, nullptr};
	*d = 0;
	simt::simt_enqueue_poll(a, fake_poll, fake_drop, &c1);
	SIMT_LAUNCH(set_kernel, 1, 32, 0, a)(d, 5);
	is_int(cudaStreamQuery(a), cudaErrorNotReady, "a query while 100 polls are due");
	is_int(*d, 0, "the kernel behind it has not run");
	is_int(cudaStreamSynchronize(a), cudaSuccess,
	       "cudaStreamSynchronize polls it to completion");
	ok(*d == 5 && c1.dropped == 1, "then runs the kernel behind it");

	/* a communication ordered after another stream's kernel by an event */
	c1 = {1, d, 0, 0, 0, nullptr};
	SIMT_LAUNCH(set_kernel, 1, 32, 0, a)(d, 77);
	cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
	cudaEventRecord(e, a);
	cudaStreamWaitEvent(b, e, 0);
	simt::simt_enqueue_poll(b, fake_poll, fake_drop, &c1);
	ok(c1.started && c1.seen == 77,
	   "after an event wait it starts once the other stream's kernel ran "
	   "(saw %d)", c1.seen);
	cudaStreamSynchronize(b);
	cudaStreamSynchronize(a);

	/* two peers' halves: x (stream a) completes only once y (stream b)
	 * started, and y is queued behind z, still in flight when y is
	 * queued.  The host waits for a alone: z and then y must move on
	 * their own meanwhile, as a GPU's streams do, or this never ends. */
	fake_comm z = {10, nullptr, 0, 0, 0, nullptr};
	fake_comm y = {1, nullptr, 0, 0, 0, nullptr};
	fake_comm x = {1, nullptr, 0, 0, 0, &y};
	simt::simt_enqueue_poll(b, fake_poll, fake_drop, &z);
	simt::simt_enqueue_poll(b, fake_poll, fake_drop, &y);
	simt::simt_enqueue_poll(a, fake_poll, fake_drop, &x);
	ok(z.started && !y.started && x.started && !x.dropped,
	   "y waits behind z, x waits for y");
	is_int(cudaStreamSynchronize(a), cudaSuccess,
	       "waiting for stream a alone");
	ok(x.dropped == 1 && z.dropped == 1 && y.started,
	   "meanwhile z completed and y started on their own");
	cudaStreamSynchronize(b);
	is_int(y.dropped, 1, "y completes at its own wait");

	/* a request's own event (comm_nccl.c): complete once its own
	 * communication is, while a later one on the stream is in flight */
	cudaEvent_t e2 = nullptr;
	fake_comm p = {5, nullptr, 0, 0, 0, nullptr};
	fake_comm q = {100, nullptr, 0, 0, 0, nullptr};
	cudaEventCreateWithFlags(&e2, cudaEventDisableTiming);
	simt::simt_enqueue_poll(b, fake_poll, fake_drop, &p);
	cudaEventRecord(e, b);
	simt::simt_enqueue_poll(b, fake_poll, fake_drop, &q);
	cudaEventRecord(e2, b);
	int polls = 0;
	while (cudaEventQuery(e) == cudaErrorNotReady && polls < 50)
		polls++;
	ok(polls > 0 && polls < 50 && p.dropped == 1,
	   "cudaEventQuery: NotReady, then the first event completes (after "
	   "%d polls)",
	   polls);
	is_int(cudaEventQuery(e2), cudaErrorNotReady,
	       "cudaEventQuery: the second, behind a communication in "
	       "flight, does not");
	is_int(cudaStreamQuery(b), cudaErrorNotReady,
	       "nor does the stream");
	cudaStreamSynchronize(b);
	is_int(cudaEventQuery(e2), cudaSuccess,
	       "cudaEventQuery: complete after the stream's wait");
	*d = 0;
	SIMT_LAUNCH(set_kernel, 1, 32, 0, a)(d, 9);
	cudaEventRecord(e2, a);
	is_int(*d, 0, "a kernel is deferred");
	is_int(cudaEventQuery(e2), cudaSuccess,
	       "cudaEventQuery: an event behind kernels alone completes");
	is_int(*d, 9, "and the kernel ran");
	cudaEventDestroy(e2);

	/* a stream held by an unsettled NCCL enqueue: work, records and
	 * queries on it are reported; released, they are not */
	int r0 = simt::simt_reports();
	simt::simt_stream_hold(b, 1);
	cudaEventRecord(e, b);
	cudaStreamQuery(b);
	SIMT_LAUNCH(set_kernel, 1, 32, 0, b)(d, 1);
	is_int(simt::simt_reports() - r0, 3,
	       "a held stream: record, query and kernel each reported");
	simt::simt_stream_hold(b, 0);
	cudaEventRecord(e, b);
	cudaStreamSynchronize(b);
	is_int(simt::simt_reports() - r0, 3, "released: nothing more reported");

	cudaEventDestroy(e);
	cudaStreamDestroy(a), cudaStreamDestroy(b);
	cudaFree(d);
	simt::simt_set_streams("immediate");
}

int main(void)
{
	test_reductions();
	test_shared();
	test_refusals();
	test_blas();
	test_bf16();
	test_order();
	test_math_error();
	test_streams();
	test_comms();
	return tap_done();
}
