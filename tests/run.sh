#!/bin/bash
# run.sh - README's test command: install what is needed, build, and run the
# whole test suite (plain build, then the unit tests again under ASan+UBSan),
# static analysis (tests/analyze.sh) and a bounded libFuzzer run.
# Safe to run twice.  Prints "N passed, N failed, N skipped" last.
set -u
HEXI_SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$HEXI_SRC/tests/deps.sh"

# The tests of a directory run in parallel (automake's harness; directories
# one after another): HEXI_TEST_JOBS, by default one per CPU, at most 8.
# Each test cluster, MPI job and scratch directory has its own ports and
# names (tests/slurm/cluster.sh), so tests do not meet.
jobs=$(hexi_test_jobs) || exit 1

status=0
# wall time of each part, printed as it ends and again at the end
times="" t_last=$SECONDS
took() {
	times="$times${times:+, }$1 $((SECONDS - t_last)) s"
	echo "   ($1: $((SECONDS - t_last)) s)"
	t_last=$SECONDS
}
hexi_install_deps || { echo "dependency install failed"; exit 1; }
hexi_build "$HEXI_SRC/build" --enable-werror || exit 1

find "$HEXI_SRC/build/tests" -name test-suite.log -exec rm -f {} + 2>/dev/null
echo "== make check (build, $jobs tests at a time)"
make -j"$jobs" -C "$HEXI_SRC/build" -k check >"$HEXI_SRC/build/check.out" 2>&1 || status=1
# -a: test names and messages may hold non-UTF-8 bytes (test_parse.t's
# refused Latin-1 paths); without it grep stops at them, "binary file matches"
grep -aE '^(PASS|FAIL|SKIP|ERROR|XPASS|XFAIL):' "$HEXI_SRC/build/check.out" |
	grep -vE '^PASS:' || true
took "build and tests"

if [ "${HEXI_NO_SANITIZERS:-0}" != 1 ]; then
	hexi_build "$HEXI_SRC/build-san" --enable-werror --enable-sanitizers CC=clang CXX=clang++ || exit 1
	find "$HEXI_SRC/build-san/tests" -name test-suite.log -exec rm -f {} + 2>/dev/null
	echo "== make check (build-san: clang 14, ASan+UBSan, unit tests, $jobs at a time)"
	# the shared fuzz driver is built by tests/, which this loop skips
	make -C "$HEXI_SRC/build-san/tests" libfuzzmain.la \
		>>"$HEXI_SRC/build-san/check.out" 2>&1 || status=1
	# tests/common without the checks of the source tree and configure
	# (shellcheck, man-lint, configure's switches, the call graph): a
	# second build changes nothing they read, the normal build ran them;
	# and without valgrind.sh, which does not mix with ASan
	common_san=$(printf 'hexi-print-tests:\n\t@echo $(TESTS)\n' |
		make -s --no-print-directory -C "$HEXI_SRC/build-san/tests/common" \
			-f Makefile -f - hexi-print-tests | tr ' ' '\n' |
		grep -vxE 'shellcheck\.sh|man-lint\.sh|configure\.sh|cycles\.sh|valgrind\.sh' |
		paste -sd' ')
	[ -n "$common_san" ] || { echo "FAIL: no tests/common list in build-san"; status=1; }
	ASAN_OPTIONS=detect_leaks=1 HEXI_SANITIZED=1 \
		make -j"$jobs" -C "$HEXI_SRC/build-san/tests/common" -k check TESTS="$common_san" \
		>>"$HEXI_SRC/build-san/check.out" 2>&1 || status=1
	for d in scheduler checkpoint; do
		ASAN_OPTIONS=detect_leaks=1 HEXI_SANITIZED=1 \
			make -j"$jobs" -C "$HEXI_SRC/build-san/tests/$d" -k check \
			>>"$HEXI_SRC/build-san/check.out" 2>&1 || status=1
	done
	# The SPANK plugin's unit tests (option/plugstack/GRES/hand-off parsers
	# and their fuzz target, srun's side with Slurm stubbed: test_local.t);
	# its cluster tests need the normal build.
	ASAN_OPTIONS=detect_leaks=1 HEXI_SANITIZED=1 \
		make -j"$jobs" -C "$HEXI_SRC/build-san/tests/spank" -k check TESTS="test_parse.t fuzz.sh test_local.t" \
		>>"$HEXI_SRC/build-san/check.out" 2>&1 || status=1
	# The GPU trainer's model and the emulated device (no MPI involved):
	# every emulated kernel, and the GPU model's host logic vs the CPU's.
	ASAN_OPTIONS=detect_leaks=1 HEXI_SANITIZED=1 \
		make -j"$jobs" -C "$HEXI_SRC/build-san/tests/gpuemu" -k check \
		TESTS="test_emu_ops.t gpu_model_emu.sh" \
		>>"$HEXI_SRC/build-san/check.out" 2>&1 || status=1
	# runtime/cuda's kernels on the SIMT emulation (tests/simt): under ASan
	# the guards around device memory are poisoned, so a kernel's read
	# past an allocation fails too, not only a write.  simt_nccl.sh
	# compares hexitrain_simt with the CPU trainer through rt_cmp.
	make -j"$jobs" -C "$HEXI_SRC/build-san/tests/runtime" rt_cmp mkplan \
		>>"$HEXI_SRC/build-san/check.out" 2>&1 || status=1
	ASAN_OPTIONS=detect_leaks=1 HEXI_SANITIZED=1 \
		make -j"$jobs" -C "$HEXI_SRC/build-san/tests/simt" -k check \
		>>"$HEXI_SRC/build-san/check.out" 2>&1 || status=1
	grep -aE '^(FAIL|ERROR|XPASS):' "$HEXI_SRC/build-san/check.out" || true
	took "sanitizers"
fi

# Static analysis of the whole tree (cppcheck, clang's analyzer through
# scan-build in build-analyze): any finding not suppressed with a reason in
# tests/analysis/ fails the run; since DECISIONS 110 that holds for the
# clang analyzer too (its findings were triaged to none, no baseline).
if [ "${HEXI_NO_ANALYSIS:-0}" != 1 ]; then
	echo "== static analysis (tests/analyze.sh)"
	HEXI_ANALYZE=cppcheck bash "$HEXI_SRC/tests/analyze.sh" "$HEXI_SRC" \
		"$HEXI_SRC/build-analyze" >"$HEXI_SRC/build/analyze.out" 2>&1
	rc=$?
	grep -E '^(PASS|FAIL):|^  ' "$HEXI_SRC/build/analyze.out" | head -n 60
	[ $rc -eq 0 ] || { echo "FAIL: cppcheck (exit $rc)"; status=1; }
	HEXI_ANALYZE=clang bash "$HEXI_SRC/tests/analyze.sh" "$HEXI_SRC" \
		"$HEXI_SRC/build-analyze" >"$HEXI_SRC/build/scan-build.out" 2>&1
	rc=$?
	grep -E '^(PASS|FAIL):|^  ' "$HEXI_SRC/build/scan-build.out" | head -n 80
	[ $rc -eq 0 ] || { echo "FAIL: clang static analyzer (exit $rc)"; status=1; }
	took "static analysis"
fi

# Coverage-guided fuzzing, bounded: every target of tests/fuzz/targets.list
# for HEXI_FUZZ_SECONDS (default 5) in build-fuzz (clang, libFuzzer).
if [ "${HEXI_NO_FUZZ:-0}" != 1 ]; then
	hexi_build "$HEXI_SRC/build-fuzz" --enable-werror --enable-sanitizers \
		--enable-fuzzing --without-cuda CC=clang || exit 1
	echo "== fuzz (libFuzzer, ${HEXI_FUZZ_SECONDS:-5} s per target)"
	make -s -C "$HEXI_SRC/build-fuzz" fuzz FUZZ_SECONDS="${HEXI_FUZZ_SECONDS:-5}" ||
		{ echo "FAIL: fuzz"; status=1; }
	took "fuzzing"
fi
echo "== wall time: $times; total $SECONDS s"

if [ $status -ne 0 ]; then
	# automake's .trs files say which tests failed; print their logs' tails
	# (grep runs only on files found: with none it would read stdin)
	find "$HEXI_SRC"/build*/tests -name '*.trs' -exec \
		grep -lE '^:global-test-result: (FAIL|ERROR|XPASS)' {} + 2>/dev/null |
	while IFS= read -r trs; do
		log=${trs%.trs}.log
		echo "---- $log"; grep -E '^not ok' "$log" | head -n 20; tail -n 40 "$log"
	done
fi
sh "$HEXI_SRC/tests/summary.sh" "$HEXI_SRC/build/tests" "$HEXI_SRC/build-san/tests"
exit $status
