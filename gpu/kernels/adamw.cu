// AdamW on the GPU, one thread per parameter, in the CPU backend's order of operations
// (decay the parameter, then the bias-corrected Adam step). The step-dependent
// constants are computed on the host exactly as the CPU backend computes them, so the
// two agree to the rounding of sqrtf and one division.
#include <cmath>

#include "gpu/cuda_check.hpp"
#include "gpu/kernels/device_helpers.cuh"
#include "gpu/kernels/kernels.hpp"

namespace dseek::gpu::kernels {

namespace {
constexpr int kThreads = 256;

__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, size_t n,
                             float beta1, float beta2, float eps, float step_size,
                             float sqrt_bias_correction2, float decay, float grad_scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float g = grads[i] * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / sqrt_bias_correction2 + eps;
    params[i] = params[i] * decay - step_size * mi / denom;
  }
}
}  // namespace

void adamw_update(cudaStream_t stream, float* params, const float* grads, float* m, float* v,
                  size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                  int64_t step, float grad_scale) {
  const float bias_correction1 = 1.0f - std::pow(beta1, static_cast<float>(step));
  const float bias_correction2 = 1.0f - std::pow(beta2, static_cast<float>(step));
  const float step_size = lr / bias_correction1;
  const float sqrt_bias_correction2 = std::sqrt(bias_correction2);
  const float decay = 1.0f - lr * weight_decay;
  adamw_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
      params, grads, m, v, n, beta1, beta2, eps, step_size, sqrt_bias_correction2, decay,
      grad_scale);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "adamw_kernel");
}

}  // namespace dseek::gpu::kernels
