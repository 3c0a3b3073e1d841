#!/bin/bash
# idle.sh - the example job when the planner leaves GPUs idle (issue 16.1):
# sbatch --hexiscale=auto examples/train.sbatch on the 8 GPUs of the test
# cluster with the plugin's default (the planner may leave slow GPUs idle;
# for tiny-8l it does): the job completes with exit code 0; the role step
# prints every task's role, idle ones included, matching the plan file;
# in the training step each idle task prints one line and exits 0 while
# the W training ranks train (W ranks in every step record, one record per
# step) and commit a checkpoint of W rank files; the summary lists the idle
# GPUs.  Then hexitrain under srun --mpi=pmix on a user plan that leaves
# the middle node idle (training ranks are then not the task ids) trains
# exactly as one process on the global batch.
. "$top_srcdir/tests/e2e/e2e-lib.sh"
unset HEXISCALE_USE_ALL_GPUS # the default: GPUs may be left idle
need_trainer
CMP=$top_builddir/tests/runtime/rt_cmp
MKPLAN=$top_builddir/tests/runtime/mkplan
[ -x "$CMP" ] && [ -x "$MKPLAN" ] || hard "tests/runtime/rt_cmp, mkplan not built"
slurm_up
mkdir -p out
export HEXI_CKPT_DIR=$JOBS/ck HEXI_PRINT_ROLES=1 HEXI_TRAIN_ARGS=--json HEXI_SAVE_EVERY=2

jid=$(HEXI_STEPS=4 sbatch --parsable -o "out/%j.out" -e "out/%j.err" "$EX/train.sbatch") ||
	hard "sbatch train.sbatch refused"
st=$(job_wait "$jid")
expect_eq "train.sbatch with idle GPUs: job completed" "$st" COMPLETED
expect_eq "train.sbatch with idle GPUs: exit code 0" "$(job_field "$jid" ExitCode)" "0:0"
[ "$st" = COMPLETED ] || sed 's/^/# /' "out/$jid.out" "out/$jid.err" | tail -n 30
p0=out/hexiscale-plan.$jid.0.json
p1=out/hexiscale-plan.$jid.1.json
[ -f "$p0" ] && [ -f "$p1" ] || hard "no plan files for the job's two steps"
w=$(pyval "$p1" "p['world_size']")
ni=$(pyval "$p1" "len(p.get('idle', []))")
echo "# training step's plan: $w training ranks, $ni idle GPUs"
[ "$ni" -gt 0 ] && [ $((w + ni)) -eq 8 ] && pass "the plan leaves $ni of the 8 GPUs idle" ||
	fail "plan of $w ranks and $ni idle GPUs"
expect_eq "both steps got the same plan" "$(pyval "$p0" "p['hash']")" "$(pyval "$p1" "p['hash']")"
grep '^HXROLE' "out/$jid.out" >roles.out
check "role step: every task's role matches the plan, idle ones included" $CHECK_ROLES "$p0" roles.out
expect_eq "role step: $ni tasks print role=idle" "$(grep -c ' role=idle ' roles.out)" "$ni"
want=$(pyval "$p1" "' '.join(str(d['rank']) for d in sorted(p['idle'], key=lambda d: d['rank']))")
expect_eq "training step: one idle line per idle task, their ranks the plan's" \
	"$(sed -n 's/^hexitrain: rank \([0-9]*\): idle in plan .*: trains nothing.*/\1/p' "out/$jid.err" |
		sort -n | paste -sd' ')" "$want"
expect_eq "training step: the idle lines name the plan" \
	"$(grep -c "idle in plan $(pyval "$p1" "p['hash']")" "out/$jid.err")" "$ni"
json_steps "out/$jid.out" >loss.txt
expect_eq "training step: one record per step (4)" "$(wc -l <loss.txt)" 4
expect_eq "training step: every record counts the $w training ranks" \
	"$(python3 -c '
import json, sys
n = set()
for l in open(sys.argv[1]):
    if l.startswith("{\"step\""):
        n.add(len(json.loads(l)["memory"]))
print(sorted(n))' "out/$jid.out")" "[$w]"
check "training step exit status 0" grep -q "hexi-train: training step exit status 0" "out/$jid.out"
check "the summary lists the idle GPUs" \
	grep -q "hexiscale:   idle: $ni GPUs on .* (ranks $w-$((w + ni - 1)), Slurm tasks .*, HEXISCALE_ROLE=idle, train nothing): " "out/$jid.err"
check "the checkpoint verifies" "$HEXICKPT" verify -q "$HEXI_CKPT_DIR"
expect_eq "the checkpoint has the $w training ranks' files" \
	"$("$HEXICKPT" info "$HEXI_CKPT_DIR" | sed -n 's/^ranks *//p')" "$w"
sed -n '/^hexiscale: step '"$jid"'.1:/,/plan file/p' "out/$jid.err" | sed 's/^/# /'

# hexitrain under srun --mpi=pmix, n2 idle between n1 and n3: tasks 3-5
# idle (ranks 5-7), tasks 6-7 train as ranks 3-4.
"$MKPLAN" tiny-8l "10/5:3x8@0;6/3:1x4@2,1x4@2" "$JOBS/mid.json" idle=1 || hard "mkplan"
OPT="--steps 3 --optimizer sgd --lr 0.5 --json"
# shellcheck disable=SC2086
"$HEXITRAIN" --model tiny-8l --batch 16 $OPT >ref.json || hard "one process"
train() {
	# shellcheck disable=SC2086
	timeout -k 5 180 srun --mpi=pmix -N3 -n8 --gpus-per-task=1 --kill-on-bad-exit=1 \
		--hexiscale="$JOBS/mid.json" "$HEXITRAIN" $OPT >midrun.json 2>mid.err
}
train
st=$?
if [ $st -ne 0 ] && hexi_ompi_tcp_flake mid.err; then
	echo "# Open MPI TCP connect failure (exit $st): running the step once more"
	train
	st=$?
fi
expect_eq "srun --mpi=pmix, n2 idle: exit status" "$st" 0
expect_eq "srun --mpi=pmix, n2 idle: ranks 5 6 7 said idle" \
	"$(sed -n 's/^hexitrain: rank \([0-9]*\): idle in plan .*(GPU [0-9] of n2, rtx4090).*/\1/p' mid.err |
		sort -n | paste -sd' ')" "5 6 7"
out=$("$CMP" --loss ref.json midrun.json)
st=$?
echo "$out" | sed 's/^/# /'
expect_eq "srun --mpi=pmix, n2 idle: same loss each step as one process" "$st" 0
no_drain
done_testing
