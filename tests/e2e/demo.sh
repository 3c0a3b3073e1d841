#!/bin/bash
# demo.sh - README's first command, shortened: examples/workflow.sh (what
# examples/demo.sh runs after building) with 4 + 4 steps on its own ports
# must show its four parts, train, resume at step 5 on the second plan,
# verify the checkpoint, exit 0, and leave no daemon or port lock behind;
# then examples/slurm-demo.sh must run through.  First, with no cluster:
# workflow.sh refuses a scratch directory that another user could have put
# at its predictable name in /tmp (a symbolic link, a directory of theirs),
# and slurm-demo.sh fails, naming the step, when a step fails (Slurm's
# commands stubbed: it exited 0 whatever happened).
. "$top_srcdir/tests/tap.sh"
scratch=$(mktemp -d /tmp/hexi-e2e-demo.XXXXXX) || hard "mktemp"
out=$scratch/out
P=20170 # a port block no other test or demo prefers
planted=/tmp/hexi-demo-$P
trap 'rm -rf "$scratch"; rm -rf -- "$planted"' EXIT
# skip_rest WHY: skip the cluster part, unless a check above failed
skip_rest() {
	[ "$t_failed" -eq 0 ] || { echo "# not run: $*"; done_testing; }
	skip "$*"
}

# 1. workflow.sh's scratch directory.  The build directory given is empty:
# a demo that went on would stop at "not built", before any cluster.
mkdir "$scratch/build" "$scratch/victim" || hard "mkdir"
# refuses WHAT PATTERN: workflow.sh (on port block $P) exits 1 saying
# "demo: $planted: PATTERN"
refuses() {
	local rc
	HEXI_DEMO_PORT_BASE=$P timeout 120 bash "$top_srcdir/examples/workflow.sh" \
		"$scratch/build" >"$out" 2>&1
	rc=$?
	if [ $rc -eq 1 ] && grep -q "^demo: $planted: $2" "$out"; then
		pass "workflow.sh refuses $1 at /tmp/hexi-demo-PORT"
	else
		fail "workflow.sh with $1 at $planted: exit $rc: $(head -c 300 "$out")"
	fi
}
rm -rf -- "$planted" # an earlier run's
ln -s "$scratch/victim" "$planted" || hard "ln -s"
refuses "a symbolic link" "a symbolic link, not a directory"
check "... nothing written through the link" test -z "$(ls -A "$scratch/victim")"
check "... its port block given back" test ! -e "/tmp/hexi-slurm-lock-$P"
rm -f -- "$planted"
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
	mkdir -m 755 "$planted" && chown nobody "$planted" || hard "chown nobody"
	refuses "another user's directory" "owned by uid $(id -u nobody), not by this user"
	rm -rf -- "$planted"
fi
mkdir -m 777 "$planted" || hard "mkdir $planted"
refuses "a directory others may write into" "mode 777"
rm -rf -- "$planted"
mkdir -m 755 "$planted" || hard "mkdir $planted"
HEXI_DEMO_PORT_BASE=$P timeout 120 bash "$top_srcdir/examples/workflow.sh" \
	"$scratch/build" >"$out" 2>&1
check "... and takes its own (going on to the build check)" grep -q "hexiplan not built" "$out"
rm -rf -- "$planted"

# 2. slurm-demo.sh with tests/slurm/cluster.sh and Slurm's commands
# stubbed: a job that ends FAILED, a refused sbatch, a job without its
# role lines, each fail with the step named; a COMPLETED job exits 0.
S=$scratch/stub
mkdir -p "$S/examples" "$S/tests/slurm" "$S/bin" || hard "mkdir"
cp "$top_srcdir/examples/slurm-demo.sh" "$top_srcdir/examples/hexiscale.sbatch" \
	"$S/examples/" || hard "cp"
cat >"$S/tests/slurm/cluster.sh" <<'EOF'
# a stub: no daemons, the scratch directory of the caller (or STUB_DIR)
hexi_cluster_claim_ports() { HEXI_SLURM_PORT_BASE=$1 HEXI_PORT_LOCK=; }
hexi_cluster_start() {
	HEXI_SLURM_DIR=${HEXI_SLURM_DIR:-$STUB_DIR}
	mkdir -p "$HEXI_SLURM_DIR/jobs"
}
hexi_cluster_stop() { :; }
EOF
cat >"$S/bin/sbatch" <<'EOF'
#!/bin/sh
[ "${STUB_SBATCH:-ok}" = ok ] || { echo "sbatch: error: refused (stub)" >&2; exit 1; }
while [ $# -gt 0 ]; do
	[ "$1" = -o ] && o=$(echo "$2" | sed 's/%j/42/')
	shift
done
{
	echo "hexiscale: step 42.0: plan 0123456789abcdef for 8 GPUs on 3 nodes"
	i=0
	while [ $i -lt "${STUB_ROLES:-8}" ]; do
		echo "HXROLE procid=$i rank=$i role=train pipe=0 stage=$i nstages=8 tp_rank=0 tp_size=1 l0=0 l1=5 gpu=0 gtype=a800 cvd=0"
		i=$((i + 1))
	done
} >"$o"
echo '{}' >"$(dirname "$o")/hexiscale-plan.42.0.json"
echo 42
EOF
printf '#!/bin/sh\necho "JobId=42 JobState=${STUB_STATE:-COMPLETED} Reason=None"\n' >"$S/bin/scontrol"
printf '#!/bin/sh\necho "n1 idle gpu:a800:3"\n' >"$S/bin/sinfo"
chmod +x "$S/bin/"* || hard "chmod"
mkdir "$scratch/stubdir" || hard "mkdir"
# sd WHAT RC PATTERN VAR=VALUE...: the stubbed slurm-demo.sh exits RC and
# says PATTERN (a BRE; on stderr when RC is 1)
sd() {
	local what=$1 want=$2 pat=$3 rc
	shift 3
	env PATH="$S/bin:$PATH" STUB_DIR="$scratch/stubdir" "$@" \
		bash "$S/examples/slurm-demo.sh" "$scratch/build" >"$out" 2>"$out.err"
	rc=$?
	# the scratch directory of a failed run stays, named
	sed -n 's/^slurm-demo: logs and job outputs kept in \(\/tmp\/hexi-slurm-demo\..*\)$/\1/p' \
		"$out.err" | while read -r d; do rm -rf -- "$d"; done
	if [ $rc = "$want" ] && cat "$out" "$out.err" | grep -q "$pat"; then
		pass "slurm-demo.sh, $what: exit $want"
	else
		fail "slurm-demo.sh, $what: exit $rc, want $want and '$pat': $(tail -c 300 "$out.err")"
	fi
}
sd "a COMPLETED job" 0 "^  task 7: RANK 7  pipeline 0 stage 7/8" STUB_STATE=COMPLETED
sd "a job that FAILED" 1 "^slurm-demo: job 42: FAILED" STUB_STATE=FAILED
sd "sbatch refusing the job" 1 "^slurm-demo: sbatch refused the job" STUB_SBATCH=no
sd "3 role lines of 8" 1 "^slurm-demo: job 42: not a role line for each of the 8 tasks" STUB_ROLES=3

# 3. the demo on the real test cluster
[ "$(id -u)" -eq 0 ] || skip_rest "needs root (the demo starts munged, slurmctld, slurmd)"
[ -x "$top_builddir/runtime/hexitrain" ] || skip_rest "hexitrain not built (needs MPI)"
[ -x "$top_builddir/checkpoint/hexickpt" ] || skip_rest "hexickpt not built (needs HDF5, xxhash)"
HEXI_DEMO_PORT_BASE=17340 HEXI_DEMO_STEPS=4 bash "$top_srcdir/examples/workflow.sh" "$top_builddir" >"$out" 2>&1
rc=$?
[ $rc -eq 77 ] && { sed 's/^/# /' "$out"; skip_rest "the test cluster cannot run here"; }
expect_eq "demo exit status" "$rc" 0
[ $rc -eq 0 ] || sed 's/^/# /' "$out" | tail -n 30
for part in "== 0. " "== 1. The allocation and the plan" "== 2. sbatch --hexiscale=auto examples/train.sbatch" \
	"== 3. A new allocation without the A800 node" "== 4. The result"; do
	check "demo shows '$part'" grep -qF "$part" "$out"
done
check "part 1 shows the plan picture (hexiplan show)" grep -q '^  pipeline 0: batch .*micro-batch' "$out"
check "part 1 shows a predicted speed-up over the best uniform plan" \
	grep -q 'llama2-7b  HexiScale .* vs best uniform .*x speed-up' "$out"
expect_eq "both jobs completed" "$(grep -c '^  job [0-9]*: COMPLETED' "$out")" 2
check "the first job trained steps 1-4" grep -q '^  step    4  loss' "$out"
check "the second job resumed at step 5" grep -q '^  step    5  loss' "$out"
check "the second job ran on n2,n3 only" grep -q 'hexi-resume: job [0-9]* on n\[2-3\], 5 tasks' "$out"
check "the checkpoint verifies" grep -q 'step-00000008: OK: ' "$out"
check "reshard + diff: identical" grep -q 'identical tensors' "$out"
port=$(sed -n 's/.*on ports \([0-9]*\)\.\..*/\1/p' "$out")
check "no daemon of the demo left running" test -z "$(pgrep -f "hexi-demo-$port/")"
check "port lock released" test ! -e "/tmp/hexi-slurm-lock-$port"
[ -n "$port" ] && [ "$t_failed" -eq 0 ] && rm -rf "/tmp/hexi-demo-$port"

# examples/slurm-demo.sh: the plan summary, a role line per task, the plan
bash "$top_srcdir/examples/slurm-demo.sh" "$top_builddir" >"$out" 2>&1
rc=$?
expect_eq "slurm-demo.sh exit status" "$rc" 0
[ $rc -eq 0 ] || sed 's/^/# /' "$out" | tail -n 30
check "slurm-demo.sh shows the plugin's plan summary" grep -q '^hexiscale: step [0-9]*\.0: plan' "$out"
expect_eq "slurm-demo.sh shows a role for each of the 8 tasks" \
	"$(grep -c '^  task [0-7]: RANK ' "$out")" 8
port=$(sed -n 's/.*(ports \([0-9]*\)\.\.).*/\1/p' "$out")
[ -n "$port" ] && [ ! -e "/tmp/hexi-slurm-lock-$port" ] &&
	pass "slurm-demo.sh gave its port block back" ||
	fail "slurm-demo.sh: ports '$port', lock $(ls -d "/tmp/hexi-slurm-lock-$port" 2>&1)"
done_testing
