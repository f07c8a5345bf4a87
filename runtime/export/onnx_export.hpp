// Export of a trained GPT as an ONNX model (the interchange format ONNX Runtime, and
// through it most inference servers, run): the forward graph from token ids to logits
// with the weights inside, written with ONNX's own protobuf classes (Debian's
// libonnx-dev). One graph for any batch and length up to the context:
//   input  input_ids  int64  [batch, sequence]   (sequence <= model.context)
//   output logits     float  [batch, sequence, vocab]
// Opset 17 (ai.onnx; LayerNormalization is an operator from 17 on), IR version 8: what
// Debian's python3-onnx 1.12 checks and ONNX Runtime 1.x runs. The weights are
// initializers under dseek's tensor names (runtime/model/param_layout.hpp), fp32, in
// dseek's (out, in) layout; Transpose nodes feed them to MatMul. GELU is the tanh
// form (GPT-2's; ONNX's Gelu operator comes with opset 20), the causal mask a
// (context, context) initializer of 0 and -inf sliced to the sequence.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

#include "runtime/model/param_layout.hpp"

namespace dseek::exporting {

inline constexpr int64_t kOnnxOpset = 17;
inline constexpr int64_t kOnnxIrVersion = 8;

// Writes `output` atomically (a temporary file beside it, fsync, rename; removed on
// failure). `params` is the flat buffer of ParamLayout(shape). Throws
// checkpoint::CheckpointError naming the file.
void export_onnx(const model::GptShape& shape, std::span<const float> params,
                 const std::filesystem::path& output, int64_t step);

}  // namespace dseek::exporting
