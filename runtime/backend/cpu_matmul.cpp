// Linear layers on the CPU: single-threaded OpenBLAS sgemm on one block per thread.
// Forward and dinp split the token rows (a forward of one row, generation's decode step,
// splits the output channels instead); dw and dbias split the output channels, so
// each thread owns whole rows of dw and the reduction over tokens stays inside one
// sgemm call (deterministic, no partial sums to merge).
#include <cblas.h>

#include <cstring>

#include "runtime/backend/cpu_backend.hpp"

namespace dseek::backend {

namespace {
constexpr size_t kMinRowsPerChunk = 32;
constexpr size_t kMinChannelsPerChunk = 64;
}

void CpuBackend::matmul_forward(float* out, const float* inp, const float* w,
                                const float* bias, int N, int C, int OC) {
  const double start = now_seconds();
  scaled_matmul_forward(out, inp, w, bias, N, C, OC, 1.0f);
  count_matmul(start, double(N) * C * OC);
}

void CpuBackend::matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                                 const float* inp, const float* w, int N, int C, int OC) {
  const double start = now_seconds();
  scaled_matmul_backward(dinp, dw, dbias, dout, dout, inp, w, N, C, OC, 1.0f, 1.0f);
  count_matmul(start, double(N) * C * OC * (dinp != nullptr ? 2 : 1));
}

void CpuBackend::scaled_matmul_forward(float* out, const float* inp, const float* w,
                                       const float* bias, int N, int C, int OC, float alpha) {
  if (N == 1 && pool_.size() > 1) {
    // One row (generation's one token per step) cannot be shared: split the output
    // channels instead, each thread reading its rows of w. (Only N = 1, so that no
    // training shape changes its blocks, and with them its bits.)
    pool_.parallel_for(static_cast<size_t>(OC), [&](size_t o0, size_t o1, int) {
      const int channels = static_cast<int>(o1 - o0);
      float* block = out + o0;
      if (bias != nullptr) {
        for (int r = 0; r < N; ++r)
          std::memcpy(block + static_cast<size_t>(r) * OC, bias + o0, sizeof(float) * channels);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, channels, C, alpha, inp, C,
                  w + o0 * C, C, bias != nullptr ? 1.0f : 0.0f, block, OC);
    }, kMinChannelsPerChunk);
    return;
  }
  pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int) {
    const int rows = static_cast<int>(r1 - r0);
    float* block = out + r0 * OC;
    if (bias != nullptr) {
      for (int r = 0; r < rows; ++r) std::memcpy(block + static_cast<size_t>(r) * OC, bias,
                                                 sizeof(float) * OC);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, OC, C, alpha, inp + r0 * C, C,
                w, C, bias != nullptr ? 1.0f : 0.0f, block, OC);
  }, kMinRowsPerChunk);
}

void CpuBackend::scaled_matmul_backward(float* dinp, float* dw, float* dbias,
                                        const float* dout, const float* bias_dout,
                                        const float* inp, const float* w, int N, int C, int OC,
                                        float alpha_dinp, float alpha_dw) {
  if (dinp != nullptr) {
    pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(r1 - r0), C, OC,
                  alpha_dinp, dout + r0 * OC, OC, w, C, 0.0f, dinp + r0 * C, C);
    }, kMinRowsPerChunk);
  }
  pool_.parallel_for(static_cast<size_t>(OC), [&](size_t o0, size_t o1, int) {
    const int channels = static_cast<int>(o1 - o0);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, channels, C, N, alpha_dw, dout + o0, OC,
                inp, C, 1.0f, dw + o0 * C, C);
    if (dbias != nullptr) {
      float* db = dbias + o0;
      for (int n = 0; n < N; ++n) {
        const float* row = bias_dout + static_cast<size_t>(n) * OC + o0;
#pragma omp simd
        for (int o = 0; o < channels; ++o) db[o] += row[o];
      }
    }
  }, 16);
}

}  // namespace dseek::backend
