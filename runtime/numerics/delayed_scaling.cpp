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

DelayedScalingState replica_state(const DelayedScalingState& state, int64_t replica) {
  if (replica < 0 || replica >= state.replicas)
    throw std::invalid_argument("fp8 scaling state: replica " + std::to_string(replica) +
                                " of " + std::to_string(state.replicas));
  const size_t tensors = state.tensors();
  const size_t length = static_cast<size_t>(state.history_length);
  const size_t r = static_cast<size_t>(replica);
  DelayedScalingState one;
  one.history_length = state.history_length;
  one.scales.assign(state.scales.begin() + static_cast<std::ptrdiff_t>(r * tensors),
                    state.scales.begin() + static_cast<std::ptrdiff_t>((r + 1) * tensors));
  one.histories.assign(
      state.histories.begin() + static_cast<std::ptrdiff_t>(r * tensors * length),
      state.histories.begin() + static_cast<std::ptrdiff_t>((r + 1) * tensors * length));
  return one;
}

DelayedScalingState merged_state(const DelayedScalingState& state) {
  DelayedScalingState merged = replica_state(state, 0);
  for (int64_t r = 1; r < state.replicas; ++r) {
    const DelayedScalingState other = replica_state(state, r);
    for (size_t i = 0; i < merged.scales.size(); ++i)
      merged.scales[i] = std::min(merged.scales[i], other.scales[i]);
    for (size_t i = 0; i < merged.histories.size(); ++i)
      merged.histories[i] = std::max(merged.histories[i], other.histories[i]);
  }
  return merged;
}

std::vector<float> DelayedScaling::history_oldest_first() const {
  std::vector<float> ordered(history_.size());
  for (size_t i = 0; i < history_.size(); ++i) ordered[i] = history_[(next_ + i) % history_.size()];
  return ordered;
}

void DelayedScaling::restore(const std::vector<float>& oldest_first, float scale) {
  std::fill(history_.begin(), history_.end(), 0.0f);
  const size_t kept = std::min(oldest_first.size(), history_.size());
  // The newest `kept` amaxes end the history; the next one replaces its oldest, index 0.
  std::copy(oldest_first.end() - static_cast<std::ptrdiff_t>(kept), oldest_first.end(),
            history_.end() - static_cast<std::ptrdiff_t>(kept));
  next_ = 0;
  current_ = 0.0f;
  current_finite_ = true;
  scale_ = scale;
}

}  // namespace dseek::numerics
