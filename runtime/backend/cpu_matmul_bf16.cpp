// bf16 linear layers on the CPU through oneDNN (cpu_onednn_gemm.hpp): the operands are
// rounded to bf16 (nearest even, numerics/bf16.hpp: the GPU's __float2bfloat16_rn) into
// preallocated scratch, and oneDNN multiplies them with fp32 accumulation (AVX-512 BF16's
// vdpbf16ps or AMX where the CPU has them; on older CPUs oneDNN's own bf16 emulation, see
// matmul_kernels()). Each product of two bf16 values is exact in fp32, so this computes
// what cpu_matmul_mixed.cpp's former sgemm on rounded operands and a bf16 tensor-core
// GEMM compute, up to the order of the additions -- except that vdpbf16ps treats bf16
// subnormals as zero. The blocks are those of cpu_matmul.cpp: forward and dinp split the
// token rows, dw and dbias the output channels (the reduction over tokens inside one call).
#include <cstring>

#include "runtime/backend/cpu_backend.hpp"
#include "runtime/numerics/bf16.hpp"

namespace dseek::backend {

namespace {
constexpr size_t kMinRowsPerChunk = 32;
constexpr size_t kMinFloatsPerChunk = 1 << 14;
}  // namespace

const uint16_t* CpuBackend::to_bf16_bits(Operand which, const float* x, size_t n) {
  auto& buffer = bf16_scratch_[which];
  if (buffer.size() < n) buffer.resize(n);
  uint16_t* out = buffer.data();
  pool_.parallel_for(n, [&](size_t begin, size_t end, int) {
    numerics::to_bf16_bits(x + begin, out + begin, end - begin);
  }, kMinFloatsPerChunk);
  return out;
}

void CpuBackend::bf16_matmul_forward(float* out, const float* inp, const float* w,
                                     const float* bias, int N, int C, int OC) {
  const uint16_t* inp_b = to_bf16_bits(kInput, inp, static_cast<size_t>(N) * C);
  const uint16_t* w_b = to_bf16_bits(kWeight, w, static_cast<size_t>(OC) * C);
  pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int thread) {
    GemmShape s;  // out rows = inp rows @ w^T: b (C, OC) is w read by columns
    s.M = static_cast<int64_t>(r1 - r0), s.N = OC, s.K = C;
    s.a_row = C, s.b_row = 1, s.b_col = C, s.c_row = OC;
    s.bias = bias != nullptr;
    gemm_.run(thread, s, inp_b + r0 * C, w_b, out + r0 * OC, bias);
  }, kMinRowsPerChunk);
}

void CpuBackend::bf16_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                                      const float* inp, const float* w, int N, int C, int OC) {
  const uint16_t* dout_b = to_bf16_bits(kOutputGrad, dout, static_cast<size_t>(N) * OC);
  const uint16_t* inp_b = to_bf16_bits(kInput, inp, static_cast<size_t>(N) * C);
  if (dinp != nullptr) {
    const uint16_t* w_b = to_bf16_bits(kWeight, w, static_cast<size_t>(OC) * C);
    pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int thread) {
      GemmShape s;  // dinp rows = dout rows @ w
      s.M = static_cast<int64_t>(r1 - r0), s.N = C, s.K = OC;
      s.a_row = OC, s.b_row = C, s.c_row = C;
      gemm_.run(thread, s, dout_b + r0 * OC, w_b, dinp + r0 * C, nullptr);
    }, kMinRowsPerChunk);
  }
  pool_.parallel_for(static_cast<size_t>(OC), [&](size_t o0, size_t o1, int thread) {
    const int channels = static_cast<int>(o1 - o0);
    GemmShape s;  // dw rows o0..o1 += dout^T (columns o0..o1 of dout, read by columns) @ inp
    s.M = channels, s.N = C, s.K = N;
    s.a_row = 1, s.a_col = OC, s.b_row = C, s.c_row = C;
    s.accumulate = true;
    gemm_.run(thread, s, dout_b + o0, inp_b, dw + o0 * C, nullptr);
    if (dbias != nullptr) {  // from the unrounded output gradient, as in fp32
      float* db = dbias + o0;
      for (int n = 0; n < N; ++n) {
        const float* row = dout + static_cast<size_t>(n) * OC + o0;
#pragma omp simd
        for (int o = 0; o < channels; ++o) db[o] += row[o];
      }
    }
  }, 16);
}

}  // namespace dseek::backend
