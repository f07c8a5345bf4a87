// Implementation of loss_scaler_of.hpp.
#include "runtime/optim/loss_scaler_of.hpp"

namespace dseek::optim {

std::unique_ptr<LossScaler> loss_scaler_of(const config::JobConfig& config) {
  const auto& t = config.train;
  if (t.precision != config::Precision::fp8) return nullptr;
  return std::make_unique<LossScaler>(LossScalerSettings{t.loss_scale_init, t.loss_scale_window});
}

}  // namespace dseek::optim
