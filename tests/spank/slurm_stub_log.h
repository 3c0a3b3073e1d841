/*
 * slurm_stub_log.h - Slurm's logging functions for the spank unit tests
 * that link the plugin's objects without Slurm: each prints its name and
 * message on stderr.  Include once per test program.
 */
#ifndef HEXI_SLURM_STUB_LOG_H
#define HEXI_SLURM_STUB_LOG_H

#include <stdarg.h>
#include <stdio.h>

static void vlog(const char *what, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void vlog(const char *what, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", what);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}
#define LOG_STUB(name)                                                         \
	void name(const char *fmt, ...)                                        \
	{                                                                      \
		va_list ap;                                                    \
		va_start(ap, fmt);                                             \
		vlog(#name, fmt, ap);                                          \
		va_end(ap);                                                    \
	}
LOG_STUB(slurm_error)
LOG_STUB(slurm_info)
LOG_STUB(slurm_verbose)
LOG_STUB(slurm_debug)

#endif
