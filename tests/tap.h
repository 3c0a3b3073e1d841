/*
 * tap.h - a small TAP producer for C unit tests (header only).
 *
 * Each assertion prints "ok N - name" or "not ok N - name" with both operands
 * on failure; tap_done() prints the plan and returns the exit status (0 or 1).
 * tap_skip_all() prints "1..0 # SKIP reason" and exits 0, which automake's
 * TAP driver counts as a skip.  tap_bail() is a hard error (exit 99).
 */
#ifndef HEXI_TAP_H
#define HEXI_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n;
static int tap_failed;

static __attribute__((format(printf, 2, 0))) void
tap_vreport(int pass, const char *fmt, va_list ap)
{
	tap_n++;
	printf("%s %d - ", pass ? "ok" : "not ok", tap_n);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	if (!pass)
		tap_failed++;
}

static __attribute__((format(printf, 2, 3), unused)) int
tap_ok(int pass, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_vreport(pass, fmt, ap);
	va_end(ap);
	return pass;
}

static __attribute__((format(printf, 1, 2), unused)) void
tap_diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

#define ok(cond, ...) tap_ok(!!(cond), __VA_ARGS__)

#define is_int(got, want, ...)                                                 \
	do {                                                                   \
		long long tap_g_ = (long long)(got),                           \
			  tap_w_ = (long long)(want);                          \
		if (!tap_ok(tap_g_ == tap_w_, __VA_ARGS__))                    \
			tap_diag("  got %lld, want %lld (%s:%d)", tap_g_,      \
				 tap_w_, __FILE__, __LINE__);                  \
	} while (0)

#define is_str(got, want, ...)                                                 \
	do {                                                                   \
		const char *tap_g_ = (got), *tap_w_ = (want);                  \
		int tap_p_ = tap_g_ != NULL && tap_w_ != NULL &&               \
			     strcmp(tap_g_, tap_w_) == 0;                      \
		if (!tap_ok(tap_p_, __VA_ARGS__))                              \
			tap_diag("  got '%s', want '%s' (%s:%d)",              \
				 tap_g_ ? tap_g_ : "(null)",                   \
				 tap_w_ ? tap_w_ : "(null)", __FILE__,         \
				 __LINE__);                                    \
	} while (0)

/* |got - want| <= tol * max(1, |want|) */
#define is_near(got, want, tol, ...)                                           \
	do {                                                                   \
		double tap_g_ = (got), tap_w_ = (want), tap_t_ = (tol);        \
		double tap_s_ = fabs(tap_w_) > 1.0 ? fabs(tap_w_) : 1.0;       \
		if (!tap_ok(fabs(tap_g_ - tap_w_) <= tap_t_ * tap_s_,          \
			    __VA_ARGS__))                                      \
			tap_diag("  got %.10g, want %.10g, tol %g (%s:%d)",    \
				 tap_g_, tap_w_, tap_t_, __FILE__, __LINE__);  \
	} while (0)

static __attribute__((noreturn, unused)) void tap_skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	exit(0);
}

static __attribute__((noreturn, unused)) void tap_bail(const char *why)
{
	printf("Bail out! %s\n", why);
	exit(99);
}

static __attribute__((unused)) int tap_done(void)
{
	printf("1..%d\n", tap_n);
	if (tap_failed)
		tap_diag("%d of %d failed", tap_failed, tap_n);
	return tap_failed ? 1 : 0;
}

#endif /* HEXI_TAP_H */
