# shellcheck shell=sh
# tap.sh - helpers for shell tests (sourced).  Exit codes: 0 pass, 1 fail,
# 77 skip (reason printed), 99 hard error.
t_n=0
t_failed=0
skip() { echo "SKIP: $*"; exit 77; }
hard() { echo "ERROR: $*"; exit 99; }
pass() { t_n=$((t_n + 1)); echo "ok $t_n - $*"; }
fail() { t_n=$((t_n + 1)); t_failed=$((t_failed + 1)); echo "not ok $t_n - $*"; }
# check NAME CMD...: run CMD, pass if it exits 0
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name (exit $?)"; fi; }
# check_fails NAME CMD...: pass if CMD exits non-zero
check_fails() { local name=$1; shift; if "$@"; then fail "$name (unexpected success)"; else pass "$name"; fi; }
# expect_eq NAME GOT WANT
expect_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: got '$2', want '$3'"; fi; }
done_testing() { echo "1..$t_n"; [ "$t_failed" -eq 0 ] || { echo "# $t_failed of $t_n failed"; exit 1; }; exit 0; }
