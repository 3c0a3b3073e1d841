# shellcheck shell=sh
# configure.sh: configure's dependency switches do what --help says:
# --with-X for a missing X is an error naming it, --without-X turns X off
# (and the summary says so), a CPU-only configuration still configures.
. "$top_srcdir/tests/tap.sh"
tmp=$(mktemp -d /tmp/hexi-conf-XXXXXX) || hard "mktemp failed"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || hard "cd $tmp"
# configure refuses to run outside a source tree that is configured itself
# ("source directory already configured"): for an in-tree build (README's
# ./configure && make check) run it in a copy of the sources, in-tree too.
conf() { "$top_srcdir/configure" --disable-werror "$@" >out 2>&1; }
if [ -f "$top_srcdir/config.status" ]; then
	mkdir "$tmp/src" &&
		tar -C "$top_srcdir" --exclude=.git --exclude=./build --exclude=./build-san \
			--exclude=./build-analyze --exclude=./build-fuzz --exclude=.libs \
			--exclude=.deps --exclude='*.o' --exclude='*.lo' --exclude='*.la' \
			--exclude='*.a' --exclude='*.so' --exclude='*.log' --exclude='*.trs' \
			--exclude=config.status -cf - . | tar -C "$tmp/src" -xf - ||
		hard "cannot copy the configured source tree"
	echo "# in-tree build: configure runs in a copy of the sources"
	conf() { (cd "$tmp/src" && ./configure --disable-werror "$@") >out 2>&1; }
fi

conf --with-cuda=/nonexistent
expect_eq "--with-cuda=/nonexistent fails" "$?" 1
grep -q "with-cuda=/nonexistent: no such directory" out && pass "the error names the option" ||
	fail "the error names the option: $(tail -n 2 out)"

# A pkg-config search path that has jansson but no PMIx.
mkdir pc && cp "$(pkg-config --variable=pcfiledir jansson)/jansson.pc" pc/ ||
	hard "no jansson.pc"
PKG_CONFIG_LIBDIR=$tmp/pc PKG_CONFIG_PATH='' conf --with-pmix
expect_eq "--with-pmix without PMIx fails" "$?" 1
grep -q "with-pmix was given but pmix was not found" out && pass "the error names pmix" ||
	fail "the error names pmix: $(tail -n 2 out)"

conf --without-cuda --without-hdf5 --without-mpi --without-pmix --without-slurm \
	--without-openblas --without-xxhash --without-check
expect_eq "a minimal CPU configuration configures" "$?" 0
for dep in "Slurm spank.h" PMIx MPI HDF5 xxhash OpenBLAS "CUDA \\+ NCCL"; do
	grep -qE "^ +$dep +no" out && pass "summary: $dep no" || fail "summary: $dep no"
done
done_testing
