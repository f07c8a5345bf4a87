"""An independent GPT-2 loader and forward, written against the published GPT-2 layout
(Hugging Face transformers' GPT2LMHeadModel / OpenAI's checkpoints), not against dseek:
the test of `dseek ckpt export --format hf` (tests/unit/test_hf_gpt2.cpp).

  python3 gpt2_hf_reference.py DIR IDS_FILE OUT_FILE

Reads DIR/config.json and DIR/model.safetensors (json + numpy, the format as specified;
F32 or BF16), checks every tensor name and shape GPT-2 of that config has (Conv1D weights
stored (in, out)), runs the forward in float64 (PyTorch, Debian's python3-torch) on the
int32 ids of IDS_FILE (one sequence) and writes the float32 logits (T, vocab) to
OUT_FILE. Prints "layout ok" and the config's sizes.
"""
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F


def read_safetensors(path, dtype=torch.float64):
    """Every tensor of a safetensors file (F32 or BF16), as torch tensors of `dtype`;
    also the reader of bench/peers/pytorch_gpt_generate.py."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = data[8 + n + b:8 + n + e]
        if t["dtype"] == "F32":
            values = np.frombuffer(raw, dtype="<f4")
        elif t["dtype"] == "BF16":
            values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{name}: dtype {t['dtype']}")
        out[name] = torch.from_numpy(values.copy()).to(dtype).view(t["shape"])
    return out


def main():
    directory, ids_file, out_file = sys.argv[1:4]
    cfg = json.load(open(f"{directory}/config.json"))
    assert cfg["model_type"] == "gpt2" and cfg["architectures"] == ["GPT2LMHeadModel"], cfg
    assert cfg["activation_function"] == "gelu_new" and cfg["tie_word_embeddings"], cfg
    C, L, NH, V, P = cfg["n_embd"], cfg["n_layer"], cfg["n_head"], cfg["vocab_size"], cfg["n_positions"]
    eps = cfg["layer_norm_epsilon"]
    w = read_safetensors(f"{directory}/model.safetensors")
    # The published layout: every name and shape, nothing else (the head is tied).
    expected = {"transformer.wte.weight": [V, C], "transformer.wpe.weight": [P, C],
                "transformer.ln_f.weight": [C], "transformer.ln_f.bias": [C]}
    for l in range(L):
        p = f"transformer.h.{l}."
        expected.update({p + "ln_1.weight": [C], p + "ln_1.bias": [C],
                         p + "attn.c_attn.weight": [C, 3 * C], p + "attn.c_attn.bias": [3 * C],
                         p + "attn.c_proj.weight": [C, C], p + "attn.c_proj.bias": [C],
                         p + "ln_2.weight": [C], p + "ln_2.bias": [C],
                         p + "mlp.c_fc.weight": [C, 4 * C], p + "mlp.c_fc.bias": [4 * C],
                         p + "mlp.c_proj.weight": [4 * C, C], p + "mlp.c_proj.bias": [C]})
    assert set(w) == set(expected), sorted(set(w) ^ set(expected))
    for name, shape in expected.items():
        assert list(w[name].shape) == shape, (name, list(w[name].shape), shape)
    print("layout ok", C, L, NH, V, P, cfg["torch_dtype"], cfg["eos_token_id"])

    def conv1d(x, name):  # GPT-2's Conv1D: x @ W + b, W is (in, out)
        return x @ w[name + ".weight"] + w[name + ".bias"]

    ids = torch.from_numpy(np.fromfile(ids_file, dtype="<i4").astype(np.int64))
    T, hs = len(ids), C // NH
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        p = f"transformer.h.{l}."
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps=eps)
        q, k, v = conv1d(h, p + "attn.c_attn").split(C, dim=-1)
        q, k, v = (t.view(T, NH, hs).transpose(0, 1) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(0, 1).reshape(T, C)
        x = x + conv1d(y, p + "attn.c_proj")
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps=eps)
        h = conv1d(h, p + "mlp.c_fc")
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)))
        x = x + conv1d(h, p + "mlp.c_proj")
    x = F.layer_norm(x, (C,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps=eps)
    logits = x @ w["transformer.wte.weight"].t()
    logits.numpy().astype("<f4").tofile(out_file)


if __name__ == "__main__":
    main()
