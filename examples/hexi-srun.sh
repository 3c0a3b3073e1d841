# shellcheck shell=bash
# hexi-srun.sh - sourced by train.sbatch and resume.sbatch: hexi_srun runs
# one srun step of hexitrain(1) and, when the step failed because Open MPI
# crashed a task inside MPI_Init_thread (a start-up race of Open MPI 4.1
# with PMIx 4.2 when several tasks share a node; hexitrain(1) BUGS),
# runs it once more: hexitrain says so in one line per crashed task, and
# nothing has been trained or written then.  stderr still streams live.
#
#     hexi_srun SRUN-ARGS...     (exit status: the last step's)
hexi_srun() {
	local log rc
	log=$(mktemp "${TMPDIR:-/tmp}/hexi-srun.XXXXXX") || {
		srun "$@"
		return
	}
	# stderr through tee (the pipeline waits for it), stdout as it was.
	{ srun "$@" 2>&1 1>&3 3>&- | tee "$log" >&2; } 3>&1
	rc=${PIPESTATUS[0]}
	if [ "$rc" -ne 0 ] && grep -q 'crashed inside MPI_Init_thread' "$log"; then
		echo "hexi-srun: a task crashed inside MPI_Init_thread (exit $rc," \
			"Open MPI's start-up race): running the step once more" >&2
		srun "$@"
		rc=$?
	fi
	rm -f "$log"
	return "$rc"
}
