#!/bin/bash
# libfuzzer.sh SRC BUILD SECONDS [NAME...] - coverage-guided fuzzing of the
# targets in tests/fuzz/targets.list (all, or the NAMEs given) with
# libFuzzer, SECONDS each, in BUILD, a build configured with
# --enable-sanitizers --enable-fuzzing CC=clang (`make fuzz` makes one).
# Each target starts from a working corpus BUILD/tests/fuzz/work/NAME
# (kept between runs, so long runs build on each other) plus the seed
# directories of the list; a crash, leak or sanitizer report fails the run
# and leaves the input in BUILD/tests/fuzz/artifacts/NAME/.  Prints one line
# per target: executions, exec/s, coverage (edges) and features, corpus.
set -u
SRC=$1 BUILD=$2 SECS=$3
shift 3
LIST=$SRC/tests/fuzz/targets.list
[ -f "$LIST" ] || { echo "libfuzzer.sh: no $LIST"; exit 99; }
grep -q '^libfuzzmain_la_CPPFLAGS = .*-DHEXI_LIBFUZZER' "$BUILD/tests/Makefile" 2>/dev/null ||
	{ echo "libfuzzer.sh: $BUILD is not configured with --enable-fuzzing"; exit 99; }
status=0
printf '%-10s %10s %8s %7s %7s %6s  %s\n' target execs exec/s edges features corpus result
while read -r name dir prog seeds; do
	case $name in '' | '#'*) continue ;; esac
	if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then continue; fi
	if ! make -s -C "$BUILD/tests" libfuzzmain.la >/dev/null 2>&1 ||
		! make -s -C "$BUILD/tests/$dir" "$prog" >"$BUILD/tests/fuzz/build-$name.log" 2>&1; then
		printf '%-10s %s\n' "$name" "BUILD FAILED (see $BUILD/tests/fuzz/build-$name.log)"
		status=1
		continue
	fi
	bin=$BUILD/tests/$dir/$prog
	[ -x "$BUILD/tests/$dir/.libs/$prog" ] && bin=$BUILD/tests/$dir/.libs/$prog
	work=$BUILD/tests/fuzz/work/$name art=$BUILD/tests/fuzz/artifacts/$name/
	mkdir -p "$work" "$art"
	sd=""
	for s in $seeds; do [ -d "$SRC/$s" ] && sd="$sd $SRC/$s"; done
	log=$BUILD/tests/fuzz/$name.log
	# -rss_limit_mb: a parser must not need more; -timeout: no input may
	# take a second (a hang is a finding too)
	LD_LIBRARY_PATH="$BUILD/scheduler/.libs:$BUILD/checkpoint/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" \
		timeout $((SECS + 120)) "$bin" -max_total_time="$SECS" -timeout=10 \
		-rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
		-artifact_prefix="$art" "$work" $sd >"$log" 2>&1
	rc=$?
	line=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	cov=$(printf '%s' "$line" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
	ft=$(printf '%s' "$line" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
	corp=$(printf '%s' "$line" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
	if [ $rc -eq 0 ]; then res=ok; else res="FAILED (exit $rc, $log)"; status=1; fi
	printf '%-10s %10s %8s %7s %7s %6s  %s\n' "$name" "${execs:-?}" "${eps:-?}" \
		"${cov:-?}" "${ft:-?}" "${corp:-?}" "$res"
	[ $rc -eq 0 ] || grep -E 'ERROR|SUMMARY|Test unit written' "$log" | head -n 5 | sed 's/^/#   /'
done <"$LIST"
exit $status
