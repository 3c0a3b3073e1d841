#!/bin/bash
# badinput.sh - bad input when submitting the training job is refused before
# any training task runs, with a message naming the problem, and no node is
# drained:
#  - malformed options and environment twins, an unknown model, a model
#    file that does not parse or validate, a plan file that does not parse
#    or whose hash is wrong: sbatch itself refuses (it loads libhexisched as
#    srun does), no job is created;
#  - a plan file made for another allocation: srun refuses the step before
#    launching a task (sbatch has no allocation to check it against yet:
#    the batch script starts, its training step does not, the job fails);
#  - a valid submission afterwards still trains (the cluster is healthy).
. "$top_srcdir/tests/e2e/e2e-lib.sh"
need_trainer
slurm_up
mkdir -p out
export HEXI_STEPS=2 HEXI_SAVE_EVERY=1 HEXI_TRAIN_ARGS=--json

# Bad files for the table below.
sed 's/"hidden": 48/"hidden": 50/' "$top_srcdir/examples/models/tiny-8l.json" >"$JOBS/bad-model.json"
printf '{"format": "hexiscale-model", "layers": ' >"$JOBS/cut-model.json"
printf '{"format": "hexiscale-plan", "version": 1,' >"$JOBS/cut-plan.json"
sed 's/"hash": "[0-9a-f]*"/"hash": "0123456789abcdef"/' "$top_srcdir/examples/plans/tiny-8l-tp123.json" >"$JOBS/bad-hash.json"
grep -q '"hidden": 50' "$JOBS/bad-model.json" && grep -q 0123456789abcdef "$JOBS/bad-hash.json" ||
	hard "cannot make the bad model and plan files"

# Malformed options and env twins, bad models and plan files: refused by
# sbatch, no job created.
n0=$(njobs)
while IFS='|' read -r env opt want; do
	[ -z "$opt$env" ] && continue
	out=$(env $env sbatch --parsable -o "out/%j.out" ${opt:+"$opt"} "$EX/train.sbatch" 2>&1)
	rc=$?
	if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "hexiscale: .*$want"; then
		pass "sbatch ${env:+$env }$opt refused: $(printf '%s' "$out" | grep -m1 'hexiscale:' | cut -c1-90)"
	else
		fail "sbatch ${env:+$env }$opt: rc $rc: $(printf '%s' "$out" | head -3)"
	fi
done <<TABLE
|--hexiscale-global-batch=abc|--hexiscale-global-batch
|--hexiscale-global-batch=0|--hexiscale-global-batch
|--hexiscale-micro-batch=-1|--hexiscale-micro-batch
|--hexiscale-seq-len=16x|--hexiscale-seq-len
|--hexiscale=|empty
|--hexiscale=/nonexistent/plan.json|cannot open
|--hexiscale-model=tiny;8l|';' or '|'
HEXISCALE_SEQ_LEN=many||HEXISCALE_SEQ_LEN
|--hexiscale-model=no-such-model|option --hexiscale-model=no-such-model: .*not a built-in model
|--hexiscale-model=$JOBS/bad-model.json|option --hexiscale-model=.*bad-model.json: .*model.hidden: 50 is not a multiple
|--hexiscale-model=$JOBS/cut-model.json|option --hexiscale-model=.*cut-model.json: .*malformed JSON
|--hexiscale=$JOBS/cut-plan.json|option --hexiscale=.*cut-plan.json: .*malformed JSON
|--hexiscale=$JOBS/bad-hash.json|option --hexiscale=.*bad-hash.json: .*hash: file says 0123456789abcdef
TABLE
expect_eq "no job was created by a refused submission" "$(njobs)" "$n0"

# refused_step NAME JOBID WANT: the job failed, its training step never
# launched (no step logged, no checkpoint directory $JOBS/ck-NAME), and the
# job's stderr names the cause.
refused_step() {
	local st
	st=$(job_wait "$2")
	expect_eq "$1: job failed" "$st" FAILED
	check "$1: message names the cause ($3)" grep -q "hexiscale: .*$3" "out/$2.err"
	if json_steps "out/$2.out" | grep -q . || [ -e "$JOBS/ck-$1" ]; then
		fail "$1: a training task ran"
		sed 's/^/# /' "out/$2.out" | head
	else
		pass "$1: no training task ran"
	fi
}
# sub NAME SBATCH-ARGS...: submit with checkpoints in $JOBS/ck-NAME.
sub() {
	local name=$1
	shift
	HEXI_CKPT_DIR="$JOBS/ck-$name" sbatch --parsable -o "out/%j.out" -e "out/%j.err" "$@"
}

# srun refuses an unknown model too, before launch (e.g. srun in an
# allocation made without --hexiscale).
out=$(srun -N3 -n8 --gpus-per-task=1 --hexiscale=auto --hexiscale-model=no-such-model \
	"$HEXITRAIN" --steps 1 --json 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q "hexiscale: .*no-such-model" <<<"$out" && ! grep -q '"step"' <<<"$out"; then
	pass "srun with an unknown model refused before launch"
else
	fail "srun with an unknown model: rc $rc: $(head -3 <<<"$out")"
fi

# Plan files made for another allocation: hexiplan for all 8 GPUs, used on
# n2,n3 (5 GPUs); hexiplan for n2,n3, used on all 8.
"$HEXIPLAN" plan "$top_srcdir/examples/clusters/paper.json" --model tiny-8l \
	--global-batch 64 --micro-batch 4 -o "$JOBS/plan8.json" >/dev/null || hard "hexiplan plan8"
python3 - "$top_srcdir/examples/clusters/paper.json" "$JOBS/cl5.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["nodes"] = [n for n in c["nodes"] if n["name"] != "n1"]
json.dump(c, open(sys.argv[2], "w"))
EOF
"$HEXIPLAN" plan "$JOBS/cl5.json" --model tiny-8l --global-batch 64 --micro-batch 4 \
	-o "$JOBS/plan5.json" >/dev/null || hard "hexiplan plan5"
jid=$(sub "8-GPU plan on a 5-GPU allocation" -w n2,n3 --hexiscale="$JOBS/plan8.json" "$EX/resume.sbatch" 2>&1) || fail "sbatch with plan8: $jid"
refused_step "8-GPU plan on a 5-GPU allocation" "$jid" "plan .* has 3 nodes but the step runs on 2"
jid=$(sub "5-GPU plan on an 8-GPU allocation" --hexiscale="$JOBS/plan5.json" "$EX/train.sbatch" 2>&1) || fail "sbatch with plan5: $jid"
refused_step "5-GPU plan on an 8-GPU allocation" "$jid" "plan .* has 2 nodes but the step runs on 3"
no_drain "after the refused submissions"

# The cluster still trains after all that.
jid=$(sub valid "$EX/train.sbatch")
expect_eq "a valid job afterwards completes" "$(job_wait "$jid")" COMPLETED
expect_eq "it trained steps 1-2" "$(json_steps "out/$jid.out" | cut -d' ' -f1 | paste -sd' ')" "1 2"
no_drain
done_testing
