// LayerNorm on the CPU (eps 1e-5, as PyTorch's default), its output in fp32 or as bf16 bits
// (bf16 activations). Rows are split across threads;
// the weight and bias gradients are summed per thread into scratch and then merged in
// thread order, so the result is deterministic for a given thread count.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/backend/cpu_backend.hpp"
#include "runtime/numerics/bf16.hpp"

namespace dseek::backend {

namespace {
constexpr float kEps = 1e-5f;
}

namespace {
// One row: y = (x - mean) * rstd * w + b; returns mean and rstd.
inline void layernorm_row(float* y, const float* x, const float* w, const float* b, int C,
                          float& mean, float& rstd) {
  float total = 0.0f;
#pragma omp simd reduction(+ : total)
  for (int i = 0; i < C; ++i) total += x[i];
  const float m = total / C;
  float variance = 0.0f;
#pragma omp simd reduction(+ : variance)
  for (int i = 0; i < C; ++i) variance += (x[i] - m) * (x[i] - m);
  const float s = 1.0f / std::sqrt(variance / C + kEps);
#pragma omp simd
  for (int i = 0; i < C; ++i) y[i] = (x[i] - m) * s * w[i] + b[i];
  mean = m;
  rstd = s;
}
}  // namespace

void CpuBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                   const float* w, const float* b, int N, int C) {
  pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r)
      layernorm_row(out + r * C, inp + r * C, w, b, C, mean[r], rstd[r]);
  }, 8);
}

// Each row in fp32 in the thread's scratch, then rounded to bf16 bits while in cache.
void CpuBackend::layernorm_forward_bf16(uint16_t* out, float* mean, float* rstd,
                                        const float* inp, const float* w, const float* b, int N,
                                        int C) {
  pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int thread) {
    float* row = scratch(thread, static_cast<size_t>(C));
    for (size_t r = r0; r < r1; ++r) {
      layernorm_row(row, inp + r * C, w, b, C, mean[r], rstd[r]);
      numerics::to_bf16_bits(row, out + r * C, static_cast<size_t>(C));
    }
  }, 8);
}

void CpuBackend::layernorm_backward(float* dinp, float* dw, float* db, const float* dout,
                                    const float* inp, const float* w, const float* mean,
                                    const float* rstd, int N, int C) {
  constexpr size_t kMinRows = 8;
  pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int thread) {
    float* partial_dw = scratch(thread, 2 * static_cast<size_t>(C));
    float* partial_db = partial_dw + C;
    std::memset(partial_dw, 0, 2 * sizeof(float) * C);
    for (size_t r = r0; r < r1; ++r) {
      const float* x = inp + r * C;
      const float* dy = dout + r * C;
      float* dx = dinp + r * C;
      const float m = mean[r], s = rstd[r];
      // The two means of the LayerNorm backward formula (llm.c's dnorm_mean and
      // dnorm_norm_mean).
      float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
      for (int i = 0; i < C; ++i) {
        const float norm = (x[i] - m) * s;
        const float dnorm = w[i] * dy[i];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * norm;
      }
      dnorm_mean /= C;
      dnorm_norm_mean /= C;
#pragma omp simd
      for (int i = 0; i < C; ++i) {
        const float norm = (x[i] - m) * s;
        const float dnorm = w[i] * dy[i];
        partial_db[i] += dy[i];
        partial_dw[i] += norm * dy[i];
        dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
      }
    }
  }, kMinRows);
  // Chunk i ran on thread i; merge the partial sums in chunk order.
  const int chunks = pool_.chunks_for(static_cast<size_t>(N), kMinRows);
  for (int t = 0; t < chunks; ++t) {
    const float* partial_dw = scratch(t, 2 * static_cast<size_t>(C));
    const float* partial_db = partial_dw + C;
#pragma omp simd
    for (int i = 0; i < C; ++i) {
      dw[i] += partial_dw[i];
      db[i] += partial_db[i];
    }
  }
}

}  // namespace dseek::backend
