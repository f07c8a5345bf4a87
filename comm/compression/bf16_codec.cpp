// Implementation of bf16_codec.hpp.
#include "comm/compression/bf16_codec.hpp"

#include <bit>
#include <cstring>
#include <string>

namespace dseek::comm::compression {

size_t Bf16::max_encoded_bytes(size_t n) const { return kHeaderBytes + (2 * n + 3) / 4 * 4; }

uint16_t Bf16::to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  // NaN: keep a quiet NaN (rounding could carry its mantissa into the exponent = inf).
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);  // to nearest, ties to even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float Bf16::from_bf16(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

size_t Bf16::do_encode(const float* grad, size_t n, std::byte* out) {
  MessageHeader h;
  h.codec = static_cast<uint8_t>(CodecId::bf16);
  h.n = n;
  h.k = n;
  std::memcpy(out, &h, sizeof h);
  std::byte* values = out + kHeaderBytes;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t b = to_bf16(grad[i]);
    std::memcpy(values + 2 * i, &b, sizeof b);
  }
  const size_t written = max_encoded_bytes(n);
  std::memset(values + 2 * n, 0, written - kHeaderBytes - 2 * n);  // the padding, deterministic
  return written;
}

void Bf16::do_decode_add(const MessageHeader& h, const std::byte* in, size_t bytes, float* accumulate,
                         float alpha) const {
  if (h.k != h.n) fail("stored count k=" + std::to_string(h.k) + " differs from n=" + std::to_string(h.n));
  expect_size(bytes, max_encoded_bytes(h.n), h);
  const std::byte* values = in + kHeaderBytes;
  for (size_t i = 0; i < h.n; ++i) {
    uint16_t b;
    std::memcpy(&b, values + 2 * i, sizeof b);
    accumulate[i] += alpha * from_bf16(b);
  }
}

}  // namespace dseek::comm::compression
