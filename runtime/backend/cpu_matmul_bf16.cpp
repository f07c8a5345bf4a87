// bf16 linear layers on the CPU through oneDNN (cpu_onednn_gemm.hpp): the operands are
// rounded to bf16 (nearest even, numerics/bf16.hpp: the GPU's __float2bfloat16_rn) into
// preallocated scratch, and oneDNN multiplies them with fp32 accumulation (AVX-512 BF16's
// vdpbf16ps or AMX where the CPU has them; on older CPUs oneDNN's own bf16 emulation, see
// matmul_kernels()). Each product of two bf16 values is exact in fp32, so this computes
// what the fp32 sgemm on the rounded values and a bf16 tensor-core GEMM compute, up to
// the order of the additions -- except that vdpbf16ps treats bf16 subnormals as zero.
// On a CPU with neither AMX nor an AMD core's AVX-512 BF16 (OnednnGemm::native_bf16)
// oneDNN's bf16 is slower than the fp32 sgemm, so there the operands are rounded to bf16 values kept in fp32 and the fp32
// sgemm (cpu_matmul.cpp) multiplies them: the same products, at fp32 speed plus the
// rounding passes; matmul_kernels() says which runs. The blocks are those of cpu_matmul.cpp: forward and dinp split the
// token rows, dw and dbias the output channels (the reduction over tokens inside one call).
#include <cstring>

#include "runtime/backend/cpu_backend.hpp"
#include "runtime/numerics/bf16.hpp"

namespace dseek::backend {

namespace {
constexpr size_t kMinRowsPerChunk = 32;
constexpr size_t kMinFloatsPerChunk = 1 << 14;
}  // namespace

// b for the row blocks of `shape.M = N` rows: packed once, on this thread, into the shape
// every block then runs (shape.M set to the block's rows), when the blocks are equal;
// otherwise each block runs on plain b, its own shape.
const void* CpuBackend::packed_for_row_blocks(GemmShape& shape, const void* b) {
  const int chunks = pool_.chunks_for(static_cast<size_t>(shape.M), kMinRowsPerChunk);
  if (shape.M % chunks != 0) return b;
  shape.M /= chunks;
  const void* packed = gemm_.pack_b(0, shape, b);
  shape.packed_b = true;
  return packed;
}

const float* CpuBackend::to_bf16(Operand which, const float* x, size_t n) {
  auto& buffer = operand_scratch_[which];
  if (buffer.size() < n) buffer.resize(n);
  float* out = buffer.data();
  pool_.parallel_for(n, [&](size_t begin, size_t end, int) {
    numerics::round_to_bf16(x + begin, out + begin, end - begin);
  }, kMinFloatsPerChunk);
  return out;
}

const uint16_t* CpuBackend::to_bf16_bits(Operand which, const float* x, size_t n) {
  auto& buffer = bf16_scratch_[which];
  if (buffer.size() < n) buffer.resize(n);
  uint16_t* out = buffer.data();
  pool_.parallel_for(n, [&](size_t begin, size_t end, int) {
    numerics::to_bf16_bits(x + begin, out + begin, end - begin);
  }, kMinFloatsPerChunk);
  return out;
}

const void* CpuBackend::bf16_input_operand(const float* inp, size_t n) {
  if (native_bf16_) return to_bf16_bits(kInput, inp, n);
  return to_bf16(kInput, inp, n);
}

const void* CpuBackend::bf16_input_operand(const uint16_t* inp, size_t n) {
  if (native_bf16_) return inp;
  auto& buffer = operand_scratch_[kInput];  // the bf16 values in fp32: exact
  if (buffer.size() < n) buffer.resize(n);
  float* out = buffer.data();
  pool_.parallel_for(n, [&](size_t begin, size_t end, int) {
    for (size_t i = begin; i < end; ++i) out[i] = numerics::bf16_to_fp32(inp[i]);
  }, kMinFloatsPerChunk);
  return out;
}

void CpuBackend::bf16_matmul_forward(float* out, const void* inp_operand, const float* w,
                                     const float* bias, int N, int C, int OC) {
  if (!native_bf16_) {
    scaled_matmul_forward(out, static_cast<const float*>(inp_operand),
                          to_bf16(kWeight, w, static_cast<size_t>(OC) * C), bias, N, C, OC, 1.0f);
    return;
  }
  const auto* inp_b = static_cast<const uint16_t*>(inp_operand);
  const uint16_t* w_b = to_bf16_bits(kWeight, w, static_cast<size_t>(OC) * C);
  GemmShape shape;  // out rows = inp rows @ w^T: b (C, OC) is w read by columns
  shape.M = N, shape.N = OC, shape.K = C;
  shape.a_row = C, shape.b_row = 1, shape.b_col = C, shape.c_row = OC;
  shape.bias = bias != nullptr;
  const void* b = packed_for_row_blocks(shape, w_b);
  pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int thread) {
    GemmShape s = shape;
    s.M = static_cast<int64_t>(r1 - r0);
    gemm_.run(thread, s, inp_b + r0 * C, b, out + r0 * OC, bias);
  }, kMinRowsPerChunk);
}

void CpuBackend::bf16_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                                      const void* inp_operand, const float* w, int N, int C,
                                      int OC) {
  if (!native_bf16_) {
    scaled_matmul_backward(dinp, dw, dbias, to_bf16(kOutputGrad, dout, static_cast<size_t>(N) * OC),
                           dout, static_cast<const float*>(inp_operand),
                           to_bf16(kWeight, w, static_cast<size_t>(OC) * C), N, C, OC, 1.0f, 1.0f);
    return;
  }
  const uint16_t* dout_b = to_bf16_bits(kOutputGrad, dout, static_cast<size_t>(N) * OC);
  const auto* inp_b = static_cast<const uint16_t*>(inp_operand);
  if (dinp != nullptr) {
    const uint16_t* w_b = to_bf16_bits(kWeight, w, static_cast<size_t>(OC) * C);
    GemmShape shape;  // dinp rows = dout rows @ w
    shape.M = N, shape.N = C, shape.K = OC;
    shape.a_row = OC, shape.b_row = C, shape.c_row = C;
    const void* b = packed_for_row_blocks(shape, w_b);
    pool_.parallel_for(static_cast<size_t>(N), [&](size_t r0, size_t r1, int thread) {
      GemmShape s = shape;
      s.M = static_cast<int64_t>(r1 - r0);
      gemm_.run(thread, s, dout_b + r0 * OC, b, dinp + r0 * C, nullptr);
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
