// Element-wise and gather/scatter ops on the CPU: token and position embeddings (whole,
// or a tensor-parallel rank's vocabulary slice of them), GELU, residual addition.
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/backend/cpu_backend.hpp"
#include "runtime/numerics/bf16.hpp"
#include "runtime/util/fast_math.hpp"

namespace dseek::backend {

namespace {
constexpr size_t kMinElements = 1 << 14;
const float kGeluScale = std::sqrt(2.0f / static_cast<float>(M_PI));
constexpr float kGeluCube = 0.044715f;
constexpr VocabSlice kEveryId{0, std::numeric_limits<int>::max()};
}  // namespace

// The whole model's embedding is the vocabulary-parallel one with a slice that holds
// every id (the ops know no vocabulary size: INT_MAX rows), each rank's output whole.
void CpuBackend::encoder_forward(float* out, const int32_t* tokens, const float* wte,
                                 const float* wpe, int B, int T, int C) {
  vocab_parallel_encoder_forward(out, tokens, wte, wpe, kEveryId, B, T, C);
}

void CpuBackend::encoder_backward(float* dwte, float* dwpe, const float* dout,
                                  const int32_t* tokens, int B, int T, int C) {
  vocab_parallel_encoder_backward(dwte, dwpe, dout, tokens, kEveryId, B, T, C);
}

void CpuBackend::vocab_parallel_encoder_forward(float* out, const int32_t* tokens,
                                                const float* wte_slice, const float* wpe,
                                                VocabSlice slice, int B, int T, int C) {
  pool_.parallel_for(static_cast<size_t>(B) * T, [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r) {
      float* y = out + r * C;
      const float* position_row = wpe != nullptr ? wpe + (r % T) * C : nullptr;
      if (!slice.holds(tokens[r])) {
        // Another rank's token: this rank adds nothing but the positions (if it adds them).
        if (position_row != nullptr) std::copy_n(position_row, C, y);
        else std::fill_n(y, C, 0.0f);
        continue;
      }
      const float* token_row = wte_slice + static_cast<size_t>(tokens[r] - slice.begin) * C;
      if (position_row == nullptr) {
        std::copy_n(token_row, C, y);
        continue;
      }
#pragma omp simd
      for (int i = 0; i < C; ++i) y[i] = token_row[i] + position_row[i];
    }
  }, 16);
}

void CpuBackend::vocab_parallel_encoder_backward(float* dwte_slice, float* dwpe,
                                                 const float* dout, const int32_t* tokens,
                                                 VocabSlice slice, int B, int T, int C) {
  // Split by channel: two tokens may share an embedding row, but never a channel slice
  // across threads, so there are no races and the order of the sums is fixed.
  pool_.parallel_for(static_cast<size_t>(C), [&](size_t c0, size_t c1, int) {
    const int width = static_cast<int>(c1 - c0);
    for (size_t r = 0; r < static_cast<size_t>(B) * T; ++r) {
      const float* dy = dout + r * C + c0;
      float* position_row = dwpe + (r % T) * C + c0;
      if (!slice.holds(tokens[r])) {
#pragma omp simd
        for (int i = 0; i < width; ++i) position_row[i] += dy[i];
        continue;
      }
      float* token_row = dwte_slice + static_cast<size_t>(tokens[r] - slice.begin) * C + c0;
#pragma omp simd
      for (int i = 0; i < width; ++i) {
        token_row[i] += dy[i];
        position_row[i] += dy[i];
      }
    }
  }, 16);
}

namespace {
inline void gelu_span(float* out, const float* inp, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float t = util::tanh_approx(kGeluScale * (x + kGeluCube * x * x * x));
    out[i] = 0.5f * x * (1.0f + t);
  }
}
}  // namespace

void CpuBackend::gelu_forward(float* out, const float* inp, size_t n) {
  pool_.parallel_for(n, [&](size_t begin, size_t end, int) {
    gelu_span(out + begin, inp + begin, end - begin);
  }, kMinElements);
}

// In pieces of the thread's scratch, each rounded to bf16 bits while in cache.
void CpuBackend::gelu_forward_bf16(uint16_t* out, const float* inp, size_t n) {
  constexpr size_t kPiece = 4096;
  pool_.parallel_for(n, [&](size_t begin, size_t end, int thread) {
    float* piece = scratch(thread, kPiece);
    for (size_t at = begin; at < end; at += kPiece) {
      const size_t count = std::min(kPiece, end - at);
      gelu_span(piece, inp + at, count);
      numerics::to_bf16_bits(piece, out + at, count);
    }
  }, kMinElements);
}

void CpuBackend::gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  pool_.parallel_for(n, [&](size_t begin, size_t end, int) {
#pragma omp simd
    for (size_t i = begin; i < end; ++i) {
      const float x = inp[i];
      const float t = util::tanh_approx(kGeluScale * (x + kGeluCube * x * x * x));
      const float sech2 = 1.0f - t * t;
      const float du_dx = kGeluScale * (1.0f + 3.0f * kGeluCube * x * x);
      dinp[i] = (0.5f * (1.0f + t) + 0.5f * x * sech2 * du_dx) * dout[i];
    }
  }, kMinElements);
}

void CpuBackend::residual_forward(float* out, const float* a, const float* b, size_t n) {
  pool_.parallel_for(n, [&](size_t begin, size_t end, int) {
#pragma omp simd
    for (size_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
  }, kMinElements);
}

}  // namespace dseek::backend
