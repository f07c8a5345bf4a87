// FP8 E4M3 and E5M2 (runtime/numerics/fp8.hpp). Every one of the 256 codes of each format
// decodes to the value the format's definition gives (computed here in double from sign,
// exponent field and mantissa field); every non-NaN code encodes back to itself; the
// midpoint between every pair of neighbouring codes rounds to the even one; overflow
// saturates (E4M3) or becomes Inf (E5M2); NaN stays NaN; the vectorized scaled
// quantization equals the scalar conversion and reports the amax.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "runtime/numerics/fp8.hpp"

using namespace dseek::numerics;

namespace {
struct Definition {
  Fp8Format format;
  int exponent_bits, mantissa_bits, bias;
};
const Definition kE4M3{Fp8Format::e4m3, 4, 3, 7};
const Definition kE5M2{Fp8Format::e5m2, 5, 2, 15};

// The value of `code` as the format defines it; NaN for the NaN codes.
double defined_value(const Definition& d, int code) {
  const int sign = code >> 7;
  const int field = (code >> d.mantissa_bits) & ((1 << d.exponent_bits) - 1);
  const int mantissa = code & ((1 << d.mantissa_bits) - 1);
  const int field_max = (1 << d.exponent_bits) - 1;
  const double s = sign ? -1.0 : 1.0;
  if (d.format == Fp8Format::e5m2 && field == field_max)
    return mantissa == 0 ? s * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  if (d.format == Fp8Format::e4m3 && field == field_max &&
      mantissa == (1 << d.mantissa_bits) - 1)
    return std::numeric_limits<double>::quiet_NaN();
  const double fraction = mantissa / std::pow(2.0, d.mantissa_bits);
  if (field == 0) return s * fraction * std::pow(2.0, 1 - d.bias);
  return s * (1.0 + fraction) * std::pow(2.0, field - d.bias);
}

// The positive finite codes in increasing order of value: 0x00 .. the largest finite.
std::vector<int> positive_finite_codes(const Definition& d) {
  std::vector<int> codes;
  for (int c = 0; c < 128; ++c)
    if (std::isfinite(defined_value(d, c))) codes.push_back(c);
  return codes;
}
}  // namespace

TEST_CASE("fp8: all 256 codes decode to the format's definition", "[unit][numerics]") {
  for (const Definition& d : {kE4M3, kE5M2}) {
    INFO(name_of(d.format));
    int nans = 0, infs = 0;
    for (int code = 0; code < 256; ++code) {
      INFO("code " << code);
      const double expected = defined_value(d, code);
      const float decoded = fp8_to_fp32(static_cast<uint8_t>(code), d.format);
      if (std::isnan(expected)) {
        ++nans;
        CHECK(std::isnan(decoded));
        continue;
      }
      if (std::isinf(expected)) ++infs;
      CHECK(static_cast<double>(decoded) == expected);
      CHECK(std::signbit(decoded) == (code >= 128));
      CHECK(fp32_to_fp8(decoded, d.format) == code);  // round trip
    }
    // E4M3: only S.1111.111 is NaN, no Inf. E5M2: 3 NaN mantissas per sign, and +-Inf.
    CHECK(nans == (d.format == Fp8Format::e4m3 ? 2 : 6));
    CHECK(infs == (d.format == Fp8Format::e4m3 ? 0 : 2));
  }
  CHECK(fp8_to_fp32(0x7e, Fp8Format::e4m3) == 448.0f);
  CHECK(fp8_to_fp32(0x7b, Fp8Format::e5m2) == 57344.0f);
  CHECK(fp8_to_fp32(0x01, Fp8Format::e4m3) == std::ldexp(1.0f, -9));   // smallest subnormal
  CHECK(fp8_to_fp32(0x01, Fp8Format::e5m2) == std::ldexp(1.0f, -16));
  CHECK(fp8_to_fp32(0x08, Fp8Format::e4m3) == std::ldexp(1.0f, -6));   // smallest normal
  CHECK(fp8_to_fp32(0x04, Fp8Format::e5m2) == std::ldexp(1.0f, -14));
  CHECK(fp8_max(Fp8Format::e4m3) == 448.0f);
  CHECK(fp8_max(Fp8Format::e5m2) == 57344.0f);
}

TEST_CASE("fp8: midpoints round to the even neighbour, others to the nearest",
          "[unit][numerics]") {
  for (const Definition& d : {kE4M3, kE5M2}) {
    INFO(name_of(d.format));
    const std::vector<int> codes = positive_finite_codes(d);
    for (size_t i = 0; i + 1 < codes.size(); ++i) {
      const double lo = defined_value(d, codes[i]), hi = defined_value(d, codes[i + 1]);
      const float mid = static_cast<float>((lo + hi) / 2);  // exact in fp32
      REQUIRE(static_cast<double>(mid) == (lo + hi) / 2);
      INFO("between " << lo << " and " << hi);
      const int even = (codes[i] & 1) == 0 ? codes[i] : codes[i + 1];
      CHECK(fp32_to_fp8(mid, d.format) == even);
      CHECK(fp32_to_fp8(-mid, d.format) == (even | 0x80));
      // A hair off the midpoint goes to the nearer side.
      CHECK(fp32_to_fp8(std::nextafter(mid, 0.0f), d.format) == codes[i]);
      CHECK(fp32_to_fp8(std::nextafter(mid, 1e9f), d.format) == codes[i + 1]);
    }
  }
}

TEST_CASE("fp8: overflow saturates in E4M3 and becomes Inf in E5M2", "[unit][numerics]") {
  const float inf = std::numeric_limits<float>::infinity();
  for (float big : {449.0f, 464.0f, 480.0f, 1e6f, 3e38f, inf}) {
    INFO(big);
    CHECK(round_to_fp8(big, Fp8Format::e4m3) == 448.0f);
    CHECK(round_to_fp8(-big, Fp8Format::e4m3) == -448.0f);
    CHECK(fp32_to_fp8(big, Fp8Format::e4m3) == 0x7e);
  }
  // E5M2: up to the midpoint to the next (nonexistent) value 65536 rounds to 57344; the
  // midpoint 61440 is a tie with an odd mantissa, so it rounds up: Inf.
  CHECK(round_to_fp8(61439.0f, Fp8Format::e5m2) == 57344.0f);
  CHECK(round_to_fp8(61440.0f, Fp8Format::e5m2) == inf);
  CHECK(round_to_fp8(-1e6f, Fp8Format::e5m2) == -inf);
  CHECK(fp32_to_fp8(inf, Fp8Format::e5m2) == 0x7c);
  CHECK(fp32_to_fp8(-inf, Fp8Format::e5m2) == 0xfc);
}

TEST_CASE("fp8: subnormals, underflow and NaN", "[unit][numerics]") {
  // Half the smallest subnormal is a tie with 0 (even): 0; a bit more rounds up.
  CHECK(round_to_fp8(std::ldexp(1.0f, -10), Fp8Format::e4m3) == 0.0f);
  CHECK(round_to_fp8(std::nextafter(std::ldexp(1.0f, -10), 1.0f), Fp8Format::e4m3) ==
        std::ldexp(1.0f, -9));
  CHECK(round_to_fp8(std::ldexp(1.0f, -17), Fp8Format::e5m2) == 0.0f);
  CHECK(std::signbit(round_to_fp8(-std::ldexp(1.0f, -20), Fp8Format::e5m2)));  // -0
  // 3 * 2^-10 lies between subnormals 1 and 2 (x 2^-9): to the even one, 2.
  CHECK(fp32_to_fp8(3 * std::ldexp(1.0f, -10), Fp8Format::e4m3) == 0x02);
  // The largest subnormal rounds up into the smallest normal when it should.
  CHECK(fp32_to_fp8(std::ldexp(1.0f, -6) - std::ldexp(1.0f, -11), Fp8Format::e4m3) == 0x08);
  for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    CHECK(std::isnan(round_to_fp8(std::numeric_limits<float>::quiet_NaN(), f)));
    CHECK((fp32_to_fp8(std::numeric_limits<float>::quiet_NaN(), f) & 0x7f) == 0x7f);
  }
}

TEST_CASE("fp8: scaled quantization equals the scalar conversion, with the amax",
          "[unit][numerics]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 20);
  std::vector<float> x(50001);
  float amax = 0.0f;
  for (float& v : x) {
    v = normal(rng) * std::ldexp(1.0f, exponent(rng));
    amax = std::max(amax, std::fabs(v));
  }
  x[17] = std::numeric_limits<float>::quiet_NaN();  // ignored by the amax, kept as NaN
  for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    for (float scale : {1.0f, 0.37f, 1024.0f}) {
      INFO(name_of(f) << " scale " << scale);
      std::vector<float> q(x.size());
      CHECK(quantize_scaled(x.data(), q.data(), x.size(), scale, f) == amax);
      size_t mismatches = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const float expected = round_to_fp8(x[i] * scale, f);
        if (std::isnan(expected) ? !std::isnan(q[i]) : q[i] != expected) ++mismatches;
        // Every output is a value of the format.
        if (!std::isnan(q[i]) && fp8_to_fp32(fp32_to_fp8(q[i], f), f) != q[i]) ++mismatches;
      }
      CHECK(mismatches == 0);
    }
  }
}
