// Implementation of delayed_scaling.hpp.
#include "runtime/numerics/delayed_scaling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace dseek::numerics {

DelayedScaling::DelayedScaling(Fp8Format format, DelayedScalingSettings settings)
    : format_(format), settings_(settings) {
  if (settings.history < 1)
    throw std::invalid_argument("train.fp8_amax_history must be >= 1, got " +
                                std::to_string(settings.history));
  history_.assign(static_cast<size_t>(settings.history), 0.0f);
}

void DelayedScaling::record(float amax) {
  if (!std::isfinite(amax)) {
    current_finite_ = false;
    return;
  }
  current_ = std::max(current_, amax);
}

void DelayedScaling::end_step() {
  if (current_finite_) {
    history_[next_] = current_;
    next_ = (next_ + 1) % history_.size();
  }
  current_ = 0.0f;
  current_finite_ = true;
  const float amax = history_max();
  if (amax > 0.0f) {
    const double scale = static_cast<double>(fp8_max(format_)) / amax /
                         std::ldexp(1.0, static_cast<int>(settings_.margin));
    // A tiny amax must not make the scale Inf (x * Inf is NaN for x = 0).
    scale_ = static_cast<float>(std::min(scale, double{std::numeric_limits<float>::max()}));
  }
}

float DelayedScaling::history_max() const {
  return *std::max_element(history_.begin(), history_.end());
}

}  // namespace dseek::numerics
