#!/usr/bin/python3
"""PyTorch reference of dseek's GPT model, used by tests/unit/test_gpt_pytorch.cpp.

The C++ test writes a case file (the model shape, the flat fp32 parameter buffer in
dseek's ParamLayout order, a batch, and the optimizer settings); this script rebuilds
the same model in PyTorch (float64, eager, no fused kernels), and writes back the loss,
the gradient of every parameter, and the parameters after a few AdamW steps with
global-norm clipping, in the same flat order.

Case file (little-endian): int64 C, L, NH, T, V, B, steps; float64 weight_decay, beta1,
beta2, eps, grad_clip; float64 lr[steps]; float32 params[P]; int32 tokens[B*T];
int32 targets[B*T].
Result file: float64 loss; float64 grads[P]; float64 params_after[P];
float64 losses[steps].

With a third argument `bf16`, every linear layer (the four of each block and the tied
head) runs as dseek's train.precision = "bf16" does (runtime/model/precision_policy.hpp):
its input, weight and, in backward, output gradient rounded to bf16 (nearest even, from
their float32 values), the products and sums in float64, the bias gradient from the
unrounded output gradient; attention's products likewise (backend.hpp's
attention_forward: Q, K, V, the normalized probabilities P, and in backward dO and
dS rounded; the softmax and sum_j P dP unrounded); everything else stays float64.

With a fourth argument, an integer V_real < V: the model's vocabulary pads the data's
(llm.c's V within Vp), and the loss is F.cross_entropy over the first V_real logits only
(dseek's GptModel::set_real_vocab): the padded logits take no part in the softmax.
"""
import math
import struct
import sys

import torch
import torch.nn.functional as F


def param_shapes(C, L, T, V):
    """Names and shapes in dseek's flat order (runtime/model/param_layout.cpp)."""
    shapes = [("wte", (V, C)), ("wpe", (T, C))]
    for l in range(L):
        p = f"h.{l}."
        shapes += [(p + "ln1.weight", (C,)), (p + "ln1.bias", (C,)),
                   (p + "attn.qkv.weight", (3 * C, C)), (p + "attn.qkv.bias", (3 * C,)),
                   (p + "attn.proj.weight", (C, C)), (p + "attn.proj.bias", (C,)),
                   (p + "ln2.weight", (C,)), (p + "ln2.bias", (C,)),
                   (p + "mlp.fc.weight", (4 * C, C)), (p + "mlp.fc.bias", (4 * C,)),
                   (p + "mlp.proj.weight", (C, 4 * C)), (p + "mlp.proj.bias", (C,))]
    shapes += [("lnf.weight", (C,)), ("lnf.bias", (C,))]
    return shapes


def bf16(x):
    """x as dseek rounds it: float32 first, then bf16 (nearest even)."""
    return x.to(torch.float32).to(torch.bfloat16).to(torch.float64)


class Bf16Linear(torch.autograd.Function):
    """x @ weight.T (+ bias) on bf16-rounded operands, as the bf16 GEMM computes it."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        out = bf16(x) @ bf16(weight).T
        return out + bias if bias is not None else out

    @staticmethod
    def backward(ctx, dout):
        x, weight = ctx.saved_tensors
        d = bf16(dout)
        dx = d @ bf16(weight)
        dw = d.reshape(-1, d.shape[-1]).T @ bf16(x).reshape(-1, x.shape[-1])
        db = dout.reshape(-1, dout.shape[-1]).sum(0) if ctx.has_bias else None
        return dx, dw, db


class Bf16Attention(torch.autograd.Function):
    """Causal softmax(q k^T * scale) v with every product on bf16-rounded operands."""

    @staticmethod
    def forward(ctx, q, k, v, mask, scale):
        s = (bf16(q) @ bf16(k).transpose(-2, -1)) * scale
        p = s.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        ctx.save_for_backward(q, k, v, p)
        ctx.scale = scale
        return bf16(p) @ bf16(v)

    @staticmethod
    def backward(ctx, dy):
        q, k, v, p = ctx.saved_tensors
        dp = bf16(dy) @ bf16(v).transpose(-2, -1)
        ds = p * (dp - (p * dp).sum(-1, keepdim=True)) * ctx.scale
        dq = bf16(ds) @ bf16(k)
        dk = bf16(ds).transpose(-2, -1) @ bf16(q)
        dv = bf16(p).transpose(-2, -1) @ bf16(dy)
        return dq, dk, dv, None, None


def attention(q, k, v, mask, precision):
    scale = 1.0 / math.sqrt(q.shape[-1])
    if precision == "bf16":
        return Bf16Attention.apply(q, k, v, mask, scale)
    att = (q @ k.transpose(-2, -1)) * scale
    return att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v


def linear(x, weight, bias, precision):
    if precision == "bf16":
        return Bf16Linear.apply(x, weight, bias)
    out = x @ weight.T
    return out + bias if bias is not None else out


def gpt_loss(w, tokens, targets, C, L, NH, T, precision="fp32", real_vocab=None):
    B = tokens.shape[0]
    hs = C // NH
    x = w["wte"][tokens] + w["wpe"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        p = f"h.{l}."
        h = F.layer_norm(x, (C,), w[p + "ln1.weight"], w[p + "ln1.bias"], eps=1e-5)
        qkv = linear(h, w[p + "attn.qkv.weight"], w[p + "attn.qkv.bias"], precision)
        q, k, v = qkv.split(C, dim=2)
        q = q.view(B, T, NH, hs).transpose(1, 2)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        y = attention(q, k, v, mask, precision).transpose(1, 2).reshape(B, T, C)
        x = x + linear(y, w[p + "attn.proj.weight"], w[p + "attn.proj.bias"], precision)
        h = F.layer_norm(x, (C,), w[p + "ln2.weight"], w[p + "ln2.bias"], eps=1e-5)
        h = F.gelu(linear(h, w[p + "mlp.fc.weight"], w[p + "mlp.fc.bias"], precision),
                   approximate="tanh")
        x = x + linear(h, w[p + "mlp.proj.weight"], w[p + "mlp.proj.bias"], precision)
    x = F.layer_norm(x, (C,), w["lnf.weight"], w["lnf.bias"], eps=1e-5)
    logits = linear(x, w["wte"], None, precision)  # tied head
    if real_vocab is not None:
        logits = logits[..., :real_vocab]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    case_path, result_path = sys.argv[1], sys.argv[2]
    precision = sys.argv[3] if len(sys.argv) > 3 else "fp32"
    real_vocab = int(sys.argv[4]) if len(sys.argv) > 4 else None
    if precision not in ("fp32", "bf16"):
        sys.exit(f"gpt_reference.py: unknown precision {precision!r} (fp32 | bf16)")
    data = open(case_path, "rb").read()
    C, L, NH, T, V, B, steps = struct.unpack_from("<7q", data, 0)
    off = 56
    weight_decay, beta1, beta2, eps, grad_clip = struct.unpack_from("<5d", data, off)
    off += 40
    lrs = struct.unpack_from(f"<{steps}d", data, off)
    off += 8 * steps
    shapes = param_shapes(C, L, T, V)
    P = sum(math.prod(s) for _, s in shapes)
    flat = torch.frombuffer(bytearray(data[off:off + 4 * P]), dtype=torch.float32)
    off += 4 * P
    tokens = torch.frombuffer(bytearray(data[off:off + 4 * B * T]), dtype=torch.int32)
    off += 4 * B * T
    targets = torch.frombuffer(bytearray(data[off:off + 4 * B * T]), dtype=torch.int32)
    tokens = tokens.long().view(B, T)
    targets = targets.long().view(B, T)

    torch.set_default_dtype(torch.float64)
    w, start = {}, 0
    for name, shape in shapes:
        n = math.prod(shape)
        w[name] = flat[start:start + n].double().view(shape).clone().requires_grad_(True)
        start += n
    names = [name for name, _ in shapes]

    loss = gpt_loss(w, tokens, targets, C, L, NH, T, precision, real_vocab)
    loss.backward()
    first_loss = loss.item()
    grads = torch.cat([w[n].grad.reshape(-1) for n in names])

    # The same update dseek makes: decay on matrices and embeddings only.
    decay = [w[n] for n, s in shapes if len(s) == 2]
    no_decay = [w[n] for n, s in shapes if len(s) != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lrs[0] if steps else 0.0, betas=(beta1, beta2), eps=eps)
    losses = []
    for step in range(steps):
        if step > 0:
            opt.zero_grad()
            loss = gpt_loss(w, tokens, targets, C, L, NH, T, precision, real_vocab)
            loss.backward()
        losses.append(loss.item())
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_([w[n] for n in names], grad_clip)
        for group in opt.param_groups:
            group["lr"] = lrs[step]
        opt.step()
    after = torch.cat([w[n].detach().reshape(-1) for n in names])

    with open(result_path, "wb") as out:
        out.write(struct.pack("<d", first_loss))
        out.write(grads.double().numpy().tobytes())
        out.write(after.double().numpy().tobytes())
        out.write(struct.pack(f"<{steps}d", *losses))


if __name__ == "__main__":
    main()
