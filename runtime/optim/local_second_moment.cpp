// Implementation of local_second_moment.hpp.
#include "runtime/optim/local_second_moment.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dseek::optim {

LocalSecondMoment::LocalSecondMoment(size_t n, double beta2)
    : values_(n + 1, 0.0f), means_(n, 0.0f), beta2_(static_cast<float>(beta2)) {
  if (!(beta2 >= 0.0 && beta2 < 1.0))
    throw std::invalid_argument("LocalSecondMoment: beta2 = " + std::to_string(beta2) + " is not in [0, 1)");
}

void LocalSecondMoment::add(size_t offset, const float* grad, size_t count, float scale) {
  if (offset + count > size())
    throw std::out_of_range("LocalSecondMoment::add: [" + std::to_string(offset) + ", " +
                            std::to_string(offset + count) + ") is outside the " + std::to_string(size()) +
                            " values");
  float* v = values_.data() + offset;
  float* mu = means_.data() + offset;
  const float keep = beta2_, take = 1.0f - beta2_;
#pragma omp simd
  for (size_t i = 0; i < count; ++i) {
    const float g = scale * grad[i];
    v[i] = keep * v[i] + take * g * g;
    mu[i] = keep * mu[i] + take * g;
  }
}

void LocalSecondMoment::end_step() { values_.back() = beta2_ * values_.back() + (1.0f - beta2_); }

void LocalSecondMoment::corrected(float* out) const {
  const float m = mass();
  const size_t n = size();
  if (m <= 0.0f) {
    for (size_t i = 0; i < n; ++i) out[i] = 0.0f;
    return;
  }
  const float inverse = 1.0f / m;
  for (size_t i = 0; i < n; ++i) out[i] = values_[i] * inverse;
}

void LocalSecondMoment::mean_gradient_estimate(float* out, int replicas) const {
  const float m = mass();
  const size_t n = size();
  out[n] = m;
  if (m <= 0.0f) {
    for (size_t i = 0; i < n; ++i) out[i] = 0.0f;
    return;
  }
  if (replicas < 1)
    throw std::invalid_argument("LocalSecondMoment::mean_gradient_estimate: replicas = " +
                                std::to_string(replicas));
  const float inverse_mass = 1.0f / m, inverse_replicas = 1.0f / static_cast<float>(replicas);
  for (size_t i = 0; i < n; ++i) {
    const float mean_square = means_[i] * means_[i] * inverse_mass;  // mass * (mu / mass)^2
    const float noise = std::max(values_[i] - mean_square, 0.0f);   // >= 0 up to rounding
    out[i] = mean_square + noise * inverse_replicas;
  }
}

}  // namespace dseek::optim
