/*
 * cli.c - the two messages every HexiScale program prints the same way:
 * a failure ("PROG: <message of the error>", exit status = the code) and
 * a usage error ("PROG: <what> (see 'PROG --help')", one line, status
 * HEXI_ERR_USAGE).  For programs only: libraries return errors.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

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
