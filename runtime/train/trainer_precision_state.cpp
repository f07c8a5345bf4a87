// The Trainer's mixed-precision state in checkpoints (trainer.hpp: precision_state,
// restore_precision_state): the dynamic loss scaler's scale and good-step count, and the
// delayed-scaling state of the model's fp8 matmuls, read and put back at a step boundary
// (checkpoint/precision_state.hpp says what and why). Every replica holds the same state
// (the same reduced gradients decide every skip; the same amaxes enter every history),
// so replica 0's copy stands for all and each replica restores it.
// The error-feedback residuals of gradient compression (trainer_unscaled_reduction.cpp)
// are not part of it: they stay out of checkpoints.
#include "runtime/train/trainer.hpp"

namespace dseek::train {

checkpoint::PrecisionState Trainer::precision_state() {
  checkpoint::PrecisionState state;
  state.precision = config_.train.precision;
  if (loss_scaler_) {
    state.loss_scale = loss_scaler_->scale();
    state.loss_scale_good_steps = loss_scaler_->good_steps();
  }
  state.fp8 = model_->precision().fp8_state();
  return state;
}

void Trainer::restore_precision_state(const checkpoint::PrecisionState& state) {
  if (loss_scaler_)
    loss_scaler_->restore(static_cast<float>(state.loss_scale), state.loss_scale_good_steps);
  model_->precision().restore_fp8_state(state.fp8);
}

}  // namespace dseek::train
