// Linear layers on the GPU through cuBLAS sgemm: fp32 inputs, fp32 accumulate. The
// backend's handle is in CUBLAS_DEFAULT_MATH mode, which never uses TF32, so results
// agree with the CPU's sgemm to fp32 rounding (TF32 would lose ~3 decimal digits).
//
// cuBLAS is column-major; a row-major (R, K) array x is the column-major (K, R) array
// x' = x^T, so each row-major product is computed as its transpose: out = inp w^T
// becomes out' = op_T(w') inp'. Each call below spells out its shapes and leading
// dimensions. The bias is broadcast into `out` first and the GEMM adds to it (beta = 1).
#include "gpu/cuda_check.hpp"
#include "gpu/kernels/device_helpers.cuh"
#include "gpu/kernels/kernels.hpp"

namespace dseek::gpu::kernels {

namespace {
__global__ void broadcast_bias_kernel(float* out, const float* bias, int N, int OC) {
  const size_t total = static_cast<size_t>(N) * OC;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = bias[i % OC];
}
}  // namespace

void matmul_forward(cublasHandle_t handle, cudaStream_t stream, float* out, const float* inp,
                    const float* w, const float* bias, int N, int C, int OC) {
  if (bias != nullptr) {
    constexpr int kThreads = 256;
    broadcast_bias_kernel<<<blocks_for(static_cast<size_t>(N) * OC, kThreads), kThreads, 0,
                            stream>>>(out, bias, N, OC);
    DSEEK_CUDA_CHECK_LAUNCH(stream, "broadcast_bias_kernel");
  }
  const float one = 1.0f, zero = 0.0f;
  // Column-major: out' (OC x N, ld OC) = op_T(w' (C x OC, ld C)) * inp' (C x N, ld C).
  DSEEK_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, &one, w, C, inp, C,
                                 bias != nullptr ? &one : &zero, out, OC));
}

size_t matmul_backward_scratch_floats(int N, int OC) { return column_sums_scratch_floats(N, OC); }

void matmul_backward(cublasHandle_t handle, cudaStream_t stream, Scratch scratch, float* dinp,
                     float* dw, float* dbias, const float* dout, const float* inp, const float* w,
                     int N, int C, int OC) {
  const float one = 1.0f, zero = 0.0f;
  if (dinp != nullptr) {
    // dinp (N,C) = dout (N,OC) w (OC,C). Column-major: dinp' (C x N, ld C) =
    // w' (C x OC, ld C) * dout' (OC x N, ld OC). Overwrites (beta = 0: dinp is not read).
    DSEEK_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, &one, w, C, dout,
                                   OC, &zero, dinp, C));
  }
  // dw (OC,C) += dout^T (OC,N) inp (N,C). Column-major: dw' (C x OC, ld C) +=
  // inp' (C x N, ld C) * op_T(dout' (OC x N, ld OC)).
  DSEEK_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, &one, inp, C, dout,
                                 OC, &one, dw, C));
  if (dbias != nullptr) add_column_sums(stream, scratch, dbias, dout, N, OC);
}

}  // namespace dseek::gpu::kernels
