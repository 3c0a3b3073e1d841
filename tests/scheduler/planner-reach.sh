#!/bin/bash
# planner-reach.sh - issue 16 end to end through hexiplan: subsets (idle
# GPUs), pipeline-count coverage and the 4096-GPU regression, determinism
# (work bound; the time budget only a recorded safety stop), errors that
# name the constraint with one exit code per class, micro-batch bounds
# (a larger bound is never worse), the memory options (zero, recompute).
. "$top_srcdir/tests/tap.sh"
H="$top_builddir/scheduler/hexiplan"
EX="$top_srcdir/examples/clusters"
[ -x "$H" ] || hard "no hexiplan binary at $H"
T=$(mktemp -d) || hard "mktemp"
BUSY=""
trap 'for p in $BUSY; do kill "$p" 2>/dev/null; done; rm -rf "$T"' EXIT

# NGPUS: 8-GPU nodes of A100 / 4090 / 3090 / 3080 Ti in turn, 0.7 GB/s
mixed4() {
	awk -v n="$1" 'BEGIN { split("a100-80g rtx4090 rtx3090 rtx3080ti", t, " ");
	printf "{\"format\":\"hexiscale-cluster\",\"version\":1,\"nodes\":[";
	for (i = 0; i < n / 8; i++)
		printf "%s{\"name\":\"n%04d\",\"gpu\":\"%s\",\"count\":8}", i ? "," : "", i, t[i % 4 + 1];
	printf "],\"inter_bw_gbps\":0.7}\n" }'
}
jget() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }
mixed4 64 >"$T/m64.json"
mixed4 4096 >"$T/m4096.json"

# ---- subsets -------------------------------------------------------------
"$H" plan "$EX/mixed-1024.json" --model llama2-7b --global-batch 2 -o "$T/s.json" >"$T/s.txt" 2>&1
expect_eq "mixed-1024, llama2-7b, global batch 2: a plan (was exit 10)" $? 0
check "the summary lists the idle GPUs" grep -q "idle: .* GPUs on .* nodes" "$T/s.txt"
expect_eq "plan file: idle + ranks = 1024 GPUs" \
	"$(jget "$T/s.json" '["world_size"] + len(json.load(open(sys.argv[1]))["idle"])')" 1024
check "validate accepts the idle list" "$H" validate "$T/s.json"
"$H" show "$T/s.json" >"$T/show.txt" || fail "show"
check "show lists the idle GPUs" grep -q "idle: " "$T/show.txt"
"$H" plan "$EX/mixed-1024.json" --model llama2-7b --global-batch 2 --use-all-gpus >"$T/e.txt" 2>&1
expect_eq "--use-all-gpus: exit 18 (the batch cannot feed the pipelines)" $? 18
check "names the batch and the pipelines" grep -q "global batch 2 .* cannot feed the 4 pipelines that 1024 GPUs need" "$T/e.txt"
"$H" plan "$T/m64.json" --model llama-30b --global-batch 24 --cost-model reference --json >"$T/a.json" || fail "64 GPUs"
"$H" plan "$T/m64.json" --model llama-30b --global-batch 24 --cost-model reference --json --use-all-gpus >"$T/b.json" || fail "64 GPUs, all"
sub=$(jget "$T/a.json" '["iteration_s"]')
all=$(jget "$T/b.json" '["iteration_s"]')
check "64 mixed GPUs: a subset beats every GPU ($sub < $all s)" awk -v a="$sub" -v b="$all" 'BEGIN { exit !(a < b) }'
check "and uses fewer than 64" awk -v w="$(jget "$T/a.json" '["world_size"]')" 'BEGIN { exit !(w < 64) }'

# ---- single GPUs idle ----------------------------------------------------
# One node of 3 A100s, a llama2-7b shape with 2 KV heads (TP <= 2), global
# batch 1: one pipeline, one micro-batch; a TP-2 stage alone beats TP 2 +
# TP 1, whose stages run one after the other.
echo '{"format":"hexiscale-cluster","version":1,"nodes":[{"name":"n1","gpu":"a100-80g","gpus":[0,1,2]}]}' >"$T/n3.json"
sed 's/"kv_heads": *[0-9]*/"kv_heads": 2/; s/"name": *"llama2-7b"/"name": "kv2-7b"/' \
	"$top_srcdir/examples/models/llama2-7b.json" >"$T/kv2.json"
"$H" plan "$T/n3.json" --model "$T/kv2.json" --global-batch 1 --json >"$T/g.json" || fail "3 GPUs, KV 2"
"$H" plan "$T/n3.json" --model "$T/kv2.json" --global-batch 1 --json --use-all-gpus >"$T/ga.json" || fail "3 GPUs, KV 2, every GPU"
"$H" plan "$T/n3.json" --model "$T/kv2.json" --global-batch 1 -o "$T/gp.json" >/dev/null || fail "3 GPUs, plan file"
sub=$(jget "$T/g.json" '["iteration_s"]')
all=$(jget "$T/ga.json" '["iteration_s"]')
check "1 node, 3 GPUs, KV 2, batch 1: one GPU idle is faster ($sub < $all s)" awk -v a="$sub" -v b="$all" 'BEGIN { exit !(a < b) }'
expect_eq "the plan: 2 training ranks, TP 2, one stage" \
	"$(jget "$T/gp.json" '["world_size"], [[s["tp"] for s in q["stages"]] for q in json.load(open(sys.argv[1]))["pipelines"]]')" "2 [[2]]"
expect_eq "its idle list: n1 GPU 2, rank 2" \
	"$(jget "$T/gp.json" '.get("idle")')" "[{'node': 'n1', 'gpu': 2, 'rank': 2}]"
expect_eq "--use-all-gpus: 3 training ranks, no idle list" "$(jget "$T/ga.json" '["world_size"]')" 3
check "validate accepts it" "$H" validate "$T/gp.json"
"$H" show "$T/gp.json" >"$T/gshow.txt" || fail "show"
check "show lists the idle GPU on the training node" grep -q "idle: 1 GPU on 1 node .*: n1 (a100-80g) 2$" "$T/gshow.txt"
# idle GPUs beside training ones, and whole idle nodes: 3 nodes of 8,
# llama2-7b at global batch 3 (three TP-2 pipelines on one A100 node; the
# case study's 13B at batch 1 was this case until the GPU trainer's
# backward scratch was priced, DECISIONS 184, and now idles a whole node)
"$H" plan "$EX/hetero-a100-4090-24.json" --model llama2-7b --global-batch 3 -o "$T/pp.json" >/dev/null || fail "24 GPUs, batch 3"
check "hetero-a100-4090-24.json, llama2-7b, batch 3: a node both trains and has an idle GPU" \
	/usr/bin/python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); tr={d["node"] for q in p["pipelines"] for s in q["stages"] for d in s["devices"]}; sys.exit(not tr & {d["node"] for d in p.get("idle", [])})' "$T/pp.json"
# a global batch too small for a whole node's pipelines: 1-layer model, KV 1
echo '{"format":"hexiscale-model","version":1,"name":"one-layer","layers":1,"hidden":48,"heads":6,"kv_heads":1,"ffn":128,"vocab":64,"seq_len":16}' >"$T/l1.json"
echo '{"format":"hexiscale-cluster","version":1,"nodes":[{"name":"n1","gpu":"a100-80g","count":8}]}' >"$T/n8.json"
"$H" plan "$T/n8.json" --model "$T/l1.json" --global-batch 2 -o "$T/l1p.json" >/dev/null 2>&1
expect_eq "1 layer, KV 1, batch 2 on 8 GPUs of one node: a plan on fewer GPUs" $? 0
"$H" plan "$T/n8.json" --model "$T/l1.json" --global-batch 2 --use-all-gpus >/dev/null 2>&1
expect_eq "and --use-all-gpus: exit 18 (the batch cannot feed 8 pipelines)" $? 18
# never worse than --use-all-gpus (same memory options, subsets only
# replace a plan when faster)
for c in "paper llama2-7b 8" "paper llama2-13b 2" "paper-case-study llama2-13b 2" "mixed-8 llama2-7b 32" \
	"hetero-a100-4090-12 llama2-13b 16" "homo-a100-8 tiny-gqa 4" "cpu-2x2 tiny-4l 8"; do
	set -- $c
	s1=$("$H" plan "$EX/$1.json" --model "$2" --global-batch "$3" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["iteration_s"])') || fail "$c"
	s2=$("$H" plan "$EX/$1.json" --model "$2" --global-batch "$3" --json --use-all-gpus | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["iteration_s"])') || fail "$c, every GPU"
	check "$1 $2 batch $3: subsets ($s1 s) never worse than every GPU ($s2 s)" awk -v a="$s1" -v b="$s2" 'BEGIN { exit !(a <= b) }'
done

# ---- pipeline counts -----------------------------------------------------
"$H" plan "$T/m4096.json" --model llama-30b --global-batch 24 --micro-batch-exact 2 --cost-model reference -v >"$T/r.txt" 2>&1
expect_eq "4096 GPUs, llama-30b, gb 24, mb 2, reference: a plan (was exit 10)" $? 0
check "12 of 12 pipelines was tried" grep -q "P=12 " "$T/r.txt"

# ---- determinism ---------------------------------------------------------
args="$T/m64.json --model llama2-13b --global-batch 48 --seed 1 --json"
"$H" plan $args >"$T/d1.json" || fail "plan idle"
for _ in 1 2; do (while :; do :; done) & BUSY="$BUSY $!"; done
"$H" plan $args >"$T/d2.json" || fail "plan under load"
for p in $BUSY; do kill "$p" 2>/dev/null; done; BUSY=""
expect_eq "same plan hash idle and under 2 busy loops" "$(jget "$T/d1.json" '["hash"]')" "$(jget "$T/d2.json" '["hash"]')"
expect_eq "stopped by convergence, not time" "$(jget "$T/d1.json" '["stopped_by"]')" "done"
"$H" plan $args --max-evals 40 >"$T/w1.json" || fail "work bound 1"
"$H" plan $args --max-evals 40 --time-budget 3600 >"$T/w2.json" || fail "work bound 2"
expect_eq "a work bound gives the same plan whatever the time budget" "$(jget "$T/w1.json" '["hash"]')" "$(jget "$T/w2.json" '["hash"]')"
expect_eq "and says it stopped by the bound" "$(jget "$T/w1.json" '["stopped_by"]')" work
"$H" plan "$EX/mixed-320.json" --model llama2-13b --global-batch 48 --time-budget 0.001 -o "$T/t.json" >/dev/null 2>"$T/t.err"
check "a tiny time budget warns on stderr" grep -q "stopped at its time budget" "$T/t.err"
expect_eq "and is recorded in the plan" "$(jget "$T/t.json" '["search"]["stopped_by"]')" time

# ---- errors name the constraint -----------------------------------------
"$H" plan "$EX/paper.json" --model llama2-70b >"$T/x.txt" 2>&1
expect_eq "llama2-70b on 8 GPUs: exit 10" $? 10
check "names the parameters and the memory" grep -q "68.98 G parameters need 1028 GiB .* the cluster's 8 GPUs have 344 GiB" "$T/x.txt"
"$H" plan "$EX/paper.json" --model llama2-13b --strategy megatron --zero 0 >"$T/x.txt" 2>&1
expect_eq "megatron llama2-13b on paper.json: exit 10" $? 10
check "names the stage, node, GPU, need and micro-batch" grep -q "stage [0-9]* on n[0-9] (rtx[0-9]* x1, 24 GiB) needs [0-9.]* GiB for [0-9]* layers at micro-batch 1" "$T/x.txt"
"$H" plan "$EX/mixed-1024.json" --model llama2-7b --global-batch 2 --strategy megatron >"$T/x.txt" 2>&1
expect_eq "megatron without a grid: exit 19" $? 19
check "names the grid's constraints" grep -q "no uniform DP x TP x PP grid" "$T/x.txt"
expect_eq "one line each" "$(wc -l <"$T/x.txt")" 1

# ---- micro-batch bounds --------------------------------------------------
for c in "$EX/paper.json llama2-7b 64" "$EX/mixed-8.json llama2-7b 32" "$EX/hetero-a100-4090-12.json llama2-13b 48"; do
	set -- $c
	prev=""
	for b in 1 2 4 8; do
		it=$("$H" plan "$1" --model "$2" --global-batch "$3" --micro-batch $b --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["iteration_s"])') || fail "$1 mb $b"
		[ -z "$prev" ] || check "$(basename "$1") $2: bound $b ($it s) no worse than the smaller ($prev s)" \
			awk -v a="$it" -v b="$prev" 'BEGIN { exit !(a <= b * (1 + 1e-9)) }'
		prev=$it
	done
done
"$H" plan "$EX/paper.json" --model llama2-7b --global-batch 10 --micro-batch 4 >/dev/null 2>&1
expect_eq "--micro-batch is a bound: need not divide the global batch" $? 0
"$H" plan "$EX/paper.json" --model llama2-7b --global-batch 10 --micro-batch-exact 4 >/dev/null 2>&1
expect_eq "--micro-batch-exact must divide it (exit 4)" $? 4

# ---- memory options ------------------------------------------------------
"$H" plan "$EX/paper.json" --model llama2-13b --zero 1 --no-recompute -o "$T/z.json" >/dev/null || fail "--zero 1"
expect_eq "--zero 1 is the plan's train.zero" "$(jget "$T/z.json" '["train"].get("zero", 0)')" 1
expect_eq "--no-recompute is the plan's train.recompute" "$(jget "$T/z.json" '["train"]["recompute"]')" False
"$H" compare "$EX/paper.json" --model llama2-13b --cost-model reference --json >"$T/c.json" || fail "compare"
check "reference: the llama2-13b case study has a uniform baseline and a speed-up" \
	/usr/bin/python3 -c 'import json,sys; r={x["strategy"]: x for x in json.load(open(sys.argv[1]))["strategies"]}; sys.exit(not (r["megatron"]["status"] == "HEXI_OK" and r["hexiscale"]["speedup_over_megatron"] > 1))' "$T/c.json"
# the memory setting that wins on the whole cluster need not win on the
# subsets: the planner tries the best two there (DECISIONS 160); mixed-64,
# llama2-7b was the case where zero 1 won the whole cluster and zero 0 the
# subsets
it() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["iteration_s"])'; }
auto=$("$H" plan "$EX/mixed-64.json" --model llama2-7b --json | it) || fail "mixed-64 auto"
for z in 0 1 2; do
	fixed=$("$H" plan "$EX/mixed-64.json" --model llama2-7b --zero $z --json | it) || fail "mixed-64 --zero $z"
	check "mixed-64 llama2-7b: the searched settings ($auto s) no worse than --zero $z ($fixed s)" \
		awk -v a="$auto" -v b="$fixed" 'BEGIN { exit !(a <= b * (1 + 1e-9)) }'
done

# ---- overlap (DECISIONS 160) ---------------------------------------------
# the runtime's overlap: zero 0 (and zero 1's reduce-scatter, DECISIONS
# 179) starts a layer as the last backward has finished it, so even a
# stage's own layers gain; zero 2 is not overlapped and --no-overlap
# starts a stage's sync after its own backward, not at the slowest
# pipeline's end, so with zero 2 both modes predict the same
"$H" plan "$EX/homo-a100-16.json" --model llama2-7b --zero 0 -o "$T/o0.json" >/dev/null || fail "homo-a100-16 zero 0"
"$H" plan "$EX/mixed-320.json" --model llama2-7b --zero 1 -o "$T/o1.json" >/dev/null || fail "mixed-320 zero 1"
"$H" plan "$EX/mixed-320.json" --model llama2-7b --zero 0 -o "$T/om.json" >/dev/null || fail "mixed-320 zero 0"
"$H" plan "$EX/mixed-320.json" --model llama2-7b --zero 2 -o "$T/o2.json" >/dev/null || fail "mixed-320 zero 2"
sim() { "$H" simulate "$@" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["iteration_s"])'; }
read -r on < <(sim "$T/o0.json") || fail "simulate o0"
read -r off < <(sim "$T/o0.json" --no-overlap) || fail "simulate o0 --no-overlap"
check "homo-a100-16, zero 0: overlap ($on s) below --no-overlap ($off s)" \
	awk -v a="$on" -v b="$off" 'BEGIN { exit !(a > 0 && a < b * (1 - 1e-6)) }'
read -r on < <(sim "$T/o1.json") || fail "simulate o1"
read -r off < <(sim "$T/o1.json" --no-overlap) || fail "simulate o1 --no-overlap"
check "mixed-320 (multi-stage pipelines), zero 1: overlapped reduce-scatter ($on s) below --no-overlap ($off s)" \
	awk -v a="$on" -v b="$off" 'BEGIN { exit !(a > 0 && a < b * (1 - 1e-6)) }'
read -r on < <(sim "$T/o2.json") || fail "simulate o2"
read -r off < <(sim "$T/o2.json" --no-overlap) || fail "simulate o2 --no-overlap"
check "mixed-320, zero 2 is not overlapped and both modes start a stage's sync at its own finish: the same prediction ($on s, $off s)" \
	awk -v a="$on" -v b="$off" 'BEGIN { exit !(a > 0 && a == b) }'
read -r on < <(sim "$T/om.json") || fail "simulate om"
read -r off < <(sim "$T/om.json" --no-overlap) || fail "simulate om --no-overlap"
check "mixed-320: overlap ($on s) below --no-overlap ($off s)" \
	awk -v a="$on" -v b="$off" 'BEGIN { exit !(a > 0 && a < b * (1 - 1e-6)) }'
done_testing
