// Causal multi-head attention on the CPU, tiled by query rows so that memory grows with
// T, not T x T. Each (batch, head) pair is one task; inside it the queries go in blocks
// of kBlock rows, and block r0..r1 only touches keys 0..r1 (the masked upper triangle
// costs nothing). Forward: the block's scores (kBlock x r1, in the thread's scratch) by
// sgemm, the softmax fused with the mask, then P V; what it keeps for backward is each
// row's logsumexp (B, NH, T), as the CUDA backend does. Backward recomputes the block's
// probabilities from the logsumexp (FlashAttention's recomputation) and accumulates dK
// and dV block by block in query order, inside the task: deterministic for a thread
// count, no partial sums to merge. Q, K and V are read in place from the (B, T, 3C) qkv
// buffer through sgemm's leading dimension: no transposes, no copies. With bf16 operands
// (train.precision = "bf16") the products run in cpu_attention_bf16.cpp.
//
// attention_forward_cached (generation): the same blocks and softmax rows, with keys and
// values read from the sequence's KV cache after the new tokens' rows are stored there;
// query row t of the new tokens sees the cache's rows 0 .. past + t.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "runtime/backend/cpu_backend.hpp"
#include "runtime/backend/cpu_attention_rows.hpp"

namespace dseek::backend {

using namespace attention_rows;  // kBlock and the row functions

size_t CpuBackend::attention_state_floats(int B, int T, int C, int NH) const {
  return static_cast<size_t>(B) * NH * T;  // the logsumexp of each score row
}

namespace {
void check_attention_format(MatmulFormat format) {
  if (format == MatmulFormat::fp8)
    throw std::invalid_argument(
        "attention has no fp8 form on the CPU backend: fp32 or bf16 (train.precision = "
        "\"fp8\" runs attention in fp32)");
}
}  // namespace

void CpuBackend::attention_forward(float* out, float* att, const float* qkv, int B, int T,
                                   int C, int NH, MatmulFormat format) {
  check_attention_format(format);
  if (format == MatmulFormat::bf16) return bf16_attention_forward(out, att, qkv, B, T, C, NH);
  fp32_attention_forward(out, att, qkv, B, T, C, NH);
}

void CpuBackend::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                    const float* /*out*/, const float* att, int B, int T,
                                    int C, int NH, MatmulFormat format) {
  check_attention_format(format);
  if (format == MatmulFormat::bf16)
    return bf16_attention_backward(dqkv, dout, qkv, att, B, T, C, NH);
  fp32_attention_backward(dqkv, dout, qkv, att, B, T, C, NH);
}

void CpuBackend::fp32_attention_forward(float* out, float* att, const float* qkv, int B, int T,
                                        int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int ld = T;  // row stride of a block's scores
  pool_.parallel_for(static_cast<size_t>(B) * NH, [&](size_t i0, size_t i1, int thread) {
    float* scores = scratch(thread, static_cast<size_t>(kBlock) * ld);
    for (size_t i = i0; i < i1; ++i) {
      const size_t b = i / NH, h = i % NH;
      const float* q = qkv + b * T * C3 + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* lse = att + i * T;
      float* o = out + b * T * C + h * hs;
      for (int r0 = 0; r0 < T; r0 += kBlock) {
        const int r1 = std::min(T, r0 + kBlock);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hs, scale,
                    q + static_cast<size_t>(r0) * C3, C3, k, C3, 0.0f, scores, ld);
        for (int t = r0; t < r1; ++t) {
          float* row = scores + static_cast<size_t>(t - r0) * ld;
          lse[t] = causal_softmax_row(row, t, 1.0f);
          std::fill(row + t + 1, row + r1, 0.0f);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hs, r1, 1.0f, scores, ld,
                    v, C3, 0.0f, o + static_cast<size_t>(r0) * C, C);
      }
    }
  });
}

void CpuBackend::fp32_attention_backward(float* dqkv, const float* dout, const float* qkv,
                                         const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int ld = T;
  pool_.parallel_for(static_cast<size_t>(B) * NH, [&](size_t i0, size_t i1, int thread) {
    // One block's probabilities P and score gradients dS, side by side.
    float* probs = scratch(thread, 2 * static_cast<size_t>(kBlock) * ld);
    float* dscores = probs + static_cast<size_t>(kBlock) * ld;
    for (size_t i = i0; i < i1; ++i) {
      const size_t b = i / NH, h = i % NH;
      const float* q = qkv + b * T * C3 + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      const float* lse = att + i * T;
      const float* dO = dout + b * T * C + h * hs;
      float* dq = dqkv + b * T * C3 + h * hs;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      zero_key_value_gradients(dk, dv, T, hs, static_cast<size_t>(C3));
      for (int r0 = 0; r0 < T; r0 += kBlock) {
        const int r1 = std::min(T, r0 + kBlock), rows = r1 - r0;
        const float* q_block = q + static_cast<size_t>(r0) * C3;
        const float* dO_block = dO + static_cast<size_t>(r0) * C;
        // P again: scores of rows r0..r1 against keys 0..r1, then exp(s - lse).
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, r1, hs, scale, q_block, C3, k,
                    C3, 0.0f, probs, ld);
        // dP = dO V^T.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, r1, hs, 1.0f, dO_block, C, v,
                    C3, 0.0f, dscores, ld);
        // Softmax backward: dS = P * (dP - sum_j P dP) * scale; both zero beyond the diagonal.
        for (int t = r0; t < r1; ++t) {
          float* prow = probs + static_cast<size_t>(t - r0) * ld;
          float* drow = dscores + static_cast<size_t>(t - r0) * ld;
          probabilities_row(prow, t, lse[t], 1.0f);
          std::fill(prow + t + 1, prow + r1, 0.0f);
          score_gradients_row(drow, prow, t, scale);
          std::fill(drow + t + 1, drow + r1, 0.0f);
        }
        // dQ = dS K; dK[0..r1] += dS^T Q; dV[0..r1] += P^T dO.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, r1, 1.0f, dscores, ld, k,
                    C3, 0.0f, dq + static_cast<size_t>(r0) * C3, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, hs, rows, 1.0f, dscores, ld,
                    q_block, C3, 1.0f, dk, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, hs, rows, 1.0f, probs, ld,
                    dO_block, C, 1.0f, dv, C3);
      }
    }
  });
}

void CpuBackend::attention_forward_cached(float* out, const float* qkv, float* k_cache,
                                          float* v_cache, int past, int n, int C, int NH) {
  const int hs = C / NH;
  const size_t C3 = 3 * static_cast<size_t>(C);
  const size_t Cs = static_cast<size_t>(C);
  for (int i = 0; i < n; ++i) {
    const float* row = qkv + static_cast<size_t>(i) * C3;
    std::memcpy(k_cache + static_cast<size_t>(past + i) * Cs, row + Cs, Cs * sizeof(float));
    std::memcpy(v_cache + static_cast<size_t>(past + i) * Cs, row + 2 * Cs, Cs * sizeof(float));
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int ld = past + n;  // row stride of a block's scores: every key there is
  pool_.parallel_for(static_cast<size_t>(NH), [&](size_t h0, size_t h1, int thread) {
    float* scores = scratch(thread, static_cast<size_t>(kBlock) * ld);
    for (size_t h = h0; h < h1; ++h) {
      const float* q = qkv + h * hs;
      const float* k = k_cache + h * hs;
      const float* v = v_cache + h * hs;
      float* o = out + h * hs;
      for (int r0 = 0; r0 < n; r0 += kBlock) {
        const int r1 = std::min(n, r0 + kBlock);
        const int keys = past + r1;  // what the block's last query sees
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, keys, hs, scale,
                    q + static_cast<size_t>(r0) * C3, static_cast<int>(C3), k, C, 0.0f, scores,
                    ld);
        for (int t = r0; t < r1; ++t) {
          float* row = scores + static_cast<size_t>(t - r0) * ld;
          causal_softmax_row(row, past + t, 1.0f);
          std::fill(row + past + t + 1, row + keys, 0.0f);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hs, keys, 1.0f, scores,
                    ld, v, C, 0.0f, o + static_cast<size_t>(r0) * Cs, C);
      }
    }
  });
}

}  // namespace dseek::backend
