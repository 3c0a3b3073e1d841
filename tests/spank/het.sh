#!/bin/bash
# het.sh - heterogeneous jobs on the test cluster, whose partitions hold one
# GPU type each (a800: n1, rtx4090: n2, rtx3090: n3): a step over several
# components with --hexiscale=auto is refused before launch with one clear
# line (one plan over several components is not supported yet); a step of
# one component of a heterogeneous batch job gets a plan for its GPUs (run
# first: after a refused multi-component step Slurm 22.05 keeps the other
# component's step slot busy for a while); a
# heterogeneous step without HexiScale runs untouched.
. "$top_srcdir/tests/spank/slurm-lib.sh"
slurm_up
nm -D "$HEXI_LIBSCHED" 2>/dev/null | grep -q ' T hexi_plan_create' ||
	skip "libhexisched has no planner"
EX=$top_srcdir/examples
check "one partition per GPU type" sh -c "sinfo -h -o '%P %N' | grep -qx 'rtx4090 n2'"
A="-p a800 -n2 --gpus-per-task=1"
B="-p rtx4090 -n2 --gpus-per-task=1"
# shellcheck disable=SC2086
out=$(timeout 60 srun $A sh -c 'echo ${HEXISCALE_RANK:-none}' : $B sh -c 'echo ${HEXISCALE_RANK:-none}' 2>&1 </dev/null)
st=$?
expect_eq "heterogeneous step without HexiScale runs, untouched" "$st $(printf '%s\n' "$out" | grep -c '^none$')" "0 4"
# shellcheck disable=SC2086
out=$(timeout 60 srun $A --hexiscale=auto --hexiscale-model=tiny-8l true : $B true 2>&1 </dev/null)
st=$?
[ $st -ne 0 ] && printf '%s' "$out" | grep -q "spans several components of a heterogeneous job.*srun --het-group=N" &&
	pass "srun A : B --hexiscale=auto refused before launch, one clear line" || fail "srun A : B: rc $st: $out"
cat >"$JOBS/het.sbatch" <<'EOS'
#!/bin/bash
srun --het-group=1 sh -c 'echo "one=${HEXISCALE_RANK:-none}/${HEXISCALE_WORLD_SIZE:-none}/${HEXISCALE_GPU_TYPE:-none}"'
srun --het-group=0,1 true && echo "both=ran" || echo "both=refused"
EOS
# shellcheck disable=SC2086
jid=$(sbatch --parsable --hexiscale=auto --hexiscale-model=tiny-8l -o "$JOBS/het.out" -e "$JOBS/het.err" \
	$A : $B "$JOBS/het.sbatch" 2>&1) || hard "sbatch A : B: $jid"
for _ in $(seq 150); do
	squeue -h -j "${jid%%+*}" 2>/dev/null | grep -q . || break
	sleep 0.4
done
check "batch job: srun --het-group=0,1 refused" grep -q "^both=refused" "$JOBS/het.out"
check "... naming the way that works" grep -q "srun --het-group=N" "$JOBS/het.err"
expect_eq "batch job: srun --het-group=1 planned on its 2 rtx4090 GPUs" \
	"$(grep '^one=' "$JOBS/het.out" | sort | paste -sd' ')" "one=0/2/rtx4090 one=1/2/rtx4090"
no_drain
done_testing
