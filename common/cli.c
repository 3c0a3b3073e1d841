/*
 * cli.c - the messages every HexiScale program prints the same way:
 * a failure ("PROG: <message of the error>", exit status = the code), a
 * usage error ("PROG: <what> (see 'PROG --help')", one line, status
 * HEXI_ERR_USAGE), and a failed write of standard output at the end.
 * For programs only: libraries return errors.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hexi_common.h"

int hexi_cli_fail(const char *prog, hexi_rc rc)
{
	fprintf(stderr, "%s: %s\n", prog, hexi_errmsg(rc));
	return (int)rc;
}

int hexi_cli_usage_error(const char *prog, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see '%s --help')\n", prog);
	return HEXI_ERR_USAGE;
}

int hexi_cli_close_stdout(const char *prog, int status)
{
	int e;

	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return status;
	e = errno;
	fprintf(stderr, "%s: cannot write standard output: %s\n", prog,
		e != 0 ? strerror(e) : "write error");
	if (status != 0)
		return status;
	return (int)(e == ENOSPC || e == EDQUOT ? HEXI_ERR_NOSPACE
						: HEXI_ERR_IO);
}
