# hexi_flags.m4: warnings, sanitizers and hardening flags.

# HEXI_WARNINGS: -Wall -Wextra plus the house set; --enable-werror (default
# yes) makes them errors.  Kept in WARN_CFLAGS so third-party code (nvcc
# host passes) can opt out.
AC_DEFUN([HEXI_WARNINGS], [
  AC_ARG_ENABLE([werror],
    [AS_HELP_STRING([--disable-werror], [do not turn compiler warnings into errors])],
    [hexi_werror=$enableval], [hexi_werror=yes])
  WARN_CFLAGS="-Wall -Wextra -Wshadow -Wstrict-prototypes -Wformat=2 -Wno-unused-parameter"
  AS_IF([test "x$hexi_werror" = xyes], [WARN_CFLAGS="$WARN_CFLAGS -Werror"])
  AC_SUBST([WARN_CFLAGS])
])

# HEXI_SANITIZERS: --enable-sanitizers builds everything with ASan+UBSan.
AC_DEFUN([HEXI_SANITIZERS], [
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers], [build with AddressSanitizer and UndefinedBehaviorSanitizer])],
    [hexi_san=$enableval], [hexi_san=no])
  SAN_CFLAGS=""
  SAN_LDFLAGS=""
  AS_IF([test "x$hexi_san" = xyes], [
    SAN_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
    SAN_LDFLAGS="-fsanitize=address,undefined"
  ])
  AC_SUBST([SAN_CFLAGS])
  AC_SUBST([SAN_LDFLAGS])
  AM_CONDITIONAL([HAVE_SANITIZERS], [test "x$hexi_san" = xyes])
])

# HEXI_HARDENING: fortify, stack protector, relro/now.
AC_DEFUN([HEXI_HARDENING], [
  HARDEN_CFLAGS="-fstack-protector-strong -fPIC"
  HARDEN_LDFLAGS="-Wl,-z,relro -Wl,-z,now"
  AS_IF([test "x$hexi_san" != xyes],
    [HARDEN_CFLAGS="$HARDEN_CFLAGS -D_FORTIFY_SOURCE=2"])
  AC_SUBST([HARDEN_CFLAGS])
  AC_SUBST([HARDEN_LDFLAGS])
])

# AX_PTHREAD_SIMPLE: -pthread is all glibc needs.
AC_DEFUN([AX_PTHREAD_SIMPLE], [
  PTHREAD_CFLAGS="-pthread"
  PTHREAD_LIBS="-pthread"
  AC_SUBST([PTHREAD_CFLAGS])
  AC_SUBST([PTHREAD_LIBS])
])
