// Causal attention with bf16 operands (train.precision = "bf16"): cpu_attention.cpp's
// query blocks, logsumexp and recomputed probabilities, with each product's operands
// rounded to bf16 (nearest even) and fp32 accumulation: S = Q K^T, O = P V; in backward
// dP = dO V^T, dQ = dS K, dK = dS^T Q, dV = P^T dO. The softmax, its logsumexp and
// sum_j P dP stay fp32. PyTorch's bf16 autocast runs attention's matmuls the same way.
//
// Each (batch, head) task first rounds its head's Q, K, V (and dO) into contiguous
// per-thread buffers of T x hs: every product then has the same shapes and strides
// whatever the layout (a tensor-parallel rank's qkv rows are narrower), so the bits do
// not depend on it, and oneDNN reads packed rows. Where the CPU has native bf16
// (OnednnGemm::native_bf16) the products are oneDNN's bf16 GEMM (2.2x OpenBLAS's sgemm
// on a 64 x 256 x 64 product on a Zen 4 core, 2026-12-07); elsewhere the sgemm on the
// rounded values, the same products.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/backend/cpu_attention_rows.hpp"
#include "runtime/backend/cpu_backend.hpp"
#include "runtime/numerics/bf16.hpp"

namespace dseek::backend {

using namespace attention_rows;  // kBlock and the row functions

namespace {

// A thread's bf16 operands: `count` buffers of `elements` each, elements of `bytes`.
struct OperandBuffers {
  char* base;
  size_t elements, bytes;
  void* at(int index, size_t offset = 0) const {
    return base + (static_cast<size_t>(index) * elements + offset) * bytes;
  }
};

// rows x width values, `stride` floats apart in `src`, rounded into `dst` (rows x width,
// contiguous), as bf16 bits (2 bytes) or bf16 values in fp32 (4 bytes).
void round_rows(void* dst, size_t bytes, const float* src, size_t stride, int rows, int width) {
  for (int r = 0; r < rows; ++r) {
    const float* in = src + static_cast<size_t>(r) * stride;
    if (bytes == sizeof(uint16_t))
      numerics::to_bf16_bits(in, static_cast<uint16_t*>(dst) + static_cast<size_t>(r) * width,
                             static_cast<size_t>(width));
    else
      numerics::round_to_bf16(in, static_cast<float*>(dst) + static_cast<size_t>(r) * width,
                              static_cast<size_t>(width));
  }
}

GemmShape shape_of(int64_t M, int64_t N, int64_t K, int64_t a_row, int64_t a_col, int64_t b_row,
                   int64_t b_col, int64_t c_row, bool accumulate) {
  GemmShape s;
  s.M = M, s.N = N, s.K = K;
  s.a_row = a_row, s.a_col = a_col, s.b_row = b_row, s.b_col = b_col, s.c_row = c_row;
  s.accumulate = accumulate;
  return s;
}

}  // namespace

void CpuBackend::bf16_product(int thread, const GemmShape& shape, const void* a, const void* b,
                              float* c) {
  if (native_bf16_) return gemm_.run(thread, shape, a, b, c, nullptr);
  // The same strided views through cblas: a row-major operand is "no transpose" with its
  // row stride, a column-major one "transpose" with its column stride.
  const bool a_rows = shape.a_col == 1, b_rows = shape.b_col == 1;
  cblas_sgemm(CblasRowMajor, a_rows ? CblasNoTrans : CblasTrans, b_rows ? CblasNoTrans : CblasTrans,
              static_cast<int>(shape.M), static_cast<int>(shape.N), static_cast<int>(shape.K), 1.0f,
              static_cast<const float*>(a), static_cast<int>(a_rows ? shape.a_row : shape.a_col),
              static_cast<const float*>(b), static_cast<int>(b_rows ? shape.b_row : shape.b_col),
              shape.accumulate ? 1.0f : 0.0f, c, static_cast<int>(shape.c_row));
}

void CpuBackend::bf16_attention_forward(float* out, float* att, const float* qkv, int B, int T,
                                        int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const size_t bytes = bf16_operand_bytes();
  const size_t head_elements = static_cast<size_t>(T) * hs;
  const size_t block_elements = static_cast<size_t>(kBlock) * T;
  pool_.parallel_for(static_cast<size_t>(B) * NH, [&](size_t i0, size_t i1, int thread) {
    // Scores (fp32), then Q, K, V and the block's P rounded (bf16 operands).
    const size_t operand_elements = 3 * head_elements + block_elements;
    float* scores = scratch(thread, block_elements + (operand_elements * bytes + 3) / 4);
    char* operands = reinterpret_cast<char*>(scores + block_elements);
    const OperandBuffers heads{operands, head_elements, bytes};
    void* p_rounded = heads.at(3);
    for (size_t i = i0; i < i1; ++i) {
      const size_t b = i / NH, h = i % NH;
      const float* q = qkv + b * T * C3 + h * hs;
      for (int part = 0; part < 3; ++part)
        round_rows(heads.at(part), bytes, q + part * C, C3, T, hs);
      float* lse = att + i * T;
      float* o = out + b * T * C + h * hs;
      for (int r0 = 0; r0 < T; r0 += kBlock) {
        const int r1 = std::min(T, r0 + kBlock), rows = r1 - r0;
        // scores (rows, r1) = Q[r0..r1) K[0..r1)^T
        bf16_product(thread, shape_of(rows, r1, hs, hs, 1, 1, hs, T, false),
                     heads.at(0, static_cast<size_t>(r0) * hs), heads.at(1), scores);
        for (int t = r0; t < r1; ++t) {
          float* row = scores + static_cast<size_t>(t - r0) * T;
          lse[t] = causal_softmax_row(row, t, scale);
          std::fill(row + t + 1, row + r1, 0.0f);
        }
        round_rows(p_rounded, bytes, scores, T, rows, r1);
        // O[r0..r1) = P (rows, r1) V[0..r1)
        bf16_product(thread, shape_of(rows, hs, r1, r1, 1, hs, 1, C, false), p_rounded,
                     heads.at(2), o + static_cast<size_t>(r0) * C);
      }
    }
  });
}

void CpuBackend::bf16_attention_backward(float* dqkv, const float* dout, const float* qkv,
                                         const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const size_t bytes = bf16_operand_bytes();
  const size_t head_elements = static_cast<size_t>(T) * hs;
  const size_t block_elements = static_cast<size_t>(kBlock) * T;
  enum { kQ, kK, kV, kDout, kHeads };
  pool_.parallel_for(static_cast<size_t>(B) * NH, [&](size_t i0, size_t i1, int thread) {
    // P and dS (fp32), then Q, K, V, dO and the block's rounded P and dS.
    const size_t operand_elements = kHeads * head_elements + 2 * block_elements;
    float* probs = scratch(thread, 2 * block_elements + (operand_elements * bytes + 3) / 4);
    float* dscores = probs + block_elements;
    char* operands = reinterpret_cast<char*>(dscores + block_elements);
    const OperandBuffers heads{operands, head_elements, bytes};
    const OperandBuffers blocks{static_cast<char*>(heads.at(kHeads)), block_elements, bytes};
    for (size_t i = i0; i < i1; ++i) {
      const size_t b = i / NH, h = i % NH;
      const float* q = qkv + b * T * C3 + h * hs;
      for (int part = 0; part < 3; ++part)
        round_rows(heads.at(part), bytes, q + part * C, C3, T, hs);
      round_rows(heads.at(kDout), bytes, dout + b * T * C + h * hs, C, T, hs);
      const float* lse = att + i * T;
      float* dq = dqkv + b * T * C3 + h * hs;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      zero_key_value_gradients(dk, dv, T, hs, static_cast<size_t>(C3));
      for (int r0 = 0; r0 < T; r0 += kBlock) {
        const int r1 = std::min(T, r0 + kBlock), rows = r1 - r0;
        const size_t block_row = static_cast<size_t>(r0) * hs;
        const GemmShape a_bt = shape_of(rows, r1, hs, hs, 1, 1, hs, T, false);
        bf16_product(thread, a_bt, heads.at(kQ, block_row), heads.at(kK), probs);  // scores
        bf16_product(thread, a_bt, heads.at(kDout, block_row), heads.at(kV), dscores);  // dP
        for (int t = r0; t < r1; ++t) {
          float* prow = probs + static_cast<size_t>(t - r0) * T;
          float* drow = dscores + static_cast<size_t>(t - r0) * T;
          probabilities_row(prow, t, lse[t], scale);
          std::fill(prow + t + 1, prow + r1, 0.0f);
          score_gradients_row(drow, prow, t, scale);
          std::fill(drow + t + 1, drow + r1, 0.0f);
        }
        round_rows(blocks.at(0), bytes, probs, T, rows, r1);
        round_rows(blocks.at(1), bytes, dscores, T, rows, r1);
        // dQ[r0..r1) = dS K[0..r1)
        bf16_product(thread, shape_of(rows, hs, r1, r1, 1, hs, 1, C3, false), blocks.at(1),
                     heads.at(kK), dq + static_cast<size_t>(r0) * C3);
        // dK[0..r1) += dS^T Q[r0..r1); dV[0..r1) += P^T dO[r0..r1)
        const GemmShape at_b = shape_of(r1, hs, rows, 1, r1, hs, 1, C3, true);
        bf16_product(thread, at_b, blocks.at(1), heads.at(kQ, block_row), dk);
        bf16_product(thread, at_b, blocks.at(0), heads.at(kDout, block_row), dv);
      }
    }
  });
}

}  // namespace dseek::backend
