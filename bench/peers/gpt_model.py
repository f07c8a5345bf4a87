"""The GPT of dseek's PyTorch peers, shared by pytorch_gpt_train.py (one process)
and pytorch_ddp_train.py (DistributedDataParallel over gloo).

GPT-2 style: token + learned position embedding, pre-LayerNorm blocks with causal
softmax attention and a 4*dim tanh-GELU MLP, final LayerNorm, head tied to the
token embedding; plain nanoGPT-style eager ops, as users run it (attention="sdpa":
torch's fused scaled_dot_product_attention, as nanoGPT uses where torch has it -- 2.0
and later, so not Debian 12's 1.13 -- and as a GPU user would run it). make_optimizer
gives the AdamW dseek uses (lr 1e-3, betas 0.9/0.95, weight decay 0.1 on 2-D
weights only).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads, context, attention="manual"):
        super().__init__()
        self.heads = heads
        self.attention = attention
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
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp_proj(F.gelu(self.mlp_fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, context, dim, layers, heads, attention="manual"):
        super().__init__()
        if attention == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
            raise ValueError(f"attention='sdpa' needs torch >= 2.0 (this is {torch.__version__})")
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, context, attention) for _ in range(layers))
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


def make_optimizer(model):
    """AdamW as dseek runs it: decay on 2-D weights only."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
