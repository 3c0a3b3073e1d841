#!/bin/bash
# workflow.sh - the whole user story on the real test cluster, as assertions:
# sbatch --hexiscale=auto examples/train.sbatch on all 8 GPUs (plan matches
# the allocation, every task's role matches the plan, hexitrain trains under
# it, loss decreases, checkpoints commit and verify); then
# examples/resume.sbatch on n2,n3 only (5 GPUs, another plan) resumes from
# the checkpoint of step 5: its steps 6-8 repeat job 1's losses (the run
# continues exactly, not restarting), the first resumed loss is close to the
# last saved one and well below the initial one; hexickpt verify/info/ls of
# the result, and an offline hexickpt reshard of it back to job 1's plan.
. "$top_srcdir/tests/e2e/e2e-lib.sh"
need_trainer
slurm_up
mkdir -p out
CK=$JOBS/ck
export HEXI_CKPT_DIR=$CK HEXI_PRINT_ROLES=1 HEXI_TRAIN_ARGS=--json HEXI_SAVE_EVERY=5

# Job 1: all three nodes, steps 1-8, checkpoint at step 5.
jid=$(HEXI_STEPS=8 sbatch --parsable -o "out/%j.out" -e "out/%j.err" "$EX/train.sbatch") ||
	hard "sbatch train.sbatch refused"
st=$(job_wait "$jid")
expect_eq "job 1 (train.sbatch, 8 GPUs) completed" "$st" COMPLETED
[ "$st" = COMPLETED ] || { sed 's/^/# /' "out/$jid.out" "out/$jid.err" | tail -n 30; }
p_roles=out/hexiscale-plan.$jid.0.json
p1=out/hexiscale-plan.$jid.1.json
check "job 1: plan files of both steps next to the job output" test -f "$p_roles" -a -f "$p1"
check "job 1: plan covers exactly the allocation (n1 3xa800, n2 3xrtx4090, n3 2xrtx3090)" \
	plan_fits "$p1" "n1:a800:3 n2:rtx4090:3 n3:rtx3090:2"
expect_eq "job 1: training step got the same plan as the role step" \
	"$(pyval "$p1" "p['hash']")" "$(pyval "$p_roles" "p['hash']")"
grep '^HXROLE' "out/$jid.out" >roles1.out
check "job 1: every task's role matches the plan, every GPU once" $CHECK_ROLES "$p_roles" roles1.out
expect_eq "job 1: plan for the job's model and batch" \
	"$(pyval "$p1" "(p['model']['name'], p['train']['global_batch'])")" "('tiny-8l', 64)"
check "job 1: plugin summary on the job's stderr" \
	grep -q "hexiscale: step $jid.1: plan [0-9a-f]\{16\} for 8 GPUs on 3 nodes" "out/$jid.err"
json_steps "out/$jid.out" >loss1.txt
expect_eq "job 1: steps 1-8 logged" "$(cut -d' ' -f1 loss1.txt | paste -sd' ')" "1 2 3 4 5 6 7 8"
l1_first=$(awk '$1 == 1 {print $2}' loss1.txt)
l1_5=$(awk '$1 == 5 {print $2}' loss1.txt)
l1_last=$(awk '$1 == 8 {print $2}' loss1.txt)
check "job 1: loss decreases (step 1 $l1_first > step 8 $l1_last by > 10%)" \
	awk -v a="$l1_first" -v b="$l1_last" 'BEGIN { exit !(b < 0.9 * a) }'
expect_eq "job 1: checkpoint of step 5 committed, latest" \
	"$("$HEXICKPT" ls "$CK" 2>&1 | awk '/latest/ {print $1, $2, $3}')" "step-00000005 5 committed"
check "job 1: checkpoint verifies" "$HEXICKPT" verify -q "$CK"
expect_eq "job 1: checkpoint written by job 1's plan" \
	"$("$HEXICKPT" info --json "$CK" | python3 -c 'import json,sys; print(json.load(sys.stdin)["plan_hash"])')" \
	"$(pyval "$p1" "p['hash']")"

# Job 2: another allocation (n2, n3: no A800), its own plan, resumes at 5.
jid2=$(HEXI_STEPS=10 sbatch --parsable -w n2,n3 -o "out/%j.out" -e "out/%j.err" "$EX/resume.sbatch") ||
	hard "sbatch resume.sbatch refused"
st=$(job_wait "$jid2")
expect_eq "job 2 (resume.sbatch on n2,n3) completed" "$st" COMPLETED
[ "$st" = COMPLETED ] || { sed 's/^/# /' "out/$jid2.out" "out/$jid2.err" | tail -n 30; }
p2=out/hexiscale-plan.$jid2.1.json
check "job 2: plan covers exactly n2 3xrtx4090 + n3 2xrtx3090" \
	plan_fits "$p2" "n2:rtx4090:3 n3:rtx3090:2"
grep '^HXROLE' "out/$jid2.out" >roles2.out
check "job 2: every task's role matches its plan" $CHECK_ROLES "out/hexiscale-plan.$jid2.0.json" roles2.out
check "job 2: a different plan from job 1's" \
	test "$(pyval "$p2" "p['hash']")" != "$(pyval "$p1" "p['hash']")"
json_steps "out/$jid2.out" >loss2.txt
expect_eq "job 2: continues at step 6, up to 10" "$(cut -d' ' -f1 loss2.txt | paste -sd' ')" "6 7 8 9 10"
l2_first=$(awk '$1 == 6 {print $2}' loss2.txt)
check "first resumed loss ($l2_first) within 10% of the last saved one ($l1_5)" \
	awk -v a="$l1_5" -v b="$l2_first" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.1 * a) }'
check "first resumed loss ($l2_first) well below the initial loss ($l1_first)" \
	awk -v a="$l1_first" -v b="$l2_first" 'BEGIN { exit !(b < 0.9 * a) }'
# Same samples, same global batch, exact state: the new plan repeats job 1.
for s in 6 7 8; do
	a=$(awk -v s=$s '$1 == s {print $2}' loss1.txt)
	b=$(awk -v s=$s '$1 == s {print $2}' loss2.txt)
	check "step $s after resume on another plan equals job 1's ($b vs $a, rel 1e-4)" \
		awk -v a="$a" -v b="$b" 'BEGIN { d = (a - b) / a; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-4) }'
done

# The result: committed, verified, written by job 2's plan.
expect_eq "job 2: checkpoint of step 10 is the latest" \
	"$("$HEXICKPT" ls "$CK" 2>&1 | awk '/latest/ {print $1, $2, $3}')" "step-00000010 10 committed"
check "final checkpoint verifies" "$HEXICKPT" verify -q "$CK"
"$HEXICKPT" info "$CK" >info.txt 2>&1
check "hexickpt info names step 10" grep -q "^step *10 " info.txt
check "hexickpt info names the model tiny-8l" grep -q "^model *tiny-8l" info.txt
check "hexickpt info shows job 2's plan" grep -q "$(pyval "$p2" "p['hash']")" info.txt

# Offline resharding back to job 1's plan: full tensors identical.
"$HEXICKPT" reshard -q "$CK" --plan "$p1" -o "$JOBS/ck-p1" >reshard.out 2>&1
check "hexickpt reshard to job 1's plan" test $? -eq 0
check "resharded checkpoint verifies" "$HEXICKPT" verify -q "$JOBS/ck-p1"
"$HEXICKPT" diff -q "$CK" "$JOBS/ck-p1" >diff.out 2>&1
check "resharded checkpoint equals the original (hexickpt diff: $(tail -1 diff.out))" test $? -eq 0
no_drain
done_testing
