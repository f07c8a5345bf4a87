// Conversions between the fp32 master copies and the low-precision operands of the
// cuBLASLt GEMMs (cublaslt_gemm.hpp): fp32 -> bf16, and fp32 -> FP8 with a per-tensor
// scale and the tensor's amax reduced in the same pass (the next entry of a delayed-
// scaling history). The transposing variant makes the K-contiguous copies that
// cuBLASLt's FP8 backward products need ("TN" only), in the same single read of the
// input. All pointers are device memory; every call enqueues on `stream` and returns.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace dseek::gpu {

enum class Fp8Format { e4m3, e5m2 };

// The largest finite value of the format: 448 (E4M3), 57344 (E5M2).
float fp8_max(Fp8Format format);

// out[i] = bf16(in[i]), round to nearest even.
void convert_to_bf16(__nv_bfloat16* out, const float* in, size_t n, cudaStream_t stream);
// out[i] = float(in[i]) (exact).
void convert_bf16_to_float(float* out, const __nv_bfloat16* in, size_t n, cudaStream_t stream);

// out[i] = fp8(in[i] * *scale), and *amax = max(*amax, max_i |in[i]|): zero *amax first
// for this tensor's alone. E4M3 saturates to +-448 (values beyond become +-max); E5M2
// does not (beyond 57344 becomes Inf, so an overflowing gradient reaches the loss
// scaler), as runtime/numerics/fp8.hpp does on the CPU. NaN inputs stay NaN and do not
// raise amax.
void quantize_to_fp8(void* out, Fp8Format format, const float* in, size_t n, const float* scale,
                     float* amax, cudaStream_t stream);
// The same from in (rows, cols) to out_t (cols, rows), row-major: out_t[c][r] = in[r][c].
void quantize_transpose_to_fp8(void* out_t, Fp8Format format, const float* in, int rows,
                               int cols, const float* scale, float* amax, cudaStream_t stream);
// out[i] = float(in[i]) * *scale_inv: back to fp32 (checks and debugging).
void dequantize_fp8(float* out, const void* in, Fp8Format format, size_t n,
                    const float* scale_inv, cudaStream_t stream);

// On the device: *scale = fp8_max(format) / *amax / 2^margin, so the tensor's largest
// value lands 2^margin below the format's limit; *scale_inv = 1 / *scale. An amax that is
// zero or not finite leaves scale 1 (nothing to scale by); one so small that the scale
// would overflow gives the largest finite float (never inf, which would make 0 * scale NaN).
void fp8_scale_from_amax(float* scale, float* scale_inv, const float* amax, Fp8Format format,
                         int margin, cudaStream_t stream);

}  // namespace dseek::gpu
