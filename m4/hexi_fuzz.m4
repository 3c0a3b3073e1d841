# hexi_fuzz.m4: --enable-fuzzing, coverage-guided fuzzing with libFuzzer.

# HEXI_FUZZING: with clang and --enable-sanitizers, every object gets
# libFuzzer's coverage instrumentation (-fsanitize=fuzzer-no-link) and
# tests/libfuzzmain.la links libFuzzer's driver (the no-main runtime of
# libclang-rt-14-dev), so each fuzz_* program is also a libFuzzer target
# (tests/fuzz/libfuzzer.sh, `make fuzz`).
AC_DEFUN([HEXI_FUZZING], [
  AC_ARG_ENABLE([fuzzing],
    [AS_HELP_STRING([--enable-fuzzing], [build the fuzz targets for libFuzzer (clang, with --enable-sanitizers; see make fuzz)])],
    [hexi_fuzz=$enableval], [hexi_fuzz=no])
  FUZZ_LIBS=""
  AS_IF([test "x$hexi_fuzz" = xyes], [
    AS_IF([test "x$hexi_san" != xyes],
      [AC_MSG_ERROR([--enable-fuzzing needs --enable-sanitizers])])
    hexi_rtdir=`$CC --print-runtime-dir 2>/dev/null`
    hexi_rt="clang_rt.fuzzer_no_main-`uname -m`"
    AS_IF([test -f "$hexi_rtdir/lib$hexi_rt.a"], [],
      [AC_MSG_ERROR([--enable-fuzzing: no libFuzzer runtime ($hexi_rtdir/lib$hexi_rt.a); use CC=clang with libclang-rt-14-dev])])
    # as -L/-l so libtool passes it on from tests/libfuzzmain.la
    FUZZ_LIBS="-L$hexi_rtdir -l$hexi_rt -lstdc++"
    SAN_CFLAGS="$SAN_CFLAGS -fsanitize=fuzzer-no-link"
  ])
  AC_SUBST([FUZZ_LIBS])
  AM_CONDITIONAL([HEXI_FUZZING], [test "x$hexi_fuzz" = xyes])
])
