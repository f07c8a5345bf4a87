// Implementation of loss_scaler.hpp.
#include "runtime/optim/loss_scaler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace dseek::optim {

LossScaler::LossScaler(LossScalerSettings settings)
    : settings_(settings), scale_(static_cast<float>(settings.initial_scale)) {
  int exponent = 0;
  if (!(settings.initial_scale > 0) || std::frexp(settings.initial_scale, &exponent) != 0.5)
    throw std::invalid_argument("train.loss_scale_init must be a power of two, got " +
                                std::to_string(settings.initial_scale));
  if (settings.window < 1)
    throw std::invalid_argument("train.loss_scale_window must be >= 1, got " +
                                std::to_string(settings.window));
}

bool LossScaler::update(double sum_squares) { return update_finite(std::isfinite(sum_squares)); }

bool LossScaler::update_finite(bool finite) {
  if (!finite) {
    // Halving stops at the smallest normal float: below it the scaled loss gradient
    // itself would lose bits.
    scale_ = std::max(scale_ * 0.5f, std::numeric_limits<float>::min());
    good_steps_ = 0;
    return false;
  }
  if (++good_steps_ >= settings_.window) {
    const float doubled = scale_ * 2.0f;
    if (std::isfinite(doubled)) scale_ = doubled;
    good_steps_ = 0;
  }
  return true;
}

void LossScaler::restore(float scale, int64_t good_steps) {
  if (!(scale > 0.0f) || !std::isfinite(scale))
    throw std::invalid_argument("checkpoint's loss scale must be a positive finite float, got " +
                                std::to_string(scale));
  scale_ = scale;
  good_steps_ = std::max<int64_t>(good_steps, 0);
}

void unscale_gradients(float* grads, size_t count, float scale) {
  const float inverse = 1.0f / scale;
#pragma omp simd
  for (size_t i = 0; i < count; ++i) grads[i] *= inverse;
}

}  // namespace dseek::optim
