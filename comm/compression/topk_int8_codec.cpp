#include "comm/compression/topk_int8_codec.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "comm/compression/int8_codec.hpp"
#include "comm/compression/topk_codec.hpp"

namespace dseek::comm::compression {

namespace {
size_t payload_bytes(size_t k, size_t block) { return 4 * k + 4 * detail::block_count(k, block) + k; }
}  // namespace

TopKInt8::TopKInt8(double fraction, size_t block_size)
    : fraction_(detail::checked_fraction(fraction)), block_size_(detail::checked_block_size(block_size)) {}

size_t TopKInt8::max_encoded_bytes(size_t n) const {
  return kHeaderBytes + payload_bytes(topk_count(n, fraction_), block_size_);
}

size_t TopKInt8::do_encode(const float* grad, size_t n, std::byte* out) {
  detail::check_index_range(n);
  const size_t k = topk_count(n, fraction_);
  if (selected_.size() < k) selected_.resize(k);
  if (values_.size() < k) values_.resize(k);
  selector_.select(grad, n, k, selected_.data(), values_.data());
  const uint32_t* sel = selected_.data();
  const float* vals = values_.data();

  MessageHeader h;
  h.codec = static_cast<uint8_t>(CodecId::topk_int8);
  h.block_size = static_cast<uint32_t>(block_size_);
  h.n = n;
  h.k = k;
  std::memcpy(out, &h, sizeof h);
  std::byte* indices = out + kHeaderBytes;
  std::byte* scales = indices + 4 * k;
  auto* q = reinterpret_cast<int8_t*>(scales + 4 * detail::block_count(k, block_size_));
  if (k > 0) std::memcpy(indices, sel, 4 * k);
  detail::quantize_blocks(vals, k, block_size_, scales, q);
  return kHeaderBytes + payload_bytes(k, block_size_);
}

void TopKInt8::do_decode_add(const MessageHeader& h, const std::byte* in, size_t bytes,
                             float* accumulate, float alpha) const {
  if (h.block_size == 0) fail("block_size is 0");
  if (h.k > h.n) fail("stored count k=" + std::to_string(h.k) + " exceeds n=" + std::to_string(h.n));
  const size_t k = h.k;
  const size_t block = h.block_size;
  expect_size(bytes, kHeaderBytes + payload_bytes(k, block), h);
  const std::byte* indices = in + kHeaderBytes;
  const std::byte* scales = indices + 4 * k;
  const auto* q = reinterpret_cast<const int8_t*>(scales + 4 * detail::block_count(k, block));
  detail::check_indices(name(), indices, k, h.n);  // before anything is added
  for (size_t b0 = 0, bi = 0; b0 < k; b0 += block, ++bi) {
    const size_t end = std::min(k, b0 + block);
    const float s = alpha * detail::load_f32(scales + 4 * bi);
    for (size_t j = b0; j < end; ++j) {
      accumulate[detail::load_u32(indices + 4 * j)] += static_cast<float>(q[j]) * s;
    }
  }
}

}  // namespace dseek::comm::compression
