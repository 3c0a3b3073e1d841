# HEXI_SIMT_FMA: can $CXX build tests/simt's contracted kernels (the FMA
# that nvcc's default -fmad=true makes of a * b + c)?  Yes on x86-64 with
# -mfma; elsewhere tests/simt/simt_fma.sh skips and says why.
AC_DEFUN([HEXI_SIMT_FMA], [
  AC_LANG_PUSH([C++])
  hexi_simt_fma_save=$CXXFLAGS
  CXXFLAGS="$CXXFLAGS -mfma -ffp-contract=fast"
  AC_MSG_CHECKING([whether $CXX builds FMA code for tests/simt (-mfma)])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[
#ifndef __FMA__
#error no FMA with -mfma
#endif
]], [[]])], [hexi_simt_fma=yes], [hexi_simt_fma=no])
  AC_MSG_RESULT([$hexi_simt_fma])
  CXXFLAGS=$hexi_simt_fma_save
  AC_LANG_POP([C++])
  AM_CONDITIONAL([SIMT_FMA], [test "$hexi_simt_fma" = yes])
])
