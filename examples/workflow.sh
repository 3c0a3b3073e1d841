#!/bin/bash
# workflow.sh BUILD_DIR - the HexiScale demo (run by examples/demo.sh after it
# has installed the packages and built BUILD_DIR): a local three-node Slurm
# cluster with heterogeneous fake GPUs, the plan HexiScale makes for it,
# asymmetric training under that plan with checkpoints, a second job on a
# different allocation resuming from the checkpoint under its own plan, and
# the checkpoint checked.  The cluster is stopped at the end, whatever
# happens; outputs stay in $HEXI_SLURM_DIR/jobs until the next run
# (/tmp/hexi-demo-PORT: taken only as a directory, not a symbolic link, of
# the user running the demo that no one else may write into).
#
# Environment: HEXI_DEMO_PORT_BASE (default 17500: its own ports, apart from
# the tests'), HEXI_DEMO_STEPS (steps of the first job, default 10, with a
# checkpoint half-way and at the end; the second job trains as many more).
# Needs root (it starts munged, slurmctld and three slurmd).  Exit status:
# 0 done, 77 the cluster cannot run here (reason printed), 1 a failure.
set -u
# a pipeline's status is its first failure: "tool | sed || die" checked
# sed's status, so a failed verify was reported as success
set -o pipefail
B=${1:?usage: workflow.sh BUILD_DIR}
B=$(cd "$B" && pwd) || exit 1
SRC=$(cd "$(dirname "$0")/.." && pwd)
EX=$SRC/examples
STEPS=${HEXI_DEMO_STEPS:-10}
SAVE=$(((STEPS + 1) / 2))
HEXI_BUILD=$B
HEXI_PORT_LOCK=

. "$SRC/tests/slurm/cluster.sh"

# own_dir DIR: make DIR (mode 755), or take the one there only if it is a
# directory, not a symbolic link, of this user's that no one else may write
# into (the uid and the mode are checked, not followed through a link).
# Its name is predictable (a run reuses the last one's, and it is where
# the outputs stay), and /tmp is everyone's: another user could have put a
# link there, or a directory of theirs, for root to write through.
own_dir() {
	local d=$1 err st uid mode type
	err=$(mkdir -m 755 -- "$d" 2>&1) && return 0
	st=$(stat -c '%u %a %F' -- "$d" 2>/dev/null) || {
		echo "demo: $err" >&2
		return 1
	}
	read -r uid mode type <<<"$st"
	if [ "$type" != directory ]; then
		echo "demo: $d: a $type, not a directory: refused (remove it)" >&2
	elif [ "$uid" != "$(id -u)" ]; then
		echo "demo: $d: owned by uid $uid, not by this user: refused (remove it)" >&2
	elif [ $((8#$mode & 8#022)) -ne 0 ]; then
		echo "demo: $d: mode $mode, others may write into it: refused (remove it)" >&2
	else
		return 0
	fi
	return 1
}

hexi_cluster_claim_ports "${HEXI_DEMO_PORT_BASE:-17500}" || { echo "demo: no free ports" >&2; exit 1; }
# until stop_cluster takes over (below): give the port block back
trap 'rm -rf "$HEXI_PORT_LOCK"' EXIT
HEXI_SLURM_DIR=/tmp/hexi-demo-$HEXI_SLURM_PORT_BASE
own_dir "$HEXI_SLURM_DIR" || exit 1
export HEXI_SLURM_PORT_BASE HEXI_SLURM_DIR HEXI_BUILD
hexi_cluster_vars
HEXIPLAN=$B/scheduler/hexiplan
HEXICKPT=$B/checkpoint/hexickpt
HEXITRAIN=$B/runtime/hexitrain
# The job settings of examples/train.sbatch, for the plan shown in part 1.
PLANOPTS="--hexiscale=auto --hexiscale-model=tiny-8l --hexiscale-global-batch=64 --hexiscale-micro-batch=4"
# Every GPU gets a rank (--hexiscale-use-all-gpus' twin, inherited by the
# jobs): for a model this small the planner alone would leave the slower
# GPUs idle (hexiscale-env(7) HEXISCALE_ROLE=idle), and the demo is about
# an asymmetric plan over all of them.
export HEXISCALE_USE_ALL_GPUS=1
t_start=$(date +%s)

if [ -t 1 ]; then
	h() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
	h() { printf '\n== %s\n' "$*"; }
fi
say() { printf '%s\n' "$*"; }
die() {
	say "demo: $*" >&2
	exit 1
}
field() { python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

stop_cluster() {
	local ids i
	cd / || true
	# Jobs first: slurmstepd and the tasks would outlive slurmd.  Only of a
	# running controller: squeue with no slurm.conf retries for 60 s.
	ids=
	hexi_cluster_pid_alive "$(cat "$HEXI_SLURM_DIR/run/slurmctld.pid" 2>/dev/null)" &&
		ids=$(squeue -h -o %i 2>/dev/null)
	if [ -n "$ids" ]; then
		scancel $ids 2>/dev/null
		for i in $(seq 50); do
			[ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
			sleep 0.2
		done
	fi
	hexi_cluster_stop >/dev/null 2>&1
	if hexi_cluster_status >/dev/null 2>&1; then
		say "demo: some daemons are still running (see $HEXI_SLURM_DIR/run)"
	fi
	[ -n "$HEXI_PORT_LOCK" ] && rm -rf "$HEXI_PORT_LOCK"
	HEXI_PORT_LOCK=
}
trap stop_cluster EXIT
trap 'exit 130' INT TERM

# follow JOBID: print the job's output as it comes (training lines), until
# the job ends; print its final state.
follow() {
	local jid=$1 out=$JOBS/out/$1.out n=0 st m blank=0
	while :; do
		st=$(scontrol show job "$jid" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
		# no state for 60 s: slurmctld is gone, not the job running
		if [ -z "$st" ]; then
			blank=$((blank + 1))
			[ $blank -lt 200 ] || die "job $jid: no state from scontrol for 60 s (slurmctld down?)"
		else
			blank=0
		fi
		if [ -f "$out" ]; then
			m=$(wc -l <"$out")
			[ "$m" -gt "$n" ] && sed -n "$((n + 1)),${m}p" "$out" | grep -E '^(hexi-|hexitrain|step )' | sed 's/^/  /'
			n=$m
		fi
		case $st in PENDING | RUNNING | CONFIGURING | COMPLETING | "") sleep 0.3 ;; *) break ;; esac
	done
	say "  job $jid: $st"
	[ "$st" = COMPLETED ]
}

for p in "$HEXIPLAN" "$HEXICKPT" "$HEXITRAIN"; do
	[ -x "$p" ] || die "$p not built (configure found no MPI or HDF5?)"
done

h "0. A local Slurm cluster with three kinds of (fake) GPUs"
# in the demo's own directory: a fixed name in /tmp could be another
# user's link
hexi_cluster_start >"$HEXI_SLURM_DIR/start.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
	cat "$HEXI_SLURM_DIR/start.log"
	say "demo: cannot start the test cluster (tests/slurm/cluster.sh)" >&2
	[ $rc -eq 77 ] && exit 77
	exit 1
fi
rm -f "$HEXI_SLURM_DIR/start.log"
JOBS=$HEXI_SLURM_DIR/jobs
# cluster.sh leaves jobs/ writable by all (1777) for other users' jobs; the
# demo's are root's, and it writes there itself: closed first, and empty
# (nothing another user put there in between)
chmod 755 "$JOBS" && [ -z "$(ls -A "$JOBS")" ] ||
	die "$JOBS: not empty as the cluster made it (another user's files?)"
mkdir -p "$JOBS/out" && cd "$JOBS" || die "no job directory"
sinfo -N -o '  %N %.6T %G'
say "  (slurmctld + slurmd n1 n2 n3 on ports $HEXI_SLURM_PORT_BASE.., plugin $(basename "$HEXI_PLUGIN"))"

h "1. The allocation and the plan HexiScale chooses for it"
say "  srun -N3 -n8 --gpus-per-task=1 $PLANOPTS true"
srun -N3 -n8 --gpus-per-task=1 $PLANOPTS true 2>plan1.err || { cat plan1.err; die "planning step failed"; }
sed 's/^/  /' plan1.err
say "  (HEXISCALE_USE_ALL_GPUS=1: every GPU gets a rank; without it the planner"
say "   may leave slow GPUs idle when the plan is faster, and says so above)"
plan1=$(sed -n 's/^hexiscale:   plan file //p' plan1.err)
[ -f "$plan1" ] || die "no plan file"
"$HEXIPLAN" show "$plan1" | sed 's/^/  /' || die "hexiplan show failed"
field "$plan1" "json.dumps(p['cluster'])" >alloc.json
compare() { # MODEL [ARGS]: one line, HexiScale vs the best uniform plan
	local m=$1
	shift
	"$HEXIPLAN" compare alloc.json --model "$m" "$@" --json 2>/dev/null | python3 -c '
import json, sys
m = sys.argv[1]
s = {x["strategy"]: x for x in json.load(sys.stdin)["strategies"]}
h, u = s.get("hexiscale"), s.get("megatron")
if not h or h.get("status") != "HEXI_OK":
    print("  %-10s no HexiScale plan" % m)
elif not u or u.get("status") != "HEXI_OK":
    print("  %-10s HexiScale %.4g s/iteration; no uniform plan fits (%s)" % (m, h["iteration_s"], u and u.get("status")))
else:
    print("  %-10s HexiScale %.4g s/iteration vs best uniform (Megatron-style) %.4g s: %.2fx speed-up" %
          (m, h["iteration_s"], u["iteration_s"], u["iteration_s"] / h["iteration_s"]))
' "$m"
}
say "  Predicted on these 8 GPUs (hexiplan compare, the same cost model):"
compare tiny-8l --global-batch 64 --micro-batch 4
compare llama2-7b
say "  (tiny-8l is the demo's CPU-sized model: latency, not FLOPS, decides its time;"
say "   llama2-7b is the size the method is for. Its plan on this allocation:)"
"$HEXIPLAN" plan alloc.json --model llama2-7b -o plan-7b.json >/dev/null 2>&1 &&
	"$HEXIPLAN" show plan-7b.json | sed 's/^/  /'

h "2. sbatch --hexiscale=auto examples/train.sbatch: train under that plan"
export HEXITRAIN HEXI_EXAMPLES=$EX HEXI_CKPT_DIR=$JOBS/ckpt HEXI_SAVE_EVERY=$SAVE
hexi_ompi_env # Open MPI over TCP on the loopback (tests/slurm/cluster.sh)
export OPENBLAS_NUM_THREADS=1
say "  (the GPUs are fake: every rank computes its role's share on the CPU with MPI)"
jid=$(HEXI_PRINT_ROLES=1 HEXI_STEPS=$STEPS sbatch --parsable --hexiscale=auto -o "out/%j.out" -e "out/%j.err" "$EX/train.sbatch") ||
	die "sbatch refused the job"
say "  sbatch --hexiscale=auto examples/train.sbatch   (job $jid: $STEPS steps, a checkpoint every $SAVE)"
follow "$jid" || { tail -n 20 "out/$jid.err"; die "training job failed"; }
planA=out/hexiscale-plan.$jid.1.json
say "  every task's role, as the plugin set it (HEXISCALE_* variables; first step of the job):"
grep '^HXROLE' "out/$jid.out" | sort -t= -k2 -n |
	awk -v nodes="$(scontrol show hostnames "$(sed -n 's/^HXROLE.* nodelist=\([^ ]*\).*/\1/p' "out/$jid.out" | head -1)")" '
	BEGIN { split(nodes, node, "\n") } {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	printf "    task %s on %s GPU %s (%s): rank %s  pipeline %s stage %s/%s  TP %s/%s  layers [%s,%s)  batch %s in %s micro-batches\n",
		v["procid"], node[v["nodeid"] + 1], v["gpu"], v["gtype"], v["rank"], v["pipe"], v["stage"], v["nstages"],
		v["tp_rank"], v["tp_size"], v["l0"], v["l1"], v["batch"], v["mb"] }'
hA=$(field "$planA" "p['hash']")
if [ "$hA" = "$(field "$plan1" "p['hash']")" ]; then
	say "  the job's training step ran plan $hA: the one of part 1 (same allocation, same plan)"
else
	say "  the job's training step ran plan $hA (part 1 planned $(field "$plan1" "p['hash']"): the planner ran out of its time budget differently)"
fi
say "  checkpoints:"
"$HEXICKPT" ls "$JOBS/ckpt" | sed 's/^/    /' || die "hexickpt ls failed"

h "3. A new allocation without the A800 node: resume under its own plan"
jid2=$(HEXI_STEPS=$((2 * STEPS)) sbatch --parsable -w n2,n3 -o "out/%j.out" -e "out/%j.err" "$EX/resume.sbatch") ||
	die "sbatch refused the resume job"
say "  sbatch -w n2,n3 examples/resume.sbatch   (job $jid2: 2 nodes, 5 GPUs)"
follow "$jid2" || { tail -n 20 "out/$jid2.err"; die "resume job failed"; }
planB=out/hexiscale-plan.$jid2.0.json
say "  its plan (hexitrain --resume reads each rank's rows of the stored shards: load-time reshard):"
grep '^hexiscale:' "out/$jid2.err" | grep -v 'plan file' | sed 's/^/  /'
loss() { sed -n "s/^step *$2 *loss \([0-9.]*\).*/\1/p" "out/$1.out"; }
say "  loss: step 1 $(loss "$jid" 1) -> step $STEPS $(loss "$jid" "$STEPS") (saved, plan $(field "$planA" "p['hash']"))"
say "        -> step $((STEPS + 1)) $(loss "$jid2" $((STEPS + 1))) on plan $(field "$planB" "p['hash']") -> step $((2 * STEPS)) $(loss "$jid2" $((2 * STEPS)))"
say "        continuing from the checkpoint, not restarting."

h "4. The result: hexickpt info and verify"
"$HEXICKPT" info "$JOBS/ckpt" | sed -n '1,9p' | sed 's/^/  /' ||
	die "hexickpt info failed"
say "  ..."
"$HEXICKPT" verify "$JOBS/ckpt" | sed 's/^/  /' || die "verify failed"
"$HEXICKPT" reshard -q "$JOBS/ckpt" --plan "$planA" -o "$JOBS/ckpt-planA" >/dev/null 2>&1 &&
	"$HEXICKPT" diff -q "$JOBS/ckpt" "$JOBS/ckpt-planA" >/dev/null 2>&1 ||
	die "hexickpt reshard to the first job's plan and diff: not identical"
say "  hexickpt reshard to the first job's plan, then hexickpt diff: identical tensors"

h "Done in $(($(date +%s) - t_start)) s"
stop_cluster
trap - EXIT
say "  cluster stopped, nothing left running; job outputs, plans and checkpoints in $JOBS"
