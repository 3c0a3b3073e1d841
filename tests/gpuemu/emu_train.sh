#!/bin/sh
# The GPU trainer (train_gpu.c, rt_cuda_model.c: --backend nccl) run on the
# host emulation of the device (hexitrain_emu, see Makefile.am) against the
# CPU trainer (runtime/hexitrain, --backend mpi), which mpi_equiv.sh proves
# exact: the same tiny model, seed and data for 6 steps must give the same
# loss every step (rt_cmp: 1e-5 relative) and the same parameters (per
# tensor |a-b|/|a| <= 1e-5), in fp32, with plain SGD and with AdamW at eps
# 1e-4 (as mpi_equiv.sh), on
#   one process; 2 ranks: two data-parallel one-stage pipelines of unequal
#   batches (8 in 2 micro-batches + 4 in 1); and the asymmetric plans A-D
#   and gqa of tests/runtime/plans (pipeline stages, TP 1-4, 5-8 ranks).
# Also AdamW with weight decay and a clip of 0.5 (one process in 3 micro-
# batches, and plan D).  Another seed must be reported different (negative control); bf16
# runs (one process, and plan A with TP and pipeline stages) stay within
# 1 % of the fp32 loss at every step; checkpoints written by the emulated
# GPU trainer resume on the CPU trainer and the other way round, under other
# plans, with the same result as an uninterrupted run.  Every emulated run
# must end with no device memory left allocated, no bad free, no host
# memory handed to the NCCL communicator (an error there) and no stream
# race (gpu_emu prints "gpu_emu: ..." on stderr for those).  The sync
# overlapped with the backward (the default) equals --no-overlap, and
# without its ordering event the checker reports a race.  Recompute off
# and mixed per pipeline give the same as on.  Two ranks on
# one "GPU" are refused by name; a rank killed mid-step ends the job.
# Validation every step leaves training as it was.
. "$top_srcdir/tests/runtime/rt_env.sh"
need_mpi
. "$top_srcdir/tests/gpuemu/emu_env.sh"
STEPS=6
MODEL="--model tiny-8l --batch 12"
BF16_TOL=0.01

# emu NAME NP ARGS...: the emulated GPU trainer on NP ranks (a plan's
# world size; 1 without mpirun), output in $WORK/NAME.{json,err}; the
# ranks get the VAR=VALUE words of $EMU_ENV in their environment
emu() {
	local name=$1 np=$2
	shift 2
	if [ "$np" -eq 1 ]; then
		# shellcheck disable=SC2086
		timeout -k 5 120 env $EMU_ENV "$EMU" --backend nccl "$@" \
			--json >"$WORK/$name.json" 2>"$WORK/$name.err"
	else
		# shellcheck disable=SC2086
		hx_mpirun "$np" env $EMU_ENV "$EMU" --backend nccl "$@" \
			--json >"$WORK/$name.json" 2>"$WORK/$name.err"
	fi
	emu_ok "$name" "$np" $?
}

"$MKPLAN" tiny-8l "8/2:1x8;4/1:1x8" "$WORK/dp2.json" >/dev/null ||
	hard "mkplan dp2"
for opt in "sgd --lr 0.5" "adamw --lr 0.01 --eps 1e-4"; do
	tag=${opt%% *}
	# shellcheck disable=SC2086
	"$HT" $MODEL --steps $STEPS --optimizer $opt --json \
		--dump "$WORK/ref-$tag" >"$WORK/ref-$tag.json" ||
		hard "CPU reference run ($tag) failed"
	# shellcheck disable=SC2086
	emu "one-$tag" 1 $MODEL --steps $STEPS --optimizer $opt \
		--dump "$WORK/one-$tag" &&
		same "$tag, one process" "ref-$tag" "one-$tag"
	for p in dp2 A B C D; do
		plan="$PLANS/equiv-$p.json"
		[ "$p" = dp2 ] && plan="$WORK/dp2.json"
		# shellcheck disable=SC2086
		emu "$p-$tag" "$(plan_ranks "$plan")" --plan "$plan" \
			--steps $STEPS --optimizer $opt --dump "$WORK/$p-$tag" &&
			same "$tag, plan $p ($(plan_ranks "$plan") ranks)" \
				"ref-$tag" "$p-$tag"
	done
done
# Grouped KV heads split unevenly by TP 3 and 2 (tiny-gqa).
plan="$PLANS/equiv-gqa.json"
"$HT" --model tiny-gqa --batch 8 --steps $STEPS --optimizer sgd --lr 0.5 \
	--json --dump "$WORK/ref-gqa" >"$WORK/ref-gqa.json" || hard "gqa reference"
emu gqa "$(plan_ranks "$plan")" --plan "$plan" --steps $STEPS \
	--optimizer sgd --lr 0.5 --dump "$WORK/gqa" &&
	same "sgd, plan gqa (TP 3, 1, 2)" ref-gqa gqa

# Weight decay (2-D tensors only), a tighter clip, micro-batches of a
# plan-less run, and the same options on plan D.
WD="--optimizer adamw --lr 0.01 --eps 1e-4 --weight-decay 0.1 --clip 0.5"
# shellcheck disable=SC2086
"$HT" $MODEL --micro-batches 3 --steps $STEPS $WD --json --dump "$WORK/ref-wd" \
	>"$WORK/ref-wd.json" || hard "CPU reference run (weight decay)"
# shellcheck disable=SC2086
emu one-wd 1 $MODEL --micro-batches 3 --steps $STEPS $WD \
	--dump "$WORK/one-wd" &&
	same "adamw, weight decay, clip 0.5, 3 micro-batches" ref-wd one-wd
plan="$PLANS/equiv-D.json"
# shellcheck disable=SC2086
emu D-wd "$(plan_ranks "$plan")" --plan "$plan" --steps $STEPS $WD \
	--dump "$WORK/D-wd" &&
	same "adamw, weight decay, clip 0.5, plan D" ref-wd D-wd

# Negative control: the comparison must notice another seed.
# shellcheck disable=SC2086
if emu neg 1 $MODEL --steps $STEPS --optimizer sgd --lr 0.5 --seed 99 \
	--dump "$WORK/neg"; then
	differ "another seed" ref-sgd neg
fi

# bf16: weights and activations in bf16, fp32 master weights; the loss
# stays within BF16_TOL (relative) of the fp32 run at every step.
# shellcheck disable=SC2086
emu bf16-one 1 $MODEL --steps $STEPS --optimizer adamw --lr 0.01 \
	--eps 1e-4 --dtype bf16 &&
	{
		out=$("$CMP" --tol $BF16_TOL --loss "$WORK/ref-adamw.json" \
			"$WORK/bf16-one.json")
		st=$?
		echo "$out" | tail -n 1 | sed 's/^/# /'
		expect_eq "bf16, one process: loss within $BF16_TOL of fp32" \
			"$st" 0
	}
emu bf16-A "$(plan_ranks "$PLANS/equiv-A.json")" --plan \
	"$PLANS/equiv-A.json" --steps $STEPS --optimizer adamw --lr 0.01 \
	--eps 1e-4 --dtype bf16 &&
	{
		out=$("$CMP" --tol $BF16_TOL --loss "$WORK/ref-adamw.json" \
			"$WORK/bf16-A.json")
		st=$?
		echo "$out" | tail -n 1 | sed 's/^/# /'
		expect_eq "bf16, plan A (TP, stages): loss within $BF16_TOL of fp32" \
			"$st" 0
		# bf16 really is in use: not bit-equal to fp32
		"$CMP" --tol 1e-7 --loss "$WORK/ref-adamw.json" \
			"$WORK/bf16-A.json" >/dev/null
		expect_eq "bf16, plan A: differs from fp32 beyond 1e-7" "$?" 1
	}

# Activation recompute (the plans above recompute, as train.recompute
# defaults to on): plan D with recompute off and mixed per pipeline, and a
# plan-less run with --no-recompute, equal the CPU trainer; the emulated
# GPU's own runs with and without agree within 1e-7; the JSON reports the
# device allocations, fewer activation bytes with recompute.
D="9/3:1x1,2x4,1x3;3/3:3x5,1x3"
"$MKPLAN" tiny-8l "$D" "$WORK/D-off.json" recompute=0 &&
	"$MKPLAN" tiny-8l "9/3+:1x1,2x4,1x3;3/3-:3x5,1x3" "$WORK/D-mix.json" ||
	hard "mkplan recompute plans"
for v in D-off D-mix; do
	emu "$v-sgd" 8 --plan "$WORK/$v.json" --steps $STEPS --optimizer sgd \
		--lr 0.5 --dump "$WORK/$v-sgd" &&
		same "sgd, plan $v (recompute off / mixed)" ref-sgd "$v-sgd"
done
"$CMP" --tol 1e-7 --loss "$WORK/D-sgd.json" "$WORK/D-off-sgd.json" \
	>/dev/null && "$CMP" --tol 1e-7 --params "$WORK/D-sgd" "$WORK/D-off-sgd" \
	>/dev/null
expect_eq "emulated GPU, plan D: recompute on = off within 1e-7" "$?" 0
# shellcheck disable=SC2086
emu one-norc 1 $MODEL --steps $STEPS --optimizer sgd --lr 0.5 \
	--no-recompute --dump "$WORK/one-norc" &&
	same "sgd, one process, --no-recompute" ref-sgd one-norc
dev=$(sed -n '1s/.*"rank":1,"device":\([01]\).*/\1/p' "$WORK/D-sgd.json")
a_on=$(sed -n '1s/.*"rank":1,[^}]*"acts":\([0-9]*\).*/\1/p' "$WORK/D-sgd.json")
a_off=$(sed -n '1s/.*"rank":1,[^}]*"acts":\([0-9]*\).*/\1/p' "$WORK/D-off-sgd.json")
echo "# rank 1 device activations: recompute $a_on bytes, without $a_off"
[ "$dev" = 1 ] && [ -n "$a_on" ] && [ -n "$a_off" ] &&
	[ "$((a_on * 2))" -lt "$a_off" ] &&
	pass "emulated GPU: device memory reported, recompute holds less" ||
	fail "emulated GPU memory report: device=$dev acts $a_on vs $a_off"

# Overlap (doc/DECISIONS.md 78, 145): every run above overlaps the sync
# with the last backward (the default) and equals the CPU trainer.  With
# small buckets (HEXI_RT_SYNC_BUCKET=3000: tens of sub-buckets per rank,
# packed ones on the TP stages of plan A) on dp2 and plan A, AdamW and a
# clip: overlap and --no-overlap agree within 1e-7 and no stream race is
# seen, although the sub-buckets' all-reduces start on the dp stream while
# the backward's later layers are queued on the compute stream.  Negative
# control: without the event that orders dp after the compute stream
# (HEXI_GPU_EMU_NO_ORDER=1) the checker must report the dp all-reduce
# racing the backward: the buckets really start inside the backward.
OV="--optimizer adamw --lr 0.01 --eps 1e-4 --clip 0.5"
for p in dp2 A; do
	plan="$PLANS/equiv-$p.json"
	[ "$p" = dp2 ] && plan="$WORK/dp2.json"
	np=$(plan_ranks "$plan")
	# shellcheck disable=SC2086
	EMU_ENV=HEXI_RT_SYNC_BUCKET=3000 emu "ov-$p" "$np" --plan "$plan" \
		--steps $STEPS $OV --dump "$WORK/ov-$p" &&
		EMU_ENV=HEXI_RT_SYNC_BUCKET=3000 emu "nov-$p" "$np" \
			--plan "$plan" --steps $STEPS $OV --no-overlap \
			--dump "$WORK/nov-$p" &&
		{
			"$CMP" --tol 1e-7 --loss "$WORK/ov-$p.json" \
				"$WORK/nov-$p.json" | tail -n 1 | sed 's/^/# /'
			"$CMP" --tol 1e-7 --loss "$WORK/ov-$p.json" \
				"$WORK/nov-$p.json" >/dev/null &&
				"$CMP" --tol 1e-7 --params "$WORK/ov-$p" \
					"$WORK/nov-$p" >/dev/null
			expect_eq "emulated GPU, plan $p, 3000-element buckets: overlap = --no-overlap within 1e-7" "$?" 0
		}
done
# shellcheck disable=SC2086
hx_mpirun 2 env HEXI_GPU_EMU_NO_ORDER=1 HEXI_RT_SYNC_BUCKET=3000 "$EMU" \
	--backend nccl --plan "$WORK/dp2.json" --steps 2 $OV >/dev/null \
	2>"$WORK/noorder.err"
expect_eq "overlap without the ordering event: the run itself succeeds" "$?" 0
grep -q 'stream race: NCCL all-reduce (dp) .* while .* pending' \
	"$WORK/noorder.err" &&
	pass "overlap without the ordering event: the dp all-reduce races the backward" ||
	fail "overlap without the ordering event: no race reported: $(head -n 3 "$WORK/noorder.err")"

# Checkpoints cross the backends: emulated GPU plan A (3 steps) -> CPU
# plan B (steps 4-6), and CPU plan A (3 steps) -> emulated GPU plan B.
"$HT" --steps 1 --save-every 1 --ckpt-dir "$WORK/probe" >/dev/null 2>&1
if [ $? -eq 9 ]; then
	echo "# checkpoint part skipped: built without the checkpoint library"
	done_testing
fi
A="$PLANS/equiv-A.json"
B="$PLANS/equiv-B.json"
OPT="--optimizer adamw --lr 0.01 --eps 1e-4"
# shellcheck disable=SC2086
emu ck-gpu "$(plan_ranks "$A")" --plan "$A" --steps 3 $OPT --save-every 3 \
	--ckpt-dir "$WORK/ck-gpu" && [ -f "$WORK/ck-gpu/latest" ] &&
	pass "emulated GPU plan A: checkpoint at step 3 committed"
# shellcheck disable=SC2086
hx_mpirun "$(plan_ranks "$B")" "$HT" --plan "$B" --steps $STEPS $OPT --json \
	--resume "$WORK/ck-gpu" --dump "$WORK/res-cpu" >"$WORK/res-cpu.json" \
	2>"$WORK/res-cpu.err"
expect_eq "CPU plan B resumes the GPU checkpoint" "$?" 0
"$CMP" --skip 3 --loss "$WORK/ref-adamw.json" "$WORK/res-cpu.json" |
	tail -n 1 | sed 's/^/# /'
"$CMP" --skip 3 --loss "$WORK/ref-adamw.json" "$WORK/res-cpu.json" >/dev/null
expect_eq "GPU A(3) + CPU B(3): same loss at steps 4-6" "$?" 0
"$CMP" --params "$WORK/ref-adamw" "$WORK/res-cpu" >/dev/null
expect_eq "GPU A(3) + CPU B(3): same parameters" "$?" 0
# shellcheck disable=SC2086
hx_mpirun "$(plan_ranks "$A")" "$HT" --plan "$A" --steps 3 $OPT --json \
	--save-every 3 --ckpt-dir "$WORK/ck-cpu" >/dev/null 2>&1 ||
	hard "CPU plan A checkpoint run"
# shellcheck disable=SC2086
emu res-gpu "$(plan_ranks "$B")" --plan "$B" --steps $STEPS $OPT \
	--resume "$WORK/ck-cpu" --dump "$WORK/res-gpu" &&
	{
		"$CMP" --skip 3 --loss "$WORK/ref-adamw.json" \
			"$WORK/res-gpu.json" | tail -n 1 | sed 's/^/# /'
		"$CMP" --skip 3 --loss "$WORK/ref-adamw.json" \
			"$WORK/res-gpu.json" >/dev/null
		expect_eq "CPU A(3) + GPU B(3): same loss at steps 4-6" "$?" 0
		"$CMP" --params "$WORK/ref-adamw" "$WORK/res-gpu" >/dev/null
		expect_eq "CPU A(3) + GPU B(3): same parameters" "$?" 0
	}
# Two ranks on one GPU: refused before NCCL (which would only say "invalid
# usage"), exit 27 (HEXI_ERR_NODEV), naming both ranks.
HEXI_GPU_EMU_ONE_GPU=1 hx_mpirun 2 env HEXI_GPU_EMU_ONE_GPU=1 "$EMU" \
	--backend nccl --plan "$WORK/dp2.json" --steps 1 >/dev/null \
	2>"$WORK/onegpu.err"
expect_eq "two ranks on one GPU: exit 27" "$?" 27
grep -q 'ranks 0 and 1 both drive GPU 0' "$WORK/onegpu.err" &&
	pass "two ranks on one GPU: message names them" ||
	fail "two ranks on one GPU: message: $(head -n 3 "$WORK/onegpu.err")"
# Ranks 0 and 1 share a GPU, rank 2 has its own: only the two see the
# clash, and rank 2 must not go on alone into the NCCL communicators'
# collectives (it did, and the job hung until killed).
"$MKPLAN" tiny-4l "4/1:1x4;4/1:1x4;4/1:1x4" "$WORK/dp3.json" >/dev/null ||
	fail "mkplan dp3"
HX_TIMEOUT=60 hx_mpirun 2 env HEXI_GPU_EMU_ONE_GPU=1 "$EMU" --backend nccl \
	--plan "$WORK/dp3.json" --steps 1 : -np 1 "$EMU" --backend nccl \
	--plan "$WORK/dp3.json" --steps 1 >/dev/null 2>"$WORK/twogpu.err"
st=$?
# mpirun reports whichever rank exits first: 27 (the clash) or 17 (a peer)
check "two of three ranks on one GPU: exit 27 or 17, no hang (exit $st)" \
	test "$st" -eq 27 -o "$st" -eq 17
grep -q 'ranks 0 and 1 both drive GPU 0' "$WORK/twogpu.err" &&
	grep -q 'rank 2: another rank failed during the one-GPU-per-rank check' "$WORK/twogpu.err" &&
	pass "two of three ranks on one GPU: both messages" ||
	fail "two of three on one GPU: message: $(head -n 4 "$WORK/twogpu.err")"
# Validation changes nothing in training on the GPU trainer either: its
# overlap hook started the sync on validation's gradients, as the CPU
# trainer's did (mpi_eval.sh), and the next step applied them.
python3 - "$WORK" <<'PY' || hard "token files"
import random, struct, sys
for name, n, seed in (("train", 8000, 1), ("val", 2000, 2)):
    r = random.Random(seed)
    hdr = [20240520, 2, n, 0, 2] + [0] * 251
    toks = [r.randrange(64) for _ in range(n)]  # tiny-8l's vocabulary
    with open("%s/%s.tok" % (sys.argv[1], name), "wb") as f:
        f.write(struct.pack("<256I", *hdr) + struct.pack("<%dH" % n, *toks))
PY
VD="--data $WORK/train.tok --steps 3 --optimizer adamw --lr 0.01 --eps 1e-4"
emu noval 2 --plan "$WORK/dp2.json" $VD --dump "$WORK/noval" &&
	emu val 2 --plan "$WORK/dp2.json" $VD --val-data "$WORK/val.tok" \
		--eval-every 1 --dump "$WORK/val" &&
	same "GPU trainer, dp2, validation every step" noval val 0
[ "$(grep -c '"val_loss"' "$WORK/val.json")" -eq 4 ] &&
	pass "GPU trainer: validation at steps 0 to 3" ||
	fail "GPU trainer: $(grep -c '"val_loss"' "$WORK/val.json") validation lines"
# A rank of the GPU trainer killed mid-step (plan A: TP and two stages)
# brings the job down, non-zero, without a hang (as mpi_fail.sh on the CPU
# path; here the abort goes through the NCCL communicator first).
t0=$(date +%s)
HEXI_RT_TEST_KILL=3:3 HX_TIMEOUT=60 hx_mpirun "$(plan_ranks "$A")" \
	-x HEXI_RT_TEST_KILL "$EMU" --backend nccl --plan "$A" \
	--steps 1000000 --timeout 30 >"$WORK/kill.out" 2>&1
st=$?
t1=$(date +%s)
echo "# exit status $st after $((t1 - t0)) s"
[ "$st" -ne 0 ] && pass "GPU trainer, killed rank: job exits non-zero ($st)" ||
	fail "GPU trainer, killed rank: job exited 0"
[ "$st" -ne 124 ] && [ $((t1 - t0)) -le 45 ] &&
	pass "GPU trainer, killed rank: down in $((t1 - t0)) s, no hang" ||
	fail "GPU trainer, killed rank: hung ($((t1 - t0)) s, exit $st)"
grep -q 'killing myself in step 3' "$WORK/kill.out" &&
	pass "GPU trainer: the kill happened in step 3" ||
	fail "GPU trainer: kill hook did not fire"
done_testing

