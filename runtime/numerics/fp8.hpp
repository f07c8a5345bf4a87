// The two 8-bit float formats of FP8 training (OCP FP8 / NVIDIA Hopper):
//   E4M3 (bias 7):  max 448, subnormals down to 2^-9, no Inf, S.1111.111 is NaN. It holds
//                   activations and weights. Conversion SATURATES: anything beyond +-448
//                   (Inf included) becomes +-448, as cuda's __NV_SATFINITE conversion does.
//   E5M2 (bias 15): max 57344, subnormals down to 2^-16, Inf and NaN as in IEEE. It holds
//                   gradients (wider range, less precision). Conversion does NOT saturate:
//                   a value that rounds beyond 57344 becomes Inf, so an overflow reaches
//                   the loss scaler (optim/loss_scaler.hpp) instead of passing silently.
// Both round to nearest, ties to even, and keep NaN.
//
// encode/decode give the 8-bit codes (tests, storage); quantize_scaled() is the vectorized
// path the CPU backend's FP8 matmuls use: the fp8 values of x * scale, kept as fp32
// (an fp32 GEMM on them is exact per product, as an FP8 tensor-core GEMM with fp32
// accumulate), and the amax of x for delayed scaling (delayed_scaling.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dseek::numerics {

enum class Fp8Format { e4m3, e5m2 };

const char* name_of(Fp8Format format);
// Largest finite value: 448 (E4M3) or 57344 (E5M2).
float fp8_max(Fp8Format format);

// The float nearest to x on the format's grid, with the format's overflow rule (see above).
float round_to_fp8(float x, Fp8Format format);
uint8_t fp32_to_fp8(float x, Fp8Format format);
float fp8_to_fp32(uint8_t code, Fp8Format format);

// out[i] = round_to_fp8(in[i] * scale); returns max |in[i]| over the finite and infinite
// entries (NaN ignored). out may alias in. Vectorized.
float quantize_scaled(const float* in, float* out, size_t n, float scale, Fp8Format format);

}  // namespace dseek::numerics
