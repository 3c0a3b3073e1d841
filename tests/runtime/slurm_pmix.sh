#!/bin/bash
# srun --mpi=pmix (issue 5): hexitrain started by Slurm on the 3-node test
# cluster (tests/slurm/cluster.sh) with a user plan through the hexiscale
# plugin (--hexiscale=PLAN.json): ranks come from PMIx, the role and the
# plan from the HEXISCALE_* environment.  Asymmetric plan of 8 ranks, TP 3,
# 2, 2, 1 over a800/rtx3090/rtx4090 nodes, batches 10 and 6; 5 SGD steps
# must equal one process on the global batch of 16 (loss 1e-5 relative,
# parameters |a-b|/|a| <= 1e-5).  Skips where no Slurm cluster can run.
. "$top_srcdir/tests/spank/slurm-lib.sh"
HT="$top_builddir/runtime/hexitrain"
CMP="$top_builddir/tests/runtime/rt_cmp"
MKPLAN="$top_builddir/tests/runtime/mkplan"
[ -x "$HT" ] || hard "hexitrain not built"
command -v srun >/dev/null 2>&1 || skip "Slurm not installed"
slurm_up
srun --mpi=list 2>&1 | grep -q pmix || skip "Slurm has no pmix"
hexi_ompi_env
export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1
"$MKPLAN" tiny-8l "10/5:3x3@0,2x5@2;6/2:2x4@1,1x4@1" "$JOBS/plan.json" ||
	hard "mkplan"
OPT="--steps 5 --optimizer sgd --lr 0.5"
# shellcheck disable=SC2086
"$HT" --model tiny-8l --batch 16 $OPT --json --dump "$JOBS/ref" \
	>"$JOBS/ref.json" || hard "single-process reference"
# shellcheck disable=SC2086
train() {
	timeout -k 5 180 srun --mpi=pmix -N3 -n8 --gpus-per-task=1 \
		--hexiscale="$JOBS/plan.json" "$HT" $OPT --json --dump "$JOBS/srun" \
		>"$JOBS/srun.json" 2>"$JOBS/srun.err"
}
train
st=$?
if [ $st -ne 0 ] && hexi_ompi_tcp_flake "$JOBS/srun.err"; then
	echo "# Open MPI TCP connect failure (exit $st): running the step once more"
	train
	st=$?
fi
grep -v '^hexiscale:' "$JOBS/srun.err" | head -n 20 | sed 's/^/# /'
expect_eq "srun --mpi=pmix -n8 hexitrain exit status" "$st" 0
out=$("$CMP" --loss "$JOBS/ref.json" "$JOBS/srun.json")
st=$?
echo "$out" | sed 's/^/# /'
expect_eq "srun run: same loss each step as one process" "$st" 0
out=$("$CMP" --params "$JOBS/ref" "$JOBS/srun")
st=$?
echo "$out" | sed 's/^/# /'
expect_eq "srun run: same parameters as one process" "$st" 0
timeout -k 5 120 srun --mpi=pmix -N3 -n8 --gpus-per-task=1 \
	--hexiscale="$JOBS/plan.json" "$HT" --steps 1 >"$JOBS/one.out" 2>&1
grep -q 'tiny-8l, 8 ranks (pmix), 2 pipelines' "$JOBS/one.out" &&
	pass "ranks came from PMIx" ||
	{ fail "launcher line"; head -n 20 "$JOBS/one.out"; }
# A rank killed mid-step under srun: the step ends, non-zero, no hang.
t0=$(date +%s)
timeout -k 5 120 srun --mpi=pmix -N3 -n8 --gpus-per-task=1 \
	--kill-on-bad-exit=1 --hexiscale="$JOBS/plan.json" \
	env HEXI_RT_TEST_KILL=5:2 "$HT" --steps 100000 --timeout 30 \
	>"$JOBS/kill.out" 2>&1
st=$?
t1=$(date +%s)
echo "# killed rank under srun: exit $st after $((t1 - t0)) s"
[ "$st" -ne 0 ] && [ "$st" -ne 124 ] && [ $((t1 - t0)) -le 60 ] &&
	pass "killed rank under srun: step fails within 60 s" ||
	fail "killed rank under srun: exit $st after $((t1 - t0)) s"
no_drain
done_testing
