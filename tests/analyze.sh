#!/bin/bash
# analyze.sh SRC BUILD - static analysis of the whole tree, for tests/run.sh:
#  1. cppcheck (warning, portability) over every .c file of the modules and
#     tests, with tests/analysis/cppcheck.supp;
#  2. clang's static analyzer (scan-build from clang-tools-14) over a full
#     build in BUILD (configured here under scan-build, CUDA .c files
#     included, nvcc's .cu not), with tests/analysis/clang-analyzer.supp.
# Exit 1 on any finding not suppressed (each suppression has a reason),
# 77 if a tool is missing (CI installs both: tests/deps.sh).
# HEXI_ANALYZE=cppcheck or =clang runs one of them.
set -u
SRC=$1 BUILD=$2
only=${HEXI_ANALYZE:-all}
status=0
cd "$SRC" || exit 99
dirs="common scheduler checkpoint runtime profiler spank tests"

run_cppcheck() {
	local out=$BUILD/cppcheck.out
	command -v cppcheck >/dev/null || { echo "analyze: cppcheck missing"; return 77; }
	mkdir -p "$BUILD/cppcheck-cache"
	echo "== cppcheck $(cppcheck --version | sed 's/Cppcheck //') over $dirs"
	# config.h comes from the normal build (HAVE_* as CI configures them);
	# cppcheck also checks the other #ifdef branches itself
	cppcheck -q --std=c11 --enable=warning,portability --inline-suppr \
		-j"${HEXI_JOBS:-2}" --cppcheck-build-dir="$BUILD/cppcheck-cache" \
		--suppressions-list=tests/analysis/cppcheck.supp \
		-I"$SRC/build" -Icommon -Ischeduler -Ispank -Icheckpoint -Iruntime \
		-Iprofiler -Itests -DHAVE_CONFIG_H \
		--template='{file}:{line}: {severity}: {message} [{id}]' \
		$dirs >"$out" 2>&1
	if [ -s "$out" ]; then
		echo "FAIL: cppcheck: $(wc -l <"$out") finding(s):"
		sed 's/^/  /' "$out"
		return 1
	fi
	echo "PASS: cppcheck: no finding"
}

run_clang() {
	local sb rep
	sb=$(command -v scan-build-14 || command -v scan-build) ||
		{ echo "analyze: scan-build missing (clang-tools-14)"; return 77; }
	rep=$BUILD/scan-build
	rm -rf "$rep"
	mkdir -p "$BUILD" "$rep"
	echo "== clang static analyzer ($sb) in $BUILD"
	(cd "$BUILD" &&
		{ [ -f Makefile ] || "$sb" --use-cc=clang "$SRC/configure" \
			--disable-werror >configure.out 2>&1 ||
			{ tail -n 20 configure.out; exit 1; }; } &&
		make clean >/dev/null 2>&1
		"$sb" --use-cc=clang -plist --exclude /usr -o "$rep" \
			make -j"${HEXI_JOBS:-2}" >make.out 2>&1 ||
			{ tail -n 30 make.out; exit 1; }) || return 1
	python3 "$SRC/tests/analysis/scan_report.py" "$SRC" "$rep" \
		"$SRC/tests/analysis/clang-analyzer.supp"
}

if [ "$only" = all ] || [ "$only" = cppcheck ]; then
	run_cppcheck
	rc=$?
	[ $rc -eq 0 ] || status=$rc
fi
if [ "$only" = all ] || [ "$only" = clang ]; then
	run_clang
	rc=$?
	[ $rc -eq 0 ] || [ $status -eq 1 ] || status=$rc
fi
exit $status
