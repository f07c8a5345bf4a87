// Dynamic loss scaling for the precisions whose gradients can underflow or overflow
// (train.precision = "fp8": output gradients in E5M2, 2 mantissa bits and a smallest
// subnormal of 2^-16). bf16 has fp32's exponent range and needs none, as PyTorch's
// autocast uses none for bf16; fp32 needs none either.
//
// The recipe of PyTorch's GradScaler and Megatron-LM: the loss (its gradient, dloss) is
// multiplied by scale() before backward; the reduced gradients are checked: non-finite
// ones (an Inf or NaN anywhere makes the global sum of squares non-finite) skip the step
// (parameters and optimizer state untouched) and halve the scale; otherwise they are
// divided by the scale before clipping and the update, and after train.loss_scale_window
// good steps in a row the scale doubles. The scale is a power of two, so scaling and
// unscaling change no mantissa bits (barring underflow).
//
// Data parallel: every replica computes the decision from the same all-reduced sum of
// squares, so all take the same skip decision and keep the same scale. With gradient
// compression the decision comes first, from a flag summed over the replicas (any
// replica's non-finite local gradient skips the step everywhere), and the gradients are
// unscaled before the codecs see them (train/pipeline/stage_trainer.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dseek::optim {

struct LossScalerSettings {
  double initial_scale = 65536.0;  // train.loss_scale_init (a power of two)
  int64_t window = 1000;           // train.loss_scale_window: good steps before doubling
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerSettings settings);

  float scale() const { return scale_; }
  // Records the outcome of a step whose scaled gradients had the global sum of squares
  // `sum_squares`; returns whether the step may be applied (false: skip it). Updates
  // the scale for the next step.
  bool update(double sum_squares);
  // The same decision from a flag: whether every gradient of the step was finite (a
  // trainer that decides before the reduction, on a global overflow flag).
  bool update_finite(bool finite);
  int64_t good_steps() const { return good_steps_; }
  // Puts back the state a checkpoint kept (scale() and good_steps() between steps), so
  // that a resumed run halves and doubles at the same steps as the run it continues.
  // std::invalid_argument when the scale is not a positive finite float.
  void restore(float scale, int64_t good_steps);

 private:
  LossScalerSettings settings_;
  float scale_;
  int64_t good_steps_ = 0;
};

// grads[i] /= scale on host memory (the CPU backend's buffers), exactly for a power of
// two scale.
void unscale_gradients(float* grads, size_t count, float scale);

}  // namespace dseek::optim
