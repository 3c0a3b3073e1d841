#!/bin/bash
# slurm-demo.sh [BUILD] - HexiScale under a real Slurm on this machine:
# starts the 3-node test cluster of tests/slurm/cluster.sh (fake typed GPUs:
# n1 3xa800, n2 3xrtx4090, n3 2xrtx3090), submits examples/hexiscale.sbatch
# (sbatch --hexiscale=auto), shows the plan summary, every task's role and
# the plan file, and stops every daemon it started.  Needs root; run after
# a build (examples/demo.sh does both).
set -u
HEXI_SRC=$(cd "$(dirname "$0")/.." && pwd)
HEXI_BUILD=${1:-$HEXI_SRC/build}
HEXI_SLURM_PORT_BASE=${HEXI_SLURM_PORT_BASE:-17700}
export HEXI_BUILD HEXI_SLURM_PORT_BASE
. "$HEXI_SRC/tests/slurm/cluster.sh"
trap 'cd /; hexi_cluster_stop >/dev/null 2>&1' EXIT
echo "== starting munged, slurmctld and slurmd n1..n3 (ports $HEXI_SLURM_PORT_BASE..)"
hexi_cluster_start || { echo "(Slurm demo not run)"; exit 0; }
sinfo -N -o '%N %T %G'
jobs=$HEXI_SLURM_DIR/jobs
cd "$jobs" || exit 1
export HEXI_EXAMPLES=$HEXI_SRC/examples
echo "== sbatch --hexiscale-model=llama2-13b --hexiscale-global-batch=64 examples/hexiscale.sbatch"
jid=$(sbatch --parsable -o "$jobs/slurm-%j.out" --hexiscale-model=llama2-13b \
	--hexiscale-global-batch=64 "$HEXI_SRC/examples/hexiscale.sbatch") || exit 1
for _ in $(seq 300); do
	st=$(scontrol show job "$jid" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
	case $st in COMPLETED|FAILED|CANCELLED|TIMEOUT) break ;; esac
	sleep 0.2
done
echo "== job $jid: $st; its output (plan summary on stderr, one role line per task):"
grep -E '^hexiscale:' "$jobs/slurm-$jid.out"
grep '^HXROLE' "$jobs/slurm-$jid.out" | head -8 | sort -t= -k2 -n | awk '{
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	if (v["role"] == "idle") {
		printf "  task %s: RANK %s  idle (the plan leaves GPU %s (%s) out)  CUDA_VISIBLE_DEVICES=%s\n",
			v["procid"], v["rank"], v["gpu"], v["gtype"], v["cvd"]; next }
	printf "  task %s: RANK %s  pipeline %s stage %s/%s  TP %s/%s  layers [%s,%s)  GPU %s (%s)  CUDA_VISIBLE_DEVICES=%s\n",
		v["procid"], v["rank"], v["pipe"], v["stage"], v["nstages"], v["tp_rank"], v["tp_size"],
		v["l0"], v["l1"], v["gpu"], v["gtype"], v["cvd"] }'
echo "== plan files (one per step):"
ls -l "$jobs"/hexiscale-plan.$jid.*.json
if [ -x "$HEXI_BUILD/scheduler/hexiplan" ]; then
	"$HEXI_BUILD/scheduler/hexiplan" show "$jobs/hexiscale-plan.$jid.0.json" 2>/dev/null | head -30
fi
