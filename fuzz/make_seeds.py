#!/usr/bin/python3
"""Writes the seed corpora of the file-reading fuzz targets (fuzz/corpus/<target>/):
small valid files in each reader's format, written here from the published formats,
plus, for the checkpoint loader, a checkpoint dseek itself writes (`dseek ckpt import`
of the HF seed). Run from the repository root after a build:

    fuzz/make_seeds.py [BUILD_DIR]     # default build; needs BUILD_DIR/bin/dseek

The bundles: hf_import and checkpoint_loader read several files from one input, as
fuzz/fuzz_files.hpp's unbundle() splits it: for each file a 2-byte little-endian name
length, the name, a 4-byte little-endian size, the bytes.
"""
import json
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = ROOT / "fuzz" / "corpus"
BUILD = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build"


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype "F32"|"BF16", shape, raw bytes)]"""
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def f32(values):
    return struct.pack(f"<{len(values)}f", *values)


def bf16(values):
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def bundle(files):
    out = b""
    for name, raw in files:
        out += struct.pack("<H", len(name)) + name.encode() + struct.pack("<I", len(raw)) + raw
    return out


def shard(width, tokens):
    body = b"".join(t.to_bytes(width, "little") for t in tokens)
    return b"DSEEKTOK" + struct.pack("<IIQQ", 1, width, len(tokens), 0) + body


# GPT-2 with n_embd 4, n_layer 1, n_head 2, vocab 8, n_positions 4.
D, V, C = 4, 8, 4
def gpt2_tensors():
    shapes = [("wte.weight", [V, D]), ("wpe.weight", [C, D]),
              ("h.0.ln_1.weight", [D]), ("h.0.ln_1.bias", [D]),
              ("h.0.attn.c_attn.weight", [D, 3 * D]), ("h.0.attn.c_attn.bias", [3 * D]),
              ("h.0.attn.c_proj.weight", [D, D]), ("h.0.attn.c_proj.bias", [D]),
              ("h.0.ln_2.weight", [D]), ("h.0.ln_2.bias", [D]),
              ("h.0.mlp.c_fc.weight", [D, 4 * D]), ("h.0.mlp.c_fc.bias", [4 * D]),
              ("h.0.mlp.c_proj.weight", [4 * D, D]), ("h.0.mlp.c_proj.bias", [D]),
              ("ln_f.weight", [D]), ("ln_f.bias", [D])]
    out = []
    for i, (name, shape) in enumerate(shapes):
        n = 1
        for s in shape:
            n *= s
        out.append(("transformer." + name, "F32", shape, f32([0.01 * ((i + j) % 7 - 3) for j in range(n)])))
    return out


CONFIG = json.dumps({"model_type": "gpt2", "n_embd": D, "n_layer": 1, "n_head": 2, "vocab_size": V,
                     "n_positions": C, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
                     "tie_word_embeddings": True}).encode()


def write(target, name, raw):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(raw)


def main():
    write("safetensors", "f32_bf16.safetensors",
          safetensors([("a", "F32", [2, 3], f32([1, 2, 3, 4, 5, 6])), ("b", "BF16", [4], bf16([1, -2, 0.5, 3]))],
                      {"format": "pt"}))
    write("safetensors", "empty_shape.safetensors", safetensors([("s", "F32", [], f32([7]))]))
    # The inputs of fixed bugs (tests/unit/test_file_reader_bounds.cpp): 2^33 x 2^31 floats,
    # whose byte count wraps to 0; a config whose n_embd no weights file backs.
    write("safetensors", "overflow_shape.safetensors",
          safetensors([("w", "F32", [1 << 33, 1 << 31], b"")]))
    model = safetensors(gpt2_tensors(), {"format": "pt"})
    absurd = json.loads(CONFIG)
    absurd["n_embd"] = 1 << 40
    write("hf_import", "absurd_n_embd.bin",
          bundle([("config.json", json.dumps(absurd).encode()), ("model.safetensors", model)]))
    write("hf_import", "gpt2_tiny.bin", bundle([("config.json", CONFIG), ("model.safetensors", model)]))
    write("token_shard", "bytes_u16.bin", shard(2, [104, 101, 108, 108, 111, 0, 119]))
    write("token_shard", "cl100k_u32.bin", shard(4, [15339, 1917, 100257, 0]))
    write("token_shard", "empty.bin", shard(2, []))
    dseek = BUILD / "bin" / "dseek"
    with tempfile.TemporaryDirectory() as scratch:
        hf = pathlib.Path(scratch) / "hf"
        hf.mkdir()
        (hf / "config.json").write_bytes(CONFIG)
        (hf / "model.safetensors").write_bytes(model)
        subprocess.run([str(dseek), "ckpt", "import", "--format", "hf", str(hf), "--output",
                        str(pathlib.Path(scratch) / "ckpt")], check=True, capture_output=True)
        step = pathlib.Path(scratch) / "ckpt" / "step-00000000"
        files = sorted(p for p in step.iterdir() if p.is_file())
        checkpoint = [(p.name, p.read_bytes()) for p in files]
        write("checkpoint_loader", "imported_tiny.bin", bundle(checkpoint))
        # With edits (fuzz_checkpoint_loader.cpp): wpe's first extent set to 2^40 (a shape
        # far larger than its slices), then a slice count of 3 on the same tensor.
        edits = struct.pack("<BBQ", 0, 1, 2 << 40) + struct.pack("<BBQ", 3, 1, 3)
        write("checkpoint_loader", "edited_tiny.bin", bundle(checkpoint + [("edits", edits)]))
        print("checkpoint files:", [p.name for p in files])


if __name__ == "__main__":
    main()
