// Implementation of local_second_moment.hpp.
#include "runtime/optim/local_second_moment.hpp"

#include <stdexcept>
#include <string>

namespace dseek::optim {

LocalSecondMoment::LocalSecondMoment(size_t n, double beta2)
    : values_(n + 1, 0.0f), beta2_(static_cast<float>(beta2)) {
  if (!(beta2 >= 0.0 && beta2 < 1.0))
    throw std::invalid_argument("LocalSecondMoment: beta2 = " + std::to_string(beta2) + " is not in [0, 1)");
}

void LocalSecondMoment::add(size_t offset, const float* grad, size_t count, float scale) {
  if (offset + count > size())
    throw std::out_of_range("LocalSecondMoment::add: [" + std::to_string(offset) + ", " +
                            std::to_string(offset + count) + ") is outside the " + std::to_string(size()) +
                            " values");
  float* v = values_.data() + offset;
  const float keep = beta2_, take = 1.0f - beta2_;
#pragma omp simd
  for (size_t i = 0; i < count; ++i) {
    const float g = scale * grad[i];
    v[i] = keep * v[i] + take * g * g;
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

}  // namespace dseek::optim
