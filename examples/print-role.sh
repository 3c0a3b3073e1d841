#!/bin/sh
# print-role.sh - run by every task of a HexiScale step: prints the task's
# role variables (hexiscale-env(7)) on one line, for people and for
# tests/spank/check-roles.py.  A task whose GPU the plan leaves idle has
# role=idle and no pipeline, stage or TP variables ("none" below); it
# prints its line like the others and exits 0.
echo "HXROLE procid=${SLURM_PROCID} localid=${SLURM_LOCALID} nodeid=${SLURM_NODEID}" \
	"role=${HEXISCALE_ROLE:-none}" \
	"nodelist=${SLURM_STEP_NODELIST} plan=${HEXISCALE_PLAN:-none}" \
	"hash=${HEXISCALE_PLAN_HASH:-none} rank=${RANK:-none}" \
	"hrank=${HEXISCALE_RANK:-none} world=${WORLD_SIZE:-none}" \
	"npipe=${HEXISCALE_NPIPELINES:-none} pipe=${HEXISCALE_PIPELINE:-none}" \
	"stage=${HEXISCALE_STAGE:-none} nstages=${HEXISCALE_NSTAGES:-none}" \
	"tp_rank=${HEXISCALE_TP_RANK:-none} tp_size=${HEXISCALE_TP_SIZE:-none}" \
	"l0=${HEXISCALE_LAYER_BEGIN:-none} l1=${HEXISCALE_LAYER_END:-none}" \
	"batch=${HEXISCALE_PIPELINE_BATCH:-none} mb=${HEXISCALE_MICRO_BATCHES:-none}" \
	"mbs=${HEXISCALE_MICRO_BATCH_SIZE:-none} gpu=${HEXISCALE_GPU:-none}" \
	"gtype=${HEXISCALE_GPU_TYPE:-none} local_rank=${LOCAL_RANK:-none}" \
	"local_size=${LOCAL_WORLD_SIZE:-none} master=${MASTER_ADDR:-none}:${MASTER_PORT:-none}" \
	"cvd=${CUDA_VISIBLE_DEVICES:-none} order=${CUDA_DEVICE_ORDER:-none}" \
	"step_gpus=${SLURM_STEP_GPUS:-none} handoff=${HEXISCALE_HANDOFF:+present}"
