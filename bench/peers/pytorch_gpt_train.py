#!/usr/bin/python3
"""PyTorch peer of `dseek bench train`: the same GPT, trained the same way.

Trains a GPT-2 style model (token + learned position embedding, pre-LayerNorm
blocks with causal softmax attention and a 4*dim tanh-GELU MLP, final
LayerNorm, head tied to the token embedding) on random tokens with AdamW
(lr 1e-3, betas 0.9/0.95, weight decay 0.1 on 2-D weights) and global grad-norm
clipping at 1.0, in fp32 eager mode: plain nanoGPT-style ops, as users run it (the model and
the optimizer are in gpt_model.py, shared with pytorch_ddp_train.py).
Each step (forward + backward + clip + optimizer step) is timed with
time.perf_counter (on --device cuda after torch.cuda.synchronize()); after --warmup untimed steps, --steps steps are timed.

Prints ONE JSON line with the fields of dseek's, bench "train-pytorch":
tokens_per_s is the median over timed steps of batch_size*context/step_time.
Driven by bench/train_vs_pytorch.sh; run it with /usr/bin/python3 (the
interpreter that has Debian's python3-torch), and with OMP_WAIT_POLICY=PASSIVE
when --threads > 1 (see shared/notes/platform.md).
"""
import argparse
import json
import statistics
import time

import torch

from gpt_model import GPT, make_optimizer  # bench/peers/gpt_model.py, shared with the DDP peer


def synchronize(device):
    """A step's time includes its GPU work: CUDA kernels run asynchronously."""
    if device.type == "cuda":
        torch.cuda.synchronize()


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
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: forward under torch.autocast(device, bfloat16), as users run "
                         "mixed precision (fp32 master weights and optimizer)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: CUDA device 0 (bench/gpu/check.sh's peer row); each timed step "
                         "ends with torch.cuda.synchronize()")
    ap.add_argument("--attention", choices=["auto", "manual", "sdpa"], default="auto",
                    help="manual: softmax(q k^T) v as written (nanoGPT without flash); sdpa: "
                         "torch's fused scaled_dot_product_attention; auto: sdpa on cuda "
                         "where torch has it, else manual")
    a = ap.parse_args()
    if a.dim % a.heads or min(a.steps, a.dim, a.layers, a.heads, a.context, a.vocab, a.batch_size) < 1:
        ap.error("need positive sizes, steps >= 1 and dim divisible by heads")

    torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch sees no CUDA device")
    attention = a.attention
    if attention == "auto":
        fused = hasattr(torch.nn.functional, "scaled_dot_product_attention")
        attention = "sdpa" if a.device == "cuda" and fused else "manual"
    device = torch.device(a.device)
    model = GPT(a.vocab, a.context, a.dim, a.layers, a.heads, attention).to(device)
    opt = make_optimizer(model)
    gen = torch.Generator().manual_seed(1234)
    tokens = a.batch_size * a.context

    times, loss = [], float("nan")
    for step in range(a.warmup + a.steps):
        data = torch.randint(a.vocab, (a.batch_size, a.context + 1), generator=gen)
        x, y = data[:, :-1].contiguous().to(device), data[:, 1:].contiguous().to(device)
        synchronize(device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            l = model(x, y)
        l.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        synchronize(device)
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
        "precision": a.precision,
        "device": a.device if a.device == "cpu" else torch.cuda.get_device_name(0),
        "attention": attention,
        "dim": a.dim, "layers": a.layers, "heads": a.heads, "context": a.context,
        "vocab": a.vocab, "batch_size": a.batch_size,
        "steps": a.steps, "warmup": a.warmup,
        "params": sum(p.numel() for p in model.parameters()),
        "final_loss": round(loss, 4),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }, separators=(",", ":")))  # compact, as dseek's lines: bench/gpu/check.sh reads fields


if __name__ == "__main__":
    main()
