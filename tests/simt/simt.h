/*
 * simt.h - CUDA's device side on the CPU, for tests only: the .cu sources
 * of runtime/cuda, rewritten by cu2cc.pl (k<<<g, b, sm, s>>>(args) becomes
 * SIMT_LAUNCH(k, g, b, sm, s)(args)), compile as C++ against this header
 * and run each launch in its stream's order (at once, or when the host
 * waits with SIMT_STREAMS=deferred: runtime.c), one block after another,
 * every CUDA thread a fiber on one OS thread (simt.cc).  A fiber runs until it reaches a
 * barrier: __syncthreads waits for the whole block, a warp shuffle for its
 * 32 lanes, so warp-synchronous code (shuffle reductions, one warp per
 * row) runs as written.  Shared memory is the kernels' own static arrays,
 * in one section that is refilled with 0xff bytes (a NaN) before each
 * block, so a read before any write shows in the result.  What a GPU
 * would not forgive is reported and fails the launch (cudaGetLastError;
 * with deferred streams, the wait that runs it):
 * a barrier some threads never reach (deadlock), a shuffle some lanes of
 * the warp skip, a block over 1024 threads or a grid over CUDA's limits,
 * a kernel argument that is not device memory, and (after the launch) a
 * write into the guard bytes around a cudaMalloc block (under ASan any
 * access to them, at once: tests/simt/runtime.c).  Races between
 * barriers show by running the threads in another order (set_order,
 * SIMT_ORDER).  expf, logf and rsqrtf err by up to CUDA's documented
 * ulp.  Built with -ffp-contract=fast -mfma too (simt_fma.sh), the kernels
 * round as nvcc's FMA contraction does; the _rn intrinsics never fuse.
 * Not emulated: the GPU's timing, its memory model's reorderings.  See
 * tests/simt/Makefile.am, DECISIONS 162, 166-168.
 */
#ifndef HEXI_SIMT_H
#define HEXI_SIMT_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
/* Shared memory: function statics, all in one section, which every block
 * starts with filled with 0xff (NaN), as uninitialised as on a GPU. */
#define __shared__ static __attribute__((section("simt_shared"), aligned(16)))
#define __launch_bounds__(...)

struct uint3 {
	unsigned x, y, z;
};

struct dim3 {
	unsigned x, y, z;
	constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1)
	    : x(x_), y(y_), z(z_)
	{
	}
};

/* The running fiber's coordinates, set by the scheduler on every switch. */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

namespace simt {

/* Block until the whole block (0) or the calling thread's warp (1) is at a
 * barrier of the same kind. */
void barrier(int warp);

/* The calling thread's index in its block, and its exchange slot for the
 * current shuffle (double-buffered: one barrier per shuffle). */
unsigned tid();
void *shfl_slot(unsigned thread);
void shfl_flip();
/* Reports (the first of a launch is printed) and fails the launch. */
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A new launch of kernel: its first report will be printed. */
void begin(const char *kernel);

/*
 * The order in which a block's ready threads run between barriers, and
 * the blocks of a grid: "forward" (the default: thread 0 first),
 * "reverse", or "random[:SEED]" (a new permutation of the threads every
 * round, the blocks in a random bijective order).  Only one fiber runs at
 * a time, so a data race shows as a result that depends on this order: a
 * thread that reads what another writes with no barrier between them.
 * The environment's SIMT_ORDER is read at the first launch.  False (and a
 * message) for anything else.
 */
bool set_order(const char *spec);

/* The launch's configuration is one CUDA accepts (and SIMT_ORDER is an
 * order); false after a report.  Checked at the launch, as CUDA does. */
bool launch_ok(const char *kernel, dim3 grid, dim3 block, size_t smem);

typedef void (*body_fn)(void *);
/* Runs body(arg) as every thread of grid x block; false after a report. */
bool run(const char *kernel, dim3 grid, dim3 block, size_t smem, body_fn body,
	 void *arg);

#include "simt_stream.h"

template <typename A> bool arg_ok(const char *kernel, int i, const A &a)
{
	if constexpr (std::is_pointer<std::decay_t<A>>::value) {
		const void *p = (const void *)(+a); /* + decays an array */

		if (p != nullptr && !simt_is_device(p)) {
			fail("kernel %s: argument %d (%p) is not device memory",
			     kernel, i, p);
			return false;
		}
	}
	return true;
}

/* A launch as it waits in its stream: the kernel and copies of its
 * arguments (a GPU takes them at the launch). */
template <typename K, typename T> struct launch_job {
	const char *name;
	K k;
	dim3 g, b;
	size_t smem;
	T args;

	static void exec(void *p)
	{
		launch_job *j = static_cast<launch_job *>(p);
		auto body = [j] { std::apply(j->k, j->args); };

		begin(j->name);
		if (!run(
			j->name, j->g, j->b, j->smem,
			[](void *q) { (*static_cast<decltype(body) *>(q))(); },
			&body))
			simt_launch_failed();
		simt_check_guards(j->name);
	}
	static void drop(void *p) { delete static_cast<launch_job *>(p); }
};

template <typename K> struct launcher {
	const char *name;
	K k;
	dim3 g, b;
	size_t smem;
	const void *stream;

	/* The arguments are checked now (a host pointer fails the launch);
	 * the kernel runs in stream order (runtime.c's simt_enqueue). */
	template <typename... A> void operator()(A &&...a)
	{
		typedef std::tuple<std::decay_t<A>...> T;
		typedef launch_job<K, T> J;
		int i = 0;

		begin(name);
		if (!launch_ok(name, g, b, smem) ||
		    !(arg_ok(name, i++, a) && ...)) {
			simt_launch_failed();
			return;
		}
		if (simt_enqueue(stream, J::exec, J::drop,
				 new J{name, k, g, b, smem, T(a...)}) != 0)
			simt_launch_failed();
	}
};

template <typename K>
launcher<K> make_launcher(const char *name, K k, dim3 g, dim3 b,
			  size_t smem = 0, const void *stream = nullptr)
{
	return launcher<K>{name, k, g, b, smem, stream};
}

/* The value of lane `lane` of the caller's warp (__shfl_xor_sync and
 * __shfl_sync compute that lane). */
template <typename V> V shfl(const char *what, unsigned mask, V v,
			     unsigned lane)
{
	static_assert(sizeof(V) <= 8, "shuffle of at most 8 bytes");
	unsigned t = tid(), p = (t & ~31u) | (lane & 31u);
	V r;

	if (mask != 0xffffffffu)
		fail("%s: mask %#x (only full warps here)", what, mask);
	std::memcpy(shfl_slot(t), &v, sizeof(V));
	barrier(1); /* released only with all 32 lanes there */
	std::memcpy(&r, shfl_slot(p), sizeof(V));
	shfl_flip();
	return r;
}

} /* namespace simt */

#define SIMT_LAUNCH(k, ...)                                                    \
	::simt::make_launcher(                                                 \
	    #k, [&](auto &&...a_) { k(a_...); }, __VA_ARGS__)

static inline void __syncthreads(void)
{
	simt::barrier(0);
}

template <typename V> static inline V __shfl_xor_sync(unsigned m, V v, int l)
{
	return simt::shfl("__shfl_xor_sync", m, v,
			  (simt::tid() & 31u) ^ (unsigned)l);
}

template <typename V> static inline V __shfl_sync(unsigned m, V v, int src)
{
	return simt::shfl("__shfl_sync", m, v, (unsigned)src);
}

/* One OS thread runs every fiber: a read-modify-write is atomic. */
static inline float atomicAdd(float *p, float v)
{
	float o = *p;
	*p = o + v;
	return o;
}

static inline double atomicAdd(double *p, double v)
{
	double o = *p;
	*p = o + v;
	return o;
}

static inline unsigned atomicAdd(unsigned *p, unsigned v)
{
	unsigned o = *p;
	*p = o + v;
	return o;
}

/*
 * The _rn intrinsics round each operation on its own: nvcc never fuses them
 * into an FMA.  The empty asm makes the result opaque to the compiler, so
 * the contracted build (-ffp-contract=fast -mfma, simt_fma.sh) cannot fuse
 * them either, while plain a * b - c beside them is fused as nvcc would.
 */
static inline float simt_rounded(float x)
{
	__asm__("" : "+m"(x));
	return x;
}

static inline float __fmul_rn(float a, float b)
{
	return simt_rounded(a * b);
}

static inline float __fsub_rn(float a, float b)
{
	return simt_rounded(a - b);
}

/*
 * The GPU's math functions are not correctly rounded.  CUDA's documented
 * maximum error in single precision without fast-math (the build's nvcc
 * flags): expf 2 ulp, logf 1 ulp, rsqrtf 2 ulp (sqrtf and division are
 * IEEE).  Here each result is the correctly rounded value moved by up to
 * that many ulp, the amount and sign a hash of the argument (the same
 * input, the same result), so the tests' tolerances must hold for results
 * as a GPU may return them, not only for exact ones.  A result a float
 * holds exactly (expf(0) = 1, logf(1) = 0) is returned as is.
 */
namespace simt {
inline float ulp_error(double exact, float arg, unsigned max_ulp)
{
	float r = (float)exact;
	uint32_t h;
	int k;

	if (!std::isfinite(r) || r == 0.0f || (double)r == exact)
		return r;
	std::memcpy(&h, &arg, sizeof(h));
	h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu;
	h ^= h >> 16;
	k = (int)(h % (2 * max_ulp + 1)) - (int)max_ulp;
	for (; k > 0; k--)
		r = std::nextafter(r, INFINITY);
	for (; k < 0; k++)
		r = std::nextafter(r, -INFINITY);
	return r;
}
} /* namespace simt */

static inline float rsqrtf(float x)
{
	return simt::ulp_error(1.0 / std::sqrt((double)x), x, 2);
}

static inline float simt_expf(float x)
{
	return simt::ulp_error(std::exp((double)x), x, 2);
}

static inline float simt_logf(float x)
{
	return simt::ulp_error(std::log((double)x), x, 1);
}
#define expf simt_expf
#define logf simt_logf

static inline int min(int a, int b)
{
	return a < b ? a : b;
}

static inline int max(int a, int b)
{
	return a > b ? a : b;
}

struct float2 {
	float x, y;
};

#endif /* HEXI_SIMT_H */
