#include "comm/compression/error_feedback.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dseek::comm::compression {

ErrorFeedback::ErrorFeedback(std::shared_ptr<Codec> codec) : codec_(std::move(codec)) {
  if (!codec_) throw std::invalid_argument("ErrorFeedback needs a codec");
}

size_t ErrorFeedback::encode(const float* grad, size_t n, std::byte* out) {
  if (!sized_) {
    residual_.assign(n, 0.0f);
    sized_ = true;
  } else if (n != residual_.size()) {
    throw std::invalid_argument("ErrorFeedback: the tensor had " + std::to_string(residual_.size()) +
                                " elements and now has " + std::to_string(n) +
                                "; use one ErrorFeedback per tensor");
  }
  float* r = residual_.data();
  float poison = 0.0f;  // NaN when g' holds an inf or a NaN
#pragma omp simd reduction(+ : poison)
  for (size_t i = 0; i < n; ++i) {
    r[i] += grad[i];
    poison += r[i] * 0.0f;
  }
  const size_t bytes = codec_->encode(r, n, out);
  codec_->decode_add_uncounted(out, bytes, r, n, -1.0f);  // residual = g' - decoded
  if (poison != 0.0f) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) r[i] = (r[i] - r[i]) == 0.0f ? r[i] : 0.0f;
  }
  return bytes;
}

void ErrorFeedback::reset() { std::fill(residual_.begin(), residual_.end(), 0.0f); }

void ErrorFeedback::scale_residual(float factor) {
  for (float& v : residual_) v *= factor;
}

}  // namespace dseek::comm::compression
