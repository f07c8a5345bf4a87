// The Hugging Face GPT-2 layout, both ways: a folder that transformers' GPT2LMHeadModel
// (and every tool that reads GPT-2 checkpoints) loads, and dseek's parameters from
// such a folder.
//   model.safetensors  GPT2LMHeadModel's names: transformer.wte.weight, transformer.wpe.weight,
//                      transformer.h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
//                      mlp.c_proj}.{weight,bias}, transformer.ln_f.{weight,bias}; the four
//                      linear layers of a block are GPT-2's Conv1D, whose weight is
//                      (in, out): dseek's (out, in) transposed. The head is tied to wte
//                      (no lm_head.weight, as save_pretrained writes it). fp32 or bf16.
//   config.json        model_type gpt2: n_embd, n_layer, n_head, n_positions, vocab_size,
//                      gelu_new, layer_norm_epsilon 1e-5, tied embeddings
//   the tokenizer's    HfExportInfo::files: GPT-2's tokenizer files when the model's
//   files              tokenizer is r50k_base, else a note (hf_gpt2_tokenizer.hpp)
// dseek's model is GPT-2's architecture exactly (pre-LayerNorm, tanh GELU, learned
// positions, [q | k | v] heads in the same order), so the mapping is names and
// transposes only. Import also takes files without the "transformer." prefix (OpenAI's
// GPT-2 checkpoints on the Hub have none) and skips the attention-mask buffers older
// files carry (attn.bias, attn.masked_bias).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "runtime/export/hf_gpt2_tokenizer.hpp"
#include "runtime/export/safetensors_file.hpp"
#include "runtime/model/param_layout.hpp"

namespace dseek::exporting {

struct HfExportInfo {
  TensorDtype dtype = TensorDtype::f32;
  int64_t end_of_text = -1;  // the tokenizer's separator: bos/eos_token_id (-1: none)
  int64_t step = 0;          // recorded in the safetensors metadata
  std::vector<FolderFile> files;  // written beside model.safetensors (the tokenizer's)
};

// Writes the folder `dir` (which must not exist) atomically: its files go into a
// temporary folder beside it, which is renamed when complete (removed on failure).
// Throws CheckpointError naming the file.
void export_hf_gpt2(const model::GptShape& shape, std::span<const float> params,
                    const std::filesystem::path& dir, const HfExportInfo& info);

struct HfGpt2 {
  model::GptShape shape;
  std::vector<float> params;  // flat, in ParamLayout(shape)'s order
};

// Reads config.json and model.safetensors of `dir`. A config that is not GPT-2's
// architecture as dseek runs it, a tensor missing, unknown or of another shape than
// the config says, an untied head: CheckpointError naming the file and the tensor.
HfGpt2 import_hf_gpt2(const std::filesystem::path& dir);

}  // namespace dseek::exporting
