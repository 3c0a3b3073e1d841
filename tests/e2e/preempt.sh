#!/bin/bash
# preempt.sh - a training job preempted by Slurm's signal (scancel
# --signal=USR1, what #SBATCH --signal=USR1@90 sends before the time limit):
# every rank finishes the step, a checkpoint of that step is committed,
# the job ends with exit code 75; a resumed job (another allocation, another
# plan) continues at the next step, and the steps of both jobs equal an
# uninterrupted job's (no step lost, none repeated).
. "$top_srcdir/tests/e2e/e2e-lib.sh"
need_trainer
slurm_up
mkdir -p out
export HEXI_TRAIN_ARGS=--json HEXI_SAVE_EVERY=100000

# An uninterrupted reference for comparison comes last (its length is
# known only after the preemption).
export HEXI_CKPT_DIR=$JOBS/ck
jid=$(HEXI_STEPS=100000 sbatch --parsable -o "out/%j.out" -e "out/%j.err" "$EX/train.sbatch") ||
	hard "sbatch train.sbatch refused"
for i in $(seq 600); do
	[ "$(json_steps "out/$jid.out" 2>/dev/null | wc -l)" -ge 4 ] && break
	job_live "$jid" || break
	sleep 0.2
done
[ "$(json_steps "out/$jid.out" | wc -l)" -ge 4 ] ||
	{ sed 's/^/# /' "out/$jid.out" "out/$jid.err" | tail; hard "job never reached step 4"; }
scancel --signal=USR1 "$jid" || hard "scancel --signal=USR1"
st=$(job_wait "$jid")
echo "# preempted job: $st, exit code $(job_field "$jid" ExitCode)"
expect_eq "preempted job's exit code is 75 (hexitrain(1) EXIT STATUS)" \
	"$(job_field "$jid" ExitCode)" "75:0"
json_steps "out/$jid.out" >lossA.txt
k=$(tail -1 lossA.txt | cut -d' ' -f1)
check "the stop committed step $k and said so" \
	grep -q "saved checkpoint .*step-0*$k (step $k," "out/$jid.err"
check "every rank stopped after the same step (one save line)" \
	test "$(grep -c 'saved checkpoint' "out/$jid.err")" -eq 1
check "the checkpoint verifies" "$HEXICKPT" verify -q "$HEXI_CKPT_DIR"

# Resume on n2,n3 (resume.sbatch: 5 GPUs, another plan) for 3 more steps.
jid2=$(HEXI_STEPS=$((k + 3)) sbatch --parsable -w n2,n3 -o "out/%j.out" -e "out/%j.err" \
	"$EX/resume.sbatch") || hard "sbatch resume.sbatch refused"
expect_eq "resume job completed" "$(job_wait "$jid2")" COMPLETED
json_steps "out/$jid2.out" >lossB.txt
expect_eq "resumed at step $((k + 1))" "$(head -1 lossB.txt | cut -d' ' -f1)" "$((k + 1))"

export HEXI_CKPT_DIR=$JOBS/ref
jid3=$(HEXI_STEPS=$((k + 3)) sbatch --parsable -o "out/%j.out" -e "out/%j.err" "$EX/train.sbatch") ||
	hard "sbatch reference refused"
expect_eq "uninterrupted reference job completed" "$(job_wait "$jid3")" COMPLETED
json_steps "out/$jid3.out" >lossR.txt
cat lossA.txt lossB.txt >lossAB.txt
check "preempted + resumed = uninterrupted: $((k + 3)) steps, losses within 1e-4" \
	python3 -c '
import sys
a = [l.split() for l in open(sys.argv[1])]
r = [l.split() for l in open(sys.argv[2])]
ok = len(a) == len(r) and all(x[0] == y[0] and abs(float(x[1]) - float(y[1])) <= 1e-4 * abs(float(y[1]))
                             for x, y in zip(a, r))
sys.exit(0 if ok else 1)' lossAB.txt lossR.txt
no_drain
done_testing
