// The bf16 codec (comm/compression/bf16_codec.hpp), which the compressed all-reduce uses
// to average the replicas' second-moment estimates: every finite value within 2^-8
// relative after a round trip whatever its magnitude (no per-block scale to flush small
// values), ties rounded to even, non-finite values kept, alpha applied, and a message of
// the wrong size refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "comm/compression/bf16_codec.hpp"
#include "comm/compression/codec.hpp"

namespace cc = dseek::comm::compression;

namespace {
std::vector<float> decoded(const std::vector<float>& values, float alpha = 1.0f) {
  auto codec = cc::make_codec("bf16");
  std::vector<std::byte> message(codec->max_encoded_bytes(values.size()));
  REQUIRE(codec->encode(values.data(), values.size(), message.data()) == message.size());
  std::vector<float> out(values.size(), 0.0f);
  codec->decode_add(message.data(), message.size(), out.data(), out.size(), alpha);
  return out;
}
}  // namespace

TEST_CASE("bf16 round trip is within 2^-8 relative over 60 decades", "[compression][bf16]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-30.0f, 30.0f);
  std::uniform_int_distribution<int> sign(0, 1);
  std::vector<float> values(4099);  // odd: the 2-byte values end mid-word (padding)
  for (float& v : values) v = (sign(rng) ? 1.0f : -1.0f) * std::pow(10.0f, exponent(rng));
  const auto out = decoded(values);
  for (size_t i = 0; i < values.size(); ++i) {
    INFO("value " << values[i]);
    CHECK(std::abs(out[i] - values[i]) <= std::ldexp(std::abs(values[i]), -8));
  }
  CHECK(cc::make_codec("bf16")->max_encoded_bytes(4099) == cc::kHeaderBytes + 8200);
}

TEST_CASE("bf16 rounds to nearest even and keeps zeros, infinities and NaN", "[compression][bf16]") {
  // 1 + 2^-8 lies halfway between bf16 1 and 1 + 2^-7: ties go to the even mantissa (1);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6.
  CHECK(cc::Bf16::from_bf16(cc::Bf16::to_bf16(1.0f + std::ldexp(1.0f, -8))) == 1.0f);
  CHECK(cc::Bf16::from_bf16(cc::Bf16::to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))) == 1.0f + std::ldexp(1.0f, -6));
  const float inf = std::numeric_limits<float>::infinity();
  const auto out = decoded({0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::max()});
  CHECK(out[0] == 0.0f);
  CHECK(out[1] == 0.0f);
  CHECK(out[2] == inf);
  CHECK(out[3] == -inf);
  CHECK(std::isnan(out[4]));
  CHECK(out[5] == inf);  // float max rounds up past bf16's largest finite value
}

TEST_CASE("bf16 decode_add scales by alpha and refuses a truncated message", "[compression][bf16]") {
  const std::vector<float> values = {1.5f, -2.0f, 0.25f};  // exact in bf16
  CHECK(decoded(values, 0.5f) == std::vector<float>{0.75f, -1.0f, 0.125f});
  auto codec = cc::make_codec("bf16");
  std::vector<std::byte> message(codec->max_encoded_bytes(values.size()));
  codec->encode(values.data(), values.size(), message.data());
  std::vector<float> out(values.size(), 0.0f);
  CHECK_THROWS_AS(codec->decode_add(message.data(), message.size() - 4, out.data(), out.size()),
                  cc::CodecError);
  CHECK(out == std::vector<float>(values.size(), 0.0f));
}
