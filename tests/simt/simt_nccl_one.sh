#!/bin/sh
# simt_nccl_one.sh: tests/gpu/test_nccl.t, the NCCL backend on one rank as
# device-check.sh runs it on a GPU, here on the SIMT device with
# nccl_mpi.c (test_nccl_simt) and deferred streams: the blocking
# collectives, and the overlapped sync's non-blocking ones ordered after a
# producer stream (a missing order reads the stale buffer), completed by
# test and by wait in either order, requests reused.  A second run has
# every NCCL enqueue return ncclInProgress and reach its stream only two
# ncclCommGetAsyncError polls later (SIMT_NCCL_INPROGRESS=2): the backend
# must let it settle before it touches the stream again.  Neither run may
# print a "simt:" line.
. "$top_srcdir/tests/simt/simt_tap.sh"
[ -x ./test_nccl_simt ] || skip "test_nccl_simt not built (no MPI)"
SIMT_STREAMS=deferred
export SIMT_STREAMS

for inprog in 0 2; do
	SIMT_NCCL_INPROGRESS=$inprog ./test_nccl_simt >"$WORK/out" 2>"$WORK/err"
	st=$?
	grep -E '^not ok' "$WORK/out" | head -n 20
	expect_eq "test_nccl (enqueues in progress for $inprog polls): exit status" "$st" 0
	n=$(grep -c '^ok ' "$WORK/out")
	nb=$(grep -c '^ok .*round [0-9]: ' "$WORK/out")
	[ "$nb" -ge 21 ] &&
		pass "test_nccl ($inprog): $n checks passed, $nb of the non-blocking part" ||
		fail "test_nccl ($inprog): only $nb checks of the non-blocking part passed"
	check_diag "test_nccl ($inprog)"
done
grep -q '^# simt: nccl enqueues in progress for 2 polls' "$WORK/err" &&
	pass "the second run had its enqueues in progress" ||
	fail "the second run had its enqueues in progress"
done_testing
