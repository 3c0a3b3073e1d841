#!/bin/sh
# test-jobs.sh - tests/deps.sh's hexi_test_jobs, which sets how many tests
# tests/run.sh runs at once: HEXI_TEST_JOBS taken as given when it is a
# positive number, refused with a message otherwise (a typo must not
# quietly run the suite one test at a time), and the CPUs up to 8 without it.
set -u
srcdir=${srcdir:-.}
# shellcheck source=../deps.sh
. "$srcdir/../deps.sh"
fail=0
check() { # NAME WANT GOT
	if [ "$2" = "$3" ]; then echo "ok: $1"; else
		echo "FAIL: $1: want '$2', got '$3'"
		fail=1
	fi
}

for v in 1 3 16; do
	got=$(HEXI_TEST_JOBS=$v hexi_test_jobs 2>&1)
	check "HEXI_TEST_JOBS=$v" "$v" "$got"
done
for v in x 2x 0 02 -1 ' 2' 1.5; do
	err=$(HEXI_TEST_JOBS=$v hexi_test_jobs 2>&1 >/dev/null)
	rc=$?
	check "HEXI_TEST_JOBS='$v' refused" 1 "$rc"
	case $err in
	*"HEXI_TEST_JOBS=$v: not a number"*) check "HEXI_TEST_JOBS='$v' says why" yes yes ;;
	*) check "HEXI_TEST_JOBS='$v' says why" "HEXI_TEST_JOBS=$v: not a number..." "$err" ;;
	esac
done

cpus=$(nproc)
want=$cpus
[ "$want" -le 8 ] || want=8
got=$(unset HEXI_TEST_JOBS; hexi_test_jobs)
check "unset: the CPUs ($cpus), at most 8" "$want" "$got"
got=$(HEXI_TEST_JOBS='' hexi_test_jobs)
check "empty: as unset" "$want" "$got"
exit $fail
