// The per-row pieces of the CPU's causal attention that its fp32 and bf16 products share
// (cpu_attention.cpp, cpu_attention_bf16.cpp): the query block size, the softmax of a
// row of scores with its logsumexp, and the recomputed probabilities of backward.
// `scale` multiplies the raw scores first (1 where the GEMM's alpha already did).
#pragma once

#include <algorithm>
#include <cmath>

#include "runtime/util/fast_math.hpp"

namespace dseek::backend::attention_rows {

constexpr int kBlock = 64;  // query rows per block: block r0..r1 reads keys 0..r1

// Row t of the scores holds keys 0..t; makes it the softmax of scale * row and returns
// its logsumexp.
inline float causal_softmax_row(float* row, int t, float scale) {
  float max_value = row[0] * scale;
#pragma omp simd reduction(max : max_value)
  for (int j = 0; j <= t; ++j) max_value = std::max(max_value, row[j] * scale);
  float total = 0.0f;
#pragma omp simd reduction(+ : total)
  for (int j = 0; j <= t; ++j) {
    float e = util::exp_approx(row[j] * scale - max_value);
    row[j] = e;
    total += e;
  }
  const float inverse = 1.0f / total;
#pragma omp simd
  for (int j = 0; j <= t; ++j) row[j] *= inverse;
  return max_value + std::log(total);
}

// Row t of the scores (keys 0..t) becomes the probabilities exp(scale * s - lse).
inline void probabilities_row(float* row, int t, float lse, float scale) {
#pragma omp simd
  for (int j = 0; j <= t; ++j) row[j] = util::exp_approx(row[j] * scale - lse);
}

// Softmax backward of row t in place: dS = P * (dP - sum_j P dP) * scale.
inline void score_gradients_row(float* drow, const float* prow, int t, float scale) {
  float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
  for (int j = 0; j <= t; ++j) dot += prow[j] * drow[j];
#pragma omp simd
  for (int j = 0; j <= t; ++j) drow[j] = prow[j] * (drow[j] - dot) * scale;
}

// dK and dV of one head (T rows, `row_stride` floats apart) set to 0 before backward
// accumulates them over the query blocks.
inline void zero_key_value_gradients(float* dk, float* dv, int T, int hs, size_t row_stride) {
  for (int t = 0; t < T; ++t) {
    std::fill(dk + t * row_stride, dk + t * row_stride + hs, 0.0f);
    std::fill(dv + t * row_stride, dv + t * row_stride + hs, 0.0f);
  }
}

}  // namespace dseek::backend::attention_rows
