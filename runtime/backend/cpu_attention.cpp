// Causal multi-head attention on the CPU. Each (batch, head) pair is one task; inside
// it the T x T score matrix is computed in row blocks with sgemm, and block r0..r1
// only touches keys 0..r1, so the masked upper triangle costs (almost) nothing. The
// softmax is fused with the mask. Q, K and V are read in place from the (B, T, 3C)
// qkv buffer through sgemm's leading dimension: no transposes, no copies.
#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "runtime/backend/cpu_backend.hpp"
#include "runtime/util/fast_math.hpp"

namespace dseek::backend {

namespace {
constexpr int kBlock = 64;

// Row t of the scores holds keys 0..t; makes it the softmax, zero beyond t up to T.
void causal_softmax_row(float* row, int t, int T) {
  float max_value = row[0];
#pragma omp simd reduction(max : max_value)
  for (int j = 0; j <= t; ++j) max_value = std::max(max_value, row[j]);
  float total = 0.0f;
#pragma omp simd reduction(+ : total)
  for (int j = 0; j <= t; ++j) {
    float e = util::exp_approx(row[j] - max_value);
    row[j] = e;
    total += e;
  }
  const float inverse = 1.0f / total;
#pragma omp simd
  for (int j = 0; j <= t; ++j) row[j] *= inverse;
  std::fill(row + t + 1, row + T, 0.0f);
}
}  // namespace

size_t CpuBackend::attention_state_floats(int B, int T, int C, int NH) const {
  return static_cast<size_t>(B) * NH * T * T;  // the probabilities
}

void CpuBackend::attention_forward(float* out, float* att, const float* qkv, int B, int T,
                                   int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  pool_.parallel_for(static_cast<size_t>(B) * NH, [&](size_t i0, size_t i1, int) {
    for (size_t i = i0; i < i1; ++i) {
      const size_t b = i / NH, h = i % NH;
      const float* q = qkv + b * T * C3 + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* probs = att + i * T * T;
      float* o = out + b * T * C + h * hs;
      for (int r0 = 0; r0 < T; r0 += kBlock) {
        const int r1 = std::min(T, r0 + kBlock);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hs, scale,
                    q + static_cast<size_t>(r0) * C3, C3, k, C3, 0.0f,
                    probs + static_cast<size_t>(r0) * T, T);
        for (int t = r0; t < r1; ++t) causal_softmax_row(probs + static_cast<size_t>(t) * T, t, T);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hs, r1, 1.0f,
                    probs + static_cast<size_t>(r0) * T, T, v, C3, 0.0f,
                    o + static_cast<size_t>(r0) * C, C);
      }
    }
  });
}

void CpuBackend::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                    const float* /*out*/, const float* att, int B, int T,
                                    int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  pool_.parallel_for(static_cast<size_t>(B) * NH, [&](size_t i0, size_t i1, int thread) {
    // dS: gradient of the scaled scores, lower triangle; zero above the diagonal.
    float* dscores = scratch(thread, static_cast<size_t>(T) * T);
    for (size_t i = i0; i < i1; ++i) {
      const size_t b = i / NH, h = i % NH;
      const float* q = qkv + b * T * C3 + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      const float* probs = att + i * T * T;
      const float* dO = dout + b * T * C + h * hs;
      float* dq = dqkv + b * T * C3 + h * hs;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      for (int r0 = 0; r0 < T; r0 += kBlock) {
        const int r1 = std::min(T, r0 + kBlock);
        float* dS = dscores + static_cast<size_t>(r0) * T;
        // dP = dO V^T for rows r0..r1, keys 0..r1.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hs, 1.0f,
                    dO + static_cast<size_t>(r0) * C, C, v, C3, 0.0f, dS, T);
        // Softmax backward: dS = P * (dP - sum_j P dP) * scale.
        for (int t = r0; t < r1; ++t) {
          float* drow = dscores + static_cast<size_t>(t) * T;
          const float* prow = probs + static_cast<size_t>(t) * T;
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (int j = 0; j <= t; ++j) dot += prow[j] * drow[j];
#pragma omp simd
          for (int j = 0; j <= t; ++j) drow[j] = prow[j] * (drow[j] - dot) * scale;
          std::fill(drow + t + 1, drow + r1, 0.0f);
        }
        // dQ = dS K.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hs, r1, 1.0f, dS, T, k,
                    C3, 0.0f, dq + static_cast<size_t>(r0) * C3, C3);
      }
      // dK = dS^T Q and dV = P^T dO, in column blocks: keys c0..c1 are seen by queries c0..T.
      for (int c0 = 0; c0 < T; c0 += kBlock) {
        const int c1 = std::min(T, c0 + kBlock);
        const size_t offset = static_cast<size_t>(c0) * T + c0;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c1 - c0, hs, T - c0, 1.0f,
                    dscores + offset, T, q + static_cast<size_t>(c0) * C3, C3, 0.0f,
                    dk + static_cast<size_t>(c0) * C3, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c1 - c0, hs, T - c0, 1.0f,
                    probs + offset, T, dO + static_cast<size_t>(c0) * C, C, 0.0f,
                    dv + static_cast<size_t>(c0) * C3, C3);
      }
    }
  });
}

}  // namespace dseek::backend
