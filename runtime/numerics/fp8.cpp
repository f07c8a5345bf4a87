// Implementation of fp8.hpp. Rounding works on the fp32 value in two branch-free parts
// that GCC vectorizes: the normal range rounds the fp32 mantissa to the format's bits on
// the integer representation (round to nearest even), the subnormal range rounds to the
// fixed subnormal step by adding and removing 2^23 steps (the FPU's own round to nearest
// even does it); a select picks one, then the overflow rule and NaN are applied.
#include "runtime/numerics/fp8.hpp"

#include <cmath>
#include <cstring>

namespace dseek::numerics {

namespace {
struct Spec {
  int mantissa_bits;
  int min_normal_exponent;  // unbiased
  int bias;
  float max;
  bool saturates;
};

constexpr Spec spec_of(Fp8Format format) {
  return format == Fp8Format::e4m3 ? Spec{3, -6, 7, 448.0f, true}
                                   : Spec{2, -14, 15, 57344.0f, false};
}

constexpr float pow2(int exponent) {
  float x = 1.0f;
  for (; exponent > 0; --exponent) x *= 2.0f;
  for (; exponent < 0; ++exponent) x *= 0.5f;
  return x;
}

inline uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
inline float float_of(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// The rounding itself, inlined into the vector loop with a compile-time format.
template <Fp8Format F>
inline float round_one(float x) {
  constexpr Spec s = spec_of(F);
  constexpr int drop = 23 - s.mantissa_bits;
  const uint32_t bits = bits_of(x);
  const uint32_t sign = bits & 0x80000000u;
  const uint32_t magnitude_bits = bits & 0x7fffffffu;
  const float magnitude = float_of(magnitude_bits);
  // Normal range: round the mantissa to s.mantissa_bits bits.
  const uint32_t normal =
      (magnitude_bits + ((1u << (drop - 1)) - 1u) + ((magnitude_bits >> drop) & 1u)) &
      ~((1u << drop) - 1u);
  // Subnormal range: multiples of 2^(min_normal_exponent - mantissa_bits).
  constexpr float step = pow2(s.min_normal_exponent - s.mantissa_bits);
  constexpr float shifter = step * 8388608.0f;  // its fp32 ulp is `step`
  const float subnormal = (magnitude + shifter) - shifter;
  constexpr float min_normal = pow2(s.min_normal_exponent);
  float rounded = magnitude < min_normal ? subnormal : float_of(normal);
  if constexpr (s.saturates) {
    rounded = rounded > s.max ? s.max : rounded;
  } else {
    rounded = rounded > s.max ? INFINITY : rounded;
  }
  const float result = float_of(bits_of(rounded) | sign);
  return magnitude_bits > 0x7f800000u ? x : result;  // NaN stays NaN
}

template <Fp8Format F>
float quantize_loop(const float* in, float* out, size_t n, float scale) {
  float amax = 0.0f;
#pragma omp simd reduction(max : amax)
  for (size_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float a = std::fabs(x);
    amax = a > amax ? a : amax;
    out[i] = round_one<F>(x * scale);
  }
  return amax;
}
}  // namespace

const char* name_of(Fp8Format format) { return format == Fp8Format::e4m3 ? "e4m3" : "e5m2"; }

float fp8_max(Fp8Format format) { return spec_of(format).max; }

float round_to_fp8(float x, Fp8Format format) {
  return format == Fp8Format::e4m3 ? round_one<Fp8Format::e4m3>(x)
                                   : round_one<Fp8Format::e5m2>(x);
}

uint8_t fp32_to_fp8(float x, Fp8Format format) {
  const Spec s = spec_of(format);
  const float r = round_to_fp8(x, format);
  const uint8_t sign = std::signbit(r) ? 0x80 : 0x00;
  const int exponent_field_max = (1 << (7 - s.mantissa_bits)) - 1;
  if (std::isnan(r)) return static_cast<uint8_t>(sign | 0x7f);  // all ones: NaN in both
  if (std::isinf(r)) return static_cast<uint8_t>(sign | (exponent_field_max << s.mantissa_bits));
  const float a = std::fabs(r);
  if (a < std::ldexp(1.0f, s.min_normal_exponent)) {  // subnormal or zero
    const int mantissa = static_cast<int>(a / std::ldexp(1.0f, s.min_normal_exponent -
                                                                    s.mantissa_bits));
    return static_cast<uint8_t>(sign | mantissa);
  }
  int exponent = 0;
  const float fraction = std::frexp(a, &exponent);  // a = fraction * 2^exponent, [0.5, 1)
  const int mantissa =
      static_cast<int>((fraction * 2.0f - 1.0f) * static_cast<float>(1 << s.mantissa_bits));
  const int field = exponent - 1 + s.bias;
  return static_cast<uint8_t>(sign | (field << s.mantissa_bits) | mantissa);
}

float fp8_to_fp32(uint8_t code, Fp8Format format) {
  const Spec s = spec_of(format);
  const int exponent_bits = 7 - s.mantissa_bits;
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  const int field = (code >> s.mantissa_bits) & ((1 << exponent_bits) - 1);
  const int mantissa = code & ((1 << s.mantissa_bits) - 1);
  const int field_max = (1 << exponent_bits) - 1;
  if (format == Fp8Format::e4m3 && field == field_max && mantissa == (1 << s.mantissa_bits) - 1)
    return NAN;
  if (format == Fp8Format::e5m2 && field == field_max)
    return mantissa == 0 ? sign * INFINITY : NAN;
  if (field == 0)
    return sign * std::ldexp(static_cast<float>(mantissa),
                             s.min_normal_exponent - s.mantissa_bits);
  return sign * std::ldexp(1.0f + static_cast<float>(mantissa) / (1 << s.mantissa_bits),
                           field - s.bias);
}

float quantize_scaled(const float* in, float* out, size_t n, float scale, Fp8Format format) {
  return format == Fp8Format::e4m3 ? quantize_loop<Fp8Format::e4m3>(in, out, n, scale)
                                   : quantize_loop<Fp8Format::e5m2>(in, out, n, scale);
}

}  // namespace dseek::numerics
