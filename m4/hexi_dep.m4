# hexi_dep.m4: the shape every optional dependency follows.
#
# HEXI_OPTIONAL(NAME, HELP, CHECK)
#   Adds --with-NAME / --without-NAME.  CHECK runs unless --without-NAME and
#   must set hexi_have_NAME=yes|no.  --with-NAME (explicit yes or a DIR) with
#   the dependency missing is an error.  Defines HAVE_<NAME> and an
#   AM_CONDITIONAL of the same name.
AC_DEFUN([HEXI_OPTIONAL], [
  AC_ARG_WITH([$1], [AS_HELP_STRING([--with-$1@<:@=DIR@:>@], [$2 (default: auto)])],
    [hexi_want_$1=$withval], [hexi_want_$1=check])
  hexi_have_$1=no
  AS_IF([test "x$hexi_want_$1" != xno], [$3])
  AS_IF([test "x$hexi_want_$1" != xno && test "x$hexi_want_$1" != xcheck &&
         test "x$hexi_have_$1" != xyes],
    [AC_MSG_ERROR([--with-$1 was given but $1 was not found; install it or use --without-$1])])
  AS_IF([test "x$hexi_have_$1" = xyes],
    [AC_DEFINE(AS_TR_CPP([HAVE_$1]), [1], [Define if $1 is available])])
  AM_CONDITIONAL(AS_TR_CPP([HAVE_$1]), [test "x$hexi_have_$1" = xyes])
])

# HEXI_PKG(NAME, PKGMODULE, VARPREFIX): pkg-config probe used inside CHECK.
AC_DEFUN([HEXI_PKG], [
  PKG_CHECK_MODULES([$3], [$2], [hexi_have_$1=yes], [hexi_have_$1=no])
])
