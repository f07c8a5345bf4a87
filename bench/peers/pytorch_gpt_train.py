#!/usr/bin/python3
"""PyTorch peer of `dseek bench train`: the same GPT, trained the same way.

Trains a GPT-2 style model (token + learned position embedding, pre-LayerNorm
blocks with causal softmax attention and a 4*dim tanh-GELU MLP, final
LayerNorm, head tied to the token embedding) on random tokens with AdamW
(lr 1e-3, betas 0.9/0.95, weight decay 0.1 on 2-D weights) and global grad-norm
clipping at 1.0, in fp32 eager mode: plain nanoGPT-style ops, as users run it.
Each step (forward + backward + clip + optimizer step) is timed with
time.perf_counter; after --warmup untimed steps, --steps steps are timed.

Prints ONE JSON line with the fields of dseek's, bench "train-pytorch":
tokens_per_s is the median over timed steps of batch_size*context/step_time.
Driven by bench/train_vs_pytorch.sh; run it with /usr/bin/python3 (the
interpreter that has Debian's python3-torch), and with OMP_WAIT_POLICY=PASSIVE
when --threads > 1 (see shared/notes/platform.md).
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads, context):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp_fc = nn.Linear(dim, 4 * dim)
        self.mlp_proj = nn.Linear(4 * dim, dim)
        mask = torch.tril(torch.ones(context, context, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, context, context))

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp_proj(F.gelu(self.mlp_fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, context, dim, layers, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, context) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        for p in self.parameters():  # GPT-2 init: N(0, 0.02) weights, zero biases
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head, no bias
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6, help="timed steps")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    a = ap.parse_args()
    if a.dim % a.heads or min(a.steps, a.dim, a.layers, a.heads, a.context, a.vocab, a.batch_size) < 1:
        ap.error("need positive sizes, steps >= 1 and dim divisible by heads")

    torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    model = GPT(a.vocab, a.context, a.dim, a.layers, a.heads)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(1234)
    tokens = a.batch_size * a.context

    times, loss = [], float("nan")
    for step in range(a.warmup + a.steps):
        data = torch.randint(a.vocab, (a.batch_size, a.context + 1), generator=gen)
        x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        l = model(x, y)
        l.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        loss = l.item()
        if step >= a.warmup:
            times.append(dt)

    print(json.dumps({
        "bench": "train-pytorch",
        "tokens_per_s": round(statistics.median(tokens / t for t in times), 1),
        "step_ms_median": round(1e3 * statistics.median(times), 2),
        "step_ms": [round(1e3 * t, 2) for t in times],
        "threads": a.threads,
        "dim": a.dim, "layers": a.layers, "heads": a.heads, "context": a.context,
        "vocab": a.vocab, "batch_size": a.batch_size,
        "steps": a.steps, "warmup": a.warmup,
        "params": sum(p.numel() for p in model.parameters()),
        "final_loss": round(loss, 4),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }))


if __name__ == "__main__":
    main()
