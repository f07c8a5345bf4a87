"""Greedy generation in PyTorch with a KV cache: the peer of `dseek generate` in
bench/generate_vs_pytorch.sh. Loads the weights of a dseek checkpoint exported with
`dseek ckpt export --format safetensors` (dseek's tensor names, fp32; the file is read
with json + numpy, the way the format is specified), runs the prompt in one forward,
then one token per step against the cached keys and values, in fp32 eager under
torch.inference_mode, as a user of a hand-written nanoGPT-style sampler would.

Prints one JSON line: decode tokens/s (one-token steps after the prefill, the argmax
included, as dseek counts them), prefill ms, and the generated ids.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

# The safetensors reader the tests' GPT-2 reference uses (json + numpy, as the format is
# specified).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "reference"))
from gpt2_hf_reference import read_safetensors  # noqa: E402


def block(w, l, x, cache, heads):
    p = f"h.{l}."
    T, C = x.shape
    hs = C // heads
    h = F.layer_norm(x, (C,), w[p + "ln1.weight"], w[p + "ln1.bias"], eps=1e-5)
    q, k, v = F.linear(h, w[p + "attn.qkv.weight"], w[p + "attn.qkv.bias"]).split(C, dim=1)
    k_all = torch.cat([cache[0], k]) if cache else k
    v_all = torch.cat([cache[1], v]) if cache else v
    cache[:] = [k_all, v_all]
    past = k_all.shape[0] - T
    q = q.view(T, heads, hs).transpose(0, 1)
    kh = k_all.view(-1, heads, hs).transpose(0, 1)
    vh = v_all.view(-1, heads, hs).transpose(0, 1)
    att = (q @ kh.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
    if T > 1:  # causal mask of the new rows against every position so far
        mask = torch.ones(T, past + T, dtype=torch.bool).tril(diagonal=past)
        att = att.masked_fill(~mask, float("-inf"))
    y = (F.softmax(att, dim=-1) @ vh).transpose(0, 1).reshape(T, C)
    x = x + F.linear(y, w[p + "attn.proj.weight"], w[p + "attn.proj.bias"])
    h = F.layer_norm(x, (C,), w[p + "ln2.weight"], w[p + "ln2.bias"], eps=1e-5)
    h = F.gelu(F.linear(h, w[p + "mlp.fc.weight"], w[p + "mlp.fc.bias"]), approximate="tanh")
    return x + F.linear(h, w[p + "mlp.proj.weight"], w[p + "mlp.proj.bias"])


def forward(w, layers, heads, ids, start, caches):
    x = w["wte"][ids] + w["wpe"][start:start + len(ids)]
    for l in range(layers):
        x = block(w, l, x, caches[l], heads)
    x = F.layer_norm(x[-1:], (x.shape[1],), w["lnf.weight"], w["lnf.bias"], eps=1e-5)
    return (x @ w["wte"].t())[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--prompt-ids", required=True, help="token ids separated by spaces")
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    w = read_safetensors(a.weights, torch.float32)
    prompt = torch.tensor([int(t) for t in a.prompt_ids.split()], dtype=torch.long)
    context = w["wpe"].shape[0]
    out = []
    with torch.inference_mode():
        caches = [[] for _ in range(a.layers)]
        start = time.perf_counter()
        logits = forward(w, a.layers, a.heads, prompt, 0, caches)
        prefill = time.perf_counter() - start
        position = len(prompt)
        start = time.perf_counter()
        steps = 0
        while True:
            token = int(torch.argmax(logits))
            out.append(token)
            if len(out) == a.max_tokens or len(prompt) + len(out) == context:
                break
            logits = forward(w, a.layers, a.heads, torch.tensor([token]), position, caches)
            position += 1
            steps += 1
        decode = time.perf_counter() - start
    print(json.dumps({"tokens_per_s": steps / decode, "prefill_ms": prefill * 1e3,
                      "decode_steps": steps, "tokens": out}))


if __name__ == "__main__":
    main()
