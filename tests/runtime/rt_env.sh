# shellcheck shell=sh
# rt_env.sh - sourced by the runtime's shell tests: paths, MPI settings.
. "$top_srcdir/tests/tap.sh"
HT="$top_builddir/runtime/hexitrain"
CMP="$top_builddir/tests/runtime/rt_cmp"
# shellcheck disable=SC2034 # used by the tests that source this file
MKPLAN="$top_builddir/tests/runtime/mkplan"
# shellcheck disable=SC2034 # used by the tests that source this file
PLANS="$top_srcdir/tests/runtime/plans"
[ -x "$HT" ] || hard "hexitrain not built: $HT"
# Tiny models on 2 shared cores: one BLAS thread, TCP on loopback (the
# shared-memory BTL misbehaves with oversubscription, SLURM-FACTS.md).
export OPENBLAS_NUM_THREADS=1
export OMPI_MCA_btl=self,tcp
export OMPI_MCA_btl_tcp_if_include=lo
export OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_mpi_yield_when_idle=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hexirt.XXXXXX") || hard "mktemp"
trap 'rm -rf "$WORK"' EXIT
need_mpi() {
	command -v mpirun >/dev/null 2>&1 || skip "mpirun not installed"
	"$HT" --help >/dev/null || hard "hexitrain --help failed"
}
# world_size of a plan file
plan_ranks() { sed -n 's/^ *"world_size": *\([0-9]*\).*/\1/p' "$1" | head -n 1; }
# signal_when PID SIG FILE PATTERN: once FILE has a line matching PATTERN
# (polled every 0.05 s, for 30 s at most), send SIG to PID (a background
# child of this shell) and wait for it; returns its exit status
signal_when() {
	local pid=$1 sig=$2 file=$3 pat=$4 n=0
	while ! grep -q -- "$pat" "$file" && [ $n -lt 600 ]; do
		sleep 0.05
		n=$((n + 1))
	done
	kill -s "$sig" "$pid"
	wait "$pid"
}
# hx_mpirun NP ARGS...: run under mpirun with a hard time limit
hx_mpirun() {
	local np=$1
	shift
	timeout -k 5 "${HX_TIMEOUT:-120}" mpirun --oversubscribe \
		--allow-run-as-root -np "$np" "$@"
}
# same WHAT REF RUN [TOL]: the loss each step and the parameters of RUN
# equal REF's ($WORK/REF.json and the dumps $WORK/REF.*), within TOL
# relative (rt_cmp; 1e-5 by default)
same() {
	out=$("$CMP" --tol "${4:-1e-5}" --loss "$WORK/$2.json" "$WORK/$3.json")
	st=$?
	echo "$out" | tail -n 1 | sed 's/^/# /'
	expect_eq "$1: same loss each step" "$st" 0
	out=$("$CMP" --tol "${4:-1e-5}" --params "$WORK/$2" "$WORK/$3")
	st=$?
	echo "$out" | tail -n 1 | sed 's/^/# /'
	expect_eq "$1: same parameters" "$st" 0
}
# differ WHAT REF RUN: rt_cmp must report RUN's loss and parameters as
# different from REF's (a negative control)
differ() {
	"$CMP" --loss "$WORK/$2.json" "$WORK/$3.json" >"$WORK/$3.out"
	expect_eq "$1: losses reported different" "$?" 1
	tail -n 1 "$WORK/$3.out" | sed 's/^/# /'
	"$CMP" --params "$WORK/$2" "$WORK/$3" >"$WORK/$3.out"
	expect_eq "$1: parameters reported different" "$?" 1
	tail -n 1 "$WORK/$3.out" | sed 's/^/# /'
}
# owned ERR: the elements the sharded sync's ranks own, summed over the
# "zero N: owns K of ..." lines of a --verbose run's stderr
owned() { sed -n 's/.*zero [12]: owns \([0-9]*\) of.*/\1/p' "$1" |
	awk '{s += $1} END {print s + 0}'; }
