// bfloat16: the upper 16 bits of an IEEE float32 (8 exponent bits, 7 mantissa bits),
// with round-to-nearest-even on the way down. It keeps fp32's range, so mixed precision
// in bf16 needs no loss scaling; only the mantissa shrinks (relative step 2^-8).
//
// Used by the CPU backend's bf16 matmuls (backend/cpu_matmul_mixed.cpp) and their
// tests; a GPU backend converts with the same rounding (cuda's __float2bfloat16_rn).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dseek::numerics {

// Round to nearest, ties to even; NaN stays NaN (quiet, sign kept), +-Inf stays Inf,
// a finite value too large for bf16 rounds to Inf as IEEE rounding does.
inline uint16_t fp32_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7fffu + lsb;
  return static_cast<uint16_t>(bits >> 16);
}

inline float bf16_to_fp32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// out[i] = bf16_to_fp32(fp32_to_bf16(in[i])): the value a bf16 operand holds, kept as
// fp32 so that an fp32 GEMM on it computes exactly a bf16 x bf16 -> fp32 GEMM (products
// of two 8-bit mantissas are exact in fp32). Vectorized; out may alias in.
void round_to_bf16(const float* in, float* out, size_t n);

// out[i] = fp32_to_bf16(in[i]): the bf16 bits themselves, for a bf16 GEMM (oneDNN's).
// Vectorized; the same rounding as fp32_to_bf16 and round_to_bf16.
void to_bf16_bits(const float* in, uint16_t* out, size_t n);

}  // namespace dseek::numerics
