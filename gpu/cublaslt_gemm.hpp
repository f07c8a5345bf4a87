// BF16 and FP8 matrix products through cuBLASLt, with fp32 accumulation: the GEMMs of
// mixed-precision training (issue 7). They follow the backend's matmul conventions
// (runtime/backend/backend.hpp): row-major arrays, a linear layer's weight w is (OC, C),
//   forward          out  (N, OC)  = inp (N, C) @ w^T (+ bias)
//   input gradient   dinp (N, C)   = dout (N, OC) @ w          (overwrites)
//   weight gradient  dw   (OC, C) += dout^T @ inp              (accumulates, fp32)
// so a precision policy can swap them in for the fp32 matmuls one by one.
//
// BF16: bf16 operands, fp32 or bf16 output; every transpose is taken as it is stored.
//
// FP8 (compute capability 9.0+, refused elsewhere with a message): E4M3 for weights and
// activations, E5M2 for gradients (never both operands E5M2), per-tensor scales. cuBLASLt
// runs FP8 only in the "TN" layout (A transposed, B not: in row-major terms both operands
// have the reduction dimension K contiguous) with 16-byte aligned dimensions, i.e.
// multiples of 16 FP8 elements (cuBLAS documentation, cublasLtMatmul(), "To use FP8
// kernels, the following set of requirements must be satisfied"; also NVIDIA's
// CUDALibrarySamples cuBLASLt/LtFp8Matmul). So the two backward products take
// TRANSPOSED copies of w, dout and inp, which precision_convert.hpp's
// quantize_transpose_to_fp8 makes in the same pass as the cast (as Transformer Engine's
// cast-transpose does). Shapes that break the rule are refused with the rule in the
// message (GPT-2's vocabulary of 50257 must be padded, e.g. to 50304 as llm.c does).
//
// Scales: a tensor x is stored as fp8(x * scale); cuBLASLt's A/B scale pointers take the
// INVERSE (it multiplies the product back by scale_inv_a * scale_inv_b). An fp8 output is
// stored as fp8(result * d_scale), and cuBLASLt writes amax(|result|) before that scale
// to amax_d (the delayed-scaling history's next entry). All scale pointers are device
// pointers to one float, so scales stay on the device between steps.
//
// One CublasLtGemm per device and stream: it owns the cuBLASLt handle, a workspace, and
// the algorithms chosen for the shapes seen so far (cuBLASLt's heuristic runs once per
// shape, not per call).
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <string>

namespace dseek::gpu {

using bf16 = __nv_bfloat16;
using fp8_e4m3 = __nv_fp8_e4m3;
using fp8_e5m2 = __nv_fp8_e5m2;

// What an FP8 product's output is stored as.
enum class Fp8Output { fp32, bf16, e4m3, e5m2 };

// The per-tensor scales of one FP8 product (device pointers to one float each).
struct Fp8Scales {
  const float* a_scale_inv = nullptr;  // 1 / the scale the first operand was quantized with
  const float* b_scale_inv = nullptr;  // the same for the second operand
  const float* d_scale = nullptr;      // fp8 output only: stored = fp8(result * d_scale)
  float* amax_d = nullptr;             // fp8 output only, optional: max |result| before d_scale
};

class CublasLtGemm {
 public:
  // On device `device_index` (made current on the calling thread), enqueuing on `stream`
  // (nullptr: the default stream).
  explicit CublasLtGemm(int device_index, cudaStream_t stream = nullptr);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // True where the device runs cuBLASLt's FP8 kernels (compute capability 9.0+).
  bool fp8_supported() const { return compute_major_ >= 9; }
  std::string device_name() const { return device_name_; }

  // --- BF16 (any shape; bias has the output's type, may be null) ---------------------
  void bf16_forward(float* out, const bf16* inp, const bf16* w, const float* bias, int N, int C,
                    int OC);
  void bf16_forward(bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int N, int C,
                    int OC);
  void bf16_backward_input(float* dinp, const bf16* dout, const bf16* w, int N, int C, int OC);
  void bf16_backward_input(bf16* dinp, const bf16* dout, const bf16* w, int N, int C, int OC);
  void bf16_backward_weight(float* dw, const bf16* dout, const bf16* inp, int N, int C, int OC);

  // --- FP8 (compute capability 9.0+; N, C, OC multiples of 16) -------------------------
  // out (N, OC) = inp (N, C) @ w^T (+ bias, bf16, OC; may be null). `out` is float*,
  // bf16*, fp8_e4m3* or fp8_e5m2* as `out_type` says.
  void fp8_forward(void* out, Fp8Output out_type, const fp8_e4m3* inp, const fp8_e4m3* w,
                   const bf16* bias, int N, int C, int OC, const Fp8Scales& scales);
  // dinp (N, C) = dout (N, OC) @ w, from w_t = w^T stored (C, OC). a = dout, b = w_t.
  void fp8_backward_input(void* dinp, Fp8Output out_type, const fp8_e5m2* dout,
                          const fp8_e4m3* w_t, int N, int C, int OC, const Fp8Scales& scales);
  // dw (OC, C) += dout^T @ inp, from dout_t (OC, N) and inp_t (C, N). a = dout_t, b = inp_t.
  void fp8_backward_weight(float* dw, const fp8_e5m2* dout_t, const fp8_e4m3* inp_t, int N,
                           int C, int OC, const Fp8Scales& scales);

  // cuBLASLt's FP8 fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM): faster, but the
  // tensor cores' partial sums are not promoted to fp32 as often. Transformer Engine turns
  // it on for the forward product only; off by default here.
  void set_fp8_fast_accumulation(bool on) { fp8_fast_accumulation_ = on; }

  // The general FP8 product all three use: d (M, N) = a (M, K) @ b (N, K)^T (+ beta d,
  // + bias (N)), row-major, K contiguous in both operands.
  void fp8_gemm(void* d, Fp8Output d_type, const void* a, cudaDataType a_type, const void* b,
                cudaDataType b_type, const bf16* bias, int M, int N, int K, float beta,
                const Fp8Scales& scales);

  // One cublasLtMatmul call, described in cuBLAS's column-major terms (internal to
  // cublaslt_gemm.cu; public only so its helpers there can fill one in).
  struct Product;

 private:
  void run(const Product& product);
  // The product in words (shapes, types, leading dimensions, pointer alignment), for errors.
  std::string describe(const Product& product);

  int device_index_ = 0;
  int compute_major_ = 0;
  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  bool fp8_fast_accumulation_ = false;
  std::map<std::string, cublasLtMatmulAlgo_t> algorithms_;  // by shape, types and layout
};

}  // namespace dseek::gpu
