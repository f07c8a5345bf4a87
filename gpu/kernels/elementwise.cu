// Element-wise ops on the GPU: GELU (tanh approximation, GPT-2's) forward and backward,
// the residual addition, and scaling in place (the loss scaler's unscaling). One thread per element, grid-stride. gelu_backward reads
// inp[i] and dout[i] before writing dinp[i] at the same index, so dinp may alias dout
// (which is why no pointer here is __restrict__).
#include <cmath>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/device_helpers.cuh"
#include "gpu/kernels/kernels.hpp"

namespace dseek::gpu::kernels {

namespace {
constexpr int kThreads = 256;
constexpr float kGeluCube = 0.044715f;

__device__ __forceinline__ float gelu_scale() { return sqrtf(2.0f / static_cast<float>(M_PI)); }

template <typename Out>  // float, or uint16_t: bf16 bits
__global__ void gelu_forward_kernel(Out* out, const float* inp, size_t n) {
  const float scale = gelu_scale();
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float x = inp[i];
    const float t = tanhf(scale * (x + kGeluCube * x * x * x));
    store_activation(out + i, 0.5f * x * (1.0f + t));
  }
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n) {
  const float scale = gelu_scale();
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float x = inp[i];
    const float g = dout[i];
    const float t = tanhf(scale * (x + kGeluCube * x * x * x));
    const float sech2 = 1.0f - t * t;
    const float du_dx = scale * (1.0f + 3.0f * kGeluCube * x * x);
    dinp[i] = (0.5f * (1.0f + t) + 0.5f * x * sech2 * du_dx) * g;
  }
}

__global__ void residual_forward_kernel(float* out, const float* a, const float* b, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}

__global__ void scale_kernel(float* x, size_t n, float factor) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    x[i] *= factor;
}
}  // namespace

template <typename Out>
void launch_gelu_forward(cudaStream_t stream, Out* out, const float* inp, size_t n) {
  gelu_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(out, inp, n);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "gelu_forward_kernel");
}

void gelu_forward(cudaStream_t stream, float* out, const float* inp, size_t n) {
  launch_gelu_forward(stream, out, inp, n);
}

void gelu_forward(cudaStream_t stream, uint16_t* out, const float* inp, size_t n) {
  launch_gelu_forward(stream, out, inp, n);
}

void gelu_backward(cudaStream_t stream, float* dinp, const float* inp, const float* dout,
                   size_t n) {
  gelu_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(dinp, inp, dout, n);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "gelu_backward_kernel");
}

void residual_forward(cudaStream_t stream, float* out, const float* a, const float* b, size_t n) {
  residual_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(out, a, b, n);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "residual_forward_kernel");
}

void scale(cudaStream_t stream, float* x, size_t n, float factor) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, n, factor);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "scale_kernel");
}

}  // namespace dseek::gpu::kernels
