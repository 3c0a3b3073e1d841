#!/bin/sh
# hexiplan-cli.sh - hexiplan end to end: plan, validate, simulate, show,
# compare; --help/--version; bad input gets a one-line error naming the
# field and the exit code of the error table.
. "$top_srcdir/tests/tap.sh"
H="$top_builddir/scheduler/hexiplan"
EX="$top_srcdir/examples/clusters"
[ -x "$H" ] || hard "no hexiplan binary at $H"
T=$(mktemp -d) || hard "mktemp"
trap 'rm -rf "$T"' EXIT

check "--help exits 0" "$H" --help
# the package's name as the other programs print it: "hexiplan (hexiscale) V"
expect_eq "--version" "$("$H" --version)" "hexiplan (hexiscale) $("$H" --version | awk '{print $3}')"
"$H" >/dev/null 2>&1; expect_eq "no command: usage error 2" $? 2
"$H" frobnicate x >/dev/null 2>&1; expect_eq "unknown command: 2" $? 2
"$H" plan --bogus "$EX/paper.json" >/dev/null 2>&1; expect_eq "unknown option: 2" $? 2
"$H" plan >/dev/null 2>&1; expect_eq "plan without cluster: 2" $? 2

check "plan paper.json llama2-13b" "$H" plan "$EX/paper.json" --model llama2-13b -o "$T/p.json"
# -o through a link to /proc/self/fd/1 (what /dev/stdout is) with stdout
# redirected to a file: the plan goes to that file, the link stays (the
# rename replaced the link; as root, -o /dev/stdout replaced /dev/stdout)
ln -s /proc/self/fd/1 "$T/out1"
"$H" plan "$EX/cpu-1x4.json" --model tiny-4l -o "$T/out1" >"$T/red.txt" 2>"$T/red.err"
expect_eq "-o a link to /proc/self/fd/1, stdout to a file: exit 0" $? 0
check "the link is still a link" test -L "$T/out1"
python3 -c "import json,sys; t=open(sys.argv[1]).read(); json.JSONDecoder().raw_decode(t[t.index('{'):])" "$T/red.txt" &&
	pass "the redirected file holds the plan" || fail "no plan in the redirected file"
check "and the summary on standard error (the plan owns standard output)" grep -q "written to" "$T/red.err"
# -o in a directory that is not there: the message names the file asked
# for, not the temporary name beside it
"$H" plan "$EX/cpu-1x4.json" --model tiny-4l -o "$T/nodir/p.json" >/dev/null 2>"$T/err"
expect_eq "-o in a missing directory: exit 7 (not found)" $? 7
check "the message names the file" grep -qF "$T/nodir/p.json: cannot create: No such file or directory" "$T/err"
check "not the temporary file" sh -c '! grep -q "\.tmp\." "$1"' sh "$T/err"
"$H" plan "$EX/cpu-1x4.json" --model tiny-4l -o - >"$T/dash.txt" 2>"$T/dash.err"
expect_eq "-o -: exit 0" $? 0
# the plan alone on standard output (the summary followed it: a file no
# reader took, "end of file expected near 'plan'"), the summary on stderr
check "-o -: standard output is the plan, nothing else" "$H" validate "$T/dash.txt"
check "-o -: the summary on standard error" grep -q "written to /dev/stdout" "$T/dash.err"
"$H" plan "$EX/cpu-1x4.json" --model tiny-4l -o - --json >"$T/dashj.txt" 2>"$T/dashj.err"
check "-o - --json: standard output is the plan" "$H" validate "$T/dashj.txt"
check "-o - --json: the report on standard error" grep -q '"planning_s"' "$T/dashj.err"
"$H" plan "$EX/cpu-1x4.json" --model tiny-4l -o - >"$T/dashc.txt" 2>&-
expect_eq "-o - with standard error closed: exit 0 (the report dropped)" $? 0
check "-o - with standard error closed: the plan on standard output" "$H" validate "$T/dashc.txt"
"$H" plan -zv "$EX/cpu-1x4.json" >/dev/null 2>"$T/err"
expect_eq "an unknown letter in a cluster: usage error 2" $? 2
check "its message names the letter" grep -q "unknown option '-z'" "$T/err"
check "-o - is standard output (it made a file named -)" test ! -e ./- -a -s "$T/dash.txt"
python3 -c "import json,sys; t=open(sys.argv[1]).read(); json.JSONDecoder().raw_decode(t[t.index('{'):])" "$T/dash.txt" &&
	pass "-o -: the plan on standard output" || fail "-o -: no plan on standard output"
check "validate the plan" "$H" validate "$T/p.json"
"$H" validate --json "$T/p.json" >"$T/v.json"
check "validate --json says valid" grep -q '"valid": true' "$T/v.json"
"$H" simulate --json "$T/p.json" >"$T/s.json" || fail "simulate --json"
check "simulate --json has stages" grep -q '"mem_cap_gib"' "$T/s.json"
check "simulate --json has iteration" grep -q '"iteration_s"' "$T/s.json"
check "simulate text" "$H" simulate "$T/p.json"
check "simulate --cost-model reference" "$H" simulate --cost-model reference "$T/p.json"
# --attention: auto is the default; on bf16 sm_80+ GPUs it is the fused
# path; the own kernel (CUDA cores) is several times slower here
iter_of() { "$H" simulate --json "$@" | sed -n 's/.*"iteration_s": *\([0-9.eE+-]*\).*/\1/p' | head -n 1; }
it_def=$(iter_of "$T/p.json") it_auto=$(iter_of --attention auto "$T/p.json")
it_fused=$(iter_of --attention fused "$T/p.json") it_own=$(iter_of --attention own "$T/p.json")
expect_eq "--attention auto is the default" "$it_auto" "$it_def"
expect_eq "--attention fused on A800/4090/3090 bf16 = auto" "$it_fused" "$it_def"
check "--attention own prices the own kernel: slower ($it_own s vs $it_def s)" \
	awk -v a="$it_own" -v b="$it_def" 'BEGIN { exit !(a > 2 * b) }'
"$H" simulate --attention flash "$T/p.json" >/dev/null 2>"$T/attn.err"
expect_eq "--attention flash: usage error 2" $? 2
check "--attention error names the choices" grep -q "auto, fused or own" "$T/attn.err"
check "show" "$H" show "$T/p.json"
"$H" show --svg "$T/p.svg" "$T/p.json" >/dev/null || fail "show --svg"
check "show --svg writes SVG" grep -q "<svg" "$T/p.svg"
"$H" simulate --json --cost-model reference "$T/p.json" >"$T/r.json" || fail "simulate reference json"
check "simulate records the reference model" grep -q '"cost_model": "reference"' "$T/r.json"
# same seed, same plan
"$H" plan "$EX/paper.json" --model llama2-13b -o "$T/p2.json" >/dev/null
expect_eq "deterministic plan file" "$(cmp -s "$T/p.json" "$T/p2.json"; echo $?)" 0
"$H" plan --json "$EX/mixed-8.json" --model llama2-7b --global-batch 32 >"$T/j.json" ||
	fail "plan --json mixed-8"
check "plan --json reports MFU" grep -q '"mfu"' "$T/j.json"
# the plan file's prediction is what the simulator recomputes from it
"$H" plan --json "$EX/hetero-a100-4090-12.json" --model llama2-7b -o "$T/h.json" >"$T/hp.json" ||
	fail "plan hetero"
"$H" simulate --json "$T/h.json" >"$T/hs.json" || fail "simulate hetero"
expect_eq "simulate reproduces the planner's iteration time" \
	"$(grep '"iteration_s"' "$T/hs.json" | head -1)" "$(grep '"iteration_s"' "$T/hp.json")"
check "plan --strategy megatron (7b)" "$H" plan "$EX/homo-a100-8.json" --model llama2-7b --strategy megatron -o "$T/m.json"
check "megatron plan validates" "$H" validate "$T/m.json"
check "compare --json" sh -c "'$H' compare --json '$EX/paper.json' --model llama2-7b --global-batch 16 >'$T/c.json'"
check "compare lists megatron" grep -q '"megatron"' "$T/c.json"

# bad input: exit code and a one-line message naming the field
bad() { # NAME WANT_RC WANT_TEXT CMD...
	name=$1; want=$2; text=$3; shift 3
	"$@" >"$T/out" 2>"$T/err"; rc=$?
	if [ "$rc" != "$want" ]; then fail "$name: exit $rc, want $want ($(cat "$T/err"))"; return; fi
	if [ "$(wc -l <"$T/err")" -ne 1 ] || ! grep -q -- "$text" "$T/err"; then
		fail "$name: message '$(cat "$T/err")' lacks '$text'"; return; fi
	pass "$name"
}
cat >"$T/unknown.json" <<'J'
{"format":"hexiscale-cluster","version":1,"nodes":[{"name":"n1","gpu":"tpu-v9","count":2}],"inter_bw_gbps":1}
J
bad "unknown GPU type" 7 "tpu-v9" "$H" plan "$T/unknown.json" --model llama2-7b
printf '{"format": "hexiscale-cluster", "nodes": [' >"$T/broken.json"
bad "malformed JSON" 5 "broken.json" "$H" plan "$T/broken.json" --model llama2-7b
cat >"$T/zero.json" <<'J'
{"format":"hexiscale-cluster","version":1,"nodes":[{"name":"n1","gpu":"a100","count":2},{"name":"n2","gpu":"a100","count":2}],"inter_bw_gbps":0}
J
bad "zero bandwidth" 6 "inter_bw_gbps" "$H" plan "$T/zero.json" --model llama2-7b
sed 's/"inter_bw_gbps":0/"inter_bw_gbps":-3/' "$T/zero.json" >"$T/neg.json"
bad "negative bandwidth" 6 "inter_bw_gbps" "$H" plan "$T/neg.json" --model llama2-7b
cat >"$T/small.json" <<'J'
{"format":"hexiscale-cluster","version":1,"nodes":[{"name":"n1","gpu":"t4","count":1}],"inter_bw_gbps":1}
J
bad "model cannot fit" 10 "llama2-70b" "$H" plan "$T/small.json" --model llama2-70b
bad "batch not divisible" 4 "global-batch" "$H" plan "$EX/paper.json" --model llama2-7b --global-batch 10 --micro-batch-exact 4
bad "more pipelines than GPUs" 6 "max_pipelines" "$H" plan "$EX/paper.json" --model llama2-7b --max-pipelines 9
bad "huge global batch" 2 "global-batch" "$H" plan "$EX/paper.json" --model llama2-7b --global-batch 99999999999999999999
bad "negative micro-batch" 2 "micro-batch" "$H" plan "$EX/paper.json" --model llama2-7b --micro-batch -1
cat >"$T/huge.json" <<'J'
{"format":"hexiscale-cluster","version":1,"nodes":[{"name":"n1","gpu":"a100","count":100000}],"inter_bw_gbps":1}
J
bad "100k GPUs" 6 "count" "$H" plan "$T/huge.json" --model llama2-7b
bad "unknown model" 7 "llama9" "$H" plan "$EX/paper.json" --model llama9
bad "unknown strategy" 2 "strategy" "$H" plan "$EX/paper.json" --model llama2-7b --strategy fast
# an option a command does not read is refused by name (it was ignored:
# simulate --zero 2 printed the plan's own figures, show -o wrote nothing)
bad "simulate --zero" 2 "--zero does not apply to simulate" "$H" simulate --zero 2 "$T/p.json"
bad "simulate --model" 2 "--model does not apply to simulate" "$H" simulate --model llama2-70b "$T/p.json"
bad "show -o" 2 "--output does not apply to show" "$H" show -o "$T/x.json" "$T/p.json"
bad "validate --seq" 2 "--seq does not apply to validate" "$H" validate --seq 4096 "$T/p.json"
bad "compare --strategy" 2 "--strategy does not apply to compare" "$H" compare "$EX/paper.json" --model llama2-7b --strategy megatron
bad "plan --no-overlap" 2 "--no-overlap does not apply to plan" "$H" plan "$EX/paper.json" --model llama2-7b --no-overlap
bad "--micro-batch with --micro-batch-exact" 2 "exclude each other" "$H" plan "$EX/cpu-1x4.json" --model tiny-4l --micro-batch 3 --micro-batch-exact 2
check "simulate still takes its own options" "$H" simulate --cost-model reference --no-overlap --attention own --json -v "$T/p.json"
"$H" plan "$EX/cpu-1x4.json" --model tiny-4l --svg "$T/plan.svg" >/dev/null
expect_eq "plan --svg: exit 0" $? 0
check "plan --svg draws the plan (it wrote nothing)" grep -q "<svg" "$T/plan.svg"
bad "empty -o" 2 "--output: empty file name" "$H" plan "$EX/paper.json" --model llama2-7b -o ""
bad "empty --svg" 2 "--svg: empty file name" "$H" show "$top_srcdir/examples/plans/tiny-4l-cpu4.json" --svg ""
bad "exhaustive over 8 GPUs" 6 "exhaustive" "$H" plan "$EX/mixed-64.json" --model llama2-7b --strategy exhaustive
bad "validate broken plan" 5 "broken.json" "$H" validate "$T/broken.json"
# "> 0" is at least 1e-6: a subnormal bandwidth passed "> 0" and made a
# pipeline time NaN, which lost every comparison (iteration 0 s, MFU 102 %)
sed 's/"inter_bw_gbps":0/"inter_bw_gbps":1e-315/' "$T/zero.json" >"$T/sub.json"
bad "subnormal bandwidth" 6 "inter_bw_gbps: 1e-315 is out of range (must be at least 1e-06" "$H" plan "$T/sub.json" --model tiny-4l
# a profile whose measurement makes an efficiency the reader would refuse:
# refused when applied (a plan carrying it could not be read back)
mkdir -p "$T/prof"
echo '{"format":"hexiscale-profile","version":1,"host":"n1","gpus":[{"type":"a100","gemm_tflops":{"bf16":1e-6}}]}' >"$T/prof/n1.json"
sed 's/"inter_bw_gbps":0/"inter_bw_gbps":10/' "$T/zero.json" >"$T/ten.json"
bad "profile giving efficiency 3e-9" 6 "profiles: GPU type a100-80g: the measurements give efficiency" \
	"$H" plan "$T/ten.json" --model tiny-4l --profiles "$T/prof"
# --json output that jansson cannot write (a file name not UTF-8) is an
# error with a message, not empty output and exit 0
"$H" plan "$T/ten.json" --model tiny-4l -o "$T/$(printf 'x\377.json')" >/dev/null 2>&1 ||
	fail "plan written to a non-UTF-8 file name"
bad "validate --json of a non-UTF-8 file name" 6 "cannot be written" \
	"$H" validate --json "$T/$(printf 'x\377.json')"
# -v: the micro-batch search's lines name the micro-batch size (mb=, a
# divisor of the global batch above 1) and the candidate's TP degree per
# GPU type, not a cut direction and tp=[0]; refine and move lines a TP too
"$H" plan "$EX/cpu-1x4.json" --model tiny-4l --global-batch 24 -v 2>"$T/trace" >/dev/null ||
	fail "plan -v failed: $(tail -1 "$T/trace")"
check "-v: the micro-batch search is traced" grep -q "search: ubatch" "$T/trace"
check_fails "-v: every ubatch line shows mb=<divisor of 24> and its TP" sh -c \
	"grep 'search: ubatch' '$T/trace' | grep -Ev 'search: ubatch +P=[1-9][0-9]* +mb=(2|3|4|6|8|12|24) tp=\[[1-9][0-9]*\] iter '"
check "-v: ubatch tries mb=3 (a size, not a direction)" grep -Eq "search: ubatch +P=[0-9]+ +mb=3 " "$T/trace"
check_fails "-v: no refine, ubatch or move line with a TP degree 0" \
	grep -Eq 'search: (refine|ubatch|move) .*tp=\[([^]]*[,/])?0[],/]' "$T/trace"
done_testing
