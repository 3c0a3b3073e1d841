#!/bin/bash
# slurm-demo.sh [BUILD] - HexiScale under a real Slurm on this machine:
# starts the 3-node test cluster of tests/slurm/cluster.sh (fake typed GPUs:
# n1 3xa800, n2 3xrtx4090, n3 2xrtx3090), submits examples/hexiscale.sbatch
# (sbatch --hexiscale=auto), shows the plan summary, every task's role and
# the plan file, and stops every daemon it started.  Needs root; run after
# a build (examples/demo.sh does both).
#
# The cluster gets a free block of ports from HEXI_SLURM_PORT_BASE (default
# 17700) up, and a fresh directory made by mktemp (another user cannot have
# put a link at its name), removed at the end unless a step failed.  Exit
# status: 0 done, 77 the cluster cannot run here (reason printed), 1 a step
# failed (named on stderr).
set -u
# a pipeline's status is its first failure, not its last command's
set -o pipefail
HEXI_SRC=$(cd "$(dirname "$0")/.." && pwd)
# absolute: the jobs run elsewhere, and the plugin's path is in their config
HEXI_BUILD=$(cd "${1:-$HEXI_SRC/build}" && pwd) || {
	echo "slurm-demo: ${1:-$HEXI_SRC/build}: no such build directory" >&2
	exit 1
}
HEXI_PORT_LOCK=
HEXI_SLURM_DIR=
. "$HEXI_SRC/tests/slurm/cluster.sh"
status=1
finish() {
	cd / || true
	if [ -n "$HEXI_SLURM_DIR" ]; then
		hexi_cluster_stop >/dev/null 2>&1
		if [ $status -eq 0 ]; then
			rm -rf "$HEXI_SLURM_DIR"
		else
			echo "slurm-demo: logs and job outputs kept in $HEXI_SLURM_DIR" >&2
		fi
	fi
	[ -n "$HEXI_PORT_LOCK" ] && rm -rf "$HEXI_PORT_LOCK"
}
trap finish EXIT
trap 'exit 130' INT TERM
die() {
	echo "slurm-demo: $*" >&2
	exit 1
}

hexi_cluster_claim_ports "${HEXI_SLURM_PORT_BASE:-17700}" || die "claiming ports: no free block"
HEXI_SLURM_DIR=$(mktemp -d /tmp/hexi-slurm-demo.XXXXXX) || die "mktemp: no scratch directory"
export HEXI_BUILD HEXI_SLURM_PORT_BASE HEXI_SLURM_DIR
echo "== starting munged, slurmctld and slurmd n1..n3 (ports $HEXI_SLURM_PORT_BASE..)"
hexi_cluster_start
rc=$?
if [ $rc -eq 77 ]; then
	echo "(Slurm demo not run)"
	status=0
	exit 77
fi
[ $rc -eq 0 ] || die "starting the cluster (tests/slurm/cluster.sh) failed"
sinfo -N -o '%N %T %G' || die "sinfo failed"
jobs=$HEXI_SLURM_DIR/jobs
cd "$jobs" || die "no job directory $jobs"
export HEXI_EXAMPLES=$HEXI_SRC/examples
echo "== sbatch --hexiscale-model=llama2-13b --hexiscale-global-batch=64 examples/hexiscale.sbatch"
jid=$(sbatch --parsable -o "$jobs/slurm-%j.out" --hexiscale-model=llama2-13b \
	--hexiscale-global-batch=64 "$HEXI_SRC/examples/hexiscale.sbatch") ||
	die "sbatch refused the job"
st=
for _ in $(seq 300); do
	st=$(scontrol show job "$jid" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
	case $st in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;; esac
	sleep 0.2
done
out=$jobs/slurm-$jid.out
if [ "$st" != COMPLETED ]; then
	tail -n 20 "$out" 2>/dev/null | sed 's/^/  /'
	die "job $jid: ${st:-no state} after 60 s, not COMPLETED"
fi
echo "== job $jid: $st; its output (plan summary on stderr, one role line per task):"
grep -E '^hexiscale:' "$out" || die "job $jid: no plan summary (hexiscale: lines) in $out"
roles=$(grep '^HXROLE' "$out" | sed -n 1,8p)
[ "$(printf '%s\n' "$roles" | grep -c '^HXROLE')" -eq 8 ] ||
	die "job $jid: not a role line for each of the 8 tasks in $out"
printf '%s\n' "$roles" | sort -t= -k2 -n | awk '{
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	if (v["role"] == "idle") {
		printf "  task %s: RANK %s  idle (the plan leaves GPU %s (%s) out)  CUDA_VISIBLE_DEVICES=%s\n",
			v["procid"], v["rank"], v["gpu"], v["gtype"], v["cvd"]; next }
	printf "  task %s: RANK %s  pipeline %s stage %s/%s  TP %s/%s  layers [%s,%s)  GPU %s (%s)  CUDA_VISIBLE_DEVICES=%s\n",
		v["procid"], v["rank"], v["pipe"], v["stage"], v["nstages"], v["tp_rank"], v["tp_size"],
		v["l0"], v["l1"], v["gpu"], v["gtype"], v["cvd"] }' || die "printing the roles failed"
echo "== plan files (one per step):"
ls -l "$jobs"/hexiscale-plan."$jid".*.json || die "job $jid: no plan file in $jobs"
if [ -x "$HEXI_BUILD/scheduler/hexiplan" ]; then
	# whole, then cut: head closing the pipe early would fail hexiplan
	show=$("$HEXI_BUILD/scheduler/hexiplan" show "$jobs/hexiscale-plan.$jid.0.json" 2>&1) ||
		die "hexiplan show of the plan of step $jid.0 failed: $show"
	printf '%s\n' "$show" | sed -n 1,30p
fi
status=0
