// Top-k sparsification: the k = max(1, ceil(fraction * n)) largest |g| travel as uint32
// indices (ascending) and exact fp32 values; the rest decode as 0. Pair it with
// ErrorFeedback so that the dropped mass is sent in later steps.
#pragma once

#include <vector>

#include "comm/compression/codec.hpp"
#include "comm/compression/kernels.hpp"

namespace dseek::comm::compression {

class TopK final : public Codec {
 public:
  // fraction in (0, 1]; throws std::invalid_argument otherwise.
  explicit TopK(double fraction = 0.05);

  [[nodiscard]] std::string_view name() const override { return "topk"; }
  [[nodiscard]] CodecId id() const override { return CodecId::topk; }
  [[nodiscard]] size_t max_encoded_bytes(size_t n) const override;
  [[nodiscard]] double fraction() const { return fraction_; }

 protected:
  size_t do_encode(const float* grad, size_t n, std::byte* out) override;
  void do_decode_add(const MessageHeader& header, const std::byte* in, size_t bytes,
                     float* accumulate, float alpha) const override;

 private:
  double fraction_;
  detail::TopKSelector selector_;
  std::vector<uint32_t> selected_;
  std::vector<float> values_;
};

namespace detail {
// Checks that the k uint32 indices at idx (any alignment) are strictly ascending and < n;
// throws CodecError("<codec> message: ...") naming the first bad position.
void check_indices(std::string_view codec, const std::byte* idx, size_t k, size_t n);
double checked_fraction(double fraction);
void check_index_range(size_t n);  // top-k indices are uint32
}  // namespace detail

}  // namespace dseek::comm::compression
