#!/bin/bash
# make-bundle.sh - build HERE (the CPU machine) a self-contained GPU build
# that travels to a machine which has only a CUDA image (driver, nvcc,
# cuBLAS, cuDNN, and NCCL from PyTorch's pip wheel): nothing is built
# there.  The bundle mirrors a build directory, so tests/gpu/device-check.sh
# and tests/bench/fidelity.sh use it as HEXI_BUILD unchanged:
#
#   bundle-gpu/profiler/hexiprof  scheduler/hexiplan  runtime/hexitrain
#   bundle-gpu/tests/gpu/{test_kernels,test_nccl.t,test_gpu_model,bench_gpu_train,
#                         test_cudnn_plan.t}
#   bundle-gpu/lib/libmetis.so.5   (the one non-system library left shared)
#   bundle-gpu/MANIFEST            (commit, CUDA built against, archs, needs)
#
# Linked statically: the project's libraries, jansson, the CUDA runtime
# (cudart_static).  Taken from the GPU machine's image at run time: glibc,
# libstdc++, cuBLAS/cuBLASLt, NCCL (device-check.sh finds them), cuDNN
# (opened with dlopen: absent, the own attention kernel runs).  Built
# without MPI, HDF5, OpenBLAS, PMIx, xxhash, Slurm (one rank, no
# checkpoints).  Every binary gets RUNPATH $ORIGIN/<up>/lib (patchelf).
#
# Usage: tests/gpu/make-bundle.sh [OUTDIR]   (default $HEXI_SRC/bundle-gpu)
# Environment: CUDA_ARCHS (default "80 89 90"), HEXI_JOBS (default 2),
#   HEXI_BUNDLE_BUILD (build directory, default $HEXI_SRC/build-bundle),
#   HEXI_BUNDLE_MAX_MIB (default 40).
# Exit: 0 built and checked; 1 failed (the reason printed); 77 cannot
# build here (no nvcc / patchelf, the reason printed).
set -u
HEXI_SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUTDIR=${1:-$HEXI_SRC/bundle-gpu}
BUILD=${HEXI_BUNDLE_BUILD:-$HEXI_SRC/build-bundle}
ARCHS=${CUDA_ARCHS:-80 89 90}
MAX_MIB=${HEXI_BUNDLE_MAX_MIB:-40}
JOBS=${HEXI_JOBS:-2}
CUDA=${CUDA_DIR:-/usr/local/cuda}
LIBDIR=/usr/lib/x86_64-linux-gnu

die() { echo "make-bundle: $*" >&2; exit 1; }
skip() { echo "make-bundle: SKIP: $*" >&2; exit 77; }

[ -x "$CUDA/bin/nvcc" ] || skip "no nvcc in $CUDA/bin (CUDA_DIR)"
command -v patchelf >/dev/null 2>&1 || skip "patchelf is not installed (Debian: patchelf)"
[ -f "$LIBDIR/libjansson.a" ] || skip "no static jansson ($LIBDIR/libjansson.a, libjansson-dev)"
[ -f "$CUDA/lib64/libcudart_static.a" ] || skip "no $CUDA/lib64/libcudart_static.a"

# ---- configure + build (only what the bundle carries) ----------------------
args="--disable-shared --enable-static --with-cuda=$CUDA --without-mpi
 --without-hdf5 --without-openblas --without-pmix --without-xxhash
 --without-slurm --without-check"
[ -f "$CUDA/include/cudnn_backend.h" ] && args="$args --with-cudnn"
( cd "$HEXI_SRC" && { [ -x configure ] && [ ! configure.ac -nt configure ]; } ||
	autoreconf -fi >/dev/null ) || die "autoreconf failed"
mkdir -p "$BUILD" || die "cannot create $BUILD"
key="$args CUDA_ARCHS=$ARCHS"
if [ ! -f "$BUILD/Makefile" ] || [ "$(cat "$BUILD/.hexi-bundle-args" 2>/dev/null)" != "$key" ] ||
	[ "$HEXI_SRC/configure" -nt "$BUILD/config.status" ]; then
	echo "== configure (bundle): $key"
	# a directory holding only the static jansson, so -ljansson is static
	# wherever libtool puts it on a link line
	mkdir -p "$BUILD/static-libs" && cp "$LIBDIR/libjansson.a" "$BUILD/static-libs/" ||
		die "cannot stage libjansson.a"
	# shellcheck disable=SC2086 # word splitting of $args is wanted
	(cd "$BUILD" && "$HEXI_SRC/configure" $args CUDA_ARCHS="$ARCHS" \
		JANSSON_CFLAGS="" JANSSON_LIBS="-L$BUILD/static-libs -ljansson" \
		CUDA_RT_LIBS="-lcudart_static -ldl -lrt -lpthread" \
		>configure.out 2>&1) || { tail -n 30 "$BUILD/configure.out"; die "configure failed"; }
	echo "$key" >"$BUILD/.hexi-bundle-args"
	# libraries linked under other settings keep them in their .la files
	make -C "$BUILD" clean >/dev/null 2>&1
fi
echo "== make (bundle, -j$JOBS, CUDA_ARCHS=$ARCHS)"
progs="profiler/hexiprof scheduler/hexiplan runtime/hexitrain"
tests="test_kernels test_nccl.t test_gpu_model bench_gpu_train test_cudnn_plan.t"
# only the libraries and programs the bundle carries (not the other tests)
(cd "$BUILD" && : >make.out && for d in common scheduler runtime/cuda runtime profiler; do
	make -C "$d" -j"$JOBS" >>make.out 2>&1 || exit 1
done && make -C tests/gpu -j"$JOBS" $tests >>make.out 2>&1) ||
	{ tail -n 40 "$BUILD/make.out"; die "build failed"; }

# ---- assemble ------------------------------------------------------------------
rm -rf "$OUTDIR.tmp" && mkdir -p "$OUTDIR.tmp/lib" "$OUTDIR.tmp/tests/gpu" ||
	die "cannot create $OUTDIR.tmp"
for p in $progs; do
	mkdir -p "$OUTDIR.tmp/$(dirname "$p")"
	cp "$BUILD/$p" "$OUTDIR.tmp/$p" || die "missing $BUILD/$p"
done
for t in $tests; do cp "$BUILD/tests/gpu/$t" "$OUTDIR.tmp/tests/gpu/" || die "missing $t"; done
cp -L "$LIBDIR/libmetis.so.5" "$OUTDIR.tmp/lib/" || die "no libmetis.so.5"
for f in $progs; do patchelf --set-rpath '$ORIGIN/../lib' "$OUTDIR.tmp/$f"; done
for t in $tests; do patchelf --set-rpath '$ORIGIN/../../lib' "$OUTDIR.tmp/tests/gpu/$t"; done
strip --strip-debug "$OUTDIR.tmp"/*/* "$OUTDIR.tmp"/tests/gpu/* 2>/dev/null

# ---- check: nothing outside the bundle but system and image libraries ----------
# allowed from outside: glibc's, libstdc++/libgcc, and what the GPU image
# provides (cuBLAS, NCCL); cudart must be static
allowed='^(linux-vdso|libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcublas|libcublasLt|libnccl)\.so'
bad=""
for f in $(cd "$OUTDIR.tmp" && find . -type f -perm -u+x | sort); do
	while read -r lib; do
		[ -e "$OUTDIR.tmp/lib/$lib" ] && continue # carried
		echo "$lib" | grep -Eq "$allowed" || bad="$bad $f:$lib"
	done < <(readelf -d "$OUTDIR.tmp/$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
done
[ -z "$bad" ] || die "needs libraries outside the bundle/system:$bad"
glibc=$(find "$OUTDIR.tmp" -type f -perm -u+x -exec objdump -T {} + 2>/dev/null |
	grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -1)
glibcxx=$(find "$OUTDIR.tmp" -type f -perm -u+x -exec objdump -T {} + 2>/dev/null |
	grep -o 'GLIBCXX_[0-9.]*' | sort -Vu | tail -1)
mib=$(du -sm "$OUTDIR.tmp" | cut -f1)
[ "$mib" -le "$MAX_MIB" ] || die "bundle is $mib MiB, more than $MAX_MIB MiB"
cuda_v=$("$CUDA/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
nccl_v=$(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' "$CUDA/include/nccl.h" | paste -sd.)
cudnn_v=$(sed -n 's/^#define CUDNN_\(MAJOR\|MINOR\|PATCHLEVEL\) *\([0-9]*\).*/\2/p' "$CUDA/include/cudnn_version.h" 2>/dev/null | paste -sd.)
{
	echo "hexiscale-gpu-bundle 1"
	echo "commit       $(git -C "$HEXI_SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$HEXI_SRC" diff --quiet 2>/dev/null || echo '+changes')"
	echo "built        $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
	echo "cuda         $cuda_v (cudart static; needs a driver for CUDA >= $cuda_v)"
	echo "archs        $ARCHS (+ PTX of the last)"
	echo "needs        libcublas.so.${cuda_v%%.*} libcublasLt.so.${cuda_v%%.*} libnccl.so.2 (>= $nccl_v) from the image"
	echo "optional     libcudnn.so.9 (built against ${cudnn_v:-none}; dlopen, else the own attention kernel)"
	echo "glibc        $glibc $glibcxx"
	echo "size_mib     $mib"
} >"$OUTDIR.tmp/MANIFEST"
rm -rf "$OUTDIR" && mv "$OUTDIR.tmp" "$OUTDIR" || die "cannot move the bundle into $OUTDIR"
cat "$OUTDIR/MANIFEST"
echo "make-bundle: ok: $OUTDIR ($mib MiB)"
