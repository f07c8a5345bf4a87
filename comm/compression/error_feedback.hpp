// Error feedback for a lossy codec: what the codec dropped at one step is added to the
// gradient of the next, so nothing is lost, only delayed. One ErrorFeedback per gradient
// tensor (or per all-reduce bucket): it owns that tensor's residual.
//
//   encode(grad):  g' = grad + residual;  message = codec.encode(g');
//                  residual = g' - decode(message)
//
// Hence, over steps 1..T, sum(decoded) = sum(grad) - residual_T: the decoded gradients
// track the raw ones up to the current residual, which stays bounded, where without
// feedback the difference grows with T.
//
// Non-finite values: a NaN/inf in grad is encoded and propagated (see codec.hpp); the
// residual entries that become non-finite are reset to 0, so one overflowing step (skipped
// by a loss scaler) does not poison every later one. Give it unscaled gradients, or call
// scale_residual when the loss scale changes.
//
// Cost per step: one fused pass over n (residual += grad), the codec's encode, and its
// decode into the residual (O(k) for the top-k codecs, O(n) for int8). No allocation
// after the first call.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "comm/compression/codec.hpp"

namespace dseek::comm::compression {

class ErrorFeedback {
 public:
  // The codec may be shared by several ErrorFeedback objects used from one thread.
  explicit ErrorFeedback(std::shared_ptr<Codec> codec);

  // Encodes grad + residual into out (codec().max_encoded_bytes(n) bytes) and keeps what
  // the message does not carry. The first call fixes n; a later call with another n
  // throws std::invalid_argument. Counts one sent message on the codec.
  size_t encode(const float* grad, size_t n, std::byte* out);

  [[nodiscard]] size_t max_encoded_bytes(size_t n) const { return codec_->max_encoded_bytes(n); }
  [[nodiscard]] std::span<const float> residual() const { return residual_; }
  [[nodiscard]] Codec& codec() { return *codec_; }
  [[nodiscard]] const Codec& codec() const { return *codec_; }

  void reset();                       // residual = 0, size kept
  void scale_residual(float factor);  // residual *= factor (e.g. new / old loss scale)

 private:
  std::shared_ptr<Codec> codec_;
  std::vector<float> residual_;
  bool sized_ = false;
};

}  // namespace dseek::comm::compression
