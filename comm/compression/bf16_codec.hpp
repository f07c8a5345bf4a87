// bfloat16: every value rounded to its upper 16 bits (round to nearest even), 2 bytes per
// value. Relative error <= 2^-8 per finite value (bf16 keeps float32's exponent range);
// NaN stays NaN, inf stays inf. Half the bytes of fp32 with no per-block scale, so it
// suits values that span many orders of magnitude within a block, where int8's
// max-scaled blocks would flush the small ones to zero: the replicas' second-moment
// estimates that the compressed all-reduce averages (actors/training/
// comm_gradient_reducer.hpp) are such values.
#pragma once

#include "comm/compression/codec.hpp"

namespace dseek::comm::compression {

class Bf16 final : public Codec {
 public:
  [[nodiscard]] std::string_view name() const override { return "bf16"; }
  [[nodiscard]] CodecId id() const override { return CodecId::bf16; }
  // Header + 2n bytes, padded to a multiple of 4 (the next message's alignment).
  [[nodiscard]] size_t max_encoded_bytes(size_t n) const override;

  // The bf16 bits of x (round to nearest even; NaN kept NaN) and back.
  static uint16_t to_bf16(float x);
  static float from_bf16(uint16_t bits);

 protected:
  size_t do_encode(const float* grad, size_t n, std::byte* out) override;
  void do_decode_add(const MessageHeader& header, const std::byte* in, size_t bytes,
                     float* accumulate, float alpha) const override;
};

}  // namespace dseek::comm::compression
