#!/bin/bash
# userplan.sh - --hexiscale=PLAN.json on the real test cluster: a valid
# hand-made plan gives every task the role the plan file says (checked by
# check-roles.py), through srun, sbatch and salloc; wrong GPU types, wrong
# counts, a stale hash and a truncated file stop the step before launch;
# env twins and command-line precedence; a root-only plan file and an
# unwritable plan directory are refused for an unprivileged user.
. "$top_srcdir/tests/spank/slurm-lib.sh"
slurm_up
B=$top_builddir/tests/spank
EX=$top_srcdir/examples
export HEXI_EXAMPLES=$EX
CHECK="python3 $top_srcdir/tests/spank/check-roles.py"
GPUS="-N3 -n8 --gpus-per-task=1"
for v in good types count stale truncated; do
	"$B/mkplan" $v "$JOBS/$v.json" || hard "mkplan $v"
done
latest_plan() { ls -t "${1:-$JOBS}"/hexiscale-plan.*.json 2>/dev/null | head -1; }

# srun directly with a valid plan.
srun $GPUS --hexiscale="$JOBS/good.json" "$EX/print-role.sh" >srun.out 2>srun.err
expect_eq "srun with a valid plan runs" "$?" 0
plan=$(latest_plan)
check "plan file next to the output, job and step id in its name" \
	test -f "$plan" -a "$(dirname "$plan")" = "$JOBS"
check "roles match the plan file (srun)" $CHECK "$plan" srun.out
check "summary block on stderr" grep -q "hexiscale: step .*: plan [0-9a-f]\{16\} for 8 GPUs on 3 nodes" srun.err
check "summary names the plan file" grep -q "plan file $plan" srun.err

# sbatch with the option in the script's environment twin; the batch step
# itself is not planned, its srun step is.
rm -f "$JOBS"/hexiscale-plan.*.json
mkdir -p "$JOBS/out"
jid=$(HEXISCALE_MODE="$JOBS/good.json" sbatch --parsable $GPUS -o "$JOBS/out/%j.out" --wrap "srun $EX/print-role.sh")
st=$(job_wait "$jid")
expect_eq "sbatch job (env twin HEXISCALE_MODE) completed" "$st" COMPLETED
plan=$(latest_plan "$JOBS/out")
expect_eq "plan written next to the job output" "$(basename "$plan")" "hexiscale-plan.$jid.0.json"
check "roles match the plan file (sbatch)" $CHECK "$plan" "$JOBS/out/$jid.out"

# salloc + srun: the option given to salloc reaches the srun inside.
timeout 60 salloc $GPUS --hexiscale="$JOBS/good.json" srun "$EX/print-role.sh" >salloc.out 2>salloc.err
expect_eq "salloc + srun runs" "$?" 0
check "roles match the plan file (salloc)" $CHECK "$(latest_plan)" salloc.out

# srun's own option beats the one the allocation was made with.
out=$(timeout 60 salloc $GPUS --hexiscale="$JOBS/good.json" srun --hexiscale=off sh -c 'echo ${RANK:-none}' 2>/dev/null | sort -u)
expect_eq "srun --hexiscale=off inside salloc --hexiscale=PLAN" "$out" none
out=$(timeout 60 salloc $GPUS --hexiscale=off srun --hexiscale="$JOBS/good.json" sh -c 'echo ${RANK:-none}' 2>/dev/null | sort -n | paste -sd' ')
expect_eq "srun --hexiscale=PLAN inside salloc --hexiscale=off" "$out" "0 1 2 3 4 5 6 7"

# Command line beats env, both ways; --hexiscale-plan-dir.
mkdir -p "$JOBS/pd"
HEXISCALE_MODE=off srun $GPUS --hexiscale="$JOBS/good.json" --hexiscale-plan-dir="$JOBS/pd" "$EX/print-role.sh" >cl.out 2>&1
check "command line plan beats HEXISCALE_MODE=off" $CHECK "$(latest_plan "$JOBS/pd")" cl.out
HEXISCALE_MODE="$JOBS/good.json" srun $GPUS --hexiscale=off "$EX/print-role.sh" >off.out 2>&1
expect_eq "--hexiscale=off beats the env twin" "$(grep -c 'rank=none' off.out)" 8
HEXISCALE_PLAN_DIR="$JOBS/pd" srun $GPUS --hexiscale="$JOBS/good.json" true 2>/dev/null
expect_eq "HEXISCALE_PLAN_DIR twin" "$(ls "$JOBS"/pd/hexiscale-plan.*.json | wc -l)" 2

# Plans that do not fit or are damaged: stopped before launch, clear message.
while IFS='|' read -r v want; do
	out=$(srun $GPUS --hexiscale="$JOBS/$v.json" "$EX/print-role.sh" 2>&1)
	rc=$?
	if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "hexiscale: .*$want" &&
		! printf '%s' "$out" | grep -q HXROLE; then
		pass "plan '$v' refused before launch"
	else
		fail "plan '$v': rc $rc: $(printf '%s' "$out" | head -3)"
	fi
done <<TABLE
types|node n2 has rtx3090 GPUs but the step got rtx4090 GPUs on n2
count|node n1 has 2 GPUs but the step has 3 tasks on n1
stale|hash: file says
truncated|malformed JSON
TABLE
out=$(srun -N2 -n6 --gpus-per-task=1 --hexiscale="$JOBS/good.json" true 2>&1)
printf '%s' "$out" | grep -q "plan .* has 3 nodes but the step runs on 2" &&
	pass "plan for 3 nodes on a 2-node step refused" || fail "node count: $out"

# Security: as an unprivileged user, a root-only plan file and a plan
# directory the user cannot write are refused.
install -m 600 "$JOBS/good.json" "$JOBS/rootonly.json"
for cmd in srun sbatch; do
	if [ $cmd = srun ]; then out=$(as_user srun $GPUS --hexiscale="$JOBS/rootonly.json" true 2>&1)
	else out=$(as_user sbatch $GPUS --hexiscale="$JOBS/rootonly.json" --wrap true 2>&1); fi
	[ $? -ne 0 ] && printf '%s' "$out" | grep -q "rootonly.json: cannot open: Permission denied" &&
		pass "$cmd as nobody: root-only plan file refused" || fail "$cmd root-only: $out"
done
mkdir -p "$JOBS/rootdir" && chmod 700 "$JOBS/rootdir"
out=$(as_user srun $GPUS --hexiscale="$JOBS/good.json" --hexiscale-plan-dir="$JOBS/rootdir" true 2>&1)
[ $? -ne 0 ] && printf '%s' "$out" | grep -q "plan file: .*rootdir.*Permission denied" &&
	[ -z "$(ls "$JOBS/rootdir")" ] &&
	pass "as nobody: plan directory not writable by the user refused" || fail "rootdir: $out"
out=$(as_user srun $GPUS --hexiscale="$JOBS/good.json" "$EX/print-role.sh" 2>/dev/null)
printf '%s\n' "$out" >user.out
check "as nobody: valid plan works" $CHECK "$(latest_plan)" user.out
no_drain
done_testing
