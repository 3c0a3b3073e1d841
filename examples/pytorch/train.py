#!/usr/bin/python3
"""train.py - the tiny Llama-style model of hexitrain(1), in PyTorch, on a
HexiScale plan: tensor parallelism inside each stage, a pipeline per data-
parallel replica (stages of different TP degrees, pipelines of different
depths and batch shares), and the plan's chunked gradient sync.

Run it as every task of a HexiScale step (examples/pytorch/train.sbatch):

    srun --hexiscale=auto /usr/bin/python3 examples/pytorch/train.py --json

It reproduces hexitrain's numbers: the same deterministic initialisation
(runtime/init.c), the same synthetic corpus (runtime/data.c) or the same
samples of a --data text file, the same sample order (sample k*G + ...
of step k), loss (mean token cross-entropy over the global batch), global-
norm clipping and AdamW/SGD.  So on one plan the losses of both agree to
rounding (tests/spank/pytorch.sh checks 1e-4).  The pipeline schedule here
is the simple one (all forwards, then all backwards): the gradients do not
depend on the schedule.  Only the gloo backend on CPU is exercised.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ in a shared source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hexiscale_torch as hx  # noqa: E402

NORM_EPS = 1e-5  # runtime/rt_ops.h RT_NORM_EPS
ROPE_THETA = 10000.0  # RT_ROPE_THETA
M64 = (1 << 64) - 1

# ---- hexitrain's deterministic initialisation and data -------------------


def mix64(x):
    """splitmix64 finaliser on a Python int (runtime/init.c)."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def mix64_np(x):
    """mix64 on a uint64 array (numpy wraps modulo 2^64)."""
    u = np.uint64
    x = x + u(0x9E3779B97F4A7C15)
    x = (x ^ (x >> u(30))) * u(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> u(27))) * u(0x94D049BB133111EB)
    return x ^ (x >> u(31))


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for c in s.encode():
        h = ((h ^ c) * 0x100000001B3) & M64
    return h


def init_std(md, name):
    """rt_init_std: the standard deviation of a tensor (0: all ones)."""
    C, L = md["hidden"], max(md["layers"], 1)
    if name.endswith("norm.weight"):
        return 0.0
    if name == "embed.weight":
        return 1.0
    if name.endswith(".attn.wo"):
        return 1.0 / math.sqrt(C * 2.0 * L)
    if name.endswith(".mlp.w_down"):
        return 1.0 / math.sqrt(md["ffn"] * 2.0 * L)
    return 1.0 / math.sqrt(C)


def init_tensor(name, row_begin, row_end, ncols, std, seed):
    """rt_init_tensor: rows [row_begin, row_end) of a (rows, ncols) tensor."""
    n = (row_end - row_begin) * ncols
    if std <= 0.0:
        return np.ones(n, dtype=np.float32)
    with np.errstate(over="ignore"):
        key = mix64(seed ^ mix64(fnv1a64(name)))
        idx = np.arange(row_begin * ncols, row_begin * ncols + n,
                        dtype=np.uint64)
        x = mix64_np(np.uint64(key) + idx * np.uint64(0xD1B54A32D192ED03))
    u = (x >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    a = np.float32(np.sqrt(np.float32(3.0))) * np.float32(std)
    return (np.float32(2.0) * u - np.float32(1.0)) * a


def synthetic_sample(seed, vocab, T, sample):
    """hexi_rt_data_sample: T+1 tokens of the synthetic corpus."""
    vocab = max(vocab, 1)
    key = mix64(mix64(seed) ^ (sample & M64))
    stride = 1 + key % 7
    tok = [mix64(key) % vocab]
    for t in range(1, T + 1):
        h = mix64((key + t * 0xD1B54A32D192ED03) & M64)
        tok.append((h >> 8) % vocab if h & 7 == 0 else (tok[-1] + stride) % vocab)
    return tok


def permute(i, n, key):
    """rt_data_permute (runtime/data.c): a keyed bijection of 0..n-1."""
    if n <= 1:
        return 0
    k = 1
    while k < 64 and (1 << k) < n:
        k += 1
    mask = (1 << k) - 1
    x = i
    while True:
        for r in range(4):
            rk = mix64((key + r) & M64)
            x = (x * (rk | 1) + (rk >> 17)) & mask
            x ^= x >> ((k + 1) // 2)
        if x < n:
            return x


def data_window(seed, nwindows, sample):
    """rt_data_window: sample -> window, a new shuffle every epoch."""
    epoch = sample // nwindows
    key = mix64((seed ^ mix64((epoch + 0x5851F42D) & M64)) & M64)
    return permute(sample % nwindows, nwindows, key)


def text_sample(tokens, vocab, T, sample, seed):
    """hexitrain --data (hexiscale-data(5)): the T+1 tokens of window
    data_window(sample) at stride T; a token outside the vocabulary is an
    error, as in hexitrain."""
    w = data_window(seed, (len(tokens) - 1) // T, sample)
    seq = list(tokens[w * T:w * T + T + 1])
    for i, v in enumerate(seq):
        if v >= vocab:
            raise hx.PlanError(f"--data: token {v} at position {w * T + i} "
                               f"is outside the model's vocabulary ({vocab})")
    return seq


def read_tokens(path, fmt):
    """A token file (hexiscale-data(5): 1024-byte header, magic 20240520,
    version 1 uint16, version 2 width 2 or 4) or, with fmt "bytes", the
    raw bytes."""
    with open(path, "rb") as f:
        raw = f.read()
    if fmt == "bytes":
        return raw
    hdr = np.frombuffer(raw[:1024], dtype="<u4")
    if len(raw) < 1024 or hdr[0] != 20240520 or hdr[1] not in (1, 2):
        raise hx.PlanError(f"--data {path}: not a token file (raw text "
                           "needs --data-format bytes)")
    if hdr[1] == 1:
        n, width = int(hdr[2]), 2
    else:
        n = int(hdr[2]) | int(hdr[3]) << 32
        width = int(hdr[4])
    dt = "<u2" if width == 2 else "<u4"
    return np.frombuffer(raw[1024:1024 + n * width], dtype=dt).tolist()


# ---- one stage shard ------------------------------------------------------


def split(n, t, r):
    """hexi_layout_split: rows of rank r of t."""
    return (r * n) // t, ((r + 1) * n) // t


class Stage(torch.nn.Module):
    """Layers [layer_begin, layer_end) for TP rank tp_rank of tp_size, with
    the embedding on the first stage and final norm + LM head on the last.
    Parameters are the doc/LAYOUT.md shards, stored as hexitrain stores
    them; self.shards maps each name to (parameter, first row held)."""

    def __init__(self, md, role, seed, tp_group):
        super().__init__()
        self.md, self.role, self.tp = md, role, tp_group
        C, H, KV = md["hidden"], md["heads"], md["kv_heads"]
        self.hs, G = C // H, H // KV
        kb, ke = split(KV, role.tp_size, role.tp_rank)
        fb, fe = split(md["ffn"], role.tp_size, role.tp_rank)
        self.nkv, self.nh = ke - kb, (ke - kb) * G
        self.shards, self.replicated = {}, set()
        self.seed = seed
        if role.first:
            self._param("embed.weight", md["vocab"], C, 0, md["vocab"], True)
        hs = self.hs
        for l in range(role.layer_begin, role.layer_end):
            p = f"layers.{l}."
            self._param(p + "attn_norm.weight", C, 1, 0, C, True)
            self._param(p + "attn.wq", H * hs, C, kb * G * hs, ke * G * hs)
            self._param(p + "attn.wk", KV * hs, C, kb * hs, ke * hs)
            self._param(p + "attn.wv", KV * hs, C, kb * hs, ke * hs)
            self._param(p + "attn.wo", H * hs, C, kb * G * hs, ke * G * hs)
            self._param(p + "mlp_norm.weight", C, 1, 0, C, True)
            self._param(p + "mlp.w_gate", md["ffn"], C, fb, fe)
            self._param(p + "mlp.w_up", md["ffn"], C, fb, fe)
            self._param(p + "mlp.w_down", md["ffn"], C, fb, fe)
        if role.last:
            self._param("final_norm.weight", C, 1, 0, C, True)
            self._param("lm_head.weight", md["vocab"], C, 0, md["vocab"], True)

    def _param(self, name, rows, cols, r0, r1, replicated=False):
        w = init_tensor(name, r0, r1, cols, init_std(self.md, name), self.seed)
        shape = (r1 - r0, cols) if cols > 1 else (r1 - r0,)
        p = torch.nn.Parameter(torch.from_numpy(w.reshape(shape)).clone())
        self.register_parameter(name.replace(".", "_"), p)
        self.shards[name] = (p, r0)
        if replicated:
            self.replicated.add(name)

    def w(self, name):
        return self.shards[name][0]

    def rmsnorm(self, x, weight):
        ss = x.double().pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(ss + NORM_EPS).float() * weight

    def rope(self, x):
        """Rotate the pairs (2i, 2i+1) of x (B,T,nh,hs) by t*theta^(-2i/hs)."""
        T, hs = x.shape[1], x.shape[3]
        i = torch.arange(hs // 2, dtype=torch.float64)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * \
            ROPE_THETA ** (-2.0 * i / hs)
        cs = ang.cos().float()[None, :, None, :]
        sn = ang.sin().float()[None, :, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * cs - x1 * sn, x0 * sn + x1 * cs), -1) \
            .flatten(-2)

    def block(self, x, l):
        B, T, C = x.shape
        p, hs = f"layers.{l}.", self.hs
        ln1 = hx.tp_copy(self.rmsnorm(x, self.w(p + "attn_norm.weight")),
                         self.tp)
        q = (ln1 @ self.w(p + "attn.wq").t()).view(B, T, self.nh, hs)
        k = (ln1 @ self.w(p + "attn.wk").t()).view(B, T, self.nkv, hs)
        v = (ln1 @ self.w(p + "attn.wv").t()).view(B, T, self.nkv, hs)
        q, k = self.rope(q), self.rope(k)
        G = self.nh // self.nkv
        k = k.repeat_interleave(G, dim=2)
        v = v.repeat_interleave(G, dim=2)
        att = (q.transpose(1, 2) @ k.transpose(1, 2).transpose(-1, -2)) \
            / math.sqrt(hs)  # (B,nh,T,T)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v.transpose(1, 2)).transpose(1, 2).reshape(B, T, -1)
        xmid = x + hx.tp_reduce(y @ self.w(p + "attn.wo"), self.tp)
        ln2 = hx.tp_copy(self.rmsnorm(xmid, self.w(p + "mlp_norm.weight")),
                         self.tp)
        gate = ln2 @ self.w(p + "mlp.w_gate").t()
        up = ln2 @ self.w(p + "mlp.w_up").t()
        h = F.silu(gate) * up
        return xmid + hx.tp_reduce(h @ self.w(p + "mlp.w_down"), self.tp)

    def forward(self, x):
        """x: tokens (B,T) on the first stage, else activations (B,T,C)."""
        if self.role.first:
            x = F.embedding(x, self.w("embed.weight"))
        for l in range(self.role.layer_begin, self.role.layer_end):
            x = self.block(x, l)
        if self.role.last:
            x = self.rmsnorm(x, self.w("final_norm.weight"))
            x = x @ self.w("lm_head.weight").t()  # logits (B,T,V)
        return x


# ---- the training step ----------------------------------------------------


class Trainer:
    def __init__(self, plan, role, groups, args):
        self.plan, self.role, self.g, self.a = plan, role, groups, args
        self.md = plan["model"]
        self.T = self.md["seq_len"]
        self.stage = Stage(self.md, role, args.seed, groups.tp)
        self.text = None
        if args.data:
            self.text = read_tokens(args.data, args.data_format)
            if len(self.text) < self.T + 2:
                raise hx.PlanError(f"--data {args.data}: too short")
        self.step_no = 0
        self.m = {n: torch.zeros_like(p) for n, (p, _) in
                  self.stage.shards.items()}
        self.v = {n: torch.zeros_like(p) for n, (p, _) in
                  self.stage.shards.items()}

    def micro_batch(self, mb):
        """Tokens and targets (mbs,T) of micro-batch mb of this pipeline."""
        r, T, V = self.role, self.T, self.md["vocab"]
        base = self.step_no * r.global_batch + r.sample_offset + \
            mb * r.micro_batch_size
        seqs = []
        for j in range(r.micro_batch_size):
            if self.text is None:
                seqs.append(synthetic_sample(self.a.seed, V, T, base + j))
            else:
                seqs.append(text_sample(self.text, V, T, base + j,
                                               self.a.seed))
        s = torch.tensor(seqs, dtype=torch.long)
        return s[:, :T], s[:, 1:]

    def act_shape(self):
        return (self.role.micro_batch_size, self.T, self.md["hidden"])

    def recv_from(self, ranks, shape):
        """A tensor sent by the leader of a neighbouring stage."""
        t = torch.empty(shape)
        dist.recv(t, src=ranks[0])
        return t

    def send_to(self, t, ranks):
        """The leader (TP rank 0) sends to every rank of the neighbour."""
        if self.role.tp_rank == 0:
            for dst in ranks:
                dist.send(t.contiguous(), dst=dst)

    def pipeline(self):
        """All forwards, then all backwards; returns this stage's loss sum."""
        r, g = self.role, self.g
        saved, loss_sum = [], 0.0
        for mb in range(r.micro_batches):
            tok, tgt = self.micro_batch(mb)
            x = tok if r.first else \
                self.recv_from(g.prev_ranks, self.act_shape()).requires_grad_()
            y = self.stage(x)
            if r.last:
                ce = F.cross_entropy(y.reshape(-1, y.shape[-1]),
                                     tgt.reshape(-1), reduction="sum")
                loss_sum += ce.item() / self.T
                y = ce / self.T / r.global_batch
            else:
                self.send_to(y.detach(), g.next_ranks)
            saved.append((x, y))
        for x, y in reversed(saved):
            if r.last:
                y.backward()
            else:
                y.backward(self.recv_from(g.next_ranks, y.shape))
            if not r.first:
                self.send_to(x.grad, g.prev_ranks)
        return loss_sum

    def grad_norm(self):
        """Global gradient norm, each element of the model counted once:
        pipeline 0 holds the whole model after the sync, TP rank 0 the
        replicated tensors."""
        s = torch.zeros(1, dtype=torch.float64)
        if self.role.pipeline == 0:
            for n, (p, _) in self.stage.shards.items():
                if n in self.stage.replicated and self.role.tp_rank != 0:
                    continue
                s += p.grad.double().pow(2).sum()
        dist.all_reduce(s)
        return math.sqrt(s.item())

    def optimizer(self):
        a = self.a
        self.opt_step = getattr(self, "opt_step", 0) + 1
        c1 = 1.0 - a.beta1 ** self.opt_step
        c2 = 1.0 - a.beta2 ** self.opt_step
        with torch.no_grad():
            for n, (p, _) in self.stage.shards.items():
                if a.optimizer == "sgd":
                    p -= a.lr * p.grad
                    continue
                m, v = self.m[n], self.v[n]
                m.mul_(a.beta1).add_((1 - a.beta1) * p.grad)
                v.mul_(a.beta2).add_((1 - a.beta2) * p.grad * p.grad)
                wd = a.weight_decay if p.dim() == 2 else 0.0
                p -= a.lr * ((m / c1) / ((v / c2).sqrt() + a.eps) + wd * p)

    def step(self):
        for p, _ in self.stage.shards.values():
            p.grad = None
        loss_sum = self.pipeline()
        for p, _ in self.stage.shards.values():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        hx.sync_gradients(self.g, self.stage.shards,
                          lambda n: n in self.stage.replicated,
                          self.role.tp_size)
        # the global loss: last-stage leaders hold their pipeline's sum
        lead = self.role.last and self.role.tp_rank == 0
        lt = torch.tensor([loss_sum if lead else 0.0], dtype=torch.float64)
        dist.all_reduce(lt)
        gnorm = self.grad_norm()
        if self.a.clip > 0 and gnorm > self.a.clip:
            for p, _ in self.stage.shards.values():
                p.grad.mul_(self.a.clip / (gnorm + 1e-6))
        self.optimizer()
        self.step_no += 1
        return lt.item() / self.role.global_batch, gnorm


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Train hexitrain's tiny Llama on a HexiScale plan with "
        "torch.distributed (gloo, CPU).")
    ap.add_argument("--plan", help="plan file (default: $HEXISCALE_PLAN)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--data", help="token file (hexiscale-data(5)), or raw "
                    "bytes with --data-format bytes (default: hexitrain's "
                    "synthetic corpus)")
    ap.add_argument("--data-format", choices=["tokens", "bytes"],
                    default="tokens")
    ap.add_argument("--json", action="store_true",
                    help="one JSON object per step on stdout (rank 0)")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(1)
    try:
        plan, role, groups = hx.init("gloo", args.plan)
        if role.idle:  # hexiscale-env(7): in no group, trains nothing
            print(f"train.py: rank {role.rank}: idle in plan {plan['hash']}"
                  f": trains nothing, exits 0", file=sys.stderr)
            return 0
        tr = Trainer(plan, role, groups, args)
    except hx.PlanError as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 1
    if role.rank == 0 and not args.json:
        print(f"train.py: {plan['model']['name']}, {role.world_size} ranks, "
              f"{role.npipelines} pipelines, plan {plan['hash']}")
    for _ in range(args.steps):
        loss, gnorm = tr.step()
        if role.rank != 0:
            continue
        if args.json:
            print(json.dumps({"step": tr.step_no, "loss": loss,
                              "grad_norm": gnorm}), flush=True)
        else:
            print(f"step {tr.step_no:4d}  loss {loss:.6f}  gnorm {gnorm:.4f}",
                  flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
