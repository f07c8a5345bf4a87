// AdamW on the CPU, in the same order of operations as torch.optim.AdamW (decay the
// parameter first, then the bias-corrected Adam step), so a PyTorch reference agrees
// to float rounding.
#include <cmath>

#include "runtime/backend/cpu_backend.hpp"

namespace dseek::backend {

void CpuBackend::adamw_update(float* params, const float* grads, float* m, float* v, size_t n,
                              float lr, float beta1, float beta2, float eps, float weight_decay,
                              int64_t step, float grad_scale) {
  const float bias_correction1 = 1.0f - std::pow(beta1, static_cast<float>(step));
  const float bias_correction2 = 1.0f - std::pow(beta2, static_cast<float>(step));
  const float step_size = lr / bias_correction1;
  const float sqrt_bias_correction2 = std::sqrt(bias_correction2);
  const float decay = 1.0f - lr * weight_decay;
  pool_.parallel_for(n, [&](size_t begin, size_t end, int) {
#pragma omp simd
    for (size_t i = begin; i < end; ++i) {
      const float g = grads[i] * grad_scale;
      const float mi = beta1 * m[i] + (1.0f - beta1) * g;
      const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
      m[i] = mi;
      v[i] = vi;
      const float denom = std::sqrt(vi) / sqrt_bias_correction2 + eps;
      params[i] = params[i] * decay - step_size * mi / denom;
    }
  }, 1 << 14);
}

// One thread, in element order: the RMS's double sum and the update are the bits the
// optimizer's host loop had before the op existed (replicas and checkpoints agree).
void CpuBackend::adamw_given_moment_update(float* params, const float* grads, float* m,
                                           const float* v, size_t n, float beta1, float eps,
                                           float clip_scale, float decay, float step_size,
                                           float correction, double cap) {
  float update_scale = 1.0f;
  if (cap > 0.0 && n > 0) {
    double squares = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const float mi = (beta1 * m[i] + (1.0f - beta1) * (grads[i] * clip_scale)) * correction;
      const float update = mi / (std::sqrt(v[i]) + eps);
      squares += static_cast<double>(update) * update;
    }
    const double rms = std::sqrt(squares / static_cast<double>(n));
    if (rms > cap) update_scale = static_cast<float>(cap / rms);
  }
  for (size_t i = 0; i < n; ++i) {
    const float mi = beta1 * m[i] + (1.0f - beta1) * (grads[i] * clip_scale);
    m[i] = mi;
    params[i] = params[i] * decay - update_scale * step_size * mi / (std::sqrt(v[i]) + eps);
  }
}

}  // namespace dseek::backend
