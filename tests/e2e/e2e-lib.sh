# shellcheck shell=bash
# e2e-lib.sh - sourced by the tests/e2e/*.sh end-to-end tests: a private
# test cluster (tests/slurm/cluster.sh) per test on its own port block
# (controller + 3 nodes), stopped on exit whatever happens.  A block is
# claimed with hexi_cluster_claim_ports of tests/slurm/cluster.sh (an atomic
# mkdir /tmp/hexi-slurm-lock-BASE holding the owner's pid, taken over only
# when the owner is gone, ports checked free), so e2e tests, spank tests and
# demos of any worktree never share a controller.  Preferred blocks:
# 17300 + 10 * the test's slot; the demo prefers 17500.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/slurm/cluster.sh"

t_name=$(basename "$0" .sh)
case $t_name in
workflow) t_slot=0 ;;
fault) t_slot=1 ;;
badinput) t_slot=2 ;;
load) t_slot=3 ;;
idle) t_slot=5 ;;
attack) t_slot=6 ;;
*) t_slot=9 ;;
esac

hexi_cluster_claim_ports $((${HEXI_E2E_PORT_BASE:-17300} + 10 * t_slot)) ||
	hard "no free port block for a test cluster"
trap 'rm -rf "$HEXI_PORT_LOCK"' EXIT
HEXI_SLURM_DIR=/tmp/hexi-e2e-$t_name-$HEXI_SLURM_PORT_BASE
HEXI_BUILD=$top_builddir
export HEXI_SLURM_PORT_BASE HEXI_SLURM_DIR HEXI_BUILD

EX=$top_srcdir/examples
HEXITRAIN=$top_builddir/runtime/hexitrain
HEXICKPT=$top_builddir/checkpoint/hexickpt
# shellcheck disable=SC2034 # used by the tests that source this file
HEXIPLAN=$top_builddir/scheduler/hexiplan
# shellcheck disable=SC2034 # used, word-split, by the tests that source this file
CHECK_ROLES="python3 $top_srcdir/tests/spank/check-roles.py"
# Jobs inherit this environment (sbatch --export=ALL): several fake nodes
# on one machine need OpenMPI's TCP transport on the loopback.
HEXI_EXAMPLES=$EX
hexi_ompi_env
OPENBLAS_NUM_THREADS=1
export HEXITRAIN HEXI_EXAMPLES OPENBLAS_NUM_THREADS
unset HEXISCALE_MODE HEXISCALE_MODEL HEXISCALE_GLOBAL_BATCH \
	HEXISCALE_MICRO_BATCH HEXISCALE_SEQ_LEN HEXISCALE_PLAN_DIR
# The stories here train asymmetric plans over every GPU of the test
# cluster; for their tiny models the planner would leave the slower nodes
# idle (issue 16.1), so their jobs ask for every GPU.  idle.sh unsets it
# and runs the default.
HEXISCALE_USE_ALL_GPUS=1
export HEXISCALE_USE_ALL_GPUS

# need_trainer: skip unless hexitrain and hexickpt were built (MPI, HDF5).
need_trainer() {
	[ -x "$HEXITRAIN" ] || skip "hexitrain not built (needs MPI): $HEXITRAIN"
	[ -x "$HEXICKPT" ] || skip "hexickpt not built (needs HDF5, xxhash): $HEXICKPT"
}

# cancel_jobs: cancel every job still queued or running and wait (10 s at
# most) until they are gone: slurmstepd and the tasks outlive slurmd, so a
# cluster stopped under a running job would leave them behind.
cancel_jobs() {
	local ids i
	ids=$(squeue -h -o %i 2>/dev/null)
	[ -n "$ids" ] || return 0
	scancel $ids 2>/dev/null
	for i in $(seq 50); do
		[ -z "$(squeue -h -o %i 2>/dev/null)" ] && return 0
		sleep 0.2
	done
	return 1
}

# slurm_down: stop the daemons, free the port block; keep the scratch dir
# (logs, job outputs) only when the test failed.
slurm_down() {
	local rc=$?
	cd / || true
	cancel_jobs
	hexi_cluster_stop >/dev/null 2>&1
	case $rc in 0 | 77) rm -rf "$HEXI_SLURM_DIR" ;; *) echo "# logs and job outputs kept in $HEXI_SLURM_DIR" ;; esac
	rm -rf "$HEXI_PORT_LOCK"
	return 0
}

# slurm_up: start the cluster (skip 77 with the reason where it cannot run)
# and cd into its job directory $JOBS (mode 1777).
slurm_up() {
	local rc log=/tmp/hexi-e2e-$t_name-$HEXI_SLURM_PORT_BASE.start
	hexi_cluster_vars
	trap slurm_down EXIT
	trap 'exit 99' INT TERM
	hexi_cluster_start >"$log" 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		sed 's/^/# /' "$log"
		rm -f "$log"
		[ $rc -eq 77 ] && exit 77
		skip "Slurm test cluster did not start (see above)"
	fi
	rm -f "$log"
	srun --mpi=list 2>&1 | grep -q pmix || skip "Slurm has no pmix MPI plugin"
	JOBS=$HEXI_SLURM_DIR/jobs
	cd "$JOBS" || hard "no job directory $JOBS"
}

# job_wait JOBID [TIMEOUT_S]: wait for a batch job to end, print its state.
# The wait ends when the job does; TIMEOUT_S (default 600) only bounds a
# hung job.  A loaded CI machine can take minutes to start 8 MPI ranks, so
# give a short TIMEOUT_S only where the bound itself is what is tested.
job_wait() {
	local i st n=$((${2:-600} * 5))
	for i in $(seq "$n"); do
		st=$(scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
		case $st in
		COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
			echo "$st"
			return 0
			;;
		esac
		sleep 0.2
	done
	echo TIMEOUT_WAITING
	scancel "$1" 2>/dev/null
	return 1
}

# job_field JOBID FIELD: one field of scontrol show job (e.g. ExitCode).
job_field() {
	scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}

# job_live JOBID: 0 while the job may still run (pending, configuring,
# running, ...; also when scontrol gave no answer this time), 1 once it
# reached a final state.  One query: two (RUNNING, then PENDING) race the
# job's start and read neither (fault.sh in a CI run).
job_live() {
	case $(job_field "$1" JobState) in
	COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | \
		PREEMPTED | BOOT_FAIL | DEADLINE | REVOKED | SPECIAL_EXIT) return 1 ;;
	esac
	return 0
}

# no_drain: after failure paths no node may be drained or down.
no_drain() {
	local bad
	bad=$(sinfo -h -N -t drain,drained,draining,down -o '%N' | sort -u | paste -sd, -)
	if [ -z "$bad" ]; then pass "no node drained${1:+ ($1)}"; else
		fail "nodes drained${1:+ ($1)}: $bad"
		sinfo -h -N -o '# %N %T %E' 2>/dev/null
		hexi_cluster_resume
	fi
}

# njobs: jobs the controller knows (any state).
njobs() { squeue -h -t all -o %i 2>/dev/null | wc -l; }

# json_steps FILE: "STEP LOSS" lines of hexitrain --json output.
json_steps() {
	python3 -c '
import json, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
for line in open(sys.argv[1], errors="replace"):
    line = line.strip()
    if not line.startswith("{"):
        continue
    try:
        o = json.loads(line)
    except ValueError:
        continue
    if "step" in o and "loss" in o:
        print(o["step"], repr(float(o["loss"])))
' "$1"
}

# pyval FILE EXPR: evaluate EXPR with p = the JSON document in FILE.
pyval() {
	python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"
}

# plan_fits PLAN "n1:a800:3 n2:rtx4090:3 ...": the plan's devices are exactly
# the GPUs of the allocation: every GPU once, with its node and type.
plan_fits() {
	python3 - "$1" "$2" <<'EOF'
import json, sys
plan = json.load(open(sys.argv[1]))
want = {}
for item in sys.argv[2].split():
    node, gtype, n = item.split(":")
    want[node] = (gtype, int(n))
errors = []
types = {}
for node in plan["cluster"]["nodes"]:
    types[node["name"]] = node.get("gpu") or node.get("type")
used = {}
for p in plan["pipelines"]:
    for s in p["stages"]:
        for d in s["devices"]:
            key = (d["node"], d["gpu"])
            if key in used:
                errors.append("GPU %s:%d used twice" % key)
            used[key] = d["rank"]
for node, (gtype, n) in want.items():
    got = sorted(g for (nd, g) in used if nd == node)
    if got != list(range(n)):
        errors.append("node %s: plan uses GPUs %s, allocation has %d" % (node, got, n))
    if gtype not in str(types.get(node)):
        errors.append("node %s: plan says type %s, allocation has %s" % (node, types.get(node), gtype))
extra = set(nd for (nd, g) in used) - set(want)
if extra:
    errors.append("plan uses nodes outside the allocation: %s" % sorted(extra))
if plan["world_size"] != sum(n for _, n in want.values()):
    errors.append("world size %d" % plan["world_size"])
if sorted(used.values()) != list(range(plan["world_size"])):
    errors.append("ranks are not 0..%d" % (plan["world_size"] - 1))
for e in errors:
    print("# " + e)
sys.exit(1 if errors else 0)
EOF
}
