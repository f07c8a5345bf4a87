// The checks of gemm_check.hpp. The reference is one thread per output element summing
// in fp32: slow, plainly right, and independent of cuBLASLt.
#include "bench/gpu/gemm_check.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <vector>

#include "bench/gpu/device_array.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/precision_convert.hpp"

namespace dseek::bench {

namespace {

using gpu::bf16;
using gpu::CublasLtGemm;
using gpu::Fp8Format;
using gpu::Fp8Output;

// The quantized bytes as the FP8 type the GEMM takes.
const gpu::fp8_e4m3* e4m3(const unsigned char* bytes) {
  return reinterpret_cast<const gpu::fp8_e4m3*>(bytes);
}
const gpu::fp8_e5m2* e5m2(const unsigned char* bytes) {
  return reinterpret_cast<const gpu::fp8_e5m2*>(bytes);
}

std::vector<float> random_values(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

// d (M, N) = beta * d + sum_k a(m, k) * b(n, k) (+ bias[n]), with a(m, k) at
// a[m * a_row + k * a_k] and likewise for b: any transpose of row-major operands.
__global__ void reference_gemm(float* d, const float* a, long long a_row, long long a_k,
                               const float* b, long long b_row, long long b_k,
                               const float* bias, int M, int N, int K, float beta) {
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= M || n >= N) return;
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) sum += a[m * a_row + k * a_k] * b[n * b_row + k * b_k];
  if (bias != nullptr) sum += bias[n];
  float& out = d[static_cast<long long>(m) * N + n];
  out = beta != 0.0f ? beta * out + sum : sum;
}

void reference(Device<float>& d, Device<float>& a, long long a_row, long long a_k,
               Device<float>& b, long long b_row, long long b_k, const float* bias, int M,
               int N, int K, float beta) {
  const dim3 block(16, 16);
  const dim3 grid((N + 15) / 16, (M + 15) / 16);
  reference_gemm<<<grid, block>>>(d.get(), a.get(), a_row, a_k, b.get(), b_row, b_k, bias, M,
                                  N, K, beta);
  DSEEK_CUDA_CHECK(cudaGetLastError());
}

// max |got - want| / max |want|; infinite when got holds a NaN (an unwritten element).
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double max_diff = 0.0, max_want = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    max_diff = std::max(max_diff, std::fabs(double(got[i]) - double(want[i])));
    max_want = std::max(max_want, std::fabs(double(want[i])));
  }
  return max_want > 0.0 ? max_diff / max_want : max_diff;
}

int failures = 0;

// FP8 products against the fp32 reference on the same quantized values: every product of
// two FP8 values is exact in fp32, but Hopper's FP8 tensor cores add them in an
// accumulator narrower than fp32 (about 14 bits, DeepSeek-V3 report section 3.3.2), also
// with cuBLASLt's fast accumulation off. Measured on an H200 (2026-11-30, K = 192 to 320):
// 1.5e-4 to 2.6e-4 of the largest output. Bound: 1e-3. A bf16 product accumulates in fp32
// (its bound stays 1e-4).
constexpr double kFp8AccumulationBound = 1e-3;

// Runs one check; an exception (cuBLASLt refusing a product) is a failed check, reported
// with its message, and the checks after it still run.
template <class Check>
void guarded(const char* what, Check&& check) {
  try {
    check();
  } catch (const std::exception& error) {
    ++failures;
    std::printf("check %-44s FAILED: %s\n", what, error.what());
  }
}

void report(const char* what, double error, double bound) {
  const bool ok = error <= bound;
  if (!ok) ++failures;
  std::printf("check %-44s rel_err %.3e  bound %.0e  %s\n", what, error, bound,
              ok ? "ok" : "FAILED");
}

// bf16 values of `values`, and those values back in fp32 (what the GEMM really multiplies).
struct Bf16Operand {
  Device<bf16> low;
  Device<float> exact;
  explicit Bf16Operand(const std::vector<float>& values)
      : low(values.size()), exact(values.size()) {
    Device<float> full = upload(values);
    dseek::gpu::convert_to_bf16(low.get(), full.get(), values.size(), nullptr);
    dseek::gpu::convert_bf16_to_float(exact.get(), low.get(), values.size(), nullptr);
  }
};

void check_bf16(CublasLtGemm& gemm, int N, int C, int OC) {
  Bf16Operand inp(random_values(size_t(N) * C, 1.0f, 1));
  Bf16Operand w(random_values(size_t(OC) * C, 0.1f, 2));
  Bf16Operand dout(random_values(size_t(N) * OC, 1.0f, 3));
  Bf16Operand bias(random_values(OC, 0.5f, 4));
  const std::vector<float> dw_start = random_values(size_t(OC) * C, 1.0f, 5);

  Device<float> got(size_t(N) * OC), want(size_t(N) * OC);
  fill_nan(got);
  gemm.bf16_forward(got.get(), inp.low.get(), w.low.get(), bias.exact.get(), N, C, OC);
  reference(want, inp.exact, C, 1, w.exact, C, 1, bias.exact.get(), N, OC, C, 0.0f);
  report("bf16 forward, fp32 out + bias", relative_error(download(got), download(want)), 1e-4);

  Device<bf16> got_low(size_t(N) * OC);
  Device<float> got_low_float(size_t(N) * OC);
  DSEEK_CUDA_CHECK(cudaMemset(got_low.get(), 0xff, got_low.size() * sizeof(bf16)));
  gemm.bf16_forward(got_low.get(), inp.low.get(), w.low.get(), bias.low.get(), N, C, OC);
  dseek::gpu::convert_bf16_to_float(got_low_float.get(), got_low.get(), got_low.size(), nullptr);
  report("bf16 forward, bf16 out + bias", relative_error(download(got_low_float), download(want)),
         1e-2);

  Device<float> dinp(size_t(N) * C), dinp_want(size_t(N) * C);
  fill_nan(dinp);
  gemm.bf16_backward_input(dinp.get(), dout.low.get(), w.low.get(), N, C, OC);
  // dinp[n][c] = sum_o dout[n][o] w[o][c]
  reference(dinp_want, dout.exact, OC, 1, w.exact, 1, C, nullptr, N, C, OC, 0.0f);
  report("bf16 backward input, fp32 out", relative_error(download(dinp), download(dinp_want)),
         1e-4);

  Device<float> dw = upload(dw_start), dw_want = upload(dw_start);
  gemm.bf16_backward_weight(dw.get(), dout.low.get(), inp.low.get(), N, C, OC);
  // dw[o][c] += sum_n dout[n][o] inp[n][c]
  reference(dw_want, dout.exact, 1, OC, inp.exact, 1, C, nullptr, OC, C, N, 1.0f);
  report("bf16 backward weight, fp32 accumulate", relative_error(download(dw), download(dw_want)),
         1e-4);
}

// An FP8 operand: quantized with the scale its amax gives, and its dequantized values.
struct Fp8Operand {
  Device<unsigned char> low;
  Device<float> exact, amax, scale, scale_inv;
  float host_amax = 0.0f;
  // transpose: store values (rows, cols) as (cols, rows).
  Fp8Operand(const std::vector<float>& values, Fp8Format format, int rows, int cols,
             bool transpose)
      : low(values.size()), exact(values.size()), amax(1), scale(1), scale_inv(1) {
    for (float v : values) host_amax = std::max(host_amax, std::fabs(v));
    Device<float> full = upload(values);
    DSEEK_CUDA_CHECK(cudaMemset(amax.get(), 0, sizeof(float)));
    const float one = 1.0f;
    DSEEK_CUDA_CHECK(cudaMemcpy(scale.get(), &one, sizeof(float), cudaMemcpyHostToDevice));
    // First pass: the amax (the delayed-scaling history would give it from earlier steps).
    if (transpose)
      dseek::gpu::quantize_transpose_to_fp8(low.get(), format, full.get(), rows, cols,
                                            scale.get(), amax.get(), nullptr);
    else
      dseek::gpu::quantize_to_fp8(low.get(), format, full.get(), values.size(), scale.get(),
                                  amax.get(), nullptr);
    dseek::gpu::fp8_scale_from_amax(scale.get(), scale_inv.get(), amax.get(), format, 0, nullptr);
    if (transpose)
      dseek::gpu::quantize_transpose_to_fp8(low.get(), format, full.get(), rows, cols,
                                            scale.get(), amax.get(), nullptr);
    else
      dseek::gpu::quantize_to_fp8(low.get(), format, full.get(), values.size(), scale.get(),
                                  amax.get(), nullptr);
    dseek::gpu::dequantize_fp8(exact.get(), low.get(), format, values.size(), scale_inv.get(),
                               nullptr);
  }
  float device_amax() {
    float value = 0.0f;
    DSEEK_CUDA_CHECK(cudaMemcpy(&value, amax.get(), sizeof(float), cudaMemcpyDeviceToHost));
    return value;
  }
};

void check_fp8(CublasLtGemm& gemm, int N, int C, int OC) {
  const std::vector<float> inp_values = random_values(size_t(N) * C, 3.0f, 11);
  const std::vector<float> w_values = random_values(size_t(OC) * C, 0.05f, 12);
  const std::vector<float> dout_values = random_values(size_t(N) * OC, 1e-3f, 13);
  Fp8Operand inp(inp_values, Fp8Format::e4m3, N, C, false);
  Fp8Operand w(w_values, Fp8Format::e4m3, OC, C, false);
  Fp8Operand w_t(w_values, Fp8Format::e4m3, OC, C, true);
  Fp8Operand dout(dout_values, Fp8Format::e5m2, N, OC, false);
  Fp8Operand dout_t(dout_values, Fp8Format::e5m2, N, OC, true);
  Fp8Operand inp_t(inp_values, Fp8Format::e4m3, N, C, true);
  Bf16Operand bias(random_values(OC, 0.5f, 14));

  report("fp8 amax of quantize (exact)", std::fabs(inp.device_amax() - inp.host_amax), 0.0);
  report("fp8 amax of quantize_transpose (exact)",
         std::fabs(dout_t.device_amax() - dout.host_amax), 0.0);
  {  // The transposed copy holds the same values as the plain one.
    const std::vector<float> plain = download(w.exact), transposed = download(w_t.exact);
    std::vector<float> untransposed(plain.size());
    for (int o = 0; o < OC; ++o)
      for (int c = 0; c < C; ++c) untransposed[size_t(o) * C + c] = transposed[size_t(c) * OC + o];
    report("fp8 quantize_transpose == quantize", relative_error(untransposed, plain), 0.0);
  }

  Device<float> got(size_t(N) * OC), want(size_t(N) * OC);
  fill_nan(got);
  gemm.fp8_forward(got.get(), Fp8Output::fp32, e4m3(inp.low.get()),
                   e4m3(w.low.get()), bias.low.get(), N,
                   C, OC, {inp.scale_inv.get(), w.scale_inv.get(), nullptr, nullptr});
  reference(want, inp.exact, C, 1, w.exact, C, 1, bias.exact.get(), N, OC, C, 0.0f);
  const std::vector<float> fp8_out = download(got);
  report("fp8 forward e4m3, fp32 out + bias", relative_error(fp8_out, download(want)), kFp8AccumulationBound);
  {  // Against the unquantized product: the FP8 rounding itself (E4M3: 3 mantissa bits).
    Device<float> full_inp = upload(inp_values), full_w = upload(w_values);
    Device<float> full_want(size_t(N) * OC);
    reference(full_want, full_inp, C, 1, full_w, C, 1, bias.exact.get(), N, OC, C, 0.0f);
    // Per element E4M3 rounds by up to 2^-4; over C = 192 terms the error of the sum
    // stays near 0.05 of the largest output, so 0.1 is the stated bound.
    report("fp8 forward vs unquantized fp32 product", relative_error(fp8_out, download(full_want)),
           1e-1);
  }

  // An fp8 output: stored = fp8(result * d_scale), amax_d = max |result|.
  Device<unsigned char> out8(size_t(N) * OC);
  Device<float> out8_float(size_t(N) * OC), d_scale(1), d_scale_inv(1), amax_d(1);
  Device<float> want_nobias(size_t(N) * OC);
  reference(want_nobias, inp.exact, C, 1, w.exact, C, 1, nullptr, N, OC, C, 0.0f);
  const std::vector<float> want_nobias_host = download(want_nobias);
  float want_amax = 0.0f;
  for (float v : want_nobias_host) want_amax = std::max(want_amax, std::fabs(v));
  // 0.9: the largest result lands below E4M3's 448, whatever the rounding of the sum.
  const float scale_value = 0.9f * 448.0f / want_amax, scale_inv_value = 1.0f / scale_value;
  DSEEK_CUDA_CHECK(cudaMemcpy(d_scale.get(), &scale_value, sizeof(float), cudaMemcpyHostToDevice));
  DSEEK_CUDA_CHECK(cudaMemcpy(d_scale_inv.get(), &scale_inv_value, sizeof(float),
                              cudaMemcpyHostToDevice));
  DSEEK_CUDA_CHECK(cudaMemset(amax_d.get(), 0, sizeof(float)));
  gemm.fp8_forward(out8.get(), Fp8Output::e4m3, e4m3(inp.low.get()),
                   e4m3(w.low.get()), nullptr, N, C, OC,
                   {inp.scale_inv.get(), w.scale_inv.get(), d_scale.get(), amax_d.get()});
  dseek::gpu::dequantize_fp8(out8_float.get(), out8.get(), Fp8Format::e4m3, out8.size(),
                             d_scale_inv.get(), nullptr);
  report("fp8 forward, e4m3 out with d_scale",
         relative_error(download(out8_float), want_nobias_host),
         7e-2);  // E4M3 keeps 3 mantissa bits: half a step is 2^-4 of the value
  std::vector<float> amax_host = download(amax_d);
  report("fp8 forward, amax_d", std::fabs(amax_host[0] - want_amax) / want_amax, kFp8AccumulationBound);

  Device<float> dinp(size_t(N) * C), dinp_want(size_t(N) * C);
  fill_nan(dinp);
  gemm.fp8_backward_input(dinp.get(), Fp8Output::fp32, e5m2(dout.low.get()),
                          e4m3(w_t.low.get()), N, C, OC,
                          {dout.scale_inv.get(), w_t.scale_inv.get(), nullptr, nullptr});
  // dinp[n][c] = sum_o dout[n][o] w_t[c][o]
  reference(dinp_want, dout.exact, OC, 1, w_t.exact, OC, 1, nullptr, N, C, OC, 0.0f);
  report("fp8 backward input e5m2 x e4m3, fp32 out",
         relative_error(download(dinp), download(dinp_want)),
         kFp8AccumulationBound);

  const std::vector<float> dw_start = random_values(size_t(OC) * C, 1e-2f, 15);
  Device<float> dw = upload(dw_start), dw_want = upload(dw_start);
  gemm.fp8_backward_weight(dw.get(), e5m2(dout_t.low.get()),
                           e4m3(inp_t.low.get()), N, C, OC,
                           {dout_t.scale_inv.get(), inp_t.scale_inv.get(), nullptr, nullptr});
  // dw[o][c] += sum_n dout_t[o][n] inp_t[c][n]
  reference(dw_want, dout_t.exact, N, 1, inp_t.exact, N, 1, nullptr, OC, C, N, 1.0f);
  report("fp8 backward weight, fp32 accumulate", relative_error(download(dw), download(dw_want)),
         kFp8AccumulationBound);

  // The form CudaMixedMatmul's forward uses for an fp32 bias (cuBLASLt's FP8 bias
  // epilogue takes bf16 only): the bias broadcast into d first, the product added with
  // beta = 1.
  guarded("fp8 forward e4m3, fp32 out, beta 1 on a bias", [&] {
    std::vector<float> start(size_t(N) * OC);
    const std::vector<float> bias_host = download(bias.exact);
    for (size_t i = 0; i < start.size(); ++i) start[i] = bias_host[i % OC];
    Device<float> d = upload(start), d_want(size_t(N) * OC);
    gemm.fp8_gemm(d.get(), Fp8Output::fp32, inp.low.get(), CUDA_R_8F_E4M3, w.low.get(),
                  CUDA_R_8F_E4M3, nullptr, N, OC, C, 1.0f,
                  {inp.scale_inv.get(), w.scale_inv.get(), nullptr, nullptr});
    reference(d_want, inp.exact, C, 1, w.exact, C, 1, bias.exact.get(), N, OC, C, 0.0f);
    report("fp8 forward e4m3, fp32 out, beta 1 on a bias",
           relative_error(download(d), download(d_want)), kFp8AccumulationBound);
  });
}

}  // namespace

int check_gemm_products(CublasLtGemm& gemm, bool fp8) {
  failures = 0;
  check_bf16(gemm, 256, 192, 320);
  if (fp8) guarded("fp8 products", [&] { check_fp8(gemm, 256, 192, 320); });
  DSEEK_CUDA_CHECK(cudaDeviceSynchronize());
  return failures;
}

}  // namespace dseek::bench
