#!/bin/bash
# attack.sh - issue 18's attacks between users, as Slurm jobs of two
# unprivileged users on the test cluster (tests/checkpoint/attack.sh runs
# the root-side ones, hexickpt as root on a user's files, locally):
#  1. bob pre-creates a 0777 step directory with a symlink to alice's file
#     in a shared checkpoint directory; alice's training job
#     (sbatch --hexiscale=auto examples/train.sbatch, --save-every 1) must
#     fail without writing through the link;
#  2. two training jobs of alice save into one directory at once: the
#     second fails at its first save naming the holder of the writer lock,
#     the first is preempted (scancel --signal=USR1), commits and exits 75,
#     and every committed checkpoint verifies;
#  3. the time limit: a job submitted with --time=1 gets the script's
#     --signal=USR1@90 from Slurm itself (not scancel), commits a
#     checkpoint and exits 75 before the limit; the checkpoint resumes.
# No node may be drained by any of it.
. "$top_srcdir/tests/e2e/e2e-lib.sh"
need_trainer
[ "$(id -u)" = 0 ] || skip "needs root to create the users"
command -v setpriv >/dev/null && command -v useradd >/dev/null ||
	skip "setpriv/useradd missing"
A=hxck_alice
O=hxck_bob
for u in $A $O; do
	id "$u" >/dev/null 2>&1 || useradd -m "$u" >/dev/null 2>&1 ||
		skip "useradd $u failed"
done
HA=$(getent passwd $A | cut -d: -f6)
# as USER CMD...: CMD as USER, with the test cluster's configuration and
# the environment jobs need (sbatch exports it to the job)
as() {
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups \
		env HOME="$(getent passwd "$u" | cut -d: -f6)" USER="$u" "$@"
}
setpriv --reuid=$A --regid="$(id -g $A)" --init-groups test -x "$HEXITRAIN" ||
	skip "hexitrain not executable by $A (build directory permissions)"
slurm_up
SH=$JOBS/shared
mkdir -m 1777 "$SH" out-a 2>/dev/null
chmod 1777 out-a
rm -f "$HA/precious"
export HEXI_TRAIN_ARGS=--json

# sub USER NAME CKPT SBATCH-ARGS...: alice's or bob's training job
sub() {
	local u=$1 name=$2 ck=$3
	shift 3
	as "$u" HEXI_CKPT_DIR="$ck" sbatch --parsable -J "$name" \
		-o "$JOBS/out-a/%j.out" -e "$JOBS/out-a/%j.err" "$@"
}

# ---- 1. a planted step directory between users ---------------------------
as $A sh -c "printf mine > '$HA/precious'"
as $A mkdir -m 0777 "$SH/ck"
as $O sh -c "mkdir -m 0777 '$SH/ck/step-00000001' && ln -s '$HA/precious' '$SH/ck/step-00000001/rank-00000.h5'"
jid=$(HEXI_STEPS=2 HEXI_SAVE_EVERY=1 sub $A planted "$SH/ck" "$EX/train.sbatch") ||
	hard "alice's sbatch refused: $jid"
st=$(job_wait "$jid")
expect_eq "alice's job saving into bob's planted step directory fails" "$st" FAILED
check "its error names the other owner" \
	grep -q "owned by uid $(id -u $O)" "out-a/$jid.err"
expect_eq "alice's file is untouched" "$(cat "$HA/precious")" mine
check "the symlink is still bob's and points where it did" \
	test "$(stat -c %U "$SH/ck/step-00000001/rank-00000.h5")" = $O
no_drain "after the planted directory"

# ---- 2. two jobs of one user, one checkpoint directory -------------------
as $A mkdir -m 0700 "$SH/two"
j1=$(HEXI_STEPS=100000 HEXI_SAVE_EVERY=1 HEXI_TRAIN_ARGS="--json --keep 2" \
	sub $A first "$SH/two" -w n1 -N1 -n3 "$EX/train.sbatch") || hard "sbatch first: $j1"
for i in $(seq 1500); do
	ls -d "$SH"/two/step-* >/dev/null 2>&1 && break
	job_live "$j1" || break
	sleep 0.2
done
ls -d "$SH"/two/step-* >/dev/null 2>&1 ||
	{ sed 's/^/# /' "out-a/$j1.err" | tail; hard "the first job never committed a checkpoint"; }
j2=$(HEXI_STEPS=6 HEXI_SAVE_EVERY=1 sub $A second "$SH/two" -w n2,n3 -N2 -n5 \
	"$EX/train.sbatch") || hard "sbatch second: $j2"
st2=$(job_wait "$j2")
scancel --signal=USR1 "$j1"
st1=$(job_wait "$j1")
expect_eq "the second job fails" "$st2" FAILED
# exit code 75 (EX_TEMPFAIL: stopped with a checkpoint, resubmit) is a
# non-zero exit, so Slurm records the first job as FAILED, not CANCELLED
expect_eq "the first, preempted, ends in state FAILED" "$st1" FAILED
check "its error names the holder of the writer lock (host, pid, job)" \
	sh -c "grep 'another writer holds' 'out-a/$j2.err' | grep -q 'pid=.*job=$j1'"
expect_eq "the first, preempted, ends with exit code 75" "$(job_field "$j1" ExitCode)" "75:0"
check "every committed checkpoint verifies" sh -c \
	"for s in '$SH'/two/step-*; do '$HEXICKPT' verify -q \"\$s\" >/dev/null || exit 1; done"
check "and each was written by the first job (3 ranks)" sh -c \
	"for s in '$SH'/two/step-*; do '$HEXICKPT' info \"\$s\" | grep -q '^ranks *3\$' || exit 1; done"
no_drain "after the two writers"

# ---- 3. the time limit: Slurm's own warning signal -----------------------
# --time=2 with --signal=USR1@60: slurmctld sends USR1 to the steps
# between 30 and 60 s after the start (it checks every 30 s), once the
# training step runs.  Should it come before the step has started, the
# limit's own SIGTERM does the same at 2 minutes (state TIMEOUT).
t0=$(date +%s)
j3=$(HEXI_STEPS=100000 HEXI_SAVE_EVERY=100000 sub $A limit "$SH/lim" --time=2 \
	--signal=USR1@60 "$EX/train.sbatch") || hard "sbatch --time=2: $j3"
st3=$(job_wait "$j3")
dt=$(($(date +%s) - t0))
echo "# time-limited job: $st3 after $dt s, exit code $(job_field "$j3" ExitCode)"
case "$st3 $(job_field "$j3" ExitCode)" in
"FAILED 75:0") pass "stopped by Slurm's USR1 before the limit, exit code 75" ;;
TIMEOUT*) pass "stopped by the time limit's SIGTERM (the warning came before the step ran)" ;;
*) fail "time-limited job: $st3, exit code $(job_field "$j3" ExitCode)" ;;
esac
k=$(json_steps "out-a/$j3.out" | tail -1 | cut -d' ' -f1)
check "it committed its last step ($k) and said so" \
	grep -q "saved checkpoint .*step-0*$k (step $k," "out-a/$j3.err"
j4=$(HEXI_STEPS=$((k + 2)) HEXI_RESUME=1 sub $A resume "$SH/lim" "$EX/train.sbatch") ||
	hard "sbatch resume: $j4"
expect_eq "a resumed job completes" "$(job_wait "$j4")" COMPLETED
expect_eq "and trains steps $((k + 1))-$((k + 2))" \
	"$(json_steps "out-a/$j4.out" | cut -d' ' -f1 | paste -sd' ')" "$((k + 1)) $((k + 2))"
no_drain "after the time limit"
rm -f "$HA/precious"
done_testing
