// Vectorizable float exp and tanh for the CPU kernels. glibc's expf/tanhf are scalar
// calls that the compiler cannot vectorize without -ffast-math; the GELU and softmax
// loops call them tens of millions of times a step. These are plain arithmetic, always
// inlined, so the `#pragma omp simd` loops around them vectorize.
//
// Accuracy: exp_approx has a relative error below 2e-7 on [-87, 88] (range reduction
// to |r| <= ln2/2 and a degree-7 Taylor polynomial, truncation error < 5e-9); tanh is
// derived from it, with an absolute error below 3e-7. Both are far inside the 1e-4
// gradient tolerance against PyTorch.
#pragma once

#include <bit>
#include <cstdint>

namespace dseek::util {

[[gnu::always_inline]] inline float exp_approx(float x) {
  // Selects, not std::min/fminf/floorf: those keep GCC 12 from vectorizing the loop.
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;            // ln2 split in two for an exact
  constexpr float kLn2Lo = -2.12194440e-4f;         // range reduction (Cody-Waite)
  // Round to nearest by adding and removing 1.5 * 2^23 (floorf does not vectorize
  // without -ffast-math; this does, and it is exact for |x * log2e| < 2^22).
  constexpr float kRoundMagic = 12582912.0f;
  float k = (x * kLog2e + kRoundMagic) - kRoundMagic;
  float r = x - k * kLn2Hi - k * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t exponent_bits = (static_cast<int32_t>(k) + 127) << 23;
  return p * std::bit_cast<float>(exponent_bits);
}

[[gnu::always_inline]] inline float tanh_approx(float x) {
  // tanh(x) = 1 - 2 / (1 + e^{2x}); e^{2x} saturates cleanly at both ends.
  return 1.0f - 2.0f / (1.0f + exp_approx(2.0f * x));
}

}  // namespace dseek::util
