/*
 * init_crash.c - LD_PRELOAD shim: an MPI_Init_thread that crashes the way
 * Open MPI's start-up race does (a call through a NULL pointer, DECISIONS
 * 155), so tests can check what hexi_rt_init says about it
 * (tests/runtime/mpi_fail.sh) and that examples/train.sbatch runs the
 * step once more (tests/e2e/fault.sh).  Test-only; never installed.
 *
 * HEXI_TEST_INIT_CRASH_ONCE=FILE: only the task that creates FILE
 * crashes; every other call goes on to the real MPI_Init_thread.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	const char *once = getenv("HEXI_TEST_INIT_CRASH_ONCE");
	void (*volatile cb)(void) = NULL;

	if (once != NULL && *once != '\0') {
		int fd = open(once, O_WRONLY | O_CREAT | O_EXCL, 0600);
		int (*real)(int *, char ***, int, int *);

		if (fd >= 0) {
			close(fd);
			cb();
		}
		*(void **)&real = dlsym(RTLD_NEXT, "MPI_Init_thread");
		return real == NULL ? 1 : real(argc, argv, required, provided);
	}
	cb();
	return 0;
}
