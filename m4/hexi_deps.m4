# hexi_deps.m4: one macro per dependency.

# HEXI_JANSSON: required (plan, cluster and model JSON).
AC_DEFUN([HEXI_JANSSON], [
  PKG_CHECK_MODULES([JANSSON], [jansson >= 2.10], [],
    [AC_MSG_ERROR([jansson is required (Debian: libjansson-dev)])])
])

# HEXI_METIS: required (phase-1 graph partitioning).
AC_DEFUN([HEXI_METIS], [
  hexi_save_LIBS=$LIBS
  AC_CHECK_HEADER([metis.h], [],
    [AC_MSG_ERROR([METIS is required (Debian: libmetis-dev)])])
  AC_CHECK_LIB([metis], [METIS_PartGraphKway], [METIS_LIBS=-lmetis],
    [AC_MSG_ERROR([libmetis is required (Debian: libmetis-dev)])])
  LIBS=$hexi_save_LIBS
  AC_SUBST([METIS_LIBS])
])

# HEXI_SLURM: slurm/spank.h for the SPANK plugin; plugin directory.
AC_DEFUN([HEXI_SLURM], [
  HEXI_OPTIONAL([slurm], [build the SPANK plugin against slurm/spank.h], [
    hexi_slurm_inc=""
    AS_IF([test -d "$hexi_want_slurm"], [hexi_slurm_inc="-I$hexi_want_slurm/include"],
      [test "x$hexi_want_slurm" != xyes && test "x$hexi_want_slurm" != xcheck],
      [AC_MSG_ERROR([--with-slurm=$hexi_want_slurm: no such directory])])
    hexi_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$CPPFLAGS $hexi_slurm_inc"
    AC_CHECK_HEADER([slurm/spank.h], [hexi_have_slurm=yes], [hexi_have_slurm=no])
    CPPFLAGS=$hexi_save_CPPFLAGS
    SLURM_CPPFLAGS=$hexi_slurm_inc
  ])
  AC_SUBST([SLURM_CPPFLAGS])
  AC_ARG_WITH([slurm-plugindir],
    [AS_HELP_STRING([--with-slurm-plugindir=DIR], [where hexiscale.so goes (default: Slurm's own plugin dir when installing under /usr, else LIBDIR/slurm)])],
    [slurmplugindir=$withval], [
      AS_IF([test "x$prefix" = x/usr && test -d /usr/lib/x86_64-linux-gnu/slurm-wlm],
        [slurmplugindir=/usr/lib/x86_64-linux-gnu/slurm-wlm],
        [slurmplugindir='${libdir}/slurm'])])
  AC_SUBST([slurmplugindir])
])

# HEXI_PMIX: direct PMIx bootstrap.
AC_DEFUN([HEXI_PMIX], [
  HEXI_OPTIONAL([pmix], [PMIx bootstrap in the runtime], [HEXI_PKG([pmix], [pmix], [PMIX])])
])

# HEXI_MPI: flags from the MPI C wrapper, so plain $CC builds MPI code.
AC_DEFUN([HEXI_MPI], [
  HEXI_OPTIONAL([mpi], [MPI (runtime collectives on CPU, profiler)], [
    AC_PATH_PROG([MPICC], [mpicc], [])
    AS_IF([test -n "$MPICC"], [
      MPI_CFLAGS=`$MPICC --showme:compile 2>/dev/null`
      MPI_LIBS=`$MPICC --showme:link 2>/dev/null`
      AS_IF([test -n "$MPI_LIBS"], [hexi_have_mpi=yes])])
    AC_PATH_PROG([MPIRUN], [mpirun], [])
  ])
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
])

# HEXI_HDF5: serial HDF5 by name (plain "hdf5" flips with the MPI flavour).
AC_DEFUN([HEXI_HDF5], [
  HEXI_OPTIONAL([hdf5], [HDF5 checkpoints (serial flavour)], [HEXI_PKG([hdf5], [hdf5-serial], [HDF5])])
  AC_ARG_ENABLE([parallel-hdf5],
    [AS_HELP_STRING([--enable-parallel-hdf5], [use the hdf5-openmpi flavour])],
    [hexi_phdf5=$enableval], [hexi_phdf5=no])
  AS_IF([test "x$hexi_phdf5" = xyes], [
    PKG_CHECK_MODULES([HDF5], [hdf5-openmpi], [AC_DEFINE([HAVE_PARALLEL_HDF5], [1], [parallel HDF5])],
      [AC_MSG_ERROR([--enable-parallel-hdf5 given but hdf5-openmpi was not found])])])
])

# HEXI_XXHASH: slice checksums.
AC_DEFUN([HEXI_XXHASH], [
  HEXI_OPTIONAL([xxhash], [xxhash checksums in checkpoints], [HEXI_PKG([xxhash], [libxxhash], [XXHASH])])
])

# HEXI_OPENBLAS: CPU GEMM.
AC_DEFUN([HEXI_OPENBLAS], [
  HEXI_OPTIONAL([openblas], [OpenBLAS GEMM for the CPU runtime], [HEXI_PKG([openblas], [openblas], [OPENBLAS])])
])

# HEXI_CHECK: unit-test framework (optional; tests use tests/tap.h otherwise).
AC_DEFUN([HEXI_CHECK], [
  HEXI_OPTIONAL([check], [Check unit-test framework], [HEXI_PKG([check], [check], [CHECK])])
])

# HEXI_CUDA: nvcc, cudart, cuBLAS and NCCL under /usr/local/cuda or DIR.
AC_DEFUN([HEXI_CUDA], [
  HEXI_OPTIONAL([cuda], [CUDA GPU path (nvcc, cudart, cuBLAS, NCCL); DIR defaults to /usr/local/cuda], [
    hexi_cuda_dir=/usr/local/cuda
    AS_IF([test -d "$hexi_want_cuda"], [hexi_cuda_dir=$hexi_want_cuda],
      [test "x$hexi_want_cuda" != xyes && test "x$hexi_want_cuda" != xcheck],
      [AC_MSG_ERROR([--with-cuda=$hexi_want_cuda: no such directory])])
    AC_PATH_PROG([NVCC], [nvcc], [], [$hexi_cuda_dir/bin])
    hexi_cuda_lib=$hexi_cuda_dir/lib64
    AS_IF([test -d "$hexi_cuda_dir/targets/x86_64-linux/lib"],
      [hexi_cuda_lib=$hexi_cuda_dir/targets/x86_64-linux/lib])
    AS_IF([test -n "$NVCC" && test -f "$hexi_cuda_dir/include/cuda_runtime.h" &&
           test -f "$hexi_cuda_dir/include/cublas_v2.h" &&
           test -f "$hexi_cuda_dir/include/nccl.h"], [hexi_have_cuda=yes])
    dnl -isystem: CUDA's and NCCL's headers have old-style prototypes that
    dnl -Wstrict-prototypes -Werror would reject in our own files.
    CUDA_CPPFLAGS="-isystem $hexi_cuda_dir/include"
    CUDA_LIBS="-L$hexi_cuda_lib -Wl,-rpath,$hexi_cuda_lib -lcublasLt -lcublas -lnccl ${CUDA_RT_LIBS:--lcudart}"
    CUDA_DIR=$hexi_cuda_dir
  ])
  AC_ARG_VAR([CUDA_RT_LIBS], [how to link the CUDA runtime (default -lcudart; tests/gpu/make-bundle.sh: -lcudart_static -ldl -lrt -lpthread)])
  AC_ARG_VAR([NVCCFLAGS], [extra flags for nvcc])
  AC_ARG_VAR([CUDA_ARCHS], [GPU architectures to build for (default: "80 89 90" = A100/A800, RTX 4090/L40, H100/H200)])
  AS_IF([test -z "$CUDA_ARCHS"], [CUDA_ARCHS="80 89 90"])
  NVCC_GENCODE=""
  for hexi_a in $CUDA_ARCHS; do
    case $hexi_a in
      *@<:@!0-9@:>@*|"") AC_MSG_ERROR([CUDA_ARCHS: '$hexi_a' is not a compute capability like 80]) ;;
    esac
    NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$hexi_a,code=sm_$hexi_a"
    hexi_last_arch=$hexi_a
  done
  dnl PTX of the newest architecture too, so later GPUs can JIT it.
  AS_IF([test -n "$hexi_last_arch"],
    [NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$hexi_last_arch,code=compute_$hexi_last_arch"])
  AC_SUBST([NVCC_GENCODE])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([CUDA_DIR])
])

# HEXI_CUDNN: cuDNN 9's backend API header (cudnn_backend.h, plain C) for
# the fused attention.  Only the header is needed at build time: the
# library is opened at run time (dlopen libcudnn.so.9), so a binary runs,
# with its own attention kernel, where cuDNN is absent.  Needs CUDA.
AC_DEFUN([HEXI_CUDNN], [
  HEXI_OPTIONAL([cudnn], [cuDNN 9 fused attention (header only; the library is opened at run time); DIR defaults to the CUDA directory], [
    hexi_cudnn_dir=${hexi_cuda_dir:-/usr/local/cuda}
    AS_IF([test -d "$hexi_want_cudnn"], [hexi_cudnn_dir=$hexi_want_cudnn],
      [test "x$hexi_want_cudnn" != xyes && test "x$hexi_want_cudnn" != xcheck],
      [AC_MSG_ERROR([--with-cudnn=$hexi_want_cudnn: no such directory])])
    AC_MSG_CHECKING([for cuDNN >= 9 in $hexi_cudnn_dir/include])
    hexi_cudnn_major=`sed -n 's/^#define CUDNN_MAJOR  *\([[0-9]]*\).*/\1/p' "$hexi_cudnn_dir/include/cudnn_version.h" 2>/dev/null`
    AS_IF([test "x$hexi_have_cuda" = xyes && test -f "$hexi_cudnn_dir/include/cudnn_backend.h" &&
           test "${hexi_cudnn_major:-0}" -ge 9 2>/dev/null],
      [hexi_have_cudnn=yes
       dnl dlopen: in libc since glibc 2.34, -ldl for older ones
       CUDA_LIBS="$CUDA_LIBS -ldl"
       AS_IF([test "x$hexi_cudnn_dir" != "x$hexi_cuda_dir"],
         [CUDNN_CPPFLAGS="-isystem $hexi_cudnn_dir/include"])])
    AC_MSG_RESULT([$hexi_have_cudnn${hexi_cudnn_major:+ (cuDNN $hexi_cudnn_major)}])
  ])
  AC_SUBST([CUDNN_CPPFLAGS])
])

# HEXI_TOOLS: programs the tests use when present.
AC_DEFUN([HEXI_TOOLS], [
  AC_PATH_PROG([MANDOC], [mandoc], [])
  AC_PATH_PROG([GROFF], [groff], [])
  AC_PATH_PROG([VALGRIND], [valgrind], [])
  AC_PATH_PROG([H5DUMP], [h5dump], [])
  AC_PATH_PROG([SLURMCTLD], [slurmctld], [], [$PATH:/usr/sbin])
])

# HEXI_SUMMARY: what was found.
AC_DEFUN([HEXI_SUMMARY], [
  AC_MSG_NOTICE([
  HexiScale $PACKAGE_VERSION configuration
  ---------------------------------------------
    compiler          $CC
    werror            $hexi_werror
    sanitizers        $hexi_san
    jansson           yes (required)
    METIS             yes (required)
    Slurm spank.h     $hexi_have_slurm    plugin dir: $slurmplugindir
    PMIx              $hexi_have_pmix
    MPI               $hexi_have_mpi  $MPICC
    HDF5              $hexi_have_hdf5 (parallel: $hexi_phdf5)
    xxhash            $hexi_have_xxhash
    OpenBLAS          $hexi_have_openblas
    Check             $hexi_have_check
    CUDA + NCCL       $hexi_have_cuda  $NVCC (archs: $CUDA_ARCHS)
    cuDNN attention   $hexi_have_cudnn
    mandoc            ${MANDOC:-no}
    valgrind          ${VALGRIND:-no}
  ])
])
