#!/bin/sh
# Idle GPUs (issue 16.1): a plan that trains on n1 and n3 of the test
# cluster and leaves n2's three GPUs idle (ranks 5-7).  Run with a task per
# GPU (8), the idle tasks take part in the bootstrap, print one line each
# and exit 0, and the 5 training ranks train exactly as one process on the
# global batch, and as the same plan on its 5 training ranks alone; any
# other task count, and an environment that contradicts the idle role,
# are refused on every rank; a training rank that dies still brings the
# job down at once.
. "$top_srcdir/tests/runtime/rt_env.sh"
need_mpi
[ -x "$MKPLAN" ] || hard "mkplan not built"
"$MKPLAN" tiny-8l "10/5:3x8@0;6/3:1x4@2,1x4@2" "$WORK/idle.json" idle=1 ||
	hard "mkplan"
OPT="--steps 3 --optimizer sgd --lr 0.5 --json"
# shellcheck disable=SC2086
"$HT" --model tiny-8l --batch 16 $OPT >"$WORK/ref.json" || hard "one process"

# shellcheck disable=SC2086
hx_mpirun 8 "$HT" --plan "$WORK/idle.json" $OPT >"$WORK/all.json" 2>"$WORK/all.err"
expect_eq "8 tasks (5 training, 3 idle): exit status" "$?" 0
expect_eq "the idle tasks said so, once each (ranks 5 6 7)" \
	"$(sed -n 's/^hexitrain: rank \([0-9]*\): idle in plan [0-9a-f]* (GPU [0-9] of n2, rtx4090): trains nothing.*/\1/p' \
		"$WORK/all.err" | sort -n | paste -sd' ')" "5 6 7"
out=$("$CMP" --loss "$WORK/ref.json" "$WORK/all.json")
st=$?
echo "$out" | sed 's/^/# /'
expect_eq "8 tasks: same loss each step as one process" "$st" 0
# shellcheck disable=SC2086
hx_mpirun 5 "$HT" --plan "$WORK/idle.json" $OPT >"$WORK/five.json" 2>"$WORK/five.err"
expect_eq "the training ranks alone (5 tasks): exit status" "$?" 0
check "5 tasks: no idle line" sh -c "! grep -q 'idle in plan' '$WORK/five.err'"
"$CMP" --loss "$WORK/all.json" "$WORK/five.json" >/dev/null
expect_eq "5 tasks: same losses as 8 tasks with 3 idle" "$?" 0
hx_mpirun 4 "$HT" --plan "$WORK/idle.json" --steps 1 >"$WORK/four.out" 2>&1
expect_eq "4 tasks for a plan of 5 + 3 idle: exit status 11" "$?" 11
check "4 tasks: the message names ranks, idle GPUs and tasks" grep -q \
	"is for 5 ranks and 3 idle GPUs but the job has 4 tasks (run 5, or 8 with a task per idle GPU)" "$WORK/four.out"
hx_mpirun 8 -x HEXISCALE_ROLE=train "$HT" --plan "$WORK/idle.json" --steps 1 >"$WORK/role.out" 2>&1
st=$?
# 11 from the idle ranks, 17 (a peer failed) from the others: either first
[ "$st" -eq 11 ] || [ "$st" -eq 17 ] && pass "HEXISCALE_ROLE=train on the idle tasks: refused ($st)" ||
	fail "HEXISCALE_ROLE=train on the idle tasks: exit status $st"
check "HEXISCALE_ROLE mismatch named" grep -q \
	"rank 5: HEXISCALE_ROLE=train but plan [0-9a-f]* gives it the idle role" "$WORK/role.out"
hx_mpirun 8 -x WORLD_SIZE=8 "$HT" --plan "$WORK/idle.json" --steps 1 >"$WORK/ws.out" 2>&1
expect_eq "WORLD_SIZE=8 (the tasks, not the training ranks): exit status 11" "$?" 11
check "WORLD_SIZE mismatch named" grep -q \
	"environment WORLD_SIZE=8 but the plan has 5 ranks" "$WORK/ws.out"
# A training rank killed mid-run: the job still ends at once (the idle
# tasks waiting in MPI_Finalize go down with it).
t0=$(date +%s)
HEXI_RT_TEST_KILL=3:2 HX_TIMEOUT=90 hx_mpirun 8 -x HEXI_RT_TEST_KILL "$HT" \
	--plan "$WORK/idle.json" --steps 1000000 --timeout 20 >"$WORK/kill.out" 2>&1
st=$?
t1=$(date +%s)
echo "# killed rank 3: exit status $st after $((t1 - t0)) s"
# mpirun's teardown, else the 20 s stall watchdog (counted from before
# mpirun's start-up; the watchdog path took 31 s against a 30 s watchdog once)
[ "$st" -ne 0 ] && [ "$st" -ne 124 ] && [ $((t1 - t0)) -le 45 ] &&
	pass "killed training rank beside idle tasks: job down within 45 s ($st)" ||
	fail "killed training rank beside idle tasks: exit $st after $((t1 - t0)) s"
done_testing
