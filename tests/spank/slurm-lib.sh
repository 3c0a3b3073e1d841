# shellcheck shell=bash
# slurm-lib.sh - sourced by the tests/spank/*.sh cluster tests: starts the
# test cluster of tests/slurm/cluster.sh on ports derived from the test
# name (so tests can run in parallel), stops it on exit whatever happens.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/slurm/cluster.sh"

t_name=$(basename "$0" .sh)
HEXI_BUILD=$top_builddir
export HEXI_BUILD

if [ -z "${HEXI_SLURM_PORT_BASE:-}" ]; then
	# start where the test name and build dir point, so parallel runs spread
	t_start=$((17200 + ($(printf '%s %s' "$t_name" "$top_builddir" | cksum | cut -d' ' -f1) % 300) * 10))
	hexi_cluster_claim_ports "$t_start" || hard "no free port block for a test cluster"
fi
HEXI_SLURM_DIR=/tmp/hexi-slurm-$t_name-$HEXI_SLURM_PORT_BASE
export HEXI_SLURM_PORT_BASE HEXI_SLURM_DIR

# Stop the daemons; drop the scratch dir unless something failed (then its
# logs stay for a look).
slurm_down() {
	cd / || true
	hexi_cluster_stop >/dev/null 2>&1
	[ "${t_failed:-0}" -eq 0 ] && rm -rf "$HEXI_SLURM_DIR"
	[ -n "${HEXI_PORT_LOCK:-}" ] && rm -rf "$HEXI_PORT_LOCK"
	return 0
}

slurm_up() {
	local rc
	trap slurm_down EXIT
	trap 'exit 99' INT TERM
	hexi_cluster_start
	rc=$?
	[ $rc -eq 77 ] && exit 77
	[ $rc -eq 0 ] || hard "test cluster did not start"
	JOBS=$HEXI_SLURM_DIR/jobs
	cd "$JOBS" || hard "no job dir"
}

# Skip unless the planner library can plan (--hexiscale=auto).
need_planner() {
	nm -D "$HEXI_LIBSCHED" 2>/dev/null | grep -q ' T hexi_plan_create' ||
		skip "libhexisched has no planner (hexi_plan_create)"
}

# field PLAN.json EXPR: a Python expression over the plan file (p).
field() { python3 -c "import json,sys; p=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# Run a client command as an unprivileged user (nobody) in the job dir.
as_user() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups env SLURM_CONF="$SLURM_CONF" HOME=/tmp "$@"
}

# After failure-path tests: no node may be drained.
no_drain() {
	local bad
	bad=$(sinfo -h -N -t drain,drained,draining,down -o '%N' | sort -u | paste -sd, -)
	if [ -z "$bad" ]; then pass "no node drained"; else
		fail "nodes drained: $bad"; hexi_cluster_resume; fi
}

# Wait for a batch job to end (10 minutes at most: the wait ends when the
# job does, and a loaded CI machine can take minutes); print its state.
job_wait() {
	local i st
	for i in $(seq 3000); do
		st=$(scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
		case $st in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) echo "$st"; return 0 ;; esac
		sleep 0.2
	done
	echo TIMEOUT_WAITING
	scancel "$1" 2>/dev/null
	return 1
}
