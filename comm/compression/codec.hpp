// Gradient compression codecs for the compressed all-reduce.
//
// A codec turns a fp32 gradient buffer into one self-describing message (bytes) and adds a
// message's decoded values into an accumulator. The compressed all-reduce encodes its
// bucket, exchanges the messages (an all-gather: compressed values cannot be summed on the
// wire) and calls decode_add for every peer's message into one accumulator (alpha = 1/world
// averages). Codecs:
//
//   "none"       raw fp32 copy, so the all-reduce has one code path        4n bytes
//   "topk"       the k = max(1, ceil(fraction * n)) largest |g|: uint32
//                indices (ascending) + fp32 values, exact                  8k bytes
//   "int8"       per block of block_size values a fp32 scale = max|g| / 127
//                and int8 values round(g / scale)                          n + 4 ceil(n / B)
//   "topk+int8"  top-k indices + the selected values int8-quantized with a
//                per-block scale over the selected values (in index order)  5k + 4 ceil(k / B)
//
// plus a 32-byte header everywhere. For a given codec and n the encoded size is fixed and
// equal to max_encoded_bytes(n), so the all-gather can use equal-size slots.
//
// Wire format (host byte order: little-endian on every machine dseek runs on):
//   MessageHeader (32 bytes), then the codec's arrays in the order listed above
//   (topk: indices, values; int8: scales, values; topk+int8: indices, scales, values).
//   Every fp32/uint32 array starts at a 4-byte-aligned offset from the message start.
//
// Errors stated by each codec (decoding into a zero accumulator, alpha = 1):
//   none       exact.
//   topk       the kept elements are exact, the dropped ones are 0 (error = |g| <= the
//              smallest kept |g|). Ties at the threshold keep the lowest indices.
//   int8       |g - decoded| <= scale / 2 (+ a few ulps of scale), scale = block max|g| / 127.
//   topk+int8  kept elements within scale_b / 2 of g (scale_b over the selected values of
//              their block), dropped ones as topk.
// Non-finite input is propagated, never hidden: a NaN/inf in a top-k message travels as is
// (NaN ranks as the largest magnitude); an int8 block holding one gets a NaN scale and
// decodes to NaN, so a loss scaler that checks the reduced gradient still sees the overflow.
//
// Threading: encode uses scratch owned by the codec (no allocation per call once it has
// seen the largest n), so one codec must not encode from two threads at once. decode_add
// is const, allocation-free and safe to call from several threads on one codec (the
// counters are relaxed atomics) as long as their accumulators do not overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "comm/compression/traffic_counters.hpp"

namespace dseek::comm::compression {

enum class CodecId : uint8_t { none = 1, topk = 2, int8 = 3, topk_int8 = 4 };

// "none", "topk", "int8", "topk+int8"; "unknown(<id>)" for anything else.
std::string codec_name(CodecId id);

// Thrown by decode_add (and read_header) on a malformed, truncated or mismatched message.
// what() names the codec and the field that is wrong.
class CodecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr uint32_t kMessageMagic = 0x434B5344u;  // "DSKC" in little-endian byte order
inline constexpr uint8_t kMessageVersion = 1;

struct MessageHeader {
  uint32_t magic = kMessageMagic;
  uint8_t version = kMessageVersion;
  uint8_t codec = 0;        // CodecId
  uint16_t flags = 0;       // 0; reserved
  uint32_t block_size = 0;  // int8 codecs: values per scale; 0 otherwise
  uint32_t reserved = 0;
  uint64_t n = 0;           // element count of the gradient
  uint64_t k = 0;           // elements stored: k for the top-k codecs, n for the others
};
static_assert(sizeof(MessageHeader) == 32);
inline constexpr size_t kHeaderBytes = sizeof(MessageHeader);

// Reads the header of a message and checks its size, magic, version and codec id.
MessageHeader read_header(const std::byte* in, size_t bytes);

class Codec {
 public:
  virtual ~Codec() = default;

  [[nodiscard]] virtual std::string_view name() const = 0;
  [[nodiscard]] virtual CodecId id() const = 0;
  // The size encode() writes for n elements (it is exact, not only a bound).
  [[nodiscard]] virtual size_t max_encoded_bytes(size_t n) const = 0;

  // Encodes grad[0..n) into out, which holds at least max_encoded_bytes(n) bytes (any
  // alignment). Returns the bytes written. Counts one sent message.
  size_t encode(const float* grad, size_t n, std::byte* out);

  // accumulate[i] += alpha * decoded[i] for i < n. Checks the whole message (header, size,
  // indices) before it touches accumulate, so a bad message leaves it unchanged; throws
  // CodecError naming what is wrong. Counts one received message.
  void decode_add(const std::byte* in, size_t bytes, float* accumulate, size_t n,
                  float alpha = 1.0f) const;

  [[nodiscard]] TrafficCounters sent() const { return sent_.snapshot(); }
  [[nodiscard]] TrafficCounters received() const { return received_.snapshot(); }
  void reset_counters() {
    sent_.reset();
    received_.reset();
  }

 protected:
  Codec() = default;
  Codec(const Codec&) = delete;
  Codec& operator=(const Codec&) = delete;

  virtual size_t do_encode(const float* grad, size_t n, std::byte* out) = 0;
  // The header's magic, version, codec id and n are checked; the rest is the codec's job.
  virtual void do_decode_add(const MessageHeader& header, const std::byte* in, size_t bytes,
                             float* accumulate, float alpha) const = 0;

  // "<codec> message: <what>" as a CodecError.
  [[noreturn]] void fail(const std::string& what) const;
  // Throws unless bytes == expected.
  void expect_size(size_t bytes, size_t expected, const MessageHeader& header) const;

 private:
  friend class ErrorFeedback;  // decodes its own message into the residual, uncounted
  void decode_add_uncounted(const std::byte* in, size_t bytes, float* accumulate, size_t n,
                            float alpha) const;

  AtomicTrafficCounters sent_;
  mutable AtomicTrafficCounters received_;
};

// make_codec("none" | "topk" | "int8" | "topk+int8", topk_fraction, int8_block_size).
// topk_fraction in (0, 1] (default 5%); int8_block_size >= 1 (default 256). Throws
// std::invalid_argument on an unknown name or an out-of-range parameter.
std::unique_ptr<Codec> make_codec(std::string_view name, double topk_fraction = 0.05,
                                  size_t int8_block_size = 256);

// k = max(1, ceil(fraction * n)) for n > 0, 0 for n = 0 (never more than n). A product
// within 1e-9 of an integer counts as that integer, so 0.05 * 100 gives 5, not 6.
size_t topk_count(size_t n, double fraction);

// The raw fp32 copy: header + n floats.
class NoneCodec final : public Codec {
 public:
  [[nodiscard]] std::string_view name() const override { return "none"; }
  [[nodiscard]] CodecId id() const override { return CodecId::none; }
  [[nodiscard]] size_t max_encoded_bytes(size_t n) const override;

 protected:
  size_t do_encode(const float* grad, size_t n, std::byte* out) override;
  void do_decode_add(const MessageHeader& header, const std::byte* in, size_t bytes,
                     float* accumulate, float alpha) const override;
};

}  // namespace dseek::comm::compression
