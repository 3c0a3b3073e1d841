#!/bin/sh
# cli.sh - hexickpt end to end on checkpoints of planner plans: info, verify,
# ls, reshard A->B->A, diff, export (h5dump/h5diff readable), exit codes.
. "$top_srcdir/tests/tap.sh"
B=$top_builddir
CK=$B/checkpoint/hexickpt
PLAN=$B/scheduler/hexiplan
GEN=./ckpt_gen
[ -x "$CK" ] && [ -x "$PLAN" ] && [ -x "$GEN" ] || hard "hexickpt, hexiplan or ckpt_gen not built"
command -v python3 >/dev/null || skip "python3 needed to read --json output"
T=$(mktemp -d "${TMPDIR:-/tmp}/hexickpt-cli.XXXXXX") || hard "mktemp"
trap 'rm -rf "$T"' EXIT
C=$top_srcdir/examples/clusters
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# usage and errors
check "--help" sh -c "'$CK' --help | grep -q 'reshard SRC --plan PLAN -o DST'"
check "--version" sh -c "'$CK' --version | grep -q '^hexickpt (hexiscale) '"
"$CK" >/dev/null 2>&1; expect_eq "no command: exit 2" $? 2
"$CK" frobnicate x >/dev/null 2>&1; expect_eq "unknown command: exit 2" $? 2
"$CK" info --bogus x >/dev/null 2>&1; expect_eq "unknown option: exit 2" $? 2
"$CK" verify -xq /tmp >/dev/null 2>"$T/err.txt"; expect_eq "an unknown letter in a cluster: exit 2" $? 2
check "its message names the letter, not the command" grep -q "unknown option '-x'" "$T/err.txt"
"$CK" info "$T/none" >/dev/null 2>&1; expect_eq "missing checkpoint: exit 7 (NOTFOUND)" $? 7
"$CK" reshard "$T/none" -o "$T/x" >/dev/null 2>&1; expect_eq "reshard without --plan: exit 2" $? 2

# plans and a checkpoint of plan A
"$PLAN" plan "$C/hetero-a100-4090-12.json" --model tiny-4l --use-all-gpus -o "$T/A.json" >/dev/null 2>&1 || hard "hexiplan A"
"$PLAN" plan "$C/cpu-1x4.json" --model tiny-4l -o "$T/B.json" >/dev/null 2>&1 || hard "hexiplan B"
"$PLAN" plan "$C/cpu-2x2.json" --model tiny-8l -o "$T/C.json" >/dev/null 2>&1 || hard "hexiplan C"
check "save a checkpoint of plan A" "$GEN" save-plan "$T/a" 7 "$T/A.json"

out=$("$CK" info "$T/a")
check "info: step" sh -c "echo \"\$0\" | grep -q '^step        7 '" "$out"
check "info: model" sh -c "echo \"\$0\" | grep -q '^model       tiny-4l'" "$out"
check "info: plan summary" sh -c "echo \"\$0\" | grep -q 'pipeline 1: batch'" "$out"
ha=$(python3 -c "import json; print(json.load(open('$T/A.json'))['hash'])")
hb=$(python3 -c "import json; print(json.load(open('$T/B.json'))['hash'])")
expect_eq "info --json: plan hash" "$("$CK" info --json "$T/a" | json "d['plan_hash']")" "$ha"
expect_eq "info --json: world size" "$("$CK" info --json "$T/a" | json "d['world_size']")" 12
expect_eq "info --json: stored plan parsed" "$("$CK" info --json "$T/a" | json "d['plan']['parsed']")" True

check "verify" "$CK" verify "$T/a"
expect_eq "verify --json ok" "$("$CK" verify --json "$T/a" | json "d['ok']")" True
expect_eq "ls --json: committed latest step 7" \
	"$("$CK" ls --json "$T/a" | json "[(e['step'], e['committed'], e['latest']) for e in d]")" "[(7, True, True)]"

# reshard A -> B -> A
"$CK" reshard "$T/a" --plan "$T/B.json" -o "$T/b" 2>"$T/err"
expect_eq "reshard A -> B" $? 0
check_fails "no progress bar when stderr is not a terminal" grep -q '%' "$T/err"
expect_eq "B has B's plan hash" "$("$CK" info --json "$T/b" | json "d['plan_hash']")" "$hb"
expect_eq "B has 4 rank files" "$("$CK" info --json "$T/b" | json "len(d['rank_bytes'])")" 4
check "verify B" "$CK" verify -q "$T/b"
check "reshard B -> A" "$CK" reshard -q "$T/b" --plan "$T/A.json" -o "$T/a2"
check "A2 holds the data of step 7" "$GEN" check "$T/a2" 7
"$CK" diff "$T/a" "$T/a2" >"$T/out"; st=$?
expect_eq "diff A A2: identical (exit 0)" $st 0
check "diff says identical" grep -q "checkpoints are identical" "$T/out"

# a different step differs
check "save step 8 of plan A" "$GEN" save-plan "$T/c" 8 "$T/A.json"
"$CK" diff --json "$T/a" "$T/c" >"$T/out"; st=$?
expect_eq "diff of other data: exit 11" $st 11
expect_eq "diff --json: not identical" "$(json "d['identical']" <"$T/out")" False
expect_eq "diff --json: max_abs > 0 for embed.weight" \
	"$(json "[t['max_abs'] > 0 for t in d['tensors'] if t['name'] == 'embed.weight']" <"$T/out")" "[True]"

"$CK" diff --tolerance 1 "$T/a" "$T/c" >/dev/null; expect_eq "diff --tolerance 1: equal within it (exit 0)" $? 0
# tensors of one side only: no figures (they read "0 elements differ")
"$GEN" save-plan "$T/d8" 1 "$top_srcdir/examples/plans/tiny-8l-tp123.json" >/dev/null 2>&1 ||
	hard "tiny-8l fixture"
"$GEN" save-plan "$T/d4" 1 "$top_srcdir/examples/plans/tiny-4l-cpu4.json" >/dev/null 2>&1 ||
	hard "tiny-4l fixture"
"$CK" diff "$T/d8" "$T/d4" >"$T/out"; st=$?
expect_eq "diff of an 8-layer and a 4-layer model: exit 11" $st 11
expect_eq "an only-in-A row is the name and the state" \
	"$(grep '^layers.4.attn.wk ' "$T/out" | tr -s ' ')" "layers.4.attn.wk only in A"
"$CK" diff --json "$T/d8" "$T/d4" >"$T/out"
expect_eq "diff --json: only-in-A rows carry no max_abs" \
	"$(json "sorted(set(tuple(sorted(t)) for t in d['tensors'] if t['state'] == 'only in A'))" <"$T/out")" \
	"[('name', 'state')]"
"$CK" diff --tolerance x "$T/a" "$T/c" >/dev/null 2>&1; expect_eq "diff --tolerance x: exit 2" $? 2
expect_eq "info --step 7" "$("$CK" info --json --step 7 "$T/a" | json "d['step']")" 7
"$CK" info --step 99 "$T/a" >/dev/null 2>&1; expect_eq "info --step 99: exit 7" $? 7
if command -v script >/dev/null; then
	script -qec "'$CK' verify '$T/a'" /dev/null >"$T/tty" 2>&1
	check "progress bar on a terminal" grep -q '100%' "$T/tty"
fi

# export: one HDF5 file of full tensors; A and B export the same tensors
check "export A" "$CK" export -q "$T/a" -o "$T/a.h5"
check "export B" "$CK" export -q "$T/b" -o "$T/b.h5"
# --json of a checkpoint whose path is not UTF-8: JSON cannot carry it;
# an error with the reason (verify exited 0 with nothing printed, info and
# export said "out of memory")
NU=$T/$(printf 'a\377')
cp -r "$T/a" "$NU"
for c in verify info; do
	"$CK" $c --json "$NU" >"$T/out" 2>"$T/err"
	expect_eq "$c --json of a non-UTF-8 path: exit 6" $? 6
	check "$c --json: says why" grep -q "string that is not UTF-8" "$T/err"
done
rm -rf "$NU"
# -o naming a descriptor (a link to /proc/self/fd/1, as /dev/stdout is)
# with stdout redirected to a file: refused, the link kept (the rename
# replaced it; as root, -o /dev/stdout replaced the machine's /dev/stdout)
ln -s /proc/self/fd/1 "$T/out1"
"$CK" export -q "$T/a" -o "$T/out1" >"$T/red.h5" 2>"$T/err"
expect_eq "export -o a link to /proc/self/fd/1: refused (exit 4)" $? 4
check "the link is still a link" test -L "$T/out1"
check "message: names file descriptor 1" grep -q "out1: names file descriptor 1, not a file" "$T/err"
if command -v h5dump >/dev/null; then
	check "h5dump reads the export" sh -c "h5dump -d /tensors/embed.weight '$T/a.h5' | grep -q 'DATASPACE  SIMPLE { ( 64, 48 )'"
fi
if command -v h5diff >/dev/null; then
	check "h5diff: export(A) == export(reshard(A->B))" h5diff "$T/a.h5" "$T/b.h5" /tensors /tensors
fi

# refusals
"$CK" reshard -q "$T/a" --plan "$T/C.json" -o "$T/x" 2>"$T/err"; st=$?
expect_eq "reshard into another model's plan: exit 11" $st 11
check "message names both models" grep -q "tiny-8l.*tiny-4l" "$T/err"
cp -r "$T/a" "$T/t"
f=$(ls "$T"/t/step-00000007/rank-*.h5 | head -1)
truncate -s 2000 "$f"
"$CK" verify "$T/t" 2>"$T/err"; st=$?
expect_eq "verify of a truncated rank file: exit 8" $st 8
check "message names the file" grep -q "rank-00000.h5.*truncated" "$T/err"
expect_eq "verify --json names the error" "$("$CK" verify --json "$T/t" | json "d['error']")" HEXI_ERR_IO
rm -f "$T"/t/step-00000007/MANIFEST.json
expect_eq "ls: uncommitted step" "$("$CK" ls --json "$T/t" | json "d[0]['committed']")" False
"$CK" info "$T/t" >/dev/null 2>&1; expect_eq "info of an uncommitted dir: exit 7" $? 7
done_testing
