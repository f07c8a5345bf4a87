// INT8 quantization with a per-block scale: for each block of block_size values one fp32
// scale = max|g| / 127 and int8 values round(g / scale). |error| <= scale / 2 per value.
#pragma once

#include "comm/compression/codec.hpp"

namespace dseek::comm::compression {

class Int8Block final : public Codec {
 public:
  // block_size in [1, 2^31); throws std::invalid_argument otherwise.
  explicit Int8Block(size_t block_size = 256);

  [[nodiscard]] std::string_view name() const override { return "int8"; }
  [[nodiscard]] CodecId id() const override { return CodecId::int8; }
  [[nodiscard]] size_t max_encoded_bytes(size_t n) const override;
  [[nodiscard]] size_t block_size() const { return block_size_; }

 protected:
  size_t do_encode(const float* grad, size_t n, std::byte* out) override;
  void do_decode_add(const MessageHeader& header, const std::byte* in, size_t bytes,
                     float* accumulate, float alpha) const override;

 private:
  size_t block_size_;
};

namespace detail {
size_t checked_block_size(size_t block_size);
}

}  // namespace dseek::comm::compression
