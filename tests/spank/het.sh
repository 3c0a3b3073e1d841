#!/bin/bash
# het.sh - heterogeneous jobs on the test cluster, whose partitions hold one
# GPU type each (a800: n1, rtx4090: n2, rtx3090: n3).  A step over several
# components inside a heterogeneous allocation (srun --het-group=0,1, or
# srun A : B) gets one plan over all their GPUs: one plan hash, ranks
# 0..W-1 once each, world size = every GPU of the components, each task
# the GPU type of its component, RANK = SLURM_PROCID; the plan file also
# gets its usual name; hexitrain trains over both components as one MPI
# world (srun --mpi=pmix) with the losses of the same plan run as one
# ordinary job.  A step of one component still gets its own plan.  Limits
# are one clear line each: srun A : B that makes its own allocation, a
# component without GPUs, a step that is not one task per GPU (checked
# against Slurm's layout once the step exists), srun A : B in a job that
# is not heterogeneous, another job's hand-off (refused by slurmstepd).
# default_mode=on leaves such a step alone (one info line).  Heterogeneous
# steps without HexiScale run untouched.
. "$top_srcdir/tests/spank/slurm-lib.sh"
HT=$top_builddir/runtime/hexitrain
unset HEXISCALE_USE_ALL_GPUS HEXISCALE_MODE HEXISCALE_MODEL HEXISCALE_HANDOFF
slurm_up
need_planner
EX=$top_srcdir/examples
CHECK="python3 $top_srcdir/tests/spank/check-roles.py"
check "one partition per GPU type" sh -c "sinfo -h -o '%P %N' | grep -qx 'rtx4090 n2'"
A="-p a800 -n3 --gpus-per-task=1"
B="-p rtx4090 -n3 --gpus-per-task=1"
# field PLAN EXPR: a value of a plan file
# plan_of OUTPUT: the plan file the tasks were given
plan_of() { sed -n 's/^HXROLE .* plan=\([^ ]*\) .*/\1/p' "$1" | sort -u; }
# types OUTPUT: "procid:gputype" of every task, in task order
types() { sed -n 's/^HXROLE procid=\([0-9]*\) .* gtype=\([^ ]*\) .*/\1:\2/p' "$1" | sort -n | paste -sd' '; }
# wait_job JOBID: until the job (all components) has left the queue
wait_job() {
	for _ in $(seq 1500); do
		squeue -h -j "$1" 2>/dev/null | grep -q . || return 0
		sleep 0.2
	done
	scancel "$1"
	return 1
}

# 1. Without HexiScale a heterogeneous step runs untouched.
# shellcheck disable=SC2086
out=$(timeout 60 srun $A sh -c 'echo ${HEXISCALE_RANK:-none}' : $B sh -c 'echo ${HEXISCALE_RANK:-none}' 2>&1 </dev/null)
st=$?
expect_eq "heterogeneous step without HexiScale runs, untouched" "$st $(printf '%s\n' "$out" | grep -c '^none$')" "0 6"

# 2. srun A : B that makes its own allocation: srun copies its environment
# into both components before the plugin sees the step, and then for one
# component only, so no plan can reach the other: refused, naming the way.
# shellcheck disable=SC2086
out=$(timeout 60 srun $A --hexiscale=auto --hexiscale-model=tiny-8l sh -c 'echo LAUNCHED' : $B sh -c 'echo LAUNCHED' 2>&1 </dev/null)
st=$?
[ $st -ne 0 ] && ! printf '%s' "$out" | grep -q LAUNCHED &&
	printf '%s' "$out" | grep -q "spans 2 components of heterogeneous job .*srun makes this heterogeneous allocation itself.*salloc or sbatch A : B.*srun --het-group=0,1 inside" &&
	pass "srun A : B --hexiscale=auto making its allocation: refused before launch, one clear line" ||
	fail "srun A : B: rc $st: $out"

# 3. A heterogeneous batch job, --hexiscale=auto on sbatch (its steps
# inherit it): srun --het-group=0,1, srun A : B, one component, the
# planner's own choice (idle GPUs allowed), training, and last the refused
# layout (Slurm 22.05 keeps a step refused in srun's local_user_init
# RUNNING, holding its GPUs, until the job ends: DECISIONS 137).
hexi_ompi_env
cat >"$JOBS/het.sbatch" <<EOS
#!/bin/bash
cd "$JOBS"
srun --het-group=0,1 --hexiscale-use-all-gpus "$EX/print-role.sh" >all.out 2>all.err; echo "all=\$?"
srun --hexiscale-use-all-gpus "$EX/print-role.sh" : "$EX/print-role.sh" >colon.out 2>colon.err; echo "colon=\$?"
p=\$(sed -n 's/^HXROLE .* plan=\([^ ]*\) .*/\1/p' all.out | head -1)
srun --het-group=0,1 --hexiscale="\$p" "$EX/print-role.sh" >user.out 2>user.err; echo "user=\$?"
srun --het-group=1 --hexiscale-use-all-gpus "$EX/print-role.sh" >one.out 2>one.err; echo "one=\$?"
srun --het-group=0,1 "$EX/print-role.sh" >own.out 2>own.err; echo "own=\$?"
timeout 300 bash -c '. "$EX/hexi-srun.sh"; hexi_srun "\$@"' hexi_srun --mpi=pmix --kill-on-bad-exit=1 --het-group=0,1 --hexiscale-use-all-gpus "$HT" --steps 3 >train.out 2>train.err; echo "train=\$?"
srun -n2 --het-group=0 sh -c 'echo LAUNCHED' : -n3 --het-group=1 sh -c 'echo LAUNCHED' >bad.out 2>bad.err; echo "bad=\$?"
EOS
jid=$(sbatch --parsable --hexiscale=auto --hexiscale-model=tiny-8l \
	-o "$JOBS/het.out" -e "$JOBS/het.err" $A : $B "$JOBS/het.sbatch" 2>&1) || hard "sbatch A : B: $jid"
wait_job "${jid%%+*}" || fail "heterogeneous batch job did not end in time"
sed 's/^/# /' "$JOBS/het.out"
cd "$JOBS" || hard "no job dir"
expect_eq "batch job: step exit statuses" "$(grep -E '^(all|colon|user|one|own|train)=' het.out | paste -sd' ')" \
	"all=0 colon=0 user=0 one=0 own=0 train=0"
p=$(plan_of all.out)
[ -f "$p" ] && pass "srun --het-group=0,1: one plan file for every task ($p)" || fail "plan files: '$p'"
check "srun --het-group=0,1: every role matches the plan (ranks 0..5 once, RANK = SLURM_PROCID)" $CHECK "$p" all.out
expect_eq "srun --het-group=0,1: one plan hash over both components" \
	"$(sed -n 's/^HXROLE .* hash=\([^ ]*\) .*/\1/p' all.out | sort -u)" "$(field "$p" "p['hash']")"
expect_eq "srun --het-group=0,1: world size = the 6 GPUs of both components" \
	"$(field "$p" "p['world_size'], len(p.get('idle', []))") $(sed -n 's/^HXROLE .* world=\([^ ]*\) .*/\1/p' all.out | sort -u)" "(6, 0) 6"
expect_eq "srun --het-group=0,1: GPU type per task (component 0: a800, 1: rtx4090)" \
	"$(types all.out)" "0:a800 1:a800 2:a800 3:rtx4090 4:rtx4090 5:rtx4090"
expect_eq "srun --het-group=0,1: the plan's nodes and GPU types" \
	"$(field "$p" "' '.join('%s:%s:%d' % (n['name'], n['gpu'], n['count']) for n in p['cluster']['nodes'])")" \
	"n1:a800-80g:3 n2:rtx4090:3"
check "srun --het-group=0,1: summary names the components" \
	grep -q "^hexiscale:   heterogeneous step over components 0,1 (jobs ${jid%%+*},$((${jid%%+*} + 1)), tasks 0-2,3-5)$" all.err
step=$(sed -n "s/^hexiscale: step ${jid%%+*}\.\([0-9]*\): plan .*/\1/p" all.err)
check "srun --het-group=0,1: the plan file also has its usual name (hexiscale-plan.JOB.STEP.json)" \
	cmp -s "$p" "hexiscale-plan.${jid%%+*}.$step.json"
pc=$(plan_of colon.out)
check "srun A : B in the allocation: roles match one plan of 6 GPUs" \
	sh -c "$CHECK '$pc' colon.out && [ \"\$(grep -c ' role=train ' colon.out)\" = 6 ]"
expect_eq "srun A : B in the allocation: GPU type per task" \
	"$(types colon.out)" "0:a800 1:a800 2:a800 3:rtx4090 4:rtx4090 5:rtx4090"
pu=$(plan_of user.out)
check "srun --het-group=0,1 --hexiscale=PLAN (that plan as a user plan): roles match" $CHECK "$pu" user.out
expect_eq "... the same plan (hash)" "$(field "$pu" "p['hash']")" "$(field "$p" "p['hash']")"
expect_eq "srun --het-group=1: its own plan of its 3 rtx4090 GPUs" \
	"$(sed -n 's/^HXROLE .* rank=\([0-9]*\) .* world=\([0-9]*\) .* gtype=\([^ ]*\) .*/\1\/\2\/\3/p' one.out | sort | paste -sd' ')" \
	"0/3/rtx4090 1/3/rtx4090 2/3/rtx4090"
po=$(plan_of own.out)
check "planner's own choice over both components: roles (idle ones too) match the plan" $CHECK "$po" own.out
expect_eq "planner's own choice: training ranks + idle GPUs = the 6 GPUs" \
	"$(field "$po" "p['world_size'] + len(p.get('idle', []))")" 6
echo "# own choice: $(field "$po" "p['world_size']") training ranks, $(field "$po" "len(p.get('idle', []))") idle"
sed 's/^/# /' train.out
check "hexitrain over both components: one MPI world of 6 ranks" grep -q "^hexitrain: tiny-8l, 6 ranks (pmix)" train.out
expect_eq "hexitrain over both components: 3 steps trained" "$(grep -c '^step ' train.out)" 3
# The same plan as one ordinary job on the same nodes trains the same.
# (hexi_srun: once more if Open MPI crashed a task in MPI_Init, DECISIONS 155)
timeout 300 bash -c '. "$1/hexi-srun.sh"; shift; hexi_srun "$@"' hexi_srun "$EX" \
	-p debug -w n1,n2 -N2 -n6 --gpus-per-task=1 --mpi=pmix --kill-on-bad-exit=1 \
	--hexiscale="$(plan_of all.out)" "$HT" --steps 3 >ref.out 2>ref.err
expect_eq "same plan as one ordinary job: exit status" "$?" 0
loss() { sed -n 's/^step *\([0-9]*\) *loss \([0-9.]*\).*/\1:\2/p' "$1" | paste -sd' '; }
expect_eq "heterogeneous step trains with the losses of one ordinary job" "$(loss train.out)" "$(loss ref.out)"
expect_eq "not one task per GPU: refused before launch" \
	"$(grep '^bad=' het.out) $(grep -c LAUNCHED bad.out)" "bad=1 0"
check "... naming the component, its tasks and GPUs" \
	grep -q "component 0 (job ${jid%%+*}) has 2 tasks on 1 nodes, but the job has 3 GPUs on 1 nodes there" bad.err

# 3b. GPUs asked for per component with -G (Slurm's usual form), the step
# binding one per task.
# shellcheck disable=SC2016
timeout 120 salloc -p a800 -n3 -G 3 : -p rtx4090 -n3 -G 3 sh -c \
	'srun --het-group=0,1 --gpus-per-task=1 --hexiscale=auto --hexiscale-model=tiny-8l --hexiscale-use-all-gpus "$1"' \
	sh "$EX/print-role.sh" >g.out 2>g.err </dev/null
check "salloc -G 3 : -G 3, srun --het-group=0,1 --gpus-per-task=1: roles match one plan of 6 GPUs" \
	sh -c "$CHECK '$(plan_of g.out)' g.out && [ \"\$(grep -c ' role=train ' g.out)\" = 6 ]"

# 4. Limits found before the step exists (clean: no step left behind).
# shellcheck disable=SC2016
out=$(timeout 120 salloc $A : -p rtx3090 -n1 sh -c \
	'srun --het-group=0,1 --hexiscale=auto --hexiscale-model=tiny-8l sh -c "echo LAUNCHED"; echo "rc=$?"' 2>&1 </dev/null)
printf '%s' "$out" | grep -q "^rc=1" && ! printf '%s' "$out" | grep -q LAUNCHED &&
	printf '%s' "$out" | grep -q "component 1 (job [0-9]*) has no GPUs on node n3" &&
	pass "a component without GPUs: refused before launch, naming it" || fail "no-GPU component: $out"
# shellcheck disable=SC2016
out=$(timeout 120 salloc -p debug -w n1,n2 -N2 -n2 --gpus-per-task=1 sh -c \
	'srun -N1 -n1 --hexiscale=auto --hexiscale-model=tiny-8l sh -c "echo LAUNCHED" : -N1 -n1 sh -c "echo LAUNCHED"; echo "rc=$?"' 2>&1 </dev/null)
printf '%s' "$out" | grep -q "^rc=1" && ! printf '%s' "$out" | grep -q LAUNCHED &&
	printf '%s' "$out" | grep -q "job [0-9]* is not a heterogeneous job" &&
	pass "srun A : B in a job that is not heterogeneous: refused, one line" || fail "plain job A : B: $out"

# 5. default_mode=on plans no step over several components on its own.
conf=$HEXI_SLURM_DIR/etc/plugstack.conf
good=$(cat "$conf")
echo "$good default_mode=on model=tiny-8l" >"$conf"
# shellcheck disable=SC2016
out=$(timeout 120 salloc $A : $B sh -c \
	'srun --het-group=0,1 sh -c "echo R=\${HEXISCALE_RANK:-none}"; echo "rc=$?"' 2>&1 </dev/null)
echo "$good" >"$conf"
expect_eq "default_mode=on: the step runs untouched" \
	"$(printf '%s\n' "$out" | grep -c '^R=none$') $(printf '%s\n' "$out" | grep '^rc=')" "6 rc=0"
check "... saying why in one line" grep -q "not planned (default_mode=on; --hexiscale=auto to insist): this step spans 2 components" <<<"$out"

# 6. slurmstepd refuses another job's heterogeneous hand-off (here one
# left in sbatch's environment, with a good checksum, for job 1).
H=$(python3 - <<'EOF'
rows = ['.'.join(map(str, [t, t // 3, t % 3, 0, t, 6, 0, 1, t, t + 1, 64, 1, t % 3, 3, 0])) for t in range(6)]
body = ('hx3;j=1;hc=1.0.3.0.1/2.3.3.1.1;h=0123456789abcdef;w=6;np=1;ma=127.0.0.1;'
        'mp=30000;pf=/tmp/x.json;g=a800,rtx4090;t=' + '/'.join(rows))
h = 0xcbf29ce484222325
for b in body.encode():
    h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
print('%s;c=%016x' % (body, h))
EOF
)
printf '#!/bin/bash\necho BATCH-RAN\n' >"$JOBS/b.sbatch"
# shellcheck disable=SC2086
jid=$(HEXISCALE_HANDOFF=$H sbatch --parsable -o "$JOBS/b.out" -e "$JOBS/b.err" $A : $B "$JOBS/b.sbatch" 2>&1) ||
	hard "sbatch: $jid"
wait_job "${jid%%+*}" || fail "job did not end"
check "another job's hand-off: refused in slurmstepd, naming both jobs" \
	grep -q "the plan hand-off is for heterogeneous job 1, not job ${jid%%+*}" "$JOBS/b.out" "$JOBS/b.err"
check "... and nothing ran with it" sh -c "! grep -q BATCH-RAN '$JOBS/b.out'"
no_drain
done_testing
