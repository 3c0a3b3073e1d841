#!/bin/bash
# args.sh - the invalid-arguments table (pyxis style): every bad option value
# or environment twin must fail at submission with a message naming it, for
# sbatch, salloc and srun, and leave no node drained; --hexiscale=off and
# the default (opt-in) run a step untouched.
. "$top_srcdir/tests/spank/slurm-lib.sh"
slurm_up

long=$(head -c 3000 /dev/zero | tr '\0' a)
# option | expected text in the message
while IFS='|' read -r opt want; do
	[ -z "$opt" ] && continue
	for cmd in sbatch srun salloc; do
		case $cmd in
		sbatch) out=$(sbatch -N1 -n1 "$opt" --wrap true 2>&1) ;;
		srun) out=$(srun -N1 -n1 "$opt" true 2>&1) ;;
		salloc) out=$(timeout 20 salloc -N1 -n1 "$opt" true 2>&1) ;;
		esac
		rc=$?
		if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "hexiscale: .*$want"; then
			pass "$cmd $opt refused"
		else
			fail "$cmd $opt: rc $rc, output: $(printf '%s' "$out" | head -3)"
		fi
	done
done <<TABLE
--hexiscale-global-batch=0|--hexiscale-global-batch
--hexiscale-global-batch=abc|--hexiscale-global-batch
--hexiscale-micro-batch=-3|--hexiscale-micro-batch
--hexiscale-seq-len=1e3|--hexiscale-seq-len
--hexiscale-seq-len=1048577|--hexiscale-seq-len
--hexiscale=$long|limit is 1023
--hexiscale-model=$long|limit is 1023
--hexiscale=/nonexistent/plan.json|cannot open
--hexiscale=$JOBS|not a regular file
--hexiscale=a;b|';' or '|'
TABLE

# Bad model or plan file contents: sbatch and salloc load libhexisched and
# refuse them at submission (no job created); srun refuses the step before
# launch.  A plan's fit to the allocation is checked by srun only.
sed 's/"hidden": 48/"hidden": 50/' "$top_srcdir/examples/models/tiny-8l.json" >"$JOBS/bad-model.json"
grep -q '"hidden": 50' "$JOBS/bad-model.json" || hard "cannot make bad-model.json"
printf '{"format": "hexiscale-model", "layers": ' >"$JOBS/cut-model.json"
printf '{"format": "hexiscale-plan", "version": 1,' >"$JOBS/cut-plan.json"
sed 's/"hash": "[0-9a-f]*"/"hash": "0123456789abcdef"/' "$top_srcdir/examples/plans/tiny-8l-tp123.json" >"$JOBS/bad-hash.json"
grep -q 0123456789abcdef "$JOBS/bad-hash.json" || hard "cannot make bad-hash.json"
chmod 644 "$JOBS"/*.json
njobs() { squeue -h -t all -o %i 2>/dev/null | wc -l; }
# options | expected text in the message (after "hexiscale: ")
while IFS='|' read -r opts want; do
	[ -z "$opts" ] && continue
	for cmd in sbatch salloc srun; do
		nb=$(njobs)
		case $cmd in
		sbatch) out=$(sbatch -N1 -n1 --gpus-per-task=1 $opts --wrap true 2>&1) ;;
		salloc) out=$(timeout 20 salloc -N1 -n1 --gpus-per-task=1 $opts true 2>&1) ;;
		srun) out=$(srun -N1 -n1 --gpus-per-task=1 $opts echo LAUNCHED 2>&1) ;;
		esac
		rc=$?
		if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "hexiscale: .*$want" &&
			! printf '%s' "$out" | grep -q -e LAUNCHED -e 'Submitted batch' -e 'Granted job' &&
			{ [ $cmd = srun ] || [ "$(njobs)" = "$nb" ]; }; then
			pass "$cmd $opts refused: $(printf '%s' "$out" | grep -m1 'hexiscale:' | cut -c1-100)"
		else
			fail "$cmd $opts: rc $rc, output: $(printf '%s' "$out" | head -3)"
		fi
	done
done <<TABLE
--hexiscale=auto --hexiscale-model=no-such-model|--hexiscale-model=no-such-model: .*not a built-in model
--hexiscale=auto --hexiscale-model=$JOBS/bad-model.json|--hexiscale-model=.*bad-model.json: .*hidden
--hexiscale=auto --hexiscale-model=$JOBS/cut-model.json|--hexiscale-model=.*cut-model.json: 
--hexiscale=$JOBS/cut-plan.json|cut-plan.json
--hexiscale=$JOBS/bad-hash.json|bad-hash.json: .*hash: file says 0123456789abcdef
TABLE
# The env twin is named when it is the source.
n0=$(njobs)
out=$(HEXISCALE_MODE=auto HEXISCALE_MODEL=no-such-model sbatch -N1 -n1 --wrap true 2>&1)
[ $? -ne 0 ] && printf '%s' "$out" | grep -q 'hexiscale: environment variable HEXISCALE_MODEL=no-such-model' &&
	pass "sbatch: bad model in HEXISCALE_MODEL refused, the variable named" || fail "env model: $out"
expect_eq "no job was created by the refused sbatch" "$(njobs)" "$n0"
# A model that is only the plugstack default is not
# checked unless the user asks for planning: the opt-in default still runs.
out=$(HEXISCALE_MODEL=no-such-model sbatch --parsable -N1 -n1 --wrap true 2>&1)
[ $? -eq 0 ] && pass "opt-in default: a bad HEXISCALE_MODEL alone does not refuse sbatch" || fail "opt-in default: $out"
# Without the library in sbatch (libsched= cannot be loaded), submission
# goes on (said at verbose level) and srun refuses the step before launch.
pc=$HEXI_SLURM_DIR/etc/plugstack.conf
cp "$pc" "$pc.orig"
sed -i 's|libsched=[^ ]*|libsched=/nonexistent/libhexisched.so.0|' "$pc"
out=$(sbatch -v --parsable -N1 -n1 --gpus-per-task=1 -o "$JOBS/nolib.out" --hexiscale=auto \
	--hexiscale-model=no-such-model --wrap "srun echo LAUNCHED" 2>&1)
rc=$?
jid=$(printf '%s\n' "$out" | grep -E '^[0-9]+$' | tail -1)
if [ $rc -eq 0 ] && [ -n "$jid" ] && printf '%s' "$out" | grep -q 'hexiscale: model and plan checks left to srun: cannot load the planner library'; then
	pass "sbatch without the library: accepted, verbose message"
else
	fail "sbatch without the library: rc $rc: $(printf '%s' "$out" | tail -3)"
fi
if [ -n "$jid" ]; then
	expect_eq "  its job failed" "$(job_wait "$jid")" FAILED
	check "  srun refused the step: cannot load the planner library" grep -q 'hexiscale: .*cannot load the planner library' "$JOBS/nolib.out"
	if grep -q LAUNCHED "$JOBS/nolib.out"; then fail "  a task was launched"; else pass "  no task launched"; fi
fi
mv "$pc.orig" "$pc"

# Control characters in option values and in env twins.
out=$(srun -N1 -n1 "--hexiscale-model=$(printf 'x\ty')" true 2>&1)
[ $? -ne 0 ] && printf '%s' "$out" | grep -q 'control' && pass "control char in option refused" || fail "control char option: $out"
out=$(HEXISCALE_MODEL=$(printf 'llama\033[2J') sbatch -N1 -n1 --wrap true 2>&1)
[ $? -ne 0 ] && printf '%s' "$out" | grep -q 'HEXISCALE_MODEL.*control' && pass "control char in env twin refused" || fail "control char env: $out"
out=$(HEXISCALE_GLOBAL_BATCH=lots srun -N1 -n1 true 2>&1)
[ $? -ne 0 ] && printf '%s' "$out" | grep -q 'HEXISCALE_GLOBAL_BATCH' && pass "bad env twin refused" || fail "bad env twin: $out"
# Command line beats a bad env twin? No: a bad twin is an error only when used.
out=$(HEXISCALE_GLOBAL_BATCH=lots srun -N1 -n1 --hexiscale-global-batch=8 --hexiscale=off true 2>&1)
expect_eq "command line value hides a bad env twin" "$?" 0

# Off and opt-in default: the step runs untouched, no plan variables.
out=$(srun -N3 -n8 --gpus-per-task=1 --hexiscale=off sh -c 'echo ${HEXISCALE_RANK:-none}' 2>/dev/null | sort -u)
expect_eq "--hexiscale=off: no role variables" "$out" "none"
out=$(srun -N3 -n8 --gpus-per-task=1 sh -c 'echo ${HEXISCALE_RANK:-none}' 2>/dev/null | sort -u)
expect_eq "opt-in default: no role variables" "$out" "none"
# A hand-off in srun's environment is dropped before srun builds the step
# environment (init_post_opt, DECISIONS 136); one forced into the step
# (--export=NAME=VALUE sets it at launch) fails the task in slurmstepd.
out=$(HEXISCALE_HANDOFF='hx1;j=1;s=0;c=0' srun -N1 -n1 sh -c 'echo ${HEXISCALE_HANDOFF:-unset}' 2>/dev/null)
expect_eq "a hand-off in srun's environment never reaches the task" "$?:$out" "0:unset"
out=$(srun -N1 -n1 --export='ALL,HEXISCALE_HANDOFF=hx1;j=1;s=0;c=0' sh -c 'echo ${HEXISCALE_HANDOFF:-unset}' 2>&1)
rc=$?
[ $rc -ne 0 ] && printf '%s' "$out" | grep -q 'hexiscale: hand-off' && ! printf '%s' "$out" | grep -q '^hx1' &&
	pass "a forged hand-off forced into the step fails the task" || fail "forged hand-off: rc $rc: $out"
no_drain
done_testing
