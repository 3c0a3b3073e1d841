#!/bin/bash
# pytorch.sh - `sbatch --hexiscale=auto examples/pytorch/train.sbatch` on
# the test cluster (3 nodes, 8 typed fake GPUs): the PyTorch job trains on
# the plan the plugin made for its allocation, and hexitrain(1) on the same
# plan file prints the same losses (within 1e-4 relative).  Skips without
# torch or a cluster.
. "$top_srcdir/tests/spank/slurm-lib.sh"
PY=${HEXI_PYTHON:-/usr/bin/python3}
HT=$top_builddir/runtime/hexitrain
CMP=$top_builddir/tests/runtime/rt_cmp
[ -x "$HT" ] || hard "hexitrain not built"
[ -x "$CMP" ] || make -C "$top_builddir/tests/runtime" rt_cmp >/dev/null || hard "rt_cmp"
"$PY" -c 'import torch, numpy' 2>/dev/null || skip "$PY has no torch/numpy (python3-torch)"
command -v mpirun >/dev/null 2>&1 || skip "mpirun not installed"
slurm_up
need_planner
mkdir -p "$JOBS/out"
chmod 777 "$JOBS/out"
# Submitted from a directory holding examples/pytorch, as documented.
ln -sfn "$top_srcdir/examples" "$JOBS/out/examples"
cd "$JOBS/out" || hard "cd"
jid=$(HEXI_PYTHON=$PY HEXI_STEPS=5 HEXI_TRAIN_ARGS=--json \
	sbatch --parsable --hexiscale=auto -o "%j.out" -e "%j.err" \
	examples/pytorch/train.sbatch) || hard "sbatch: $jid"
expect_eq "PyTorch batch job completed" "$(job_wait "$jid")" COMPLETED
plan=$JOBS/out/hexiscale-plan.$jid.0.json
check "plan of the training step written" test -f "$plan"
grep '"loss"' "$jid.out" >torch.json
expect_eq "train.py printed 5 steps" "$(grep -c '"loss"' torch.json)" 5
[ "$t_failed" -eq 0 ] || { sed 's/^/# /' "$jid.err" | tail -n 30; done_testing; }
np=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["world_size"])' "$plan")
npipe=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["pipelines"]))' "$plan")
echo "# plan $plan: $np ranks, $npipe pipelines"
export OPENBLAS_NUM_THREADS=1 OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_mpi_yield_when_idle=1
timeout -k 5 300 mpirun --oversubscribe --allow-run-as-root -np "$np" \
	"$HT" --plan "$plan" --steps 5 --json >ht.json 2>ht.err ||
	{ sed 's/^/# /' ht.err | tail; hard "hexitrain on the job's plan"; }
out=$("$CMP" --tol 1e-4 --loss ht.json torch.json)
st=$?
echo "$out" | sed 's/^/# /'
expect_eq "PyTorch job's losses = hexitrain's on the same plan within 1e-4" "$st" 0
no_drain
done_testing
