#!/bin/sh
# Resume (issue 6): plan A for 6 steps equals plan A for 3 steps, a
# checkpoint, and plan B (other pipelines, TP degrees and layer splits)
# resuming for 3 steps: per-step loss within 1e-5 relative and every tensor
# within 1e-5 (|a-b|/|a|).  AdamW (eps 1e-4), so the moments must travel
# through the checkpoint in the layout of the reading plan.  Also: one
# process resuming the 7-rank checkpoint, and a resume from a directory
# without a committed checkpoint fails cleanly.
. "$top_srcdir/tests/runtime/rt_env.sh"
need_mpi
A="$PLANS/equiv-A.json"
B="$PLANS/equiv-B.json"
na=$(plan_ranks "$A")
nb=$(plan_ranks "$B")
OPT="--optimizer adamw --lr 0.01 --eps 1e-4"
"$HT" --steps 1 --save-every 1 --ckpt-dir "$WORK/probe" >/dev/null 2>&1
[ $? -eq 9 ] && skip "hexitrain built without the checkpoint library"

# shellcheck disable=SC2086
hx_mpirun "$na" "$HT" --plan "$A" --steps 6 $OPT --json \
	--dump "$WORK/full" >"$WORK/full.json" || hard "plan A, 6 steps"
# shellcheck disable=SC2086
hx_mpirun "$na" "$HT" --plan "$A" --steps 3 $OPT --json --save-every 3 \
	--ckpt-dir "$WORK/ck" >"$WORK/first.json" 2>"$WORK/first.err"
expect_eq "plan A, 3 steps, checkpoint at step 3" "$?" 0
[ -f "$WORK/ck/latest" ] && pass "checkpoint committed (latest exists)" ||
	{ fail "no committed checkpoint"; cat "$WORK/first.err"; }
# shellcheck disable=SC2086
hx_mpirun "$nb" "$HT" --plan "$B" --steps 6 $OPT --json --resume "$WORK/ck" \
	--dump "$WORK/resumed" >"$WORK/resumed.json" 2>"$WORK/resumed.err"
expect_eq "plan B resumes for steps 4-6" "$?" 0
cat "$WORK/resumed.err"
head -n 1 "$WORK/resumed.json" | grep -q '"step":4,' &&
	pass "resumed run starts at step 4" || fail "resumed run's first step"
out=$("$CMP" --skip 3 --loss "$WORK/full.json" "$WORK/resumed.json")
st=$?
echo "$out" | sed 's/^/# /'
expect_eq "A(6) vs A(3)+B(3): same loss at steps 4-6" "$st" 0
out=$("$CMP" --params "$WORK/full" "$WORK/resumed")
st=$?
echo "$out" | sed 's/^/# /'
expect_eq "A(6) vs A(3)+B(3): same parameters" "$st" 0

# One process resumes the 7-rank checkpoint too.
# shellcheck disable=SC2086
"$HT" --model tiny-8l --batch 12 --steps 6 $OPT --json --resume "$WORK/ck" \
	--dump "$WORK/single" >"$WORK/single.json" || fail "single resume"
"$CMP" --skip 3 --loss "$WORK/full.json" "$WORK/single.json" >/dev/null
expect_eq "A(3) + one process(3): same loss" "$?" 0
"$CMP" --params "$WORK/full" "$WORK/single" | tail -n 1 | sed 's/^/# /'
"$CMP" --params "$WORK/full" "$WORK/single" >/dev/null
expect_eq "A(3) + one process(3): same parameters" "$?" 0

"$HT" --model tiny-4l --steps 1 --resume "$WORK/ck" >/dev/null 2>"$WORK/err"
st=$?
[ "$st" -ne 0 ] && pass "resume into another model fails ($st)" ||
	fail "resume into another model succeeded"
# Another seed means another synthetic corpus: the resume says so.
# shellcheck disable=SC2086
"$HT" --model tiny-8l --batch 12 --steps 4 $OPT --seed 99 --resume "$WORK/ck" \
	>/dev/null 2>"$WORK/err"
grep -q "written with 'seed=1234 optimizer=adamw', this run uses 'seed=99" \
	"$WORK/err" && pass "resume with another seed warns" ||
	fail "no seed warning: $(cat "$WORK/err")"
mkdir -p "$WORK/empty"
"$HT" --model tiny-8l --steps 1 --resume "$WORK/empty" >/dev/null 2>"$WORK/err"
st=$?
[ "$st" -ne 0 ] && grep -q "$WORK/empty" "$WORK/err" &&
	pass "resume from an empty directory fails naming it ($st)" ||
	fail "resume from empty dir: exit $st $(cat "$WORK/err")"
done_testing
