#!/bin/sh
# hf_cli.sh - hexickpt import / export --format hf and diff on crafted
# Hugging Face directories (python3's standard library writes them; no
# torch): a model whose hidden size exceeds its vocabulary and FFN (the
# q/o projections are the largest tensors: a scratch buffer sized by
# vocab or FFN overflowed), import only into a new or empty directory,
# import --json, diff of NaN and infinite values and of a checksum error
# after an earlier difference, --step against a step directory, odd head
# sizes refused by import and export (RoPE pairs; the last head's last row
# was written one row past the buffer).  The
# sanitizer build runs it too (tests/run.sh), so an overflow fails there.
. "$top_srcdir/tests/tap.sh"
CK=$top_builddir/checkpoint/hexickpt
[ -x "$CK" ] || hard "hexickpt not built"
command -v python3 >/dev/null || skip "python3 needed to write safetensors"
T=$(mktemp -d "${TMPDIR:-/tmp}/hexickpt-hf.XXXXXX") || hard "mktemp"
trap 'rm -rf "$T"' EXIT

# mkhf DIR HIDDEN HEADS FFN VOCAB [SPECIAL]: a one-layer Llama, values from
# a fixed LCG; SPECIAL=nan puts a NaN and +-inf into the embedding.
mkhf() {
	python3 - "$@" <<'EOF'
import array, json, os, struct, sys
d, hid, heads, ffn, voc = sys.argv[1], *map(int, sys.argv[2:6])
special = sys.argv[6] if len(sys.argv) > 6 else ""
os.makedirs(d, exist_ok=True)
json.dump({"model_type": "llama", "hidden_act": "silu", "rope_theta": 10000.0,
           "rms_norm_eps": 1e-5, "hidden_size": hid, "intermediate_size": ffn,
           "num_attention_heads": heads, "num_key_value_heads": heads,
           "num_hidden_layers": 1, "vocab_size": voc,
           "max_position_embeddings": 16}, open(os.path.join(d, "config.json"), "w"))
x = 12345
def vals(n):
    global x
    out = array.array("f")
    for _ in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out.append(x / (1 << 31) - 0.5)
    return out
p = "model.layers.0."
shapes = [("model.embed_tokens.weight", [voc, hid]), (p + "input_layernorm.weight", [hid]),
          (p + "self_attn.q_proj.weight", [hid, hid]), (p + "self_attn.k_proj.weight", [hid, hid]),
          (p + "self_attn.v_proj.weight", [hid, hid]), (p + "self_attn.o_proj.weight", [hid, hid]),
          (p + "post_attention_layernorm.weight", [hid]), (p + "mlp.gate_proj.weight", [ffn, hid]),
          (p + "mlp.up_proj.weight", [ffn, hid]), (p + "mlp.down_proj.weight", [hid, ffn]),
          ("model.norm.weight", [hid]), ("lm_head.weight", [voc, hid])]
hdr, blobs, off = {}, [], 0
for name, sh in shapes:
    n = sh[0] * (sh[1] if len(sh) > 1 else 1)
    v = vals(n)
    if special == "nan" and name == "model.embed_tokens.weight":
        v[0], v[1], v[2] = float("nan"), float("inf"), float("-inf")
    b = v.tobytes()
    hdr[name] = {"dtype": "F32", "shape": sh, "data_offsets": [off, off + len(b)]}
    blobs.append(b); off += len(b)
h = json.dumps(hdr).encode()
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
EOF
}
# tensors DIR: "name sha256" of every tensor's bytes, sorted
tensors() {
	python3 - "$1/model.safetensors" <<'EOF'
import hashlib, json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); data = raw[8 + n:]
for k in sorted(x for x in h if x != "__metadata__"):
    b, e = h[k]["data_offsets"]
    print(k, h[k]["dtype"], h[k]["shape"], hashlib.sha256(data[b:e]).hexdigest())
EOF
}
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# 1. hidden 64 > vocab 16, FFN 16: import, export, the same tensors back
mkhf "$T/wide" 64 4 16 16 || hard "writing the HF directory"
check "import of a model whose hidden size exceeds vocab and FFN" \
	"$CK" import "$T/wide" -o "$T/ckw" -q
check "and verify" "$CK" verify -q "$T/ckw"
check "export --format hf of it" "$CK" export "$T/ckw" --format hf -o "$T/back" -q
tensors "$T/wide" >"$T/a"
tensors "$T/back" >"$T/b"
expect_eq "import then export: every tensor's bytes unchanged" "$(cmp -s "$T/a" "$T/b" && echo same)" same
expect_eq "12 tensors compared" "$(wc -l <"$T/b")" 12

# 2. import only into a new or empty directory
mkdir "$T/empty"
check "import into an empty existing directory" "$CK" import "$T/wide" -o "$T/empty" -q
mkhf "$T/other" 32 2 24 20 || hard "writing the second HF directory"
cp "$T/ckw/model.json" "$T/model.before"
latest=$(cat "$T/ckw/latest")
"$CK" import "$T/other" -o "$T/ckw" -q 2>"$T/err"
expect_eq "import into a checkpoint directory: refused (exit 4)" $? 4
check "message names the directory and an entry" grep -q "ckw: the directory is not empty (it holds '" "$T/err"
expect_eq "its model.json unchanged" "$(cmp -s "$T/model.before" "$T/ckw/model.json" && echo same)" same
expect_eq "its latest unchanged" "$(cat "$T/ckw/latest")" "$latest"
mkdir "$T/planted"
ln -s "$T/model.before" "$T/planted/model.json"
"$CK" import "$T/wide" -o "$T/planted" -q 2>"$T/err"
expect_eq "import into a directory holding a model.json symlink: refused" $? 4
expect_eq "the symlink's target unchanged" "$(cmp -s "$T/model.before" "$T/ckw/model.json" && echo same)" same

# 3. import --json
"$CK" import "$T/other" -o "$T/ckj" --json >"$T/out" 2>"$T/err"
expect_eq "import --json: exit 0" $? 0
expect_eq "import --json: command, step, shape" \
	"$(json "d['command'], d['output'] == '$T/ckj', d['step'], d['hidden'], d['ffn'], d['vocab']" <"$T/out")" \
	"import True 0 32 24 20"
expect_eq "import --json: nothing on stderr" "$(cat "$T/err")" ""
check "import --json: its model.json exists" test -f "$(json "d['model_json']" <"$T/out")"

# 4. diff: NaN and infinities equal to themselves, unbounded against numbers
mkhf "$T/nan" 64 4 16 16 nan || hard "writing the NaN HF directory"
check "import of a model with NaN and +-inf weights" "$CK" import "$T/nan" -o "$T/ckn" -q
"$CK" diff "$T/ckn" "$T/ckn" >"$T/out" 2>&1
expect_eq "diff of a NaN/inf checkpoint with itself: identical (exit 0)" $? 0
check "says identical" grep -q "checkpoints are identical" "$T/out"
"$CK" diff "$T/ckn" "$T/ckn" --json >"$T/out"
expect_eq "diff --json: identical, max_abs 0" \
	"$(json "d['identical'], [t['max_abs'] for t in d['tensors'] if t['name'] == 'embed.weight']" <"$T/out")" \
	"True [0.0]"
"$CK" diff "$T/ckn" "$T/ckw" --json --tolerance 1e300 >"$T/out"
expect_eq "diff --json NaN vs number: differs, 3 elements, max_abs null (no JSON infinity)" \
	"$(json "d['identical'], [(t['elements_differing'], t['max_abs']) for t in d['tensors'] if t['name'] == 'embed.weight']" <"$T/out")" \
	"False [(3, None)]"

# 5. diff: a checksum error after an earlier difference is still reported
cp -r "$T/ckn" "$T/bad"
python3 - "$T/bad/step-00000000" <<'EOF' || hard "corrupting lm_head"
import json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "MANIFEST.json")))
t = [t for t in m["tensors"] if t["name"] == "lm_head.weight"][0]
f = os.path.join(d, "rank-%05d.h5" % t["slices"][0]["rank"])
with open(f, "r+b") as h:
    h.seek(t["slices"][0]["offset"] + 5); b = h.read(1)
    h.seek(t["slices"][0]["offset"] + 5); h.write(bytes([b[0] ^ 0x40]))
EOF
"$CK" diff "$T/ckw" "$T/bad" >"$T/out" 2>"$T/err"
expect_eq "diff with a corrupt tensor after differing ones: exit 13 (checksum)" $? 13
check "the checksum error is printed" grep -q "lm_head.weight.*checksum mismatch" "$T/err"
"$CK" diff "$T/ckw" "$T/bad" --json >"$T/out" 2>"$T/err"
expect_eq "the same with --json: exit 13" $? 13
check "and the error on stderr" grep -q "checksum mismatch" "$T/err"

# 6. --step against a step directory
"$CK" info "$T/ckw/step-00000000" --step 0 -q >/dev/null 2>&1
expect_eq "info STEPDIR --step of its own step: exit 0" $? 0
"$CK" info "$T/ckw/step-00000000" --step 5 >/dev/null 2>"$T/err"
expect_eq "info STEPDIR --step of another step: exit 11" $? 11
check "message names both steps" grep -q "step-00000000: a step directory of step 0; the step asked for is 5" "$T/err"

# 7. an odd head size (hidden / heads) is refused before any tensor is
#    read: import wrote HF row d-1 of the last head one row past its buffer
for shape in "63 21" "6 2"; do
	set -- $shape
	mkhf "$T/odd$1" "$1" "$2" 16 16 || hard "writing the odd-head HF directory"
	"$CK" import "$T/odd$1" -o "$T/cko$1" -q 2>"$T/err"
	expect_eq "import of hidden $1, heads $2 (head size $(($1 / $2))): refused (exit 9)" $? 9
	check "message names config.json, the head size and why" \
		grep -q "odd$1/config.json: head size $(($1 / $2)) (hidden_size $1 / num_attention_heads $2) is odd: RoPE" "$T/err"
	check "nothing committed" test ! -e "$T/cko$1/latest"
done
#    export of a checkpoint whose tensors fit a model of head size 3 (hidden
#    6, heads 1 imported; --model says heads 2): refused, nothing created.
#    Such a model file is refused when it is read (hexi_model_validate, as
#    the runtime refuses it, exit 4); hexi_hf_export's own check stays for
#    callers that build a model in memory.
mkhf "$T/h6" 6 1 16 16 || hard "writing the hidden-6 HF directory"
check "import of hidden 6, heads 1 (head size 6)" "$CK" import "$T/h6" -o "$T/ck6" -q
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['heads']=2; d['kv_heads']=2; d['name']='odd-heads'; json.dump(d, open(sys.argv[2],'w'))" \
	"$T/ck6/model.json" "$T/m-odd.json" || hard "writing the odd-head model"
"$CK" export "$T/ck6" --model "$T/m-odd.json" --format hf -o "$T/hf-odd" -q 2>"$T/err"
expect_eq "export --format hf as a model of head size 3: refused (exit 4)" $? 4
check "message names the model file and why" \
	grep -q "m-odd.json.*head size 3 (hidden 6 / heads 2) is odd: RoPE rotates pairs" "$T/err"
check "the output directory was not created" test ! -e "$T/hf-odd"
done_testing
