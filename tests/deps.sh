# shellcheck shell=bash
# deps.sh - sourced by tests/run.sh and examples/demo.sh: install Debian
# packages (idempotent), bootstrap autotools, configure and build.
# Needs root (or sudo) the first time; later runs install nothing.

HEXI_PKGS="build-essential autoconf automake libtool pkg-config
  libjansson-dev libmetis-dev libxxhash-dev libopenblas-dev check
  libhdf5-dev hdf5-tools openmpi-bin libopenmpi-dev libpmix-dev
  slurm-wlm slurmctld slurmd slurm-client libslurm-dev munge
  mandoc groff-base valgrind python3 procps psmisc iproute2 util-linux strace
  clang libclang-rt-14-dev patchelf cppcheck clang-tools-14 shellcheck
  python3-torch python3-sentencepiece python3-numpy librsvg2-bin"

hexi_sudo() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

hexi_install_deps() {
	missing=""
	for p in $HEXI_PKGS; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	echo "== installing:$missing"
	hexi_sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq || true
	hexi_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends $missing
}

# hexi_test_jobs: how many tests of a directory run at once, on stdout:
# HEXI_TEST_JOBS if set (a positive number, else an error on stderr and
# status 1), or one per CPU, at most 8.
hexi_test_jobs() {
	if [ -n "${HEXI_TEST_JOBS:-}" ]; then
		case $HEXI_TEST_JOBS in
		*[!0-9]* | 0*)
			echo "HEXI_TEST_JOBS=$HEXI_TEST_JOBS: not a number of tests to run at once (1, 2, ...)" >&2
			return 1
			;;
		esac
		echo "$HEXI_TEST_JOBS"
		return 0
	fi
	n=$(nproc 2>/dev/null) || n=1
	case $n in '' | *[!0-9]* | 0*) n=1 ;; esac
	[ "$n" -le 8 ] || n=8
	echo "$n"
}

# hexi_build BUILDDIR [configure args...]: out-of-tree build under the source.
hexi_build() {
	bdir=$1
	shift
	( cd "$HEXI_SRC" &&
	  if [ ! -x configure ] || [ configure.ac -nt configure ] ||
	     [ -n "$(find . -name Makefile.am -newer configure -not -path './build*' | head -1)" ] ||
	     [ -n "$(find m4 -newer configure | head -1)" ]; then
		echo "== autoreconf"
		autoreconf -fi >/dev/null
	  fi ) || return 1
	mkdir -p "$bdir"
	( cd "$bdir" &&
	  if [ ! -f Makefile ] || [ "$HEXI_SRC/configure" -nt config.status ] ||
	     [ "$(cat .hexi-args 2>/dev/null)" != "$*" ]; then
		echo "== configure $*"
		"$HEXI_SRC/configure" "$@" >configure.out 2>&1 ||
			{ cat configure.out; exit 1; }
		echo "$*" >.hexi-args
		sed -n '/HexiScale .* configuration/,$p' configure.out
	  fi &&
	  echo "== make ($bdir)" &&
	  make -j"${HEXI_JOBS:-2}" >make.out 2>&1 ||
		{ tail -n 60 make.out; exit 1; } )
}
