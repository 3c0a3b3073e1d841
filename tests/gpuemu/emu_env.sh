# shellcheck shell=sh
# emu_env.sh - sourced by emu_train.sh and emu_zero.sh after rt_env.sh:
# the emulated GPU trainer (hexitrain_emu) and the check every emulated
# run shares (the comparisons with the CPU trainer are rt_env.sh's same).

# In a sanitizer build, LeakSanitizer would report Open MPI's and PMIx's
# own allocations; device memory leaks are checked by gpu_emu itself.
ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"
export ASAN_OPTIONS
EMU="$top_builddir/tests/gpuemu/hexitrain_emu"
[ -x "$EMU" ] || hard "hexitrain_emu not built: $EMU"
[ -x "$CMP" ] || hard "rt_cmp not built: $CMP"
[ -x "$MKPLAN" ] || hard "mkplan not built: $MKPLAN"

# emu_ok NAME NP STATUS: the run $WORK/NAME.{json,err} on NP ranks ended
# with STATUS 0 and gpu_emu reported no device memory misuse and no
# stream race ("gpu_emu: ..." lines on stderr); a failure says which.
emu_ok() {
	if [ "$3" -ne 0 ]; then
		fail "$1: emulated GPU run ($2 ranks) exit $3"
		sed 's/^/# /' "$WORK/$1.err" | head -n 20
		return 1
	fi
	if grep -q '^gpu_emu:' "$WORK/$1.err"; then
		fail "$1: device memory misuse or stream race"
		grep '^gpu_emu:' "$WORK/$1.err" |
			sed 's/0x[0-9a-f]*/ADDR/g' | sort | uniq -c | sed 's/^/# /'
		return 1
	fi
	return 0
}
