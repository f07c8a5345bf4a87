// Delayed scaling of one FP8 tensor, the recipe of NVIDIA's Transformer Engine: the
// tensor is quantized as fp8(x * scale) with
//     scale = fp8_max / max(amax history) / 2^margin,
// where the history holds the amax (max |x|) of the last `history` steps. The scale
// used at step s comes from the amaxes of steps up to s - 1 only, so a GPU can quantize
// without first reducing the tensor; the amax of step s is recorded while it is used.
// Before any amax was recorded, and while the history holds only zeros, the scale stays
// at its previous value (1 at the start). A non-finite amax (an overflowed step, which
// the loss scaler skips) is not recorded.
//
// Pure arithmetic, no memory of a backend: model/fp8_scaling_table.hpp keeps one per
// GEMM operand and moves the scales and amaxes to and from the backend once per step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/numerics/fp8.hpp"

namespace dseek::numerics {

struct DelayedScalingSettings {
  int64_t history = 16;  // train.fp8_amax_history
  int64_t margin = 0;    // train.fp8_margin: scale down by 2^margin for headroom
};

// The delayed-scaling state of a set of tensors between steps, as a checkpoint keeps it:
// per tensor its scale and `history_length` amaxes, oldest first; for `replicas` copies
// of the set (data-parallel replicas quantize their own activations and output
// gradients, so their histories differ). Empty: none (not fp8).
struct DelayedScalingState {
  int64_t replicas = 1;
  int64_t history_length = 0;
  std::vector<float> histories;  // replicas x tensors x history_length
  std::vector<float> scales;     // replicas x tensors
  bool empty() const { return scales.empty(); }
  size_t tensors() const { return scales.size() / static_cast<size_t>(replicas); }
};

// Replica `replica`'s state alone (replicas = 1).
DelayedScalingState replica_state(const DelayedScalingState& state, int64_t replica);
// One state for every replica of a world of another size (whose replicas see other slices
// of the batch): per tensor the elementwise max of the histories and the smallest scale,
// the most cautious of them (no replica's amaxes would have overflowed it).
DelayedScalingState merged_state(const DelayedScalingState& state);

class DelayedScaling {
 public:
  DelayedScaling(Fp8Format format, DelayedScalingSettings settings);

  Fp8Format format() const { return format_; }
  // The scale for the current step.
  float scale() const { return scale_; }
  // Raises the current step's amax to `amax` (several uses in one step: their max).
  void record(float amax);
  // Closes the step: its amax enters the history (the oldest leaves) and the scale for
  // the next step is computed from the history.
  void end_step();
  // max over the history (0 while empty).
  float history_max() const;

  // The state between steps, for a checkpoint: the history oldest first, and the scale
  // (which is not a function of the history alone: it stays put while the history holds
  // only zeros). Called at a step boundary (no amax recorded since end_step()).
  std::vector<float> history_oldest_first() const;
  // Puts back such a state; a history of another length keeps its newest amaxes (and
  // pads the oldest with zeros), as train.fp8_amax_history may change between runs.
  void restore(const std::vector<float>& oldest_first, float scale);

 private:
  Fp8Format format_;
  DelayedScalingSettings settings_;
  std::vector<float> history_;  // ring buffer of settings_.history amaxes
  size_t next_ = 0;
  float current_ = 0.0f;
  bool current_finite_ = true;
  float scale_ = 1.0f;
};

}  // namespace dseek::numerics
