#!/bin/sh
# Activation recompute (issue 13.1): the same plan with recompute on, off
# and mixed per pipeline trains to the same losses and parameters within
# 1e-7 relative (the recomputed forward makes the same calls on the same
# data, so the bits agree), under MPI on asymmetric plans (TP 1/2/3 in one
# pipeline, 1-layer stages, unequal batches and micro-batch sizes), with
# SGD and AdamW; recompute holds fewer activation bytes; a flag that
# contradicts the plan is refused with one line and nothing written.
#   D: [TP1 x 1, TP2 x 4, TP1 x 3] 9 in 3 + [TP3 x 5, TP1 x 3] 3 in 3 (8 ranks)
#   B: [TP3 x 4, TP2 x 4] 6 in 3 + [TP1 x 8] 6 in 2                 (6 ranks)
. "$top_srcdir/tests/runtime/rt_env.sh"
need_mpi
STEPS=4
D="9/3:1x1,2x4,1x3;3/3:3x5,1x3"
B="6/3:3x4,2x4;6/2:1x8"
"$MKPLAN" tiny-8l "$D" "$WORK/D-on.json" recompute=1 &&
	"$MKPLAN" tiny-8l "$D" "$WORK/D-off.json" recompute=0 &&
	"$MKPLAN" tiny-8l "9/3-:1x1,2x4,1x3;3/3+:3x5,1x3" "$WORK/D-mix.json" &&
	"$MKPLAN" tiny-8l "$B" "$WORK/B-on.json" recompute=1 &&
	"$MKPLAN" tiny-8l "$B" "$WORK/B-off.json" recompute=0 ||
	hard "mkplan failed"

run() { # run TAG PLAN OPT...
	tag=$1 plan=$2
	shift 2
	hx_mpirun "$(plan_ranks "$plan")" "$HT" --plan "$plan" --steps $STEPS \
		--json --dump "$WORK/$tag" "$@" >"$WORK/$tag.json" \
		2>"$WORK/$tag.err" || { cat "$WORK/$tag.err"; return 1; }
}
for opt in "sgd --lr 0.5" "adamw --lr 0.01 --eps 1e-4"; do
	o=${opt%% *}
	for v in D-on D-off D-mix B-on B-off; do
		# shellcheck disable=SC2086
		run "$v-$o" "$WORK/$v.json" --optimizer $opt ||
			fail "$o plan $v ran"
	done
	same "$o plan D: recompute on = off (1e-7)" "D-on-$o" "D-off-$o" 1e-7
	same "$o plan D: recompute on = mixed per pipeline (1e-7)" "D-on-$o" \
		"D-mix-$o" 1e-7
	same "$o plan B: recompute on = off (1e-7)" "B-on-$o" "B-off-$o" 1e-7
done
# Plan-less, one process: the flags set the run's own plan.
"$HT" --steps $STEPS --model tiny-8l --batch 4 --micro-batches 2 --recompute \
	--json --dump "$WORK/one-on" >"$WORK/one-on.json" || hard "plan-less run"
"$HT" --steps $STEPS --model tiny-8l --batch 4 --micro-batches 2 \
	--no-recompute --json --dump "$WORK/one-off" >"$WORK/one-off.json" ||
	hard "plan-less run"
same "plan-less: --recompute = --no-recompute (1e-7)" one-on one-off 1e-7
# Memory: rank 1 (TP-2 stage of 4 layers, 3 slots in flight) holds fewer
# activation bytes with recompute; parameters and optimizer state do not
# change.
acts() { sed -n '1s/.*"rank":'"$2"',[^}]*"acts":\([0-9]*\).*/\1/p' "$WORK/$1.json"; }
kind() { sed -n '1s/.*"rank":'"$2"',[^}]*"'"$3"'":\([0-9]*\).*/\1/p' "$WORK/$1.json"; }
a_on=$(acts D-on-sgd 1) a_off=$(acts D-off-sgd 1)
echo "# rank 1 activations: recompute $a_on bytes, without $a_off"
[ -n "$a_on" ] && [ -n "$a_off" ] && [ "$((a_on * 2))" -lt "$a_off" ] &&
	pass "recompute: rank 1 keeps less than half the activation bytes" ||
	fail "recompute: rank 1 activations $a_on vs $a_off"
expect_eq "recompute: same optimizer bytes on rank 1" \
	"$(kind D-on-sgd 1 optim)" "$(kind D-off-sgd 1 optim)"
# Bad input: a flag that contradicts the plan: one line, exit 2, no dump.
for f in --no-recompute --recompute; do
	p="D-on"
	[ "$f" = --recompute ] && p="D-mix"
	hx_mpirun "$(plan_ranks "$WORK/$p.json")" "$HT" --plan "$WORK/$p.json" \
		--steps 1 "$f" --dump "$WORK/bad" >"$WORK/bad.out" 2>"$WORK/bad.err"
	st=$?
	grep '^hexitrain:' "$WORK/bad.err" | sort -u | head -n 2 | sed 's/^/# /'
	# every rank's message is the one line naming the conflict
	[ "$st" -ne 0 ] && grep -q -- "$f contradicts the plan" "$WORK/bad.err" &&
		! grep '^hexitrain:' "$WORK/bad.err" | grep -vq contradicts &&
		! ls "$WORK"/bad.rank* >/dev/null 2>&1 &&
		pass "$f against plan $p: refused, nothing written" ||
		fail "$f against plan $p: exit $st"
done
# Agreeing flags are accepted.
run agree "$WORK/D-on.json" --optimizer sgd --lr 0.5 --recompute &&
	"$CMP" --tol 0 --loss "$WORK/D-on-sgd.json" "$WORK/agree.json" >/dev/null
expect_eq "--recompute agreeing with the plan: the same run" "$?" 0
done_testing
