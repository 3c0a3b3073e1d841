#!/bin/sh
# The --timeout watchdog (hexitrain(1)) measures progress, not step length:
# (a) one process, a step of many micro-batches far longer than --timeout,
# completes (each micro-batch feeds the watchdog);
# (b) a rank stopped (SIGSTOP) while the others are in a checkpoint save or
# the stop agreement between steps -- where the watchdog used to be
# disarmed -- brings the job down with status 16, no hang;
# (c) the same for a rank whose load of --resume's checkpoint stalls (not
# watched before: the others waited in resume's agreement).
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
# went_down NAME STATUS SECONDS LIMIT: the job ended with the watchdog's
# 16, rank 0 said why ($WORK/NAME.out), within LIMIT seconds
went_down() {
	grep -E 'no progress|stopping' "$WORK/$1.out" | sed 's/^/# /'
	expect_eq "$1: rank 1 stalled: the job exits 16" "$2" 16
	grep -q 'rank 0: no progress for' "$WORK/$1.out" &&
		pass "$1: rank 0's watchdog names the stall" ||
		fail "$1: no watchdog message from rank 0"
	[ "$3" -le "$4" ] && pass "$1: down within $4 s" ||
		fail "$1: took $3 s"
}
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
	# the 2 s watchdog plus mpirun's teardown; 124 (the 120 s outer
	# limit) is the regression this catches
	went_down "$name" "$st" $((t1 - t0)) 60
}
stop_rank1_after 20 save --save-every 1 --keep 2 --ckpt-dir "$WORK/ck"
stop_rank1_after 20 nosave

# (c) rank 1's reads of the checkpoint's rank file stall (strace delays
# each pread64 of that file by 600 s: a hung file system, or a peer
# stopped inside the load), so rank 0 waits in resume's agreement.  The
# load is watched as a save is (S plus 1 s per 16 MiB the rank holds):
# the job exits 16 within seconds, where the old code waited for
# hx_mpirun's 120 s (exit 124).  strace's -P names the file, so MPI's own
# startup reads (hwloc) are not delayed.
rm -rf "$WORK/rk"
hx_mpirun 2 "$HT" --plan "$WORK/p2.json" --steps 1 --save-every 1 \
	--ckpt-dir "$WORK/rk" >"$WORK/rk.out" 2>&1 || hard "resume fixture save"
RF=$WORK/rk/step-00000001/rank-00000.h5
[ -f "$RF" ] || hard "no $RF"
command -v strace >/dev/null || hard "strace missing (tests/deps.sh installs it)"
if ! strace -qq -o /dev/null true 2>/dev/null; then
	t_n=$((t_n + 1))
	echo "ok $t_n - resume stall # SKIP strace cannot trace here (ptrace denied)"
	done_testing
fi
cat >"$WORK/slow1.sh" <<'SH'
#!/bin/sh
# rank 1 only: every pread64 of $SLOW_FILE waits 600 s
[ "$OMPI_COMM_WORLD_RANK" = 1 ] && exec strace -qq -o /dev/null \
	-P "$SLOW_FILE" -e trace=pread64 \
	-e inject=pread64:delay_enter=600000000 "$@"
exec "$@"
SH
chmod +x "$WORK/slow1.sh"
t0=$(date +%s)
HX_TIMEOUT=120 hx_mpirun 2 -x SLOW_FILE="$RF" "$WORK/slow1.sh" "$HT" \
	--plan "$WORK/p2.json" --resume "$WORK/rk" --steps 2 --timeout 5 \
	>"$WORK/resume.out" 2>&1
st=$?
t1=$(date +%s)
echo "# resume: exit $st after $((t1 - t0)) s"
went_down resume "$st" $((t1 - t0)) 90
hx_mpirun 2 "$HT" --plan "$WORK/p2.json" --resume "$WORK/rk" --steps 2 \
	--timeout 5 >"$WORK/rs0.out" 2>&1
expect_eq "the same resume without the stall: exit 0" "$?" 0
done_testing
