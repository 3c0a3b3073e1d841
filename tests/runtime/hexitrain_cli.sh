#!/bin/sh
# hexitrain as one process: options, errors and exit codes, role checks
# against the environment, learning on the synthetic corpus and on a text
# file.
. "$top_srcdir/tests/runtime/rt_env.sh"

"$HT" --help >"$WORK/help" && grep -q -- '--plan FILE' "$WORK/help" &&
	pass "--help" || fail "--help"
"$HT" --version | grep -q '^hexitrain (hexiscale) ' && pass "--version" ||
	fail "--version"

# Bad usage: exit status 2 and a message naming the option.
while IFS='|' read -r args want; do
	# shellcheck disable=SC2086
	"$HT" $args >/dev/null 2>"$WORK/err"
	st=$?
	if [ "$st" -eq 2 ] && grep -q -- "$want" "$WORK/err"; then
		pass "usage error: $args"
	else
		fail "usage error: $args (exit $st: $(cat "$WORK/err"))"
	fi
done <<'EOT'
--steps -1|--steps
--steps 12x|--steps
--lr 0|--lr
--lr nan|--lr
--optimizer adam|--optimizer
--clip -1|--clip
--batch 0|--batch
--frobnicate|invalid option '--frobnicate' (see 'hexitrain --help')
--steps|option '--steps' needs a value (see 'hexitrain --help')
--ckpt-dir|option '--ckpt-dir' needs a value
extra-arg|unexpected argument 'extra-arg' (see 'hexitrain --help')
--save-every 2 --steps 1|--ckpt-dir
--data-format utf8|--data-format
--lr-schedule linear|--lr-schedule
--warmup -1|--warmup
--keep 0|--keep
--keep 2 --steps 1|--ckpt-dir
--eval-every 2 --steps 1|--val-data
--batch 8 --micro-batches 3 --steps 1|--batch 8 is not a multiple of --micro-batches 3
--lr-schedule cosine --lr 1e-3 --min-lr 0.01 --steps 1|--min-lr 0.01 is above --lr 0.001
--plan p.json --model tiny-4l|--model is for a run without a plan: the plan 'p.json' (--plan)
--micro-batches 2 --plan p.json|--micro-batches is for a run without a plan
--optimizer sgd --eps 1e-6|--eps is an AdamW option: --optimizer sgd does not read it
--weight-decay 0.1 --optimizer sgd|--weight-decay is an AdamW option
--min-lr 1e-4 --steps 1|--min-lr is for --lr-schedule cosine
--lr-decay-steps 5 --lr-schedule constant|--lr-decay-steps is for --lr-schedule cosine
--eval-batches 2|--eval-batches needs --val-data
EOT

# A plan from the environment fixes the batch too; an option a resumed run
# may read (the checkpoint's schedule) stays allowed.
HEXISCALE_PLAN=p.json "$HT" --batch 8 >/dev/null 2>"$WORK/err"
st=$?
[ "$st" -eq 2 ] && grep -q "the plan 'p.json' (\$HEXISCALE_PLAN)" "$WORK/err" &&
	pass "--batch with \$HEXISCALE_PLAN: usage error" ||
	fail "--batch with \$HEXISCALE_PLAN (exit $st: $(cat "$WORK/err"))"
"$HT" --min-lr 1e-4 --resume "$WORK/none" --steps 1 >/dev/null 2>"$WORK/err"
grep -q 'lr-schedule cosine' "$WORK/err" &&
	fail "--min-lr with --resume refused: $(cat "$WORK/err")" ||
	pass "--min-lr with --resume: not refused as unread"

# Plan and environment must agree.
"$HT" --plan "$PLANS/equiv-A.json" --steps 1 >/dev/null 2>"$WORK/err"
st=$?
expect_eq "7-rank plan in one process: exit 11" "$st" 11
grep -q 'is for 7 ranks but the job has 1' "$WORK/err" &&
	pass "message names both sizes" || fail "message: $(cat "$WORK/err")"
one="$PLANS/single-tiny4l.json"
"$HT" --plan "$one" --steps 1 >/dev/null && pass "1-rank plan runs" ||
	fail "1-rank plan runs"
HEXISCALE_PLAN="$one" "$HT" --steps 1 >"$WORK/out" &&
	grep -q 'tiny-4l, 1 ranks' "$WORK/out" && pass "HEXISCALE_PLAN is read" ||
	fail "HEXISCALE_PLAN is read"
while IFS='|' read -r var want; do
	env "$var" HEXISCALE_PLAN="$one" "$HT" --steps 1 >/dev/null 2>"$WORK/err"
	st=$?
	if [ "$st" -eq 11 ] && grep -q "$want" "$WORK/err"; then
		pass "mismatch $var: exit 11"
	else
		fail "mismatch $var (exit $st: $(cat "$WORK/err"))"
	fi
done <<'EOT'
HEXISCALE_PLAN_HASH=0123456789abcdef|HEXISCALE_PLAN_HASH
RANK=3|RANK=3
WORLD_SIZE=2|WORLD_SIZE=2
HEXISCALE_STAGE=1|HEXISCALE_STAGE=1
HEXISCALE_TP_SIZE=2|HEXISCALE_TP_SIZE=2
EOT
HEXISCALE_STAGE=x "$HT" --steps 1 >/dev/null 2>&1
expect_eq "malformed HEXISCALE_STAGE: exit 5 (parse)" "$?" 5
"$HT" --plan /nonexistent/plan.json --steps 1 >/dev/null 2>"$WORK/err"
st=$?
[ "$st" -ne 0 ] && grep -q /nonexistent/plan.json "$WORK/err" &&
	pass "missing plan file: error names it" || fail "missing plan file"

# Learning: the loss falls on the synthetic corpus and on a text file.
"$HT" --model tiny-4l --batch 8 --steps 40 --lr 0.01 --json >"$WORK/syn.json" ||
	fail "synthetic run"
first=$(sed -n '1s/.*"loss":\([^,]*\),.*/\1/p' "$WORK/syn.json")
last=$(sed -n '$s/.*"loss":\([^,]*\),.*/\1/p' "$WORK/syn.json")
echo "# synthetic: loss $first -> $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }' &&
	pass "synthetic corpus: loss falls by > 0.5" || fail "loss $first -> $last"
# Raw text needs --data-format bytes and a vocabulary of every byte used.
cat >"$WORK/v256.json" <<'EOT'
{"format": "hexiscale-model", "version": 1, "name": "tiny-4l-v256",
 "layers": 4, "hidden": 48, "heads": 6, "kv_heads": 6, "ffn": 128,
 "vocab": 256, "seq_len": 16}
EOT
"$HT" --model "$WORK/v256.json" --batch 8 --steps 30 --lr 0.01 --json \
	--data-format bytes --data "$top_srcdir/man/hexitrain.1.in" \
	>"$WORK/txt.json" || fail "text run"
first=$(sed -n '1s/.*"loss":\([^,]*\),.*/\1/p' "$WORK/txt.json")
last=$(sed -n '$s/.*"loss":\([^,]*\),.*/\1/p' "$WORK/txt.json")
echo "# text: loss $first -> $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }' &&
	pass "text data: loss falls by > 0.3" || fail "loss $first -> $last"
printf 'abc' >"$WORK/short.txt"
"$HT" --data "$WORK/short.txt" --data-format bytes --steps 1 >/dev/null \
	2>"$WORK/err"
expect_eq "text shorter than a sample: exit 4" "$?" 4
"$HT" --data "$top_srcdir/man/hexitrain.1.in" --steps 1 >/dev/null 2>"$WORK/err"
st=$?
[ "$st" -eq 5 ] && grep -q 'not a token file.*--data-format bytes' "$WORK/err" &&
	pass "text without --data-format bytes: exit 5, says so" ||
	fail "text as a token file (exit $st: $(cat "$WORK/err"))"
"$HT" --data "$top_srcdir/man/hexitrain.1.in" --data-format bytes --steps 1 \
	>/dev/null 2>"$WORK/err"
st=$?
[ "$st" -eq 6 ] && grep -q 'outside the model.s vocabulary (64)' "$WORK/err" &&
	pass "byte >= vocab: exit 6 naming the offset, no silent wrap" ||
	fail "byte >= vocab (exit $st: $(cat "$WORK/err"))"
"$HT" --model tiny-4l --steps 3 --micro-batches 4 --json >"$WORK/m4.json" &&
	"$HT" --model tiny-4l --steps 3 --json >"$WORK/m1.json" &&
	"$CMP" --loss "$WORK/m1.json" "$WORK/m4.json" >/dev/null &&
	pass "4 micro-batches train like 1" || fail "micro-batching changes results"
"$HT" --steps 2 --verbose --json | grep -q '"pipeline":0,"stage":0' &&
	pass "--verbose prints per-stage times" || fail "--verbose"

# A diverging run (SGD at lr 100, no clipping): the first step whose loss
# or gradient norm is not finite fails (exit 6, HEXI_ERR_RANGE) before its
# update and before any save; --json stays valid JSON (no bare nan), and
# --keep has not rotated finite checkpoints out for NaN ones.
"$HT" --model tiny-4l --steps 20 --optimizer sgd --lr 100 --clip 0 \
	--save-every 1 --keep 2 --ckpt-dir "$WORK/div" --json \
	>"$WORK/div.json" 2>"$WORK/div.err"
st=$?
expect_eq "diverging run: exit 6" "$st" 6
bad=$(sed -n 's/.*step \([0-9]*\): loss .* not finite.*/\1/p' "$WORK/div.err")
echo "# diverged at step $bad: $(grep 'not finite' "$WORK/div.err")"
check "the message names the step and says the run diverged" test -n "$bad"
check "--json output is valid JSON, line by line" python3 -c '
import json, sys
for l in open(sys.argv[1]):
    json.loads(l)' "$WORK/div.json"
expect_eq "one JSON record per step before it" \
	"$(grep -c '"step"' "$WORK/div.json")" "$((${bad:-1} - 1))"
expect_eq "latest checkpoint: the step before" "$(cat "$WORK/div/latest" 2>/dev/null)" \
	"step-$(printf %08d $((${bad:-1} - 1)))"

# Validation windows: each read once, so a --val-data shorter than
# --eval-batches x global batch windows is refused (it counted windows
# twice); validation runs at the step resumed from whatever --eval-every.
printf '012345678901234567890123456789012345' >"$WORK/v36"
"$HT" --model tiny-4l --data-format bytes --data "$WORK/v36" \
	--val-data "$WORK/v36" --eval-every 1 --batch 8 --steps 0 \
	>/dev/null 2>"$WORK/err"
st=$?
[ "$st" -eq 2 ] && grep -q -- '--val-data .*v36: 2 windows of 17 tokens, but --eval-batches 1 x global batch 8 reads 8' "$WORK/err" &&
	pass "val file of 2 windows, 8 asked: exit 2, says so" ||
	fail "short --val-data (exit $st: $(cat "$WORK/err"))"
"$HT" --model tiny-4l --data-format bytes --data "$WORK/v36" \
	--val-data "$WORK/v36" --eval-every 1 --batch 2 --steps 0 --json \
	>"$WORK/v.json" 2>"$WORK/err"
expect_eq "2 windows, batch 2: validates (exit 0)" "$?" 0
"$HT" --model tiny-4l --steps 3 --save-every 3 --ckpt-dir "$WORK/ev" \
	>/dev/null 2>&1 || fail "save step 3"
"$HT" --model tiny-4l --data-format bytes --data "$WORK/v36" \
	--val-data "$WORK/v36" --batch 2 --eval-every 2 --steps 4 \
	--resume "$WORK/ev" --json >"$WORK/ev.json" 2>"$WORK/err"
expect_eq "resumed at step 3, --eval-every 2: validation at steps 3 and 4" \
	"$(sed -n 's/^{"step":\([0-9]*\),"val_loss".*/\1/p' "$WORK/ev.json" | tr '\n' ' ')" "3 4 "
# --val-data without --eval-every: validated once, after the last step
# (it was silently ignored), so with --steps 0 it is the loss of the
# given weights (hexitrain(1), --json); a file too short for it is
# refused before the first step all the same.
vd() { "$HT" --model tiny-4l --data-format bytes --data "$WORK/v36" \
	--val-data "$WORK/v36" "$@"; }
vd --batch 2 --steps 0 --json >"$WORK/v0.json" 2>"$WORK/err"
expect_eq "--val-data, --steps 0, no --eval-every: exit 0" "$?" 0
check "... one validation, at step 0, nothing else" grep -qx \
	'{"step":0,"val_loss":[0-9.e+-]*}' "$WORK/v0.json"
expect_eq "... one line of output" "$(wc -l <"$WORK/v0.json")" 1
vd --batch 2 --steps 3 --json >"$WORK/v3.json" 2>"$WORK/err"
expect_eq "--val-data, --steps 3, no --eval-every: validation at step 3 only" \
	"$(sed -n 's/^{"step":\([0-9]*\),"val_loss".*/\1/p' "$WORK/v3.json" | tr '\n' ' ')" "3 "
vd --batch 2 --steps 3 --resume "$WORK/ev" --json >"$WORK/vr.json" 2>"$WORK/err"
expect_eq "resumed at step 3, --steps 3: validates the resumed weights" \
	"$(sed -n 's/^{"step":\([0-9]*\),"val_loss".*/\1/p' "$WORK/vr.json" | tr '\n' ' ')" "3 "
check "... and says there is no step to train (it exited 0 saying nothing)" \
	grep -q 'the checkpoint is at step 3, --steps is 3: no step to train' "$WORK/err"
vd --batch 8 --steps 2 >"$WORK/out" 2>"$WORK/err"
st=$?
[ "$st" -eq 2 ] && grep -q -- '--val-data .*v36: 2 windows' "$WORK/err" &&
	! grep -q '^step' "$WORK/out" &&
	pass "short --val-data without --eval-every: exit 2 before step 1" ||
	fail "short --val-data without --eval-every (exit $st: $(cat "$WORK/err"))"

# Errors name the option once, and say why.
"$HT" --val-data "$WORK/nonexist.tok" --steps 1 >/dev/null 2>"$WORK/err"
st=$?
[ "$st" -eq 7 ] && grep -qx -- "hexitrain: --val-data $WORK/nonexist.tok: No such file or directory" "$WORK/err" &&
	pass "missing --val-data file: exit 7, named as --val-data only" ||
	fail "missing --val-data file (exit $st: $(cat "$WORK/err"))"
"$HT" --steps 1 --dump "$WORK/nonexistent/x" >/dev/null 2>"$WORK/err"
st=$?
[ "$st" -eq 8 ] && grep -q -- "--dump .*nonexistent/x: cannot create .*x\.rank0: No such file or directory" "$WORK/err" &&
	pass "--dump into a missing directory: exit 8, says why" ||
	fail "--dump into a missing directory (exit $st: $(cat "$WORK/err"))"

# A --ckpt-dir that can never be created: refused before the first step
# (exit 4, as the save's error), not at the first save or at a stop
# signal's (exit 76, nothing saved); nothing is created early.
: >"$WORK/notadir"
"$HT" --model tiny-4l --steps 5 --save-every 4 --ckpt-dir "$WORK/notadir" \
	>"$WORK/nd.out" 2>"$WORK/nd.err"
st=$?
[ "$st" -eq 4 ] && grep -q -- "--ckpt-dir .*notadir: exists and is not a directory" "$WORK/nd.err" &&
	pass "--ckpt-dir a file: exit 4, says so" ||
	fail "--ckpt-dir a file (exit $st: $(cat "$WORK/nd.err"))"
check "... before the first step" test "$(grep -c '^step' "$WORK/nd.out")" = 0
"$HT" --model tiny-4l --steps 5 --ckpt-dir "$WORK/notadir/ck" \
	>"$WORK/nd.out" 2>"$WORK/nd.err"
st=$?
[ "$st" -eq 4 ] && grep -q -- "--ckpt-dir .*notadir/ck: .*notadir is not a directory" "$WORK/nd.err" &&
	! grep -q '^step' "$WORK/nd.out" &&
	pass "--ckpt-dir below a file, no --save-every: exit 4 before step 1" ||
	fail "--ckpt-dir below a file (exit $st: $(cat "$WORK/nd.err"))"
# ... nor a path the save cannot walk: a file named with a trailing '/',
# a dangling symlink (itself, or on the way), another user's symlink (the
# writer follows only root's and ours); a symlink to a directory is fine.
ln -s nowhere "$WORK/dangling"
ln -s "$WORK" "$WORK/todir"
while IFS='|' read -r dir st_want want; do
	"$HT" --model tiny-4l --steps 1 --ckpt-dir "$WORK/$dir" \
		>"$WORK/nd.out" 2>"$WORK/nd.err"
	st=$?
	if [ "$st" -eq "$st_want" ] && grep -q -- "$want" "$WORK/nd.err" &&
		! grep -q '^step' "$WORK/nd.out"; then
		pass "--ckpt-dir $dir: exit $st_want before step 1"
	else
		fail "--ckpt-dir $dir (exit $st: $(cat "$WORK/nd.err"))"
	fi
done <<'EOT'
notadir/|4|--ckpt-dir .*notadir/: exists and is not a directory
notadir/ck/|4|--ckpt-dir .*notadir/ck/: .*notadir is not a directory
dangling|4|--ckpt-dir .*dangling: .*dangling is a symbolic link to a missing target 'nowhere'
dangling/ck|4|--ckpt-dir .*dangling/ck: .*dangling is a symbolic link to a missing target 'nowhere'
EOT
"$HT" --model tiny-4l --steps 1 --ckpt-dir "$WORK/todir/later/ck" >/dev/null 2>&1
expect_eq "--ckpt-dir below a symlink to a directory: exit 0" "$?" 0
check "... and nothing created" test ! -e "$WORK/later"
if [ "$(id -u)" -eq 0 ] && ln -s "$WORK" "$WORK/theirs" &&
	chown -h 65534 "$WORK/theirs"; then
	"$HT" --model tiny-4l --steps 1 --ckpt-dir "$WORK/theirs/ck" \
		>/dev/null 2>"$WORK/nd.err"
	st=$?
	[ "$st" -eq 14 ] && grep -q -- "--ckpt-dir .*theirs/ck: .*theirs is a symbolic link owned by uid 65534" "$WORK/nd.err" &&
		pass "--ckpt-dir below another user's symlink: exit 14" ||
		fail "--ckpt-dir below another user's symlink (exit $st: $(cat "$WORK/nd.err"))"
fi
# A directory we may not search on the way: a permission error (14), not
# I/O (8).  Root may search anything, so run as nobody where we can.
mkdir "$WORK/pub" "$WORK/pub/locked" && chmod 711 "$WORK" "$WORK/pub" &&
	chmod 700 "$WORK/pub/locked"
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1 &&
	setpriv --reuid=65534 --regid=65534 --clear-groups "$HT" --version \
		>/dev/null 2>&1; then
	setpriv --reuid=65534 --regid=65534 --clear-groups "$HT" \
		--model tiny-4l --steps 1 --ckpt-dir "$WORK/pub/locked/ck" \
		>/dev/null 2>"$WORK/nd.err"
	st=$?
	[ "$st" -eq 14 ] && grep -q -- "--ckpt-dir .*locked/ck: .*Permission denied" "$WORK/nd.err" &&
		pass "--ckpt-dir below an unsearchable directory: exit 14" ||
		fail "--ckpt-dir below an unsearchable directory (exit $st: $(cat "$WORK/nd.err"))"
else
	echo "# skipped: --ckpt-dir below an unsearchable directory (needs root and setpriv to run as uid 65534)"
fi
if [ "$(id -u)" -ne 0 ]; then
	"$HT" --model tiny-4l --steps 1 --ckpt-dir /proc/nope >/dev/null 2>"$WORK/nd.err"
	st=$?
	[ "$st" -eq 14 ] && grep -q -- "--ckpt-dir /proc/nope: cannot create it in /proc" "$WORK/nd.err" &&
		pass "--ckpt-dir in an unwritable directory: exit 14" ||
		fail "--ckpt-dir /proc/nope (exit $st: $(cat "$WORK/nd.err"))"
fi
"$HT" --model tiny-4l --steps 1 --ckpt-dir "$WORK/later/ck" >/dev/null 2>&1
expect_eq "--ckpt-dir with missing parents, no save: exit 0" "$?" 0
check "... and nothing created" test ! -e "$WORK/later"

# A stop signal whose save fails: 76 (hexitrain(1)), not the error's code
# (a file put where --ckpt-dir was to be created, after the check).
"$HT" --model tiny-4l --steps 100000 --ckpt-dir "$WORK/sfd" \
	>"$WORK/sf.out" 2>"$WORK/sf.err" &
pid=$!
n=0
while ! grep -q '^step *2 ' "$WORK/sf.out" && [ $n -lt 600 ]; do
	sleep 0.05
	n=$((n + 1))
done
: >"$WORK/sfd"
kill -s USR1 $pid
wait $pid
st=$?
expect_eq "stop signal, save into a path that became a file: exit 76" "$st" 76
check "the save's error is printed" grep -q "sfd.*not a directory" "$WORK/sf.err"

# Another run's newer checkpoints in --ckpt-dir (a rollback to an older
# step of the same directory, or a fresh run into a used one): refused
# before the first step, nothing removed.  Saving beside them mixed the
# runs: --keep kept their higher steps and removed the run's own saves,
# and latest kept naming theirs, so --resume DIR continued the other run.
"$HT" --model tiny-4l --steps 8 --save-every 2 --ckpt-dir "$WORK/rb" \
	>/dev/null 2>&1 || fail "save steps 2 4 6 8"
ls "$WORK/rb" >"$WORK/rb.before"
"$HT" --model tiny-4l --steps 7 --save-every 1 --keep 2 \
	--resume "$WORK/rb/step-00000002" --ckpt-dir "$WORK/rb" \
	>"$WORK/rb.out" 2>"$WORK/rb.err"
st=$?
[ "$st" -eq 4 ] && grep -q -- "--ckpt-dir .*rb holds 3 committed checkpoints after step 2, where this run starts (step-00000004 .. step-00000008)" "$WORK/rb.err" &&
	pass "rollback into the same --ckpt-dir: exit 4, names the newer steps" ||
	fail "rollback into the same --ckpt-dir (exit $st: $(cat "$WORK/rb.err"))"
check "refused before the first step" test -s "$WORK/rb.out" -a \
	"$(grep -c '^step' "$WORK/rb.out")" = 0
ls "$WORK/rb" >"$WORK/rb.after"
check "nothing removed or added" cmp -s "$WORK/rb.before" "$WORK/rb.after"
"$HT" --model tiny-4l --steps 3 --save-every 1 --ckpt-dir "$WORK/rb" \
	>/dev/null 2>"$WORK/rb.err"
st=$?
[ "$st" -eq 4 ] && grep -q "holds 4 committed checkpoints after step 0" "$WORK/rb.err" &&
	pass "a fresh run into a used --ckpt-dir: exit 4" ||
	fail "fresh run into a used --ckpt-dir (exit $st: $(cat "$WORK/rb.err"))"
"$HT" --model tiny-4l --steps 10 --save-every 1 --keep 2 --resume "$WORK/rb" \
	--ckpt-dir "$WORK/rb" >/dev/null 2>"$WORK/rb.err" &&
	expect_eq "resumed from the newest: latest is this run's step 10" \
		"$(cat "$WORK/rb/latest")" step-00000010 ||
	fail "resume from the newest (exit $?: $(cat "$WORK/rb.err"))"
expect_eq "--keep 2 kept steps 8 (resumed from), 9, 10" \
	"$(cd "$WORK/rb" && echo step-*) " \
	"step-00000008 step-00000009 step-00000010 "
done_testing
