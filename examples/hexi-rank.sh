#!/bin/sh
# hexi-rank.sh PROGRAM [ARGS...] - run one task of a HexiScale step (as
# srun's task) and, if PROGRAM is killed by a signal, say which HexiScale
# rank it was: Slurm and MPI name the dead process by its Slurm task id,
# which is not the plan's rank (hexiscale-env(7)).  Exit status: PROGRAM's
# (128 + N for signal N), so srun --kill-on-bad-exit brings the step down.
#
# A TERM/INT/USR1 sent to the whole step (scancel, srun tearing the step
# down, #SBATCH --signal=USR1@N before the time limit) reaches PROGRAM
# directly; this wrapper only notes it, stays quiet then and, since it
# must not die of it, still exits with PROGRAM's status (hexitrain's 75
# after a checkpoint on SIGTERM/SIGUSR1).
[ $# -ge 1 ] || { echo "usage: hexi-rank.sh PROGRAM [ARGS...]" >&2; exit 2; }
stopped=0
trap 'stopped=1' TERM INT USR1
"$@"
rc=$?
if [ $rc -gt 128 ] && [ $stopped -eq 0 ]; then
	sig=$((rc - 128))
	name=$(kill -l $sig 2>/dev/null || echo "$sig")
	node=$(scontrol show hostnames "${SLURM_STEP_NODELIST:-}" 2>/dev/null |
		sed -n "$((${SLURM_NODEID:-0} + 1))p")
	echo "hexiscale: rank ${HEXISCALE_RANK:-?} of ${HEXISCALE_WORLD_SIZE:-?}" \
		"(pipeline ${HEXISCALE_PIPELINE:-?} stage ${HEXISCALE_STAGE:-?}" \
		"TP ${HEXISCALE_TP_RANK:-?}/${HEXISCALE_TP_SIZE:-?}," \
		"layers [${HEXISCALE_LAYER_BEGIN:-?},${HEXISCALE_LAYER_END:-?});" \
		"Slurm task ${SLURM_PROCID:-?} on ${node:-node ${SLURM_NODEID:-?}}):" \
		"$(basename "$1") killed by signal $sig ($name)" >&2
fi
exit $rc
