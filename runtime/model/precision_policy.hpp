// The mixed-precision policy of the GPT model (train.precision): which precision each
// matmul runs in, and, for FP8, the delayed-scaling state of each of its operands.
//
//   fp32: every matmul in fp32.
//   bf16: every matmul in bf16 (fp32 accumulate), forward and backward: the four of
//         every block (qkv, attention projection, MLP up and down), attention's own
//         products (attention()) and the head
//         (logits = lnf @ wte^T, tied to the embedding), as Megatron-LM runs its output
//         layer under --bf16 and llm.c its head. The logits come out in fp32 and the
//         softmax / cross-entropy over the vocabulary runs in fp32: that is where small
//         logit errors would cost most, not in the GEMM's bf16 operands.
//   fp8:  the same block matmuls in FP8 (inputs and weights E4M3, output gradients E5M2)
//         with per-operand delayed scaling; the head in bf16, never FP8, as Transformer
//         Engine's FP8 recipes keep the last layer in the higher precision (and without
//         fp8 scaling state: it needs none).
// In every mode the FP32 master weights stay in GptModel::params() and the gradients are
// accumulated in fp32.
//
// The scales and amaxes live in the backend's memory (one float each per operand), so a
// GPU backend uses them in place; end_step() moves them to the host once per optimizer
// step, updates every amax history (numerics/delayed_scaling.hpp) and writes the next
// step's scales back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/config/enums.hpp"
#include "runtime/backend/device_buffer.hpp"
#include "runtime/numerics/delayed_scaling.hpp"

namespace dseek::model {

// "fp32" | "bf16" | "fp8" (train.precision); std::invalid_argument otherwise.
backend::MatmulFormat matmul_format_of(config::Precision precision);
const char* name_of(backend::MatmulFormat format);

class PrecisionPolicy {
 public:
  // The matmuls of one block, in forward order.
  enum BlockMatmul { kQkv, kAttentionProjection, kMlpUp, kMlpDown, kBlockMatmuls };

  PrecisionPolicy() = default;  // fp32
  // `layers`: the whole model's block count (blocks are indexed as in ParamLayout).
  PrecisionPolicy(backend::Backend& backend, backend::MatmulFormat format, int64_t layers,
                  numerics::DelayedScalingSettings fp8 = {});

  backend::MatmulFormat format() const { return format_; }
  backend::MatmulPrecision block(int64_t layer, BlockMatmul matmul) const;
  // The head's matmul (forward and backward): fp32 under fp32, bf16 under bf16 and fp8.
  backend::MatmulPrecision head() const;
  // Attention's products (Backend::attention_forward): bf16 operands under bf16, fp32
  // under fp32 and fp8 (FP8 is for the block matmuls only; its recipe's reference keeps
  // attention in fp32).
  backend::MatmulFormat attention() const {
    return format_ == backend::MatmulFormat::bf16 ? backend::MatmulFormat::bf16
                                                  : backend::MatmulFormat::fp32;
  }

  // Closes an optimizer step: FP8 amaxes enter their histories and the scales of the
  // next step are set. Nothing to do in fp32 and bf16.
  void end_step();
  // FP8 only: the current scales, in the order (layer, matmul, operand inp/weight/dout).
  std::vector<float> scales_to_host() const;
  // FP8 only (empty otherwise): every operand's delayed-scaling state between steps, in
  // the order of scales_to_host(), for a checkpoint; and putting one back (the scales
  // also into the backend's memory). Throws std::invalid_argument when the state has
  // another operand count (a checkpoint of another model shape).
  numerics::DelayedScalingState fp8_state() const;
  void restore_fp8_state(const numerics::DelayedScalingState& state);
  // The fp8 operands of one block in that order (layer l's are l * this and on).
  static constexpr size_t fp8_operands_per_layer() { return kBlockMatmuls * kOperands; }

 private:
  static constexpr int kOperands = 3;  // inp, weight, dout
  size_t index(int64_t layer, BlockMatmul matmul, int operand) const;

  backend::Backend* backend_ = nullptr;
  backend::MatmulFormat format_ = backend::MatmulFormat::fp32;
  std::vector<numerics::DelayedScaling> scaling_;  // host: the amax histories
  backend::DeviceBuffer<float> scales_, amaxes_;   // backend: what the matmuls read/raise
  std::vector<float> host_;                        // staging for end_step
};

}  // namespace dseek::model
