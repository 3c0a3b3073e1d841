#!/bin/bash
# cluster-stop.sh - tests/slurm/cluster.sh stop leaves nothing of its
# cluster behind even with jobs running (a batch job whose srun step sleeps,
# a plain batch job, an srun from outside), and touches no process of
# another cluster (a decoy "srun" with another SLURM_CONF).
. "$top_srcdir/tests/spank/slurm-lib.sh"
slurm_up

# ours PATTERN: PIDs of processes whose environment has our SLURM_CONF.
ours() {
	local p
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$p" = $$ ] || [ "$p" = "$BASHPID" ] && continue
		tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qxF "SLURM_CONF=$SLURM_CONF" || continue
		tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -qE "$1" && echo "$p"
	done
}

j1=$(sbatch --parsable -N1 -n1 --gpus-per-task=1 --hexiscale=auto --hexiscale-model=tiny-4l \
	-o "$JOBS/j1.out" --wrap "srun sleep 3600") || hard "sbatch j1: $j1"
j2=$(sbatch --parsable -N1 -n1 -o "$JOBS/j2.out" --wrap "sleep 3601") || hard "sbatch j2: $j2"
srun -N1 -n1 sleep 3602 >/dev/null 2>&1 &
ext=$!
# A decoy of another cluster: a program named srun, another SLURM_CONF.
ddir=$(mktemp -d /tmp/hexi-decoy-XXXXXX) && cp /bin/sleep "$ddir/srun" || hard "decoy"
(cd / && exec env SLURM_CONF=/tmp/hexi-slurm-other/etc/slurm.conf "$ddir/srun" 3603) &
decoy=$!
for i in $(seq 100); do
	[ "$(ours 'sleep 36(00|01|02)' | wc -l)" -ge 3 ] && [ "$(squeue -h -t R | wc -l)" -eq 3 ] && break
	sleep 0.2
done
before=$(ours 'slurmstepd|srun|sleep 36' | sort -n | paste -sd' ')
n=$(wc -w <<<"$before")
[ "$n" -ge 7 ] && pass "jobs running: $n processes of this cluster (steps, sruns, sleeps)" ||
	fail "expected >= 7 job processes, got $n: $before"
t0=$(date +%s)
hexi_cluster_stop
t1=$(date +%s)
sleep 0.3
left=$(ours 'slurm|srun|sleep 36|munged' | paste -sd' ')
expect_eq "nothing of this cluster is left after stop" "$left" ""
[ -n "$left" ] && ps -o pid,ppid,cmd -p "${left// /,}" | sed 's/^/# /'
alive=""
for p in $before; do hexi_cluster_pid_running "$p" && alive="$alive $p"; done
expect_eq "every job process seen before stop is gone (or a zombie)" "$alive" ""
check "the decoy of another cluster is untouched" kill -0 "$decoy"
kill -KILL "$decoy" 2>/dev/null
wait "$decoy" 2>/dev/null
rm -rf "$ddir"
wait "$ext" 2>/dev/null
pass "stop took $((t1 - t0)) s"
done_testing
