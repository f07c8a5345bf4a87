// bf16 conversion (runtime/numerics/bf16.hpp): round to nearest even on the exact tie
// cases, NaN and Inf kept, overflow to Inf, and the vectorized loop equal to the scalar
// conversion on every special value and on random values of every magnitude.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/numerics/bf16.hpp"

using namespace dseek::numerics;

namespace {
float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
uint32_t bits_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}
}  // namespace

TEST_CASE("bf16: round to nearest, ties to even", "[unit][numerics]") {
  // 1 + 2^-8 lies exactly between 1 (mantissa ...0) and 1 + 2^-7 (...1): to 1.
  CHECK(bf16_to_fp32(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8))) == 1.0f);
  // 1 + 3 * 2^-8 lies between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  CHECK(bf16_to_fp32(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))) ==
        1.0f + std::ldexp(1.0f, -6));
  // Just above a tie rounds up, just below rounds down.
  CHECK(fp32_to_bf16(from_bits(0x3f808001u)) == 0x3f81u);
  CHECK(fp32_to_bf16(from_bits(0x3f807fffu)) == 0x3f80u);
  CHECK(fp32_to_bf16(-1.5f) == 0xbfc0u);
  // Subnormal floats round the same way on their bits.
  CHECK(fp32_to_bf16(from_bits(0x00008000u)) == 0x0000u);  // tie, even is 0
  CHECK(fp32_to_bf16(from_bits(0x00018000u)) == 0x0002u);  // tie, up to even
}

TEST_CASE("bf16: NaN, Inf and overflow", "[unit][numerics]") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(fp32_to_bf16(inf) == 0x7f80u);
  CHECK(fp32_to_bf16(-inf) == 0xff80u);
  CHECK(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the dropped bits must stay NaN, not become Inf.
  CHECK(std::isnan(bf16_to_fp32(fp32_to_bf16(from_bits(0x7f800001u)))));
  CHECK(std::isnan(bf16_to_fp32(fp32_to_bf16(from_bits(0xff800001u)))));
  // The largest float rounds beyond bf16's largest finite value (0x7f7f): Inf.
  CHECK(fp32_to_bf16(std::numeric_limits<float>::max()) == 0x7f80u);
  CHECK(bf16_to_fp32(0x7f7fu) == from_bits(0x7f7f0000u));
}

TEST_CASE("bf16: the vectorized rounding equals the scalar one", "[unit][numerics]") {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               from_bits(0x7f800001u), from_bits(0x00008000u),
                               from_bits(0x3f808000u), from_bits(0x3f818000u),
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::denorm_min()};
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 100000; ++i) values.push_back(from_bits(any_bits(rng)));
  std::vector<float> rounded(values.size());
  round_to_bf16(values.data(), rounded.data(), values.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const float expected = bf16_to_fp32(fp32_to_bf16(values[i]));
    const bool same = std::isnan(expected) ? std::isnan(rounded[i])
                                           : bits_of(expected) == bits_of(rounded[i]);
    if (!same) ++mismatches;
  }
  CHECK(mismatches == 0);
}
