#!/bin/bash
# nvml.sh - the task-side GPU type check: with nvml= pointing at a fake NVML
# whose every GPU is an RTX 4090, tasks on the rtx4090 node pass and tasks
# on the a800 and rtx3090 nodes fail with a message naming both types; the
# nodes are not drained.  Without NVML (the other tests) the check is
# skipped at debug level.
HEXI_PLUGSTACK_ARGS="nvml=$top_builddir/tests/spank/.libs/libfakenvml.so"
export HEXI_PLUGSTACK_ARGS
. "$top_srcdir/tests/spank/slurm-lib.sh"
[ -f "$top_builddir/tests/spank/.libs/libfakenvml.so" ] || hard "fake NVML not built"
slurm_up
"$top_builddir/tests/spank/mkplan" good "$JOBS/good.json" || hard "mkplan"
out=$(srun -N1 -n3 -w n2 --gpus-per-task=1 -l --hexiscale="$JOBS/good.json" true 2>&1)
printf '%s' "$out" | grep -q "has 3 nodes but the step runs on 1" && pass "plan/step mismatch still refused" || fail "$out"
out=$(srun -N3 -n8 --gpus-per-task=1 -l --hexiscale="$JOBS/good.json" sh -c 'echo ran $SLURM_NODEID' 2>&1)
rc=$?
[ $rc -ne 0 ] && pass "step with mismatching GPUs fails" || fail "step exit $rc"
expect_eq "tasks on the rtx4090 node ran" "$(printf '%s\n' "$out" | grep -c 'ran 1$')" 3
expect_eq "no task on the a800/rtx3090 nodes ran" "$(printf '%s\n' "$out" | grep -c 'ran [02]$')" 0
check "message names the GPU found and the type assumed" grep -q \
	"GPU 0 is a 'NVIDIA GeForce RTX 4090' but plan [0-9a-f]* assumed 'a800'" <<<"$out"
no_drain
done_testing
