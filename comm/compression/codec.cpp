#include "comm/compression/codec.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

#include "comm/compression/int8_codec.hpp"
#include "comm/compression/kernels.hpp"
#include "comm/compression/topk_codec.hpp"
#include "comm/compression/topk_int8_codec.hpp"

namespace dseek::comm::compression {

std::string codec_name(CodecId id) {
  switch (id) {
    case CodecId::none: return "none";
    case CodecId::topk: return "topk";
    case CodecId::int8: return "int8";
    case CodecId::topk_int8: return "topk+int8";
  }
  return "unknown(" + std::to_string(static_cast<unsigned>(id)) + ")";
}

MessageHeader read_header(const std::byte* in, size_t bytes) {
  if (bytes < kHeaderBytes) {
    throw CodecError("gradient message truncated: " + std::to_string(bytes) +
                     " bytes, shorter than the " + std::to_string(kHeaderBytes) + "-byte header");
  }
  MessageHeader h;
  std::memcpy(&h, in, sizeof h);
  if (h.magic != kMessageMagic) {
    std::ostringstream os;
    os << "not a dseek gradient message: bad magic 0x" << std::hex << h.magic << " (expected 0x"
       << kMessageMagic << ")";
    throw CodecError(os.str());
  }
  if (h.version != kMessageVersion) {
    throw CodecError("gradient message has format version " + std::to_string(h.version) +
                     ", this build reads version " + std::to_string(kMessageVersion));
  }
  if (h.codec < static_cast<uint8_t>(CodecId::none) || h.codec > static_cast<uint8_t>(CodecId::topk_int8)) {
    throw CodecError("gradient message has unknown codec id " + std::to_string(h.codec));
  }
  return h;
}

size_t Codec::encode(const float* grad, size_t n, std::byte* out) {
  const size_t bytes = do_encode(grad, n, out);
  sent_.add(static_cast<uint64_t>(n) * sizeof(float), bytes);
  return bytes;
}

void Codec::decode_add(const std::byte* in, size_t bytes, float* accumulate, size_t n,
                       float alpha) const {
  decode_add_uncounted(in, bytes, accumulate, n, alpha);
  received_.add(static_cast<uint64_t>(n) * sizeof(float), bytes);
}

void Codec::decode_add_uncounted(const std::byte* in, size_t bytes, float* accumulate, size_t n,
                                 float alpha) const {
  const MessageHeader h = read_header(in, bytes);
  if (h.codec != static_cast<uint8_t>(id())) {
    throw CodecError("codec mismatch: the message was encoded by '" +
                     codec_name(static_cast<CodecId>(h.codec)) + "', this decoder is '" +
                     std::string(name()) + "'");
  }
  if (h.n != n) {
    fail("element count mismatch: the message holds " + std::to_string(h.n) +
         " elements, the accumulator has " + std::to_string(n));
  }
  do_decode_add(h, in, bytes, accumulate, alpha);
}

void Codec::fail(const std::string& what) const {
  throw CodecError(std::string(name()) + " message: " + what);
}

void Codec::expect_size(size_t bytes, size_t expected, const MessageHeader& h) const {
  if (bytes == expected) return;
  fail((bytes < expected ? "truncated: " : "size mismatch: ") + std::to_string(bytes) +
       " bytes, but n=" + std::to_string(h.n) + " k=" + std::to_string(h.k) +
       " block_size=" + std::to_string(h.block_size) + " needs " + std::to_string(expected));
}

size_t topk_count(size_t n, double fraction) {
  if (n == 0) return 0;
  const double x = fraction * static_cast<double>(n);
  const double nearest = std::round(x);
  const double k = std::abs(x - nearest) <= 1e-9 * std::max(1.0, x) ? nearest : std::ceil(x);
  if (k <= 1.0) return 1;
  if (k >= static_cast<double>(n)) return n;
  return static_cast<size_t>(k);
}

// ---- none ---------------------------------------------------------------------------

size_t NoneCodec::max_encoded_bytes(size_t n) const { return kHeaderBytes + n * sizeof(float); }

size_t NoneCodec::do_encode(const float* grad, size_t n, std::byte* out) {
  MessageHeader h;
  h.codec = static_cast<uint8_t>(CodecId::none);
  h.n = n;
  h.k = n;
  std::memcpy(out, &h, sizeof h);
  if (n > 0) std::memcpy(out + kHeaderBytes, grad, n * sizeof(float));
  return max_encoded_bytes(n);
}

void NoneCodec::do_decode_add(const MessageHeader& h, const std::byte* in, size_t bytes,
                              float* accumulate, float alpha) const {
  if (h.k != h.n) fail("stored count k=" + std::to_string(h.k) + " differs from n=" + std::to_string(h.n));
  expect_size(bytes, max_encoded_bytes(h.n), h);
  const std::byte* values = in + kHeaderBytes;
  const size_t n = h.n;
  if (alpha == 1.0f) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) accumulate[i] += detail::load_f32(values + 4 * i);
  } else {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) accumulate[i] += alpha * detail::load_f32(values + 4 * i);
  }
}

// ---- factory ------------------------------------------------------------------------

std::unique_ptr<Codec> make_codec(std::string_view name, double topk_fraction, size_t int8_block_size) {
  if (name == "none") return std::make_unique<NoneCodec>();
  if (name == "topk") return std::make_unique<TopK>(topk_fraction);
  if (name == "int8") return std::make_unique<Int8Block>(int8_block_size);
  if (name == "topk+int8") return std::make_unique<TopKInt8>(topk_fraction, int8_block_size);
  throw std::invalid_argument("unknown gradient codec '" + std::string(name) +
                              "' (expected none, topk, int8 or topk+int8)");
}

}  // namespace dseek::comm::compression
