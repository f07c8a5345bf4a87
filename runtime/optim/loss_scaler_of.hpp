// The dynamic loss scaler a job config asks for: train.precision = "fp8" scales the loss
// (loss_scaler.hpp) from train.loss_scale_init, doubling after train.loss_scale_window
// good steps; fp32 and bf16 need none. One function, so that every trainer (data
// parallel, pipeline stages, tensor-parallel ranks) builds the same one.
#pragma once

#include <memory>

#include "runtime/config/job_config.hpp"
#include "runtime/optim/loss_scaler.hpp"

namespace dseek::optim {

// Null unless config.train.precision is "fp8".
std::unique_ptr<LossScaler> loss_scaler_of(const config::JobConfig& config);

}  // namespace dseek::optim
