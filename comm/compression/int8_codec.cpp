#include "comm/compression/int8_codec.hpp"

#include <cstring>
#include <string>

#include "comm/compression/kernels.hpp"

namespace dseek::comm::compression {

namespace detail {
size_t checked_block_size(size_t block_size) {
  if (block_size == 0 || block_size >= (size_t{1} << 31)) {
    throw std::invalid_argument("int8 block size must be in [1, 2^31), got " + std::to_string(block_size));
  }
  return block_size;
}
}  // namespace detail

Int8Block::Int8Block(size_t block_size) : block_size_(detail::checked_block_size(block_size)) {}

size_t Int8Block::max_encoded_bytes(size_t n) const {
  return kHeaderBytes + 4 * detail::block_count(n, block_size_) + n;
}

size_t Int8Block::do_encode(const float* grad, size_t n, std::byte* out) {
  MessageHeader h;
  h.codec = static_cast<uint8_t>(CodecId::int8);
  h.block_size = static_cast<uint32_t>(block_size_);
  h.n = n;
  h.k = n;
  std::memcpy(out, &h, sizeof h);
  std::byte* scales = out + kHeaderBytes;
  auto* q = reinterpret_cast<int8_t*>(scales + 4 * detail::block_count(n, block_size_));
  detail::quantize_blocks(grad, n, block_size_, scales, q);
  return max_encoded_bytes(n);
}

void Int8Block::do_decode_add(const MessageHeader& h, const std::byte* in, size_t bytes,
                              float* accumulate, float alpha) const {
  if (h.block_size == 0) fail("block_size is 0");
  if (h.k != h.n) fail("stored count k=" + std::to_string(h.k) + " differs from n=" + std::to_string(h.n));
  const size_t blocks = detail::block_count(h.n, h.block_size);
  expect_size(bytes, kHeaderBytes + 4 * blocks + h.n, h);
  const std::byte* scales = in + kHeaderBytes;
  const auto* q = reinterpret_cast<const int8_t*>(scales + 4 * blocks);
  detail::dequantize_add_blocks(scales, q, h.n, h.block_size, accumulate, alpha);
}

}  // namespace dseek::comm::compression
