// CudaMixedMatmul (cuda_mixed_matmul.hpp): casts the fp32 operands into scratch, then one
// cuBLASLt product per output, all on the backend's stream. The fp8 path reads the
// policy's scales on the device only (no host round trip per matmul).
#include "gpu/cuda_mixed_matmul.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "gpu/cublaslt_gemm.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/kernels/device_helpers.cuh"
#include "gpu/precision_convert.hpp"

namespace dseek::gpu {

namespace {

using backend::MatmulFormat;
using backend::MatmulPrecision;

// The inverse scales lie 256 bytes apart: cuBLASLt refuses (CUBLAS_STATUS_NOT_SUPPORTED,
// seen on an H200) a scale pointer that is only 4-byte aligned, as inverse + 1 was.
constexpr int kScaleStride = 64;  // floats
constexpr int kInpScale = 0, kWeightScale = kScaleStride, kDoutScale = 2 * kScaleStride;

__global__ void reciprocals_kernel(float* inverse, const float* inp_scale,
                                   const float* weight_scale, const float* dout_scale) {
  // The same float division the CPU reference does (1.0f / *scale), one thread.
  inverse[kInpScale] = 1.0f / *inp_scale;
  inverse[kWeightScale] = 1.0f / *weight_scale;
  if (dout_scale != nullptr) inverse[kDoutScale] = 1.0f / *dout_scale;
}

// out[r, c] = bias[c]: the fp8 product then adds to it with beta = 1, as the CPU's sgemm does.
__global__ void broadcast_bias_kernel(float* out, const float* bias, int N, int OC) {
  const size_t total = static_cast<size_t>(N) * OC;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = bias[i % OC];
}

void require_scaling(const backend::Fp8OperandScaling& scaling, const char* operand) {
  if (scaling.scale == nullptr || scaling.amax == nullptr)
    throw std::invalid_argument(std::string("train.precision = \"fp8\": the matmul operand ") +
                                operand + " has no scaling state (MatmulPrecision::" + operand +
                                ")");
}

size_t count(int rows, int cols) { return static_cast<size_t>(rows) * static_cast<size_t>(cols); }

}  // namespace

CudaMixedMatmul::CudaMixedMatmul(int device_index, cudaStream_t stream, std::string label,
                                 Allocate allocate, Release release)
    : device_index_(device_index),
      stream_(stream),
      label_(std::move(label)),
      allocate_(std::move(allocate)),
      release_(std::move(release)) {}

CudaMixedMatmul::~CudaMixedMatmul() {
  for (void* block : blocks_)
    if (block != nullptr) release_(block);
}

CublasLtGemm& CudaMixedMatmul::gemm() {
  // The backend's stream, never the legacy default one: the products must run in order
  // with the backend's other kernels (and its pool's reuse of released blocks).
  if (!gemm_) gemm_ = std::make_unique<CublasLtGemm>(device_index_, stream_);
  return *gemm_;
}

void* CudaMixedMatmul::slot(Slot which, size_t bytes) {
  const auto index = static_cast<size_t>(which);
  if (bytes > block_bytes_[index]) {
    // Released blocks are handed out again only in stream order (device_pool.hpp), so
    // work already queued on the old block is safe.
    if (blocks_[index] != nullptr) release_(blocks_[index]);
    blocks_[index] = nullptr;
    block_bytes_[index] = 0;
    blocks_[index] = allocate_(bytes);
    block_bytes_[index] = bytes;
  }
  return blocks_[index];
}

const float* CudaMixedMatmul::inverse_scales(const MatmulPrecision& precision, bool with_dout) {
  auto* inverse = static_cast<float*>(slot(kScaleInv, 3 * kScaleStride * sizeof(float)));
  reciprocals_kernel<<<1, 1, 0, stream_>>>(inverse, precision.inp.scale, precision.weight.scale,
                                           with_dout ? precision.dout.scale : nullptr);
  DSEEK_CUDA_CHECK_LAUNCH(stream_, "reciprocals_kernel");
  return inverse;
}

void CudaMixedMatmul::require_fp8(int N, int C, int OC, const MatmulPrecision& precision) {
  if (!gemm().fp8_supported())
    throw std::runtime_error("train.precision = \"fp8\": " + label_ + " (" +
                             gemm().device_name() +
                             ") has no cuBLASLt FP8 kernels (they need compute capability 9.0, "
                             "Hopper); use train.precision = \"bf16\" on this device");
  if (N % 16 != 0 || C % 16 != 0 || OC % 16 != 0)
    throw std::invalid_argument(
        "train.precision = \"fp8\": a matmul with N=" + std::to_string(N) + ", C=" +
        std::to_string(C) + ", OC=" + std::to_string(OC) + " on " + label_ +
        ": cuBLASLt's FP8 kernels need N (batch * sequence), C and OC multiples of 16; "
        "this backend refuses rather than run the layer in another precision");
  require_scaling(precision.inp, "inp");
  require_scaling(precision.weight, "weight");
}

void CudaMixedMatmul::forward(float* out, const float* inp, const float* w, const float* bias,
                              int N, int C, int OC, const MatmulPrecision& precision) {
  DSEEK_CUDA_CHECK(cudaSetDevice(device_index_));
  const size_t inp_n = count(N, C), w_n = count(OC, C);
  if (precision.format == MatmulFormat::bf16) {
    auto* inp_b = static_cast<bf16*>(slot(kInput, inp_n * sizeof(bf16)));
    convert_to_bf16(inp_b, inp, inp_n, stream_);
    bf16_forward(out, inp_b, w, bias, N, C, OC);
    return;
  }
  if (precision.format != MatmulFormat::fp8)
    throw std::invalid_argument("CudaMixedMatmul::forward: fp32 goes through matmul_forward");
  require_fp8(N, C, OC, precision);
  void* inp_q = slot(kInput, inp_n);
  void* w_q = slot(kWeight, w_n);
  quantize_to_fp8(inp_q, Fp8Format::e4m3, inp, inp_n, precision.inp.scale, precision.inp.amax,
                  stream_);
  quantize_to_fp8(w_q, Fp8Format::e4m3, w, w_n, precision.weight.scale, precision.weight.amax,
                  stream_);
  const float* inverse = inverse_scales(precision, false);
  if (bias != nullptr) {
    constexpr int kThreads = 256;
    broadcast_bias_kernel<<<kernels::blocks_for(count(N, OC), kThreads), kThreads, 0, stream_>>>(
        out, bias, N, OC);
    DSEEK_CUDA_CHECK_LAUNCH(stream_, "broadcast_bias_kernel");
  }
  Fp8Scales scales;
  scales.a_scale_inv = inverse + kInpScale;  // a = inp
  scales.b_scale_inv = inverse + kWeightScale;  // b = w
  // fp32 bias (the CPU adds it in fp32): broadcast above and added with beta = 1, since
  // cuBLASLt's FP8 bias epilogue takes bf16 only.
  gemm().fp8_gemm(out, Fp8Output::fp32, inp_q, CUDA_R_8F_E4M3, w_q, CUDA_R_8F_E4M3, nullptr, N,
                  OC, C, bias != nullptr ? 1.0f : 0.0f, scales);
}

void CudaMixedMatmul::bf16_forward(float* out, const bf16* inp, const float* w,
                                   const float* bias, int N, int C, int OC) {
  DSEEK_CUDA_CHECK(cudaSetDevice(device_index_));
  const size_t w_n = count(OC, C);
  auto* w_b = static_cast<bf16*>(slot(kWeight, w_n * sizeof(bf16)));
  convert_to_bf16(w_b, w, w_n, stream_);
  gemm().bf16_forward(out, inp, w_b, bias, N, C, OC);
}

void CudaMixedMatmul::bf16_backward(float* dinp, float* dw, const float* dout, const bf16* inp,
                                    const float* w, int N, int C, int OC) {
  DSEEK_CUDA_CHECK(cudaSetDevice(device_index_));
  const size_t w_n = count(OC, C), dout_n = count(N, OC);
  auto* dout_b = static_cast<bf16*>(slot(kOutputGrad, dout_n * sizeof(bf16)));
  auto* w_b = static_cast<bf16*>(slot(kWeight, w_n * sizeof(bf16)));
  convert_to_bf16(dout_b, dout, dout_n, stream_);
  convert_to_bf16(w_b, w, w_n, stream_);
  if (dinp != nullptr) gemm().bf16_backward_input(dinp, dout_b, w_b, N, C, OC);
  gemm().bf16_backward_weight(dw, dout_b, inp, N, C, OC);
}

void CudaMixedMatmul::backward(float* dinp, float* dw, const float* dout, const float* inp,
                               const float* w, int N, int C, int OC,
                               const MatmulPrecision& precision) {
  DSEEK_CUDA_CHECK(cudaSetDevice(device_index_));
  const size_t inp_n = count(N, C), w_n = count(OC, C), dout_n = count(N, OC);
  if (precision.format == MatmulFormat::bf16) {
    auto* inp_b = static_cast<bf16*>(slot(kInput, inp_n * sizeof(bf16)));
    convert_to_bf16(inp_b, inp, inp_n, stream_);
    bf16_backward(dinp, dw, dout, inp_b, w, N, C, OC);
    return;
  }
  if (precision.format != MatmulFormat::fp8)
    throw std::invalid_argument("CudaMixedMatmul::backward: fp32 goes through matmul_backward");
  require_fp8(N, C, OC, precision);
  require_scaling(precision.dout, "dout");
  // cuBLASLt's FP8 is "TN" only (K contiguous in both operands): dinp needs w^T and the
  // weight gradient needs dout^T and inp^T; the cast makes them in the same pass. Every
  // operand is quantized even when dinp is null, so each amax is raised as on the CPU.
  auto* dout_q = static_cast<fp8_e5m2*>(slot(kOutputGrad, dout_n));
  auto* dout_t = static_cast<fp8_e5m2*>(slot(kOutputGradT, dout_n));
  auto* inp_t = static_cast<fp8_e4m3*>(slot(kInputT, inp_n));
  auto* w_t = static_cast<fp8_e4m3*>(slot(kWeightT, w_n));
  quantize_transpose_to_fp8(dout_t, Fp8Format::e5m2, dout, N, OC, precision.dout.scale,
                            precision.dout.amax, stream_);
  quantize_transpose_to_fp8(inp_t, Fp8Format::e4m3, inp, N, C, precision.inp.scale,
                            precision.inp.amax, stream_);
  quantize_transpose_to_fp8(w_t, Fp8Format::e4m3, w, OC, C, precision.weight.scale,
                            precision.weight.amax, stream_);
  const float* inverse = inverse_scales(precision, true);
  if (dinp != nullptr) {
    quantize_to_fp8(dout_q, Fp8Format::e5m2, dout, dout_n, precision.dout.scale,
                    precision.dout.amax, stream_);
    Fp8Scales scales;
    scales.a_scale_inv = inverse + kDoutScale;  // a = dout
    scales.b_scale_inv = inverse + kWeightScale;  // b = w^T
    gemm().fp8_backward_input(dinp, Fp8Output::fp32, dout_q, w_t, N, C, OC, scales);
  }
  Fp8Scales scales;
  scales.a_scale_inv = inverse + kDoutScale;  // a = dout^T
  scales.b_scale_inv = inverse + kInpScale;  // b = inp^T
  gemm().fp8_backward_weight(dw, dout_t, inp_t, N, C, OC, scales);
}

}  // namespace dseek::gpu
