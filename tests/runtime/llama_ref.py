#!/usr/bin/python3
"""llama_ref.py - an independent Llama in plain PyTorch (float64), reading
and writing Hugging Face directories (config.json + *.safetensors, parsed
and written by hand here), for tests/runtime/hf_torch.sh.  Not HexiScale
code and no transformers package: HF's LlamaForCausalLM semantics
(rotate_half RoPE, RMSNorm, SwiGLU, GQA by repeat_kv, untied lm_head).

  llama_ref.py loss HF_DIR TOKENS B   mean loss over windows 0..B-1
  llama_ref.py write HF_DIR SEED      a random Llama (2 safetensors shards)
"""
import glob, json, os, struct, sys
import torch

DT = {"F32": (torch.float32, 4), "F16": (torch.float16, 2), "BF16": (torch.bfloat16, 2)}


def load_st(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        dt = DT[v["dtype"]][0]
        buf = bytearray(raw[8 + n + b:8 + n + e])
        t = torch.frombuffer(buf, dtype=dt) if e > b else torch.zeros(0, dtype=dt)
        out[k] = t.reshape(v["shape"]).to(torch.float64)
    return out


def save_st(path, tensors):
    hdr, off, blobs = {}, 0, []
    for k, t in tensors.items():
        b = t.to(torch.float32).contiguous().numpy().tobytes()
        hdr[k] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rot_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def forward(c, W, idx):  # idx (B,T) -> logits (B,T,V)
    B, T = idx.shape
    H, KV = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    d = c["hidden_size"] // H
    inv = 1.0 / (c.get("rope_theta", 10000.0) ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    fr = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    cos, sin = torch.cat((fr, fr), -1).cos(), torch.cat((fr, fr), -1).sin()
    eps = c["rms_norm_eps"]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    x = W["model.embed_tokens.weight"][idx]
    for l in range(c["num_hidden_layers"]):
        p = lambda n: W["model.layers.%d.%s" % (l, n)]
        h = rms(x, p("input_layernorm.weight"), eps)
        q = (h @ p("self_attn.q_proj.weight").T).view(B, T, H, d).transpose(1, 2)
        k = (h @ p("self_attn.k_proj.weight").T).view(B, T, KV, d).transpose(1, 2)
        v = (h @ p("self_attn.v_proj.weight").T).view(B, T, KV, d).transpose(1, 2)
        q, k = q * cos + rot_half(q) * sin, k * cos + rot_half(k) * sin
        k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        a = torch.softmax(q @ k.transpose(-1, -2) / d ** 0.5 + mask, -1) @ v
        x = x + a.transpose(1, 2).reshape(B, T, H * d) @ p("self_attn.o_proj.weight").T
        h = rms(x, p("post_attention_layernorm.weight"), eps)
        g = torch.nn.functional.silu(h @ p("mlp.gate_proj.weight").T)
        x = x + (g * (h @ p("mlp.up_proj.weight").T)) @ p("mlp.down_proj.weight").T
    return rms(x, W["model.norm.weight"], eps) @ W["lm_head.weight"].T


def tokens(path):
    with open(path, "rb") as f:
        hdr = struct.unpack("<256I", f.read(1024))
        w = hdr[4] if hdr[1] == 2 else 2
        data = f.read()
    return torch.tensor(struct.unpack("<%d%s" % (len(data) // w, "H" if w == 2 else "I"), data))


def loss(d, tok, B):
    c = json.load(open(os.path.join(d, "config.json")))
    W = {}
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        W.update(load_st(f))
    T = c["max_position_embeddings"]
    t = tokens(tok)
    win = torch.stack([t[i * T:i * T + T + 1] for i in range(B)])
    lg = forward(c, W, win[:, :-1])
    return torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), win[:, 1:].reshape(-1)).item()


def write(d, seed):
    g = torch.Generator().manual_seed(seed)
    C, F, H, KV, L, V, T = 48, 96, 4, 2, 2, 256, 32
    c = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": C,
         "intermediate_size": F, "num_attention_heads": H, "num_key_value_heads": KV,
         "num_hidden_layers": L, "vocab_size": V, "max_position_embeddings": T,
         "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
         "tie_word_embeddings": False}
    r = lambda *s: torch.randn(*s, generator=g) * 0.1
    n = lambda: 1 + torch.randn(C, generator=g) * 0.1
    W = {"model.embed_tokens.weight": r(V, C), "model.norm.weight": n(), "lm_head.weight": r(V, C)}
    for l in range(L):
        pre = "model.layers.%d." % l
        W.update({pre + "input_layernorm.weight": n(), pre + "post_attention_layernorm.weight": n(),
                  pre + "self_attn.q_proj.weight": r(C, C), pre + "self_attn.k_proj.weight": r(KV * C // H, C),
                  pre + "self_attn.v_proj.weight": r(KV * C // H, C), pre + "self_attn.o_proj.weight": r(C, C),
                  pre + "mlp.gate_proj.weight": r(F, C), pre + "mlp.up_proj.weight": r(F, C),
                  pre + "mlp.down_proj.weight": r(C, F)})
    os.makedirs(d, exist_ok=True)
    json.dump(c, open(os.path.join(d, "config.json"), "w"))
    keys = sorted(W)
    save_st(os.path.join(d, "model-00001-of-00002.safetensors"), {k: W[k] for k in keys[::2]})
    save_st(os.path.join(d, "model-00002-of-00002.safetensors"), {k: W[k] for k in keys[1::2]})


if __name__ == "__main__":
    if sys.argv[1] == "loss":
        print("%.9g" % loss(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    else:
        write(sys.argv[2], int(sys.argv[3]))
