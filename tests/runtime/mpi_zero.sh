#!/bin/sh
# Sharded data parallelism (issue 13 items 2 and 4): train.zero 1 and 2
# give the same losses (1e-5 relative each step) and parameters (per tensor
# |a-b|/|a| <= 1e-5) as one process, with SGD and AdamW, on asymmetric
# plans; every parameter element is owned by exactly one rank; a checkpoint
# saved under zero 2 (moments written by their owners as slices) verifies,
# reshards, and resumes under zero 0 on another plan (other DP degree and TP
# layout) identical to an uninterrupted run; a zero-0 checkpoint resumes
# under zero 1; the emulated nccl backend's zero 1 equals the mpi
# backend's.  The sync overlapped with the backward in bounded buckets
# (the default; under zero 1 non-blocking reduce-scatters into the owned
# sums) and --no-overlap give the same numbers too.  Bad input: zero 3,
# zero > 0 with one pipeline (a notice).
#   E: [TP1 x 1, TP2 x 2, TP3 x 1, TP1 x 4] 8 in 4 + [TP2 x 8] 4 in 1
#      (mixed TP 1/2/3 in one pipeline, 1-layer stages, micro-batch sizes
#      2 and 4, unequal batches; 9 ranks)
#   S: [TP1 x 4, TP1 x 4] 6 in 3 + [TP1 x 8] 6 in 2: every bucket back to
#      back in memory, so reduce-scatter and all-gather run in place
#      (MPI_Reduce_scatter / MPI_Allgatherv)                      (3 ranks)
#   B: [TP3 x 4, TP2 x 4] 6 in 3 + [TP1 x 8] 6 in 2               (6 ranks)
#   D: [TP1 x 1, TP2 x 4, TP1 x 3] 9 in 3 + [TP3 x 5, TP1 x 3] 3 in 3
#                                                                   (8 ranks)
. "$top_srcdir/tests/runtime/rt_env.sh"
need_mpi
STEPS=4
SGD="--optimizer sgd --lr 0.5"
ADAMW="--optimizer adamw --lr 0.01 --eps 1e-4"
"$MKPLAN" tiny-8l "8/4:1x1,2x2,3x1,1x4;4/1:2x8" "$WORK/E.json" ||
	hard "mkplan E"
"$MKPLAN" tiny-8l "6/3:1x4,1x4;6/2:1x8" "$WORK/S.json" || hard "mkplan S"
# with_zero PLAN N OUT: PLAN with train.zero N (the hash goes: an edit)
with_zero() { jq "del(.hash) | .train.zero = $2" "$1" >"$3" || hard "jq $1"; }
for p in E S B D; do
	src="$PLANS/equiv-$p.json"
	[ "$p" = E ] || [ "$p" = S ] && src="$WORK/$p.json"
	for z in 0 1 2; do with_zero "$src" $z "$WORK/$p$z.json"; done
done
# shellcheck disable=SC2086
"$HT" --model tiny-8l --batch 12 --steps $STEPS $SGD --json \
	--dump "$WORK/ref-sgd" >"$WORK/ref-sgd.json" || hard "sgd reference"
# shellcheck disable=SC2086
"$HT" --model tiny-8l --batch 12 --steps 6 $ADAMW --json \
	--dump "$WORK/ref6-adamw" >"$WORK/ref6-adamw.json" ||
	hard "adamw reference (6 steps)"
# shellcheck disable=SC2086
"$HT" --model tiny-8l --batch 12 --steps $STEPS $ADAMW --json \
	--dump "$WORK/ref-adamw" >"$WORK/ref-adamw.json" ||
	hard "adamw reference"

# equiv PLAN ZERO OPTTAG
equiv() {
	local plan="$WORK/$1$2.json" tag=$3 np out st opt
	np=$(plan_ranks "$plan")
	[ "$tag" = sgd ] && opt=$SGD || opt=$ADAMW
	# shellcheck disable=SC2086
	if ! hx_mpirun "$np" "$HT" --plan "$plan" --steps $STEPS $opt --json \
		--verbose --dump "$WORK/$1$2-$tag" >"$WORK/$1$2-$tag.json" \
		2>"$WORK/$1$2-$tag.err"; then
		fail "zero $2 $tag plan $1 ($np ranks) ran"
		cat "$WORK/$1$2-$tag.err"
		return
	fi
	pass "zero $2 $tag plan $1 ($np ranks) ran"
	same "zero $2 $tag plan $1" "ref-$tag" "$1$2-$tag"
}
equiv E 1 sgd
equiv E 0 adamw
equiv E 2 adamw
equiv E 1 adamw
equiv B 2 sgd
equiv S 2 adamw
equiv S 1 sgd
equiv B 1 adamw
equiv D 2 adamw

# Overlap (issue 17 item 4): tiny bounded buckets (97 elements: many
# sub-buckets, parts of chunks, packed and in place) started during the
# backward, and --no-overlap: the same numbers.
HEXI_RT_SYNC_BUCKET=97
export HEXI_RT_SYNC_BUCKET
equiv D 0 sgd
equiv D 1 sgd
equiv D 1 adamw
unset HEXI_RT_SYNC_BUCKET
SGD="$SGD --no-overlap"
equiv B 0 sgd
equiv B 1 sgd
SGD="--optimizer sgd --lr 0.5"
# every rank of plan D (each holds chunks another pipeline holds too)
# overlapped its zero-1 sync; none did with --no-overlap
ov() { grep -c "gradient sync overlapped with the backward" "$1"; }
expect_eq "zero 1 plan D: every rank's sync overlapped (97-element buckets)" \
	"$(ov "$WORK/D1-sgd.err")" 8
expect_eq "zero 1 plan B --no-overlap: no rank overlapped" \
	"$(ov "$WORK/B1-sgd.err")" 0
# Bounded staging (DECISIONS 180): packed sub-buckets that need more than
# 8 buckets' worth take turns in slots of the longest one: no rank stages
# more than 8 x 97 x 4 bytes, and some rank packs more sub-buckets than
# it has slots (a slot reused: the oldest waited for and unpacked first).
# slots ERR: "packed slots bytes" per rank
slots() { sed -n 's/.*; \([0-9]*\) packed, staged in \([0-9]*\) bytes (\([0-9]*\) slots.*/\1 \3 \2/p' "$1"; }
for r in D0-sgd D1-sgd; do
	slots "$WORK/$r.err" >"$WORK/$r.slots"
	expect_eq "$r: every rank reports its staging" \
		"$(wc -l <"$WORK/$r.slots")" 8
	expect_eq "$r: no rank stages more than 8 x 97 elements" \
		"$(awk '$3 > 8 * 97 * 4 {n++} END {print n + 0}' \
			"$WORK/$r.slots")" 0
	check "$r: a rank reuses its slots" \
		awk '$2 >= 8 && $1 > $2 {n++} END {exit !(n > 0)}' "$WORK/$r.slots"
done

# Ownership: every element of the model is owned once (the sum over the
# ranks is the model's parameter count: the same for every plan), and a
# rank owns less than it holds (its AdamW state is smaller than zero 0's).
nE=$(owned "$WORK/E2-adamw.err")
nB=$(owned "$WORK/B1-adamw.err")
nD=$(owned "$WORK/D2-adamw.err")
echo "# owned elements: E $nE, B $nB, D $nD"
[ "$nE" -gt 0 ] && [ "$nE" = "$nB" ] && [ "$nE" = "$nD" ] &&
	pass "every parameter element owned by exactly one rank" ||
	fail "owned elements differ between plans: $nE $nB $nD"
more=$(sed -n 's/.*owns \([0-9]*\) of the \([0-9]*\) .*/\1 \2/p' \
	"$WORK/E2-adamw.err" | awk '$1 >= $2 {n++} END {print n + 0}')
expect_eq "plan E: no rank owns all it holds" "$more" 0
flat=$(sed -n 's/.* \([0-9]*\) of \([0-9]*\) buckets in place/\1 \2/p' \
	"$WORK/S2-adamw.err" | awk '$1 == $2 && $1 > 0 {n++} END {print n + 0}')
expect_eq "plan S: every rank's buckets reduced in place" "$flat" 3

# Save under zero 2 (plan E, 9 ranks) at step 3, resume under zero 0 on
# plan B (6 ranks: another DP split, TP layout and layer split).
E2="$WORK/E2.json"
"$HT" --steps 1 --save-every 1 --ckpt-dir "$WORK/probe" >/dev/null 2>&1
if [ $? -eq 9 ]; then
	echo "# hexitrain built without the checkpoint library: no resume tests"
	done_testing
fi
# shellcheck disable=SC2086
hx_mpirun 9 "$HT" --plan "$E2" --steps 3 $ADAMW --json --save-every 3 \
	--ckpt-dir "$WORK/ck" >"$WORK/save.json" 2>"$WORK/save.err"
expect_eq "zero 2 plan E saves at step 3" "$?" 0
HK="$top_builddir/checkpoint/hexickpt"
"$HK" verify -q "$WORK/ck" >"$WORK/verify.out" 2>&1
expect_eq "zero-2 checkpoint verifies (owner slices cover every moment)" \
	"$?" 0
sed 's/^/# /' "$WORK/verify.out"
# shellcheck disable=SC2086
hx_mpirun 6 "$HT" --plan "$WORK/B0.json" --steps 6 $ADAMW --json \
	--resume "$WORK/ck" --dump "$WORK/res" >"$WORK/res.json" \
	2>"$WORK/res.err"
expect_eq "zero 0 plan B resumes the zero-2 checkpoint" "$?" 0
out=$("$CMP" --skip 3 --loss "$WORK/ref6-adamw.json" "$WORK/res.json")
st=$?
echo "$out" | tail -n 1 | sed 's/^/# /'
expect_eq "E zero 2 (3) + B zero 0 (3) vs uninterrupted: same loss" "$st" 0
out=$("$CMP" --params "$WORK/ref6-adamw" "$WORK/res")
st=$?
echo "$out" | tail -n 1 | sed 's/^/# /'
expect_eq "E zero 2 (3) + B zero 0 (3) vs uninterrupted: same parameters" \
	"$st" 0
# ... and under zero 1 on plan D (8 ranks)
# shellcheck disable=SC2086
hx_mpirun 8 "$HT" --plan "$WORK/D1.json" --steps 6 $ADAMW --json \
	--resume "$WORK/ck" --dump "$WORK/resD" >"$WORK/resD.json" \
	2>"$WORK/resD.err" || fail "zero 1 plan D resume ran"
"$CMP" --skip 3 --loss "$WORK/ref6-adamw.json" "$WORK/resD.json" >/dev/null &&
	"$CMP" --params "$WORK/ref6-adamw" "$WORK/resD" >/dev/null &&
	pass "E zero 2 (3) + D zero 1 (3) vs uninterrupted: same" ||
	fail "E zero 2 (3) + D zero 1 (3) differs"
# reshard the zero-2 checkpoint for plan B zero 1, resume from it
"$HK" reshard -q "$WORK/ck" --plan "$WORK/B1.json" -o "$WORK/rs" \
	>"$WORK/rs.out" 2>&1
expect_eq "hexickpt reshard of the zero-2 checkpoint" "$?" 0
# shellcheck disable=SC2086
hx_mpirun 6 "$HT" --plan "$WORK/B1.json" --steps 6 $ADAMW --json \
	--resume "$WORK/rs" --dump "$WORK/resR" >"$WORK/resR.json" \
	2>"$WORK/resR.err" || fail "zero 1 plan B resume of the reshard ran"
"$CMP" --skip 3 --loss "$WORK/ref6-adamw.json" "$WORK/resR.json" >/dev/null &&
	"$CMP" --params "$WORK/ref6-adamw" "$WORK/resR" >/dev/null &&
	pass "resharded zero-2 checkpoint + B zero 1 vs uninterrupted: same" ||
	fail "resharded zero-2 checkpoint + B zero 1 differs"
# a zero-0 checkpoint of the same step: same tensors (moments included)
# shellcheck disable=SC2086
hx_mpirun 6 "$HT" --plan "$WORK/B0.json" --steps 3 $ADAMW --save-every 3 \
	--ckpt-dir "$WORK/ck0" >/dev/null 2>&1 || fail "zero 0 plan B save"
"$HK" diff -q --tolerance 1e-5 "$WORK/ck" "$WORK/ck0" >"$WORK/diff.out" 2>&1
expect_eq "hexickpt diff: zero-2 and zero-0 checkpoints agree (1e-5)" "$?" 0
tail -n 1 "$WORK/diff.out" | sed 's/^/# /'
"$HK" export -q "$WORK/ck" -o "$WORK/ck.h5" >/dev/null 2>&1
expect_eq "hexickpt export of the zero-2 checkpoint" "$?" 0

# Bad input: zero 3; zero 1 with one pipeline is a no-op with a notice.
with_zero "$WORK/E.json" 3 "$WORK/E3.json"
hx_mpirun 9 "$HT" --plan "$WORK/E3.json" --steps 1 --dump "$WORK/bad" \
	>/dev/null 2>"$WORK/bad.err"
st=$?
[ "$st" -ne 0 ] && grep -q "train.zero: 3 is out of range 0..2" \
	"$WORK/bad.err" && ! ls "$WORK"/bad.rank* >/dev/null 2>&1 &&
	pass "zero 3: refused ($st), one clear error, nothing written" ||
	fail "zero 3: exit $st: $(head -n 3 "$WORK/bad.err")"
# The nccl backend (here its host emulation, when built) shards too
# (tests/gpuemu/emu_zero.sh has the rest): plan B under zero 1 with AdamW
# gives the mpi backend's zero-1 numbers of the same plan.
EMU="$top_builddir/tests/gpuemu/hexitrain_emu"
if [ -x "$EMU" ]; then
	# shellcheck disable=SC2086
	hx_mpirun 6 "$EMU" --backend nccl --plan "$WORK/B1.json" \
		--steps $STEPS $ADAMW --json --verbose --dump "$WORK/emu" \
		>"$WORK/emu.json" 2>"$WORK/emu.err"
	st=$?
	[ "$st" -eq 0 ] &&
		"$CMP" --loss "$WORK/B1-adamw.json" "$WORK/emu.json" >/dev/null &&
		"$CMP" --params "$WORK/B1-adamw" "$WORK/emu" >/dev/null &&
		pass "nccl (emulated) zero 1 plan B = mpi zero 1 plan B" ||
		fail "nccl zero 1: exit $st: $(head -n 3 "$WORK/emu.err")"
	expect_eq "nccl (emulated) zero 1 plan B: every rank overlapped" \
		"$(ov "$WORK/emu.err")" 6
else
	echo "# no emulated GPU trainer built: the nccl backend not checked"
fi
with_zero "$PLANS/single-tiny4l.json" 1 "$WORK/one.json"
"$HT" --plan "$WORK/one.json" --steps 2 $SGD --json --dump "$WORK/one" \
	>"$WORK/one.json.out" 2>"$WORK/one.err"
expect_eq "zero 1 with one pipeline runs" "$?" 0
grep -q "one pipeline.*running unsharded" "$WORK/one.err" &&
	pass "zero 1 with one pipeline: the notice says it is a no-op" ||
	fail "no notice: $(cat "$WORK/one.err")"
"$HT" --plan "$PLANS/single-tiny4l.json" --steps 2 $SGD --json \
	--dump "$WORK/one0" >"$WORK/one0.json" 2>/dev/null
"$CMP" --params "$WORK/one0" "$WORK/one" >/dev/null
expect_eq "zero 1 with one pipeline = zero 0" "$?" 0
done_testing
