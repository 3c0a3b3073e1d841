#!/bin/sh
# The sharded sync's ring (doc/DECISIONS.md 150): with HEXI_RT_SYNC_SEG=257
# every bucket of the tiny model longer than two 257-element segments
# reduce-scatters and all-gathers as a ring of sendrecv steps over
# segments (uneven, parts of rows: blocks cut at rows of 64 or 1 columns), the others by
# the packed collectives; train.zero 1 and 2 give the same losses (1e-5
# relative each step) and parameters (1e-5 per tensor) as one process, and
# the same as the packed collectives (HEXI_RT_SYNC_SEG=0) within 1e-6.
# Zero-1 runs pass --no-overlap: overlapped, zero 1 reduce-scatters in
# bounded sub-buckets (mpi_zero.sh), and only its all-gather would ring.
# Plans (as mpi_zero.sh): E [TP1 x 1, TP2 x 2, TP3 x 1, TP1 x 4] 8 in 4 +
# [TP2 x 8] 4 in 1 (9 ranks, rings of 2 members and more); S [TP1 x 4, TP1 x
# 4] + [TP1 x 8] (3 ranks, in place: no packing at all); D (8 ranks).
# HEXI_RT_SYNC_SEG=0 with HEXI_RT_SYNC_BUCKET=5: plan E's staged groups
# in 40-element windows, the same again (DECISIONS 183).
# Bad HEXI_RT_SYNC_SEG / HEXI_RT_SYNC_BUCKET values: refused at setup by
# every rank, the variable named, nothing dumped (DECISIONS 158).
. "$top_srcdir/tests/runtime/rt_env.sh"
need_mpi
STEPS=2
SGD="--optimizer sgd --lr 0.5"
ADAMW="--optimizer adamw --lr 0.01 --eps 1e-4"
"$MKPLAN" tiny-8l "8/4:1x1,2x2,3x1,1x4;4/1:2x8" "$WORK/E.json" ||
	hard "mkplan E"
"$MKPLAN" tiny-8l "6/3:1x4,1x4;6/2:1x8" "$WORK/S.json" || hard "mkplan S"
cp "$PLANS/equiv-D.json" "$WORK/D.json" || hard "plan D"
with_zero() { jq "del(.hash) | .train.zero = $2" "$1" >"$3" || hard "jq $1"; }
for p in E S D; do
	for z in 1 2; do with_zero "$WORK/$p.json" $z "$WORK/$p$z.json"; done
done
# shellcheck disable=SC2086
"$HT" --model tiny-8l --batch 12 --steps $STEPS $SGD --json \
	--dump "$WORK/ref-sgd" >"$WORK/ref-sgd.json" || hard "sgd reference"
# shellcheck disable=SC2086
"$HT" --model tiny-8l --batch 12 --steps $STEPS $ADAMW --json \
	--dump "$WORK/ref-adamw" >"$WORK/ref-adamw.json" ||
	hard "adamw reference"

# run PLAN ZERO OPTTAG SEG: the run's dump in $WORK/PLANZERO-TAG-SEG
run() {
	local plan="$WORK/$1$2.json" out="$WORK/$1$2-$3-$4" np opt
	np=$(plan_ranks "$plan")
	[ "$3" = sgd ] && opt=$SGD || opt=$ADAMW
	[ "$2" = 1 ] && opt="$opt --no-overlap"
	# shellcheck disable=SC2086
	HEXI_RT_SYNC_SEG=$4 hx_mpirun "$np" "$HT" --plan "$plan" \
		--steps $STEPS $opt --json --verbose --dump "$out" \
		>"$out.json" 2>"$out.err"
}
rings() { sed -n 's/.*: \([0-9]*\) buckets as rings/\1/p' "$1" |
	awk '{s += $1} END {print s + 0}'; }
# equiv PLAN ZERO OPTTAG
equiv() {
	local out st
	if ! run "$1" "$2" "$3" 257; then
		fail "zero $2 $3 plan $1 ring ran"
		cat "$WORK/$1$2-$3-257.err"
		return
	fi
	pass "zero $2 $3 plan $1 ring ran"
	n=$(rings "$WORK/$1$2-$3-257.err")
	[ "$n" -gt 0 ] && pass "zero $2 $3 plan $1: $n buckets as rings" ||
		fail "zero $2 $3 plan $1: no bucket ran as a ring"
	same "zero $2 $3 plan $1 ring" "ref-$3" "$1$2-$3-257"
	[ "$4" = packed ] || return
	if ! run "$1" "$2" "$3" 0; then
		fail "zero $2 $3 plan $1 packed ran"
		cat "$WORK/$1$2-$3-0.err"
		return
	fi
	n=$(rings "$WORK/$1$2-$3-0.err")
	expect_eq "zero $2 $3 plan $1, HEXI_RT_SYNC_SEG=0: no ring" "$n" 0
	out=$("$CMP" --tol 1e-6 --params "$WORK/$1$2-$3-0" "$WORK/$1$2-$3-257")
	st=$?
	echo "$out" | tail -n 1 | sed 's/^/# /'
	expect_eq "zero $2 $3 plan $1: ring = packed collectives" "$st" 0
}
equiv E 2 adamw packed
equiv E 1 sgd
equiv S 2 sgd packed
equiv D 1 adamw

# The staged collectives a window at a time (DECISIONS 183): with
# HEXI_RT_SYNC_BUCKET=5 a chunk group's blocks go through 40 elements of
# staging at a time; the same numbers as the ring.
# wequiv PLAN ZERO OPTTAG (after equiv ... packed)
wequiv() {
	local out st
	if ! (export HEXI_RT_SYNC_BUCKET=5 && run "$1" "$2" "$3" 0); then
		fail "zero $2 $3 plan $1 in windows ran"
		cat "$WORK/$1$2-$3-0.err"
		return
	fi
	out=$("$CMP" --tol 1e-6 --params "$WORK/$1$2-$3-0" "$WORK/$1$2-$3-257")
	st=$?
	echo "$out" | tail -n 1 | sed 's/^/# /'
	expect_eq "zero $2 $3 plan $1: packed collectives in 40-element windows = ring" \
		"$st" 0
}
wequiv E 2 adamw

# Bad values of the tuning variables: every rank refuses at setup with the
# variable named, exit non-zero, no parameters dumped.
# bad VAR VALUE PLAN: one run of PLAN with VAR=VALUE
bad() {
	local np st
	np=$(plan_ranks "$WORK/$3.json")
	rm -rf "$WORK/bad" && mkdir "$WORK/bad" || hard "mkdir"
	# shellcheck disable=SC2086
	(export "$1=$2" && hx_mpirun "$np" "$HT" --plan "$WORK/$3.json" \
		--steps $STEPS $SGD --dump "$WORK/bad/p" \
		>"$WORK/bad.out" 2>"$WORK/bad.err")
	st=$?
	[ $st -ne 0 ] && pass "$1='$2' plan $3: refused (exit $st)" ||
		fail "$1='$2' plan $3: ran"
	grep -q "$1='$2'" "$WORK/bad.err" &&
		pass "$1='$2' plan $3: the error names the variable" || {
		fail "$1='$2' plan $3: the error names the variable"
		head -n 5 "$WORK/bad.err" | sed 's/^/# /'
	}
	expect_eq "$1='$2' plan $3: nothing dumped" \
		"$(find "$WORK/bad" -type f | wc -l)" 0
}
for v in abc -1 268435457 12x; do bad HEXI_RT_SYNC_SEG "$v" S1; done
with_zero "$WORK/S.json" 0 "$WORK/S0.json"
for v in 0 -3 1073741825 1e6; do bad HEXI_RT_SYNC_BUCKET "$v" S0; done
bad HEXI_RT_SYNC_BUCKET 0 S1 # read by the sharded sync too
done_testing
