// The bf16 and FP8 linear layers of the CUDA backend (backend.hpp's mixed_matmul_forward /
// mixed_matmul_backward in MatmulFormat::bf16 / fp8), on cuBLASLt (cublaslt_gemm.hpp)
// with the operand casts of precision_convert.hpp. The numerics are those of the CPU
// reference, runtime/backend/cpu_matmul_mixed.cpp:
//   bf16: inp, w and dout rounded to bf16 (nearest even), fp32 accumulate and output.
//   fp8:  inp, w -> E4M3 and dout -> E5M2 as fp8(x * scale) with the policy's scales
//         (device floats), product times 1 / (scale_a * scale_b); each operand's amax is
//         RAISED to max |x| (never reset here: the delayed-scaling history owns that).
//   dinp overwrites, dw accumulates (beta = 1); the bias gradient is the backend's job
//   (column sums of the unquantized dout, as on the CPU).
//
// FP8 shapes: cuBLASLt's FP8 kernels need N, C and OC multiples of 16. A call that
// breaks the rule is REFUSED (std::invalid_argument naming train.precision), not run in
// bf16: a silent fallback would give numbers the CPU reference never computes for that
// config and would leave the operands' amax unraised, so the next step's scales would
// come from a stale history. GPT-2's vocabulary head (V = 50257) runs in bf16, never
// fp8, under model::PrecisionPolicy, so a GPT-2 step with B*T a multiple of 16 never hits
// it.
//
// Everything is enqueued on the backend's stream; operand copies live in scratch blocks
// taken from the backend's pool, grown to the largest shape seen and then kept.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "runtime/backend/backend.hpp"

namespace dseek::gpu {

class CublasLtGemm;

class CudaMixedMatmul {
 public:
  using Allocate = std::function<void*(size_t bytes)>;
  using Release = std::function<void(void* pointer)>;

  // `label` names the device in messages; allocate/release are the backend's pool.
  CudaMixedMatmul(int device_index, cudaStream_t stream, std::string label, Allocate allocate,
                  Release release);
  ~CudaMixedMatmul();
  CudaMixedMatmul(const CudaMixedMatmul&) = delete;
  CudaMixedMatmul& operator=(const CudaMixedMatmul&) = delete;

  // out (N, OC) = inp (N, C) @ w^T + bias (may be null), format bf16 or fp8.
  void forward(float* out, const float* inp, const float* w, const float* bias, int N, int C,
               int OC, const backend::MatmulPrecision& precision);
  // dinp = dout @ w (overwrite; may be null), dw += dout^T @ inp, format bf16 or fp8.
  void backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                int N, int C, int OC, const backend::MatmulPrecision& precision);
  // The bf16 forms on an input that is bf16 already (bf16 activations): no cast of it.
  void bf16_forward(float* out, const __nv_bfloat16* inp, const float* w, const float* bias,
                    int N, int C, int OC);
  void bf16_backward(float* dinp, float* dw, const float* dout, const __nv_bfloat16* inp,
                     const float* w, int N, int C, int OC);

 private:
  // One grow-only scratch block per operand copy, plus the inverse scales.
  enum Slot { kInput, kWeight, kOutputGrad, kInputT, kWeightT, kOutputGradT, kScaleInv, kSlots };
  void* slot(Slot which, size_t bytes);
  CublasLtGemm& gemm();
  void require_fp8(int N, int C, int OC, const backend::MatmulPrecision& precision);
  // Device floats {1 / inp scale, 1 / weight scale, 1 / dout scale} (the last only with
  // `with_dout`) in the kScaleInv block: cuBLASLt's scale pointers take the inverses.
  const float* inverse_scales(const backend::MatmulPrecision& precision, bool with_dout);

  int device_index_;
  cudaStream_t stream_;
  std::string label_;
  Allocate allocate_;
  Release release_;
  std::array<void*, kSlots> blocks_{};
  std::array<size_t, kSlots> block_bytes_{};
  std::unique_ptr<CublasLtGemm> gemm_;  // made on the first mixed call (32 MiB workspace)
};

}  // namespace dseek::gpu
