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
--hexiscale=$long|limit is 1023
--hexiscale-model=$long|limit is 1023
--hexiscale=/nonexistent/plan.json|cannot open
--hexiscale=$JOBS|not a regular file
--hexiscale=a;b|';' or '|'
TABLE

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
out=$(HEXISCALE_HANDOFF='hx1;j=1;s=0;c=0' srun -N1 -n1 sh -c 'echo ${HEXISCALE_HANDOFF:-unset}' 2>&1)
rc=$?
[ $rc -ne 0 ] && printf '%s' "$out" | grep -q 'hexiscale: hand-off' && ! printf '%s' "$out" | grep -q '^hx1' &&
	pass "a forged hand-off fails the task" || fail "forged hand-off: rc $rc: $out"
no_drain
done_testing
