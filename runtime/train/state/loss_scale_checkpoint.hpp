// The part of a checkpoint's precision state (checkpoint/precision_state.hpp) that every
// trainer writes and restores alike, whatever its layout: the precision that wrote it and
// the dynamic loss scaler's scale and good-step count. One scaler's state stands for every
// rank (all take the same skip decision from the same global norm). The fp8 amax histories
// differ by layout: state/trainer_precision_state.cpp (data parallel) and
// state/sharded_precision_state.hpp (pipeline, tensor parallel).
#pragma once

#include "runtime/config/enums.hpp"

#include <string>

#include "runtime/checkpoint/precision_state.hpp"
#include "runtime/optim/loss_scaler.hpp"

namespace dseek::train {

// `scaler`: null outside fp8 (the scale stays the state's default).
inline checkpoint::PrecisionState loss_scale_state(config::Precision precision,
                                                   const optim::LossScaler* scaler) {
  checkpoint::PrecisionState state;
  state.precision = config::name_string(precision);
  if (scaler != nullptr) {
    state.loss_scale = scaler->scale();
    state.loss_scale_good_steps = scaler->good_steps();
  }
  return state;
}

inline void restore_loss_scale(optim::LossScaler* scaler, const checkpoint::PrecisionState& state) {
  if (scaler != nullptr)
    scaler->restore(static_cast<float>(state.loss_scale), state.loss_scale_good_steps);
}

}  // namespace dseek::train
