/*
 * simt.cc - the fiber scheduler behind simt.h: one CUDA block at a time,
 * each of its threads a fiber with its own stack, switched at barriers
 * only (an own stack switch on x86-64, ucontext elsewhere).  Tests only
 * (tests/simt).
 */
#include "simt.h"
#include "simt_asan.h"

#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <ucontext.h>
#if defined(__has_include)
#if __has_include(<sanitizer/common_interface_defs.h>)
#include <sanitizer/common_interface_defs.h>
#endif
#endif

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace simt {

namespace {

enum state { RUN, AT_BLOCK, AT_WARP, DONE };

constexpr size_t STACK = 64 * 1024;
constexpr unsigned MAX_THREADS = 1024;

struct fiber {
#if defined(__x86_64__)
	void *sp; /* saved stack pointer (simt_switch) */
#else
	ucontext_t uc;
#endif
	state st;
	unsigned parity; /* which half of the shuffle slots */
};

/* Plain arrays: no destructor may free the stacks before LeakSanitizer's
 * exit-time scan (they are kept for the next launch, not leaked). */
fiber fibers[MAX_THREADS];
char *stacks[MAX_THREADS];
unsigned nstacks;
fiber *cur;
unsigned cur_tid, nthreads;
double slots[2][MAX_THREADS];
body_fn g_body;
void *g_arg;
const char *g_kernel;
bool g_failed;

/* The scheduling order (set_order): threads between barriers, blocks. */
enum order_kind { FORWARD, REVERSE, RANDOM };
order_kind g_order = FORWARD;
bool g_order_read; /* SIMT_ORDER looked at */
const char *g_bad_order; /* SIMT_ORDER, when it is not an order */
uint64_t g_rng;
unsigned g_perm[MAX_THREADS];

/* splitmix64: a fixed seed gives the same schedule on every machine. */
uint64_t next_random(void)
{
	uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b != 0) {
		uint64_t r = a % b;

		a = b;
		b = r;
	}
	return a;
}

/* The order of this round's threads in g_perm. */
void thread_order(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		g_perm[i] = g_order == REVERSE ? n - 1 - i : i;
	if (g_order == RANDOM)
		for (unsigned i = n; i > 1; i--) {
			unsigned j = (unsigned)(next_random() % i), t;

			t = g_perm[i - 1], g_perm[i - 1] = g_perm[j], g_perm[j] = t;
		}
}

} /* namespace */

#if defined(__x86_64__)
/*
 * The switch: glibc's swapcontext also saves the signal mask (a system
 * call each way), which made a switch cost microseconds.  This saves the
 * System V callee-saved registers on the old stack, swaps stack pointers
 * and restores them from the new one.  The kernels never change the FP
 * control words, so those are not switched.
 */
extern "C" void simt_switch(void **save_sp, void *to_sp);
asm(".text\n"
    ".p2align 4\n"
    ".type simt_switch, @function\n"
    "simt_switch:\n"
    "\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n"
    "\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
    "\tmovq %rsp, (%rdi)\n"
    "\tmovq %rsi, %rsp\n"
    "\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n"
    "\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
    "\tret\n"
    ".size simt_switch, .-simt_switch\n");
#endif

namespace {

#if defined(__x86_64__)
void *sched_sp;

/* Under AddressSanitizer every switch is announced, so that it tracks
 * which stack is current (its fiber annotations). */
#ifdef SIMT_ASAN
const void *sched_bottom;
size_t sched_size;

void before_switch(void **fake, const void *bottom, size_t size)
{
	__sanitizer_start_switch_fiber(fake, bottom, size);
}

void after_switch(void *fake, const void **from, size_t *from_size)
{
	__sanitizer_finish_switch_fiber(fake, from, from_size);
}
#else
const void *sched_bottom;
size_t sched_size;

void before_switch(void **, const void *, size_t) {}
void after_switch(void *, const void **, size_t *) {}
#endif

[[noreturn]] void fiber_main()
{
	void *dead;

	after_switch(nullptr, &sched_bottom, &sched_size);
	g_body(g_arg);
	cur->st = DONE;
	before_switch(nullptr, sched_bottom, sched_size); /* this one ends */
	simt_switch(&dead, sched_sp);
	__builtin_unreachable();
}

/* A fresh fiber for thread t: its stack holds six zero registers and
 * fiber_main as the return address, aligned as after a call. */
bool init_fiber(unsigned t)
{
	uintptr_t top = ((uintptr_t)stacks[t] + STACK) & ~(uintptr_t)15;
	void **sp = (void **)(top - 64);

	for (int i = 0; i < 6; i++)
		sp[i] = nullptr;
	sp[6] = (void *)fiber_main;
	fibers[t].sp = sp;
	fibers[t].st = RUN;
	fibers[t].parity = 0;
	return true;
}

void to_fiber(fiber *f)
{
	void *fake = nullptr;

	before_switch(&fake, stacks[f - fibers], STACK);
	simt_switch(&sched_sp, f->sp);
	after_switch(fake, nullptr, nullptr);
}

void to_scheduler(fiber *f)
{
	void *fake = nullptr;

	before_switch(&fake, sched_bottom, sched_size);
	simt_switch(&f->sp, sched_sp);
	after_switch(fake, nullptr, nullptr);
}
#else
ucontext_t sched_uc;

void entry()
{
	g_body(g_arg);
	cur->st = DONE;
	/* returning resumes uc_link, the scheduler */
}

/* A fresh fiber for thread t (getcontext returns twice: kept apart). */
__attribute__((noinline)) bool init_fiber(unsigned t)
{
	fiber &f = fibers[t];

	if (getcontext(&f.uc) != 0) {
		fail("getcontext failed");
		return false;
	}
	f.uc.uc_stack.ss_sp = stacks[t];
	f.uc.uc_stack.ss_size = STACK;
	f.uc.uc_link = &sched_uc;
	f.st = RUN;
	f.parity = 0;
	makecontext(&f.uc, entry, 0);
	return true;
}

void to_fiber(fiber *f)
{
	if (swapcontext(&sched_uc, &f->uc) != 0) {
		std::fprintf(stderr, "simt: swapcontext failed\n");
		std::abort(); /* test harness only: nothing sane to do */
	}
}

void to_scheduler(fiber *f)
{
	if (swapcontext(&f->uc, &sched_uc) != 0) {
		std::fprintf(stderr, "simt: swapcontext failed\n");
		std::abort();
	}
}
#endif

void resume(unsigned t)
{
	cur = &fibers[t];
	cur_tid = t;
	threadIdx.x = t % blockDim.x;
	threadIdx.y = t / blockDim.x % blockDim.y;
	threadIdx.z = t / (blockDim.x * blockDim.y);
	to_fiber(cur);
}

/* Warps whose every lane is at a shuffle go on; false after a report (a
 * shuffle that some lanes exited before, or in a partial warp). */
bool promote(void)
{
	for (unsigned w = 0; w * 32 < nthreads; w++) {
		unsigned lo = w * 32, hi = lo + 32 < nthreads ? lo + 32 : nthreads;
		unsigned at = 0, done = 0;

		for (unsigned t = lo; t < hi; t++)
			at += fibers[t].st == AT_WARP, done += fibers[t].st == DONE;
		if (at > 0 && at + done == hi - lo) {
			if (done > 0 || hi - lo < 32) {
				fail("kernel %s block (%u,%u,%u): warp %u: a "
				     "shuffle with %u of 32 lanes (the others "
				     "exited or do not exist)",
				     g_kernel, blockIdx.x, blockIdx.y,
				     blockIdx.z, w, at);
				return false;
			}
			for (unsigned t = lo; t < hi; t++)
				fibers[t].st = RUN;
		}
	}
	return true;
}

/* Nothing can run: release a complete __syncthreads (true), or report
 * that the block is done (true, done set) or deadlocked (false). */
bool release_block(bool *done)
{
	unsigned waiting_block = 0, live = 0;
	unsigned first_w = nthreads, first_b = nthreads;

	for (unsigned t = 0; t < nthreads; t++) {
		live += fibers[t].st != DONE;
		waiting_block += fibers[t].st == AT_BLOCK;
	}
	*done = live == 0;
	if (live == 0)
		return true;
	if (waiting_block == live) {
		for (unsigned t = 0; t < nthreads; t++)
			if (fibers[t].st == AT_BLOCK)
				fibers[t].st = RUN;
		return true;
	}
	for (unsigned t = 0; t < nthreads; t++) {
		if (fibers[t].st == AT_WARP && first_w == nthreads)
			first_w = t;
		if (fibers[t].st == AT_BLOCK && first_b == nthreads)
			first_b = t;
	}
	fail("kernel %s block (%u,%u,%u): deadlock: %u threads at "
	     "__syncthreads (first %u), others at a warp shuffle (first %u) "
	     "or exited: a barrier not every thread reaches",
	     g_kernel, blockIdx.x, blockIdx.y, blockIdx.z, waiting_block,
	     first_b, first_w);
	return false;
}

/* The linker's bounds of the section of __shared__ arrays (simt.h). */
extern "C" char __start_simt_shared[] __attribute__((weak));
extern "C" char __stop_simt_shared[] __attribute__((weak));

/*
 * One block.  In forward order each round runs every runnable thread up
 * to its next barrier, thread 0 first: the warps move in lockstep.  In
 * the other orders a round runs one warp only (the last runnable one, or
 * a random one), its lanes in reverse or random order, so that warp runs
 * ahead of the others up to its next __syncthreads, as a GPU may run it:
 * what one warp reads of another's shared memory without a barrier
 * between them then changes.
 */
bool run_block(void)
{
	uintptr_t lo = (uintptr_t)__start_simt_shared,
		  hi = (uintptr_t)__stop_simt_shared;

	if (lo != 0 && hi > lo)
		std::memset(__start_simt_shared, 0xff, hi - lo);
	for (unsigned t = 0; t < nthreads; t++)
		if (!init_fiber(t))
			return false;
	for (;;) {
		unsigned cand[MAX_THREADS / 32], nc = 0, first = 0, n = nthreads;

		if (!promote())
			return false;
		for (unsigned w = 0; w * 32 < nthreads; w++)
			for (unsigned t = w * 32; t < nthreads && t < w * 32 + 32; t++)
				if (fibers[t].st == RUN) {
					cand[nc++] = w;
					break;
				}
		if (nc == 0) {
			bool done;

			if (!release_block(&done))
				return false;
			if (done)
				return !g_failed;
			continue;
		}
		if (g_order != FORWARD) {
			unsigned w = g_order == REVERSE
					 ? cand[nc - 1]
					 : cand[next_random() % nc];

			first = w * 32;
			n = nthreads - first < 32 ? nthreads - first : 32;
		}
		thread_order(n);
		for (unsigned i = 0; i < n; i++)
			if (fibers[first + g_perm[i]].st == RUN)
				resume(first + g_perm[i]);
		if (g_failed)
			return false;
	}
}

} /* namespace */

void fail(const char *fmt, ...)
{
	va_list ap;

	if (g_failed)
		return; /* the first report of a launch says it */
	g_failed = true;
	std::fputs("simt: ", stderr);
	va_start(ap, fmt);
	std::vfprintf(stderr, fmt, ap);
	va_end(ap);
	std::fputc('\n', stderr);
}

void begin(const char *kernel)
{
	g_kernel = kernel;
	g_failed = false;
}

void barrier(int warp)
{
	fiber *f = cur;

	f->st = warp ? AT_WARP : AT_BLOCK;
	to_scheduler(f);
}

unsigned tid()
{
	return cur_tid;
}

void *shfl_slot(unsigned thread)
{
	return &slots[cur->parity][thread];
}

void shfl_flip()
{
	cur->parity ^= 1u;
}

bool set_order(const char *spec)
{
	const char *seed = nullptr;

	if (std::strcmp(spec, "forward") == 0) {
		g_order = FORWARD;
	} else if (std::strcmp(spec, "reverse") == 0) {
		g_order = REVERSE;
	} else if (std::strncmp(spec, "random", 6) == 0 &&
		   (spec[6] == '\0' || spec[6] == ':')) {
		char *end;
		unsigned long long v = 1;

		if (spec[6] == ':') {
			seed = spec + 7;
			errno = 0;
			v = std::strtoull(seed, &end, 10);
			if (*seed < '0' || *seed > '9' || *end != '\0' ||
			    errno != 0) {
				std::fprintf(stderr, "simt: order '%s': the seed "
					     "is not a decimal number\n", spec);
				return false;
			}
		}
		g_order = RANDOM;
		g_rng = v;
	} else {
		std::fprintf(stderr, "simt: order '%s': not forward, reverse "
			     "or random[:SEED]\n", spec);
		return false;
	}
	g_order_read = true; /* an explicit order outranks SIMT_ORDER */
	g_bad_order = nullptr;
	return true;
}

bool launch_ok(const char *kernel, dim3 grid, dim3 block, size_t smem)
{
	unsigned long long n = (unsigned long long)block.x * block.y * block.z;

	if (!g_order_read) {
		const char *e = std::getenv("SIMT_ORDER");

		g_order_read = true;
		if (e != nullptr && *e != '\0') {
			if (!set_order(e))
				g_bad_order = e; /* every launch fails */
			else
				std::fprintf(stderr, "# simt: threads and blocks "
					     "in %s order\n", e);
		}
	}
	begin(kernel);
	if (g_bad_order != nullptr) {
		fail("kernel %s: SIMT_ORDER='%s' is not an order", kernel,
		     g_bad_order);
		return false;
	}
	if (n == 0 || n > MAX_THREADS || block.x > 1024 || block.y > 1024 ||
	    block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
	    grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535 ||
	    smem > 48 * 1024) {
		fail("kernel %s: invalid configuration: grid (%u,%u,%u) block "
		     "(%u,%u,%u) shared %zu (CUDA: <= 1024 threads, block.z "
		     "<= 64, grid.y/z <= 65535, 48 KiB dynamic shared)",
		     kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z,
		     smem);
		return false;
	}
	return true;
}

bool run(const char *kernel, dim3 grid, dim3 block, size_t smem, body_fn body,
	 void *arg)
{
	uint64_t nb, step = 1, start = 0;

	if (!launch_ok(kernel, grid, block, smem))
		return false;
	nthreads = block.x * block.y * block.z;
	while (nstacks < nthreads) {
		char *s = static_cast<char *>(std::malloc(STACK));

		if (s == nullptr) {
			fail("no memory for fiber stacks");
			return false;
		}
		stacks[nstacks++] = s;
	}
	g_body = body;
	g_arg = arg;
	blockDim = block;
	gridDim = grid;
	/* Block i of the run is linear block (start + i * step) mod nb: the
	 * identity, its reverse, or a random bijection (step prime to nb). */
	nb = (uint64_t)grid.x * grid.y * grid.z;
	if (g_order == REVERSE) {
		start = nb - 1, step = nb - 1; /* i -> nb - 1 - i */
	} else if (g_order == RANDOM && nb > 1) {
		start = next_random() % nb;
		do
			step = 1 + next_random() % (nb - 1);
		while (gcd(step, nb) != 1);
	}
	for (uint64_t i = 0, b = start; i < nb; i++) {
		blockIdx = {(unsigned)(b % grid.x),
			    (unsigned)(b / grid.x % grid.y),
			    (unsigned)(b / ((uint64_t)grid.x * grid.y))};
		if (!run_block())
			return false;
		b = b >= nb - step ? b - (nb - step) : b + step;
	}
	return true;
}

} /* namespace simt */
