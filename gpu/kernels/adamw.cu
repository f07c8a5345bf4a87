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

// The given-second-moment step (Backend::adamw_given_moment_update): the squares of the
// corrected update summed in double by kGivenBlocks x kThreads threads into partials,
// one block turns them into the scale (partials[kGivenBlocks]), then the update reads it.
constexpr int kGivenBlocks = 256;

__global__ void given_update_squares_kernel(double* partials, const float* grads, const float* m,
                                            const float* v, size_t n, float beta1, float eps,
                                            float clip_scale, float correction) {
  __shared__ double shared[kThreads];
  double total = 0.0;
  for (size_t i = blockIdx.x * static_cast<size_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<size_t>(kGivenBlocks) * kThreads) {
    const float mi = (beta1 * m[i] + (1.0f - beta1) * (grads[i] * clip_scale)) * correction;
    const float update = mi / (sqrtf(v[i]) + eps);
    total += static_cast<double>(update) * update;
  }
  total = block_tree_sum<kThreads>(total, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void given_update_scale_kernel(double* partials, size_t n, double cap) {
  __shared__ double shared[kThreads];
  static_assert(kGivenBlocks == kThreads, "one thread per partial");
  const double squares = block_tree_sum<kThreads>(partials[threadIdx.x], shared);
  if (threadIdx.x == 0) {
    const double rms = sqrt(squares / static_cast<double>(n));
    partials[kGivenBlocks] = rms > cap ? cap / rms : 1.0;
  }
}

__global__ void given_update_kernel(float* params, const float* grads, float* m, const float* v,
                                    size_t n, float beta1, float eps, float clip_scale,
                                    float decay, float step_size, const double* scale) {
  const float update_scale = scale != nullptr ? static_cast<float>(*scale) : 1.0f;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float mi = beta1 * m[i] + (1.0f - beta1) * (grads[i] * clip_scale);
    m[i] = mi;
    params[i] = params[i] * decay - update_scale * step_size * mi / (sqrtf(v[i]) + eps);
  }
}
}  // namespace

int given_moment_partials() { return kGivenBlocks + 1; }

void adamw_given_moment_update(cudaStream_t stream, double* partials, float* params,
                               const float* grads, float* m, const float* v, size_t n,
                               float beta1, float eps, float clip_scale, float decay,
                               float step_size, float correction, double cap) {
  if (n == 0) return;
  const double* scale = nullptr;
  if (cap > 0.0) {
    given_update_squares_kernel<<<kGivenBlocks, kThreads, 0, stream>>>(
        partials, grads, m, v, n, beta1, eps, clip_scale, correction);
    DSEEK_CUDA_CHECK_LAUNCH(stream, "given_update_squares_kernel");
    given_update_scale_kernel<<<1, kThreads, 0, stream>>>(partials, n, cap);
    DSEEK_CUDA_CHECK_LAUNCH(stream, "given_update_scale_kernel");
    scale = partials + kGivenBlocks;
  }
  given_update_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
      params, grads, m, v, n, beta1, eps, clip_scale, decay, step_size, scale);
  DSEEK_CUDA_CHECK_LAUNCH(stream, "given_update_kernel");
}

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
