#!/bin/sh
# Equivalence (issue 5): the same tiny model, seed and data trained 6 steps
# in one process and under four asymmetric plans on 5-8 MPI ranks give the
# same loss every step (1e-5 relative) and the same parameters (per tensor
# |a-b|/|a| <= 1e-5), with plain SGD and with AdamW at eps 1e-4 (a large
# eps keeps AdamW from amplifying fp32 rounding noise in near-zero
# gradients).  A run with another seed must be reported as different.
#   A: [TP2 x 3 layers, TP1 x 5] 8 samples in 4 micro-batches
#      + [TP4 x 8] 4 samples in 1 micro-batch                      (7 ranks)
#   B: [TP3 x 4, TP2 x 4] 6 in 3 + [TP1 x 8] 6 in 2    TP 1, 2, 3  (6 ranks)
#   C: three pipelines, batches 2, 4, 6                             (5 ranks)
#   D: [TP1 x 1, TP2 x 4, TP1 x 3] 9 in 3 + [TP3 x 5, TP1 x 3] 3 in 3
#                                                                    (8 ranks)
#   gqa: tiny-gqa, [TP3 x 2, TP1 x 2] 4 in 2 + [TP2 x 4] 4 in 1      (6 ranks)
. "$top_srcdir/tests/runtime/rt_env.sh"
need_mpi
STEPS=6
for opt in "sgd --lr 0.5" "adamw --lr 0.01 --eps 1e-4"; do
	tag=${opt%% *}
	# shellcheck disable=SC2086
	"$HT" --model tiny-8l --batch 12 --steps $STEPS --optimizer $opt \
		--json --dump "$WORK/ref-$tag" >"$WORK/ref-$tag.json" ||
		hard "single-process reference run failed"
	for p in A B C D; do
		plan="$PLANS/equiv-$p.json"
		np=$(plan_ranks "$plan")
		# shellcheck disable=SC2086
		if hx_mpirun "$np" "$HT" --plan "$plan" --steps $STEPS \
			--optimizer $opt --json --dump "$WORK/$p-$tag" \
			>"$WORK/$p-$tag.json" 2>"$WORK/$p-$tag.err"; then
			pass "$tag plan $p ($np ranks) ran"
		else
			fail "$tag plan $p ($np ranks) ran"
			cat "$WORK/$p-$tag.err"
			continue
		fi
		out=$("$CMP" --loss "$WORK/ref-$tag.json" "$WORK/$p-$tag.json")
		st=$?
		echo "$out" | sed 's/^/# /'
		expect_eq "$tag plan $p: same loss each step" "$st" 0
		out=$("$CMP" --params "$WORK/ref-$tag" "$WORK/$p-$tag")
		st=$?
		echo "$out" | sed 's/^/# /'
		expect_eq "$tag plan $p: same parameters" "$st" 0
	done
done
# Grouped KV heads (tiny-gqa, 3 KV heads for 6 query heads): TP 3 and 2
# split the KV heads unevenly (1+1+1 and 1+2), plan of 6 ranks.
plan="$PLANS/equiv-gqa.json"
"$HT" --model tiny-gqa --batch 8 --steps $STEPS --optimizer sgd --lr 0.5 \
	--json --dump "$WORK/ref-gqa" >"$WORK/ref-gqa.json" || hard "gqa reference"
hx_mpirun "$(plan_ranks "$plan")" "$HT" --plan "$plan" --steps $STEPS \
	--optimizer sgd --lr 0.5 --json --dump "$WORK/gqa" >"$WORK/gqa.json" ||
	fail "gqa plan ran"
"$CMP" --loss "$WORK/ref-gqa.json" "$WORK/gqa.json" | tail -n 1 | sed 's/^/# /'
"$CMP" --loss "$WORK/ref-gqa.json" "$WORK/gqa.json" >/dev/null
expect_eq "gqa plan (TP 3, 1, 2): same loss each step" "$?" 0
"$CMP" --params "$WORK/ref-gqa" "$WORK/gqa" | tail -n 1 | sed 's/^/# /'
"$CMP" --params "$WORK/ref-gqa" "$WORK/gqa" >/dev/null
expect_eq "gqa plan (TP 3, 1, 2): same parameters" "$?" 0

# Plan ranks need not be launcher ranks (hexiscale-env(7)): reverse them
# with HEXISCALE_RANK; the result must not change.
np=$(plan_ranks "$PLANS/equiv-A.json")
hx_mpirun "$np" sh -c 'HEXISCALE_RANK=$(('"$np"' - 1 - OMPI_COMM_WORLD_RANK)) \
	exec "$0" "$@"' "$HT" --plan "$PLANS/equiv-A.json" --steps $STEPS \
	--optimizer sgd --lr 0.5 --json --dump "$WORK/rev" >"$WORK/rev.json" ||
	fail "plan A with reversed HEXISCALE_RANK ran"
"$CMP" --loss "$WORK/ref-sgd.json" "$WORK/rev.json" >/dev/null &&
	"$CMP" --params "$WORK/ref-sgd" "$WORK/rev" >/dev/null &&
	pass "plan A with plan ranks reversed: same loss and parameters" ||
	fail "plan A with plan ranks reversed differs"
# Negative control: the comparison must notice another seed.
"$HT" --model tiny-8l --batch 12 --steps $STEPS --optimizer sgd --lr 0.5 \
	--seed 99 --json --dump "$WORK/neg" >"$WORK/neg.json" || hard "seed run"
differ "another seed" ref-sgd neg
done_testing
