#!/bin/sh
# The --timeout watchdog (hexitrain(1)) measures progress, not step length:
# (a) one process, a step of many micro-batches far longer than --timeout,
# completes (each micro-batch feeds the watchdog);
# (b) a rank stopped (SIGSTOP) while the others are in a checkpoint save or
# the stop agreement between steps -- where the watchdog used to be
# disarmed -- brings the job down with status 16, no hang.
. "$top_srcdir/tests/runtime/rt_env.sh"

# (a) tiny-4l, 16384 samples in 512 micro-batches of 32: on this 2-core
# machine a step of 64 micro-batches of 32 takes ~0.8 s idle, so this one
# takes ~6 s, 3x the 2 s timeout (and more under load), while one
# micro-batch takes ~12 ms idle: 160x below it, so only a stall of 2 s
# (a load spike 160x the idle time) could fire it.  Before the fix the
# deadline was set once per step and this run exited 16.
"$HT" --model tiny-4l --batch 16384 --micro-batches 512 --steps 1 \
	--timeout 2 --json >"$WORK/long.out" 2>"$WORK/long.err"
st=$?
sed 's/^/# /' "$WORK/long.err" | tail -n 3
expect_eq "long step (512 micro-batches) under --timeout 2: exit 0" "$st" 0
grep -q '"step":1,' "$WORK/long.out" && pass "long step: step 1 done" ||
	fail "long step: no step 1 record"
grep -q 'no progress' "$WORK/long.err" && fail "long step: watchdog fired" ||
	pass "long step: watchdog quiet"
ts=$(sed -n 's/.*"time_s":\([0-9.]*\).*/\1/p' "$WORK/long.out")
echo "# step took ${ts:-?} s (the timeout is 2 s)"
awk -v t="${ts:-0}" 'BEGIN { exit !(t > 2) }' ||
	echo "# note: the step was not longer than the timeout here: (a) proves nothing on this machine"

# (b) 2 ranks, one pipeline each; saving every step, so most of the time
# is spent in the save (its all_ok) and the stop agreement.
need_mpi
"$MKPLAN" tiny-4l "4/1:1x4;4/1:1x4" "$WORK/p2.json" gpu=cpu >/dev/null ||
	hard "mkplan"
# stop_rank1_after STEP EXTRA...: run, SIGSTOP rank 1 once STEP is printed,
# and check that the job ends with 16 in bounded time
stop_rank1_after() {
	local k=$1 name=$2 n=0 r1="" p
	shift 2
	rm -rf "$WORK/ck"
	HX_TIMEOUT=120 hx_mpirun 2 -x HEXI_WD_TEST="$WORK" "$HT" \
		--plan "$WORK/p2.json" --steps 100000 --timeout 2 "$@" \
		>"$WORK/$name.out" 2>&1 &
	local mp=$!
	while ! grep -q "^step *$k " "$WORK/$name.out" 2>/dev/null &&
		[ $n -lt 1200 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	# rank 1 of this job: its environment has our marker and rank
	for p in $(pgrep -x hexitrain); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
			grep -qx "HEXI_WD_TEST=$WORK" || continue
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
			grep -qx 'OMPI_COMM_WORLD_RANK=1' && r1=$p
	done
	[ -n "$r1" ] || { kill "$mp"; wait "$mp"; hard "$name: no rank 1 found"; }
	local t0 t1 st
	t0=$(date +%s)
	kill -STOP "$r1"
	wait "$mp"
	st=$?
	t1=$(date +%s)
	# leave nothing stopped behind (the pid is ours, from this job)
	kill -CONT "$r1" 2>/dev/null
	kill -KILL "$r1" 2>/dev/null
	echo "# $name: exit $st, $((t1 - t0)) s after rank 1 stopped"
	grep -E 'no progress|stopping' "$WORK/$name.out" | sed 's/^/# /'
	expect_eq "$name: rank 1 stopped: the job exits 16" "$st" 16
	grep -q 'rank 0: no progress for' "$WORK/$name.out" &&
		pass "$name: rank 0's watchdog names the stall" ||
		fail "$name: no watchdog message from rank 0"
	# the 2 s watchdog plus mpirun's teardown; 124 (the 120 s outer
	# limit) is the regression this catches
	[ $((t1 - t0)) -le 60 ] && pass "$name: down within 60 s" ||
		fail "$name: took $((t1 - t0)) s"
}
stop_rank1_after 20 save --save-every 1 --keep 2 --ckpt-dir "$WORK/ck"
stop_rank1_after 20 nosave
done_testing
