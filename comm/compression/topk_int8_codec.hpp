// Top-k + INT8: the top-k indices (uint32, ascending) and the selected values quantized to
// int8 with one fp32 scale per block of block_size selected values (in index order).
// Kept values are within scale_b / 2 of the gradient; dropped ones decode as 0.
#pragma once

#include <vector>

#include "comm/compression/codec.hpp"
#include "comm/compression/kernels.hpp"

namespace dseek::comm::compression {

class TopKInt8 final : public Codec {
 public:
  explicit TopKInt8(double fraction = 0.05, size_t block_size = 256);

  [[nodiscard]] std::string_view name() const override { return "topk+int8"; }
  [[nodiscard]] CodecId id() const override { return CodecId::topk_int8; }
  [[nodiscard]] size_t max_encoded_bytes(size_t n) const override;
  [[nodiscard]] double fraction() const { return fraction_; }
  [[nodiscard]] size_t block_size() const { return block_size_; }

 protected:
  size_t do_encode(const float* grad, size_t n, std::byte* out) override;
  void do_decode_add(const MessageHeader& header, const std::byte* in, size_t bytes,
                     float* accumulate, float alpha) const override;

 private:
  double fraction_;
  size_t block_size_;
  detail::TopKSelector selector_;
  std::vector<uint32_t> selected_;
  std::vector<float> values_;
};

}  // namespace dseek::comm::compression
