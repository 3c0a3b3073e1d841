/*
 * simt.cc - the fiber scheduler behind simt.h: one CUDA block at a time,
 * each of its threads a fiber with its own stack, switched at barriers
 * only (an own stack switch on x86-64, ucontext elsewhere).  Tests only
 * (tests/simt).
 */
#include "simt.h"
#include "simt_asan.h"

#include <cstdarg>
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

/* Release the threads waiting at a complete barrier; false if none is
 * complete (a deadlock: reported). */
bool release(void)
{
	bool any = false;
	unsigned waiting_block = 0, live = 0;

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
			any = true;
		}
	}
	if (any)
		return true;
	for (unsigned t = 0; t < nthreads; t++) {
		live += fibers[t].st != DONE;
		waiting_block += fibers[t].st == AT_BLOCK;
	}
	if (live > 0 && waiting_block == live) {
		for (unsigned t = 0; t < nthreads; t++)
			if (fibers[t].st == AT_BLOCK)
				fibers[t].st = RUN;
		return true;
	}
	unsigned first_w = nthreads, first_b = nthreads;
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
		unsigned done = 0;

		for (unsigned t = 0; t < nthreads; t++)
			if (fibers[t].st == RUN)
				resume(t);
		for (unsigned t = 0; t < nthreads; t++)
			done += fibers[t].st == DONE;
		if (done == nthreads)
			return !g_failed;
		if (g_failed || !release())
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

bool run(const char *kernel, dim3 grid, dim3 block, size_t smem, body_fn body,
	 void *arg)
{
	unsigned long long n = (unsigned long long)block.x * block.y * block.z;

	begin(kernel);
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
	nthreads = (unsigned)n;
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
	for (unsigned z = 0; z < grid.z; z++)
		for (unsigned y = 0; y < grid.y; y++)
			for (unsigned x = 0; x < grid.x; x++) {
				blockIdx = {x, y, z};
				if (!run_block())
					return false;
			}
	return true;
}

} /* namespace simt */
