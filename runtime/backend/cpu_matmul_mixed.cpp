// Mixed-precision linear layers on the CPU (backend.hpp's MatmulPrecision). bf16 runs
// through oneDNN's bf16 matmuls (cpu_matmul_bf16.cpp). FP8: the operands are quantized
// with their scales into preallocated scratch and multiplied by the fp32 sgemm of
// cpu_matmul.cpp; each product of two fp8 values is exact in fp32 and the sum is
// accumulated in fp32, so this computes what an FP8 tensor-core GEMM with fp32
// accumulation computes (up to the order of the additions): the CPU reference of the GPU
// backend's numerics, not a faster path (no CPU here has FP8 GEMM instructions).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "runtime/backend/cpu_backend.hpp"
#include "runtime/numerics/fp8.hpp"

namespace dseek::backend {

namespace {
constexpr size_t kMinFloatsPerChunk = 1 << 14;
}  // namespace

const float* CpuBackend::to_fp8(Operand which, const float* x, size_t n,
                                const Fp8OperandScaling& scaling) {
  if (scaling.scale == nullptr || scaling.amax == nullptr)
    throw std::invalid_argument("train.precision = \"fp8\": a matmul operand has no scaling "
                                "state (MatmulPrecision::inp/weight/dout)");
  auto& buffer = operand_scratch_[which];
  if (buffer.size() < n) buffer.resize(n);
  amax_partials_.assign(static_cast<size_t>(pool_.size()), 0.0f);
  float* out = buffer.data();
  const float scale = *scaling.scale;
  const auto format = which == kOutputGrad ? numerics::Fp8Format::e5m2 : numerics::Fp8Format::e4m3;
  pool_.parallel_for(n, [&](size_t begin, size_t end, int thread) {
    amax_partials_[static_cast<size_t>(thread)] =
        numerics::quantize_scaled(x + begin, out + begin, end - begin, scale, format);
  }, kMinFloatsPerChunk);
  for (float amax : amax_partials_) *scaling.amax = std::max(*scaling.amax, amax);
  return out;
}

void CpuBackend::mixed_matmul_forward(float* out, const float* inp, const float* w,
                                      const float* bias, int N, int C, int OC,
                                      const MatmulPrecision& precision) {
  const double start = now_seconds();
  mixed_forward(out, inp, w, bias, N, C, OC, precision);
  count_matmul(start, double(N) * C * OC);
}

void CpuBackend::bf16_input_matmul_forward(float* out, const uint16_t* inp, const float* w,
                                           const float* bias, int N, int C, int OC) {
  const double start = now_seconds();
  bf16_matmul_forward(out, bf16_input_operand(inp, static_cast<size_t>(N) * C), w, bias, N, C,
                      OC);
  count_matmul(start, double(N) * C * OC);
}

void CpuBackend::bf16_input_matmul_backward(float* dinp, float* dw, float* dbias,
                                            const float* dout, const uint16_t* inp,
                                            const float* w, int N, int C, int OC) {
  const double start = now_seconds();
  bf16_matmul_backward(dinp, dw, dbias, dout, bf16_input_operand(inp, static_cast<size_t>(N) * C),
                       w, N, C, OC);
  count_matmul(start, double(N) * C * OC * (dinp != nullptr ? 2 : 1));
}

void CpuBackend::mixed_forward(float* out, const float* inp, const float* w, const float* bias,
                               int N, int C, int OC, const MatmulPrecision& precision) {
  const size_t inp_n = static_cast<size_t>(N) * C, w_n = static_cast<size_t>(OC) * C;
  switch (precision.format) {
    case MatmulFormat::fp32:
      scaled_matmul_forward(out, inp, w, bias, N, C, OC, 1.0f);
      return;
    case MatmulFormat::bf16:
      bf16_matmul_forward(out, bf16_input_operand(inp, inp_n), w, bias, N, C, OC);
      return;
    case MatmulFormat::fp8: {
      const float* inp_q = to_fp8(kInput, inp, inp_n, precision.inp);
      const float* w_q = to_fp8(kWeight, w, w_n, precision.weight);
      scaled_matmul_forward(out, inp_q, w_q, bias, N, C, OC,
                            (1.0f / *precision.inp.scale) * (1.0f / *precision.weight.scale));
      return;
    }
  }
}

void CpuBackend::mixed_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                                       const float* inp, const float* w, int N, int C, int OC,
                                       const MatmulPrecision& precision) {
  const double start = now_seconds();
  mixed_backward(dinp, dw, dbias, dout, inp, w, N, C, OC, precision);
  count_matmul(start, double(N) * C * OC * (dinp != nullptr ? 2 : 1));
}

void CpuBackend::mixed_backward(float* dinp, float* dw, float* dbias, const float* dout,
                                const float* inp, const float* w, int N, int C, int OC,
                                const MatmulPrecision& precision) {
  const size_t inp_n = static_cast<size_t>(N) * C, w_n = static_cast<size_t>(OC) * C;
  const size_t dout_n = static_cast<size_t>(N) * OC;
  switch (precision.format) {
    case MatmulFormat::fp32:
      scaled_matmul_backward(dinp, dw, dbias, dout, dout, inp, w, N, C, OC, 1.0f, 1.0f);
      return;
    case MatmulFormat::bf16:
      bf16_matmul_backward(dinp, dw, dbias, dout, bf16_input_operand(inp, inp_n), w, N, C, OC);
      return;
    case MatmulFormat::fp8: {
      // The forward operands again, with the same scales as in forward (scales change
      // only between steps), so backward multiplies the very values forward did.
      const float* dout_q = to_fp8(kOutputGrad, dout, dout_n, precision.dout);
      const float* inp_q = to_fp8(kInput, inp, inp_n, precision.inp);
      const float* w_q = to_fp8(kWeight, w, w_n, precision.weight);
      const float dout_inv = 1.0f / *precision.dout.scale;
      scaled_matmul_backward(dinp, dw, dbias, dout_q, dout, inp_q, w_q, N, C, OC,
                             dout_inv * (1.0f / *precision.weight.scale),
                             dout_inv * (1.0f / *precision.inp.scale));
      return;
    }
  }
}

}  // namespace dseek::backend
