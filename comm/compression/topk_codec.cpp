#include "comm/compression/topk_codec.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace dseek::comm::compression {

namespace detail {

double checked_fraction(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw std::invalid_argument("top-k fraction must be in (0, 1], got " + std::to_string(fraction));
  }
  return fraction;
}

void check_index_range(size_t n) {
  if (n > std::numeric_limits<uint32_t>::max()) {
    throw std::invalid_argument("top-k codecs index with uint32: a tensor of " + std::to_string(n) +
                                " elements must be split into buckets below 2^32");
  }
}

void check_indices(std::string_view codec, const std::byte* idx, size_t k, size_t n) {
  uint32_t prev = 0;
  for (size_t j = 0; j < k; ++j) {
    const uint32_t i = load_u32(idx + 4 * j);
    if (i >= n) {
      throw CodecError(std::string(codec) + " message: index " + std::to_string(i) + " at position " +
                       std::to_string(j) + " is out of range for n=" + std::to_string(n));
    }
    if (j > 0 && i <= prev) {
      throw CodecError(std::string(codec) + " message: indices not strictly ascending at position " +
                       std::to_string(j) + " (" + std::to_string(i) + " after " + std::to_string(prev) +
                       ")");
    }
    prev = i;
  }
}

}  // namespace detail

TopK::TopK(double fraction) : fraction_(detail::checked_fraction(fraction)) {}

size_t TopK::max_encoded_bytes(size_t n) const {
  return kHeaderBytes + topk_count(n, fraction_) * (sizeof(uint32_t) + sizeof(float));
}

size_t TopK::do_encode(const float* grad, size_t n, std::byte* out) {
  detail::check_index_range(n);
  const size_t k = topk_count(n, fraction_);
  if (selected_.size() < k) {
    selected_.resize(k);
    values_.resize(k);
  }
  selector_.select(grad, n, k, selected_.data(), values_.data());

  MessageHeader h;
  h.codec = static_cast<uint8_t>(CodecId::topk);
  h.n = n;
  h.k = k;
  std::memcpy(out, &h, sizeof h);
  if (k > 0) {
    std::memcpy(out + kHeaderBytes, selected_.data(), 4 * k);
    std::memcpy(out + kHeaderBytes + 4 * k, values_.data(), 4 * k);
  }
  return kHeaderBytes + 8 * k;
}

void TopK::do_decode_add(const MessageHeader& h, const std::byte* in, size_t bytes,
                         float* accumulate, float alpha) const {
  if (h.k > h.n) fail("stored count k=" + std::to_string(h.k) + " exceeds n=" + std::to_string(h.n));
  expect_size(bytes, kHeaderBytes + 8 * h.k, h);
  const std::byte* indices = in + kHeaderBytes;
  const std::byte* values = indices + 4 * h.k;
  detail::check_indices(name(), indices, h.k, h.n);  // before anything is added
  for (size_t j = 0; j < h.k; ++j) {
    accumulate[detail::load_u32(indices + 4 * j)] += alpha * detail::load_f32(values + 4 * j);
  }
}

}  // namespace dseek::comm::compression
