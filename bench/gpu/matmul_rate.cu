// matmul_rate: the card's dense BF16 (and, on compute capability 9.0+, FP8) GEMM rate in
// TFLOP/s through gpu/cublaslt_gemm.hpp -- the denominator of the MFU that
// bench/gpu/gpt2_train prints and bench/gpu/check.sh reports.
//
// Before timing, it checks every product of CublasLtGemm and the conversion kernels on
// small shapes against a plain fp32 kernel fed the same rounded values (outputs are
// filled with NaN first, so an element the GEMM did not write fails the check). A rate
// is only printed for products that computed the right thing.
//
//   matmul_rate [--device I] [--shapes MxNxK,...] [--reps R] [--warmup W] [--no-fp8]
//
// Each shape is out (M, N) = a (M, K) @ b (N, K)^T, bf16 output, fp32 accumulate; the rate
// is 2 M N K over the median of R timed calls (cudaEvents around each) after W warm-ups.
// The last line is one JSON object: {"bench":"matmul_rate", "bf16_tflops": the best
// shape's median rate, "fp8_tflops": ... or null, ...}. Exit 0; 1 when a check fails or
// CUDA fails; 77 when no CUDA device can be used (as the GPU tests do).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/cublaslt_gemm.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/precision_convert.hpp"

namespace {

using dseek::gpu::bf16;
using dseek::gpu::CublasLtGemm;
using dseek::gpu::Fp8Format;
using dseek::gpu::Fp8Output;
using dseek::gpu::Fp8Scales;

struct Shape {
  long long M = 0, N = 0, K = 0;
};

// A device array that frees itself.
template <class T>
class Device {
 public:
  explicit Device(size_t count) : count_(count) {
    DSEEK_CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(count, 1) * sizeof(T)));
  }
  ~Device() { cudaFree(data_); }
  Device(Device&& other) noexcept : data_(other.data_), count_(other.count_) {
    other.data_ = nullptr;
  }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  Device& operator=(Device&&) = delete;
  T* get() { return data_; }
  size_t size() const { return count_; }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

Device<float> upload(const std::vector<float>& host) {
  Device<float> device(host.size());
  DSEEK_CUDA_CHECK(cudaMemcpy(device.get(), host.data(), host.size() * sizeof(float),
                              cudaMemcpyHostToDevice));
  return device;
}

std::vector<float> download(Device<float>& device) {
  std::vector<float> host(device.size());
  DSEEK_CUDA_CHECK(cudaMemcpy(host.data(), device.get(), host.size() * sizeof(float),
                              cudaMemcpyDeviceToHost));
  return host;
}

void fill_nan(Device<float>& device) {
  DSEEK_CUDA_CHECK(cudaMemset(device.get(), 0xff, device.size() * sizeof(float)));
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
  gemm.fp8_forward(got.get(), Fp8Output::fp32, reinterpret_cast<const dseek::gpu::fp8_e4m3*>(inp.low.get()),
                   reinterpret_cast<const dseek::gpu::fp8_e4m3*>(w.low.get()), bias.low.get(), N,
                   C, OC, {inp.scale_inv.get(), w.scale_inv.get(), nullptr, nullptr});
  reference(want, inp.exact, C, 1, w.exact, C, 1, bias.exact.get(), N, OC, C, 0.0f);
  const std::vector<float> fp8_out = download(got);
  report("fp8 forward e4m3, fp32 out + bias", relative_error(fp8_out, download(want)), 1e-4);
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
  gemm.fp8_forward(out8.get(), Fp8Output::e4m3, reinterpret_cast<const dseek::gpu::fp8_e4m3*>(inp.low.get()),
                   reinterpret_cast<const dseek::gpu::fp8_e4m3*>(w.low.get()), nullptr, N, C, OC,
                   {inp.scale_inv.get(), w.scale_inv.get(), d_scale.get(), amax_d.get()});
  dseek::gpu::dequantize_fp8(out8_float.get(), out8.get(), Fp8Format::e4m3, out8.size(),
                             d_scale_inv.get(), nullptr);
  report("fp8 forward, e4m3 out with d_scale", relative_error(download(out8_float), want_nobias_host),
         7e-2);  // E4M3 keeps 3 mantissa bits: half a step is 2^-4 of the value
  std::vector<float> amax_host = download(amax_d);
  report("fp8 forward, amax_d", std::fabs(amax_host[0] - want_amax) / want_amax, 1e-4);

  Device<float> dinp(size_t(N) * C), dinp_want(size_t(N) * C);
  fill_nan(dinp);
  gemm.fp8_backward_input(dinp.get(), Fp8Output::fp32, reinterpret_cast<const dseek::gpu::fp8_e5m2*>(dout.low.get()),
                          reinterpret_cast<const dseek::gpu::fp8_e4m3*>(w_t.low.get()), N, C, OC,
                          {dout.scale_inv.get(), w_t.scale_inv.get(), nullptr, nullptr});
  // dinp[n][c] = sum_o dout[n][o] w_t[c][o]
  reference(dinp_want, dout.exact, OC, 1, w_t.exact, OC, 1, nullptr, N, C, OC, 0.0f);
  report("fp8 backward input e5m2 x e4m3, fp32 out", relative_error(download(dinp), download(dinp_want)),
         1e-4);

  const std::vector<float> dw_start = random_values(size_t(OC) * C, 1e-2f, 15);
  Device<float> dw = upload(dw_start), dw_want = upload(dw_start);
  gemm.fp8_backward_weight(dw.get(), reinterpret_cast<const dseek::gpu::fp8_e5m2*>(dout_t.low.get()),
                           reinterpret_cast<const dseek::gpu::fp8_e4m3*>(inp_t.low.get()), N, C, OC,
                           {dout_t.scale_inv.get(), inp_t.scale_inv.get(), nullptr, nullptr});
  // dw[o][c] += sum_n dout_t[o][n] inp_t[c][n]
  reference(dw_want, dout_t.exact, N, 1, inp_t.exact, N, 1, nullptr, OC, C, N, 1.0f);
  report("fp8 backward weight, fp32 accumulate", relative_error(download(dw), download(dw_want)),
         1e-4);
}

// Uniform values in [-1, 1) from the index: large operands without a host round trip.
__global__ void fill_uniform(float* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    x[i] = static_cast<float>(h) / 2147483648.0f - 1.0f;
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Median milliseconds of `reps` calls of `product` after `warmup` untimed ones.
template <class Product>
double time_median_ms(Product&& product, int reps, int warmup) {
  for (int i = 0; i < warmup; ++i) product();
  cudaEvent_t start, stop;
  DSEEK_CUDA_CHECK(cudaEventCreate(&start));
  DSEEK_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    DSEEK_CUDA_CHECK(cudaEventRecord(start));
    product();
    DSEEK_CUDA_CHECK(cudaEventRecord(stop));
    DSEEK_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    DSEEK_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return median(times);
}

// {bf16 TFLOP/s, fp8 TFLOP/s (0 when not run)} of one shape.
std::pair<double, double> measure(CublasLtGemm& gemm, const Shape& s, int reps, int warmup,
                                  bool fp8) {
  const size_t a_n = size_t(s.M) * s.K, b_n = size_t(s.N) * s.K, d_n = size_t(s.M) * s.N;
  const double flops = 2.0 * double(s.M) * double(s.N) * double(s.K);
  Device<float> a_full(a_n), b_full(b_n);
  fill_uniform<<<1024, 256>>>(a_full.get(), a_n, 1u);
  fill_uniform<<<1024, 256>>>(b_full.get(), b_n, 2u);
  DSEEK_CUDA_CHECK(cudaGetLastError());
  Device<bf16> a(a_n), b(b_n), d(d_n);
  dseek::gpu::convert_to_bf16(a.get(), a_full.get(), a_n, nullptr);
  dseek::gpu::convert_to_bf16(b.get(), b_full.get(), b_n, nullptr);
  const int M = int(s.M), N = int(s.N), K = int(s.K);
  // out (M, N) = a (M, K) @ b (N, K)^T: the forward product with N tokens = M, OC = N, C = K.
  const double bf16_ms = time_median_ms(
      [&] { gemm.bf16_forward(d.get(), a.get(), b.get(), static_cast<const bf16*>(nullptr), M, K, N); },
      reps, warmup);
  const double bf16_tflops = flops / (bf16_ms * 1e-3) / 1e12;
  std::printf("rate bf16 %lldx%lldx%lld  median %.3f ms  %.1f TFLOP/s\n", s.M, s.N, s.K, bf16_ms,
              bf16_tflops);
  double fp8_tflops = 0.0;
  if (fp8) {
    Device<unsigned char> a8(a_n), b8(b_n);
    Device<float> one(1), amax(1);
    const float one_value = 1.0f;
    DSEEK_CUDA_CHECK(cudaMemcpy(one.get(), &one_value, sizeof(float), cudaMemcpyHostToDevice));
    DSEEK_CUDA_CHECK(cudaMemset(amax.get(), 0, sizeof(float)));
    dseek::gpu::quantize_to_fp8(a8.get(), Fp8Format::e4m3, a_full.get(), a_n, one.get(),
                                amax.get(), nullptr);
    dseek::gpu::quantize_to_fp8(b8.get(), Fp8Format::e4m3, b_full.get(), b_n, one.get(),
                                amax.get(), nullptr);
    const Fp8Scales scales{one.get(), one.get(), nullptr, nullptr};
    const double fp8_ms = time_median_ms(
        [&] {
          gemm.fp8_forward(d.get(), Fp8Output::bf16,
                           reinterpret_cast<const dseek::gpu::fp8_e4m3*>(a8.get()),
                           reinterpret_cast<const dseek::gpu::fp8_e4m3*>(b8.get()), nullptr, M, K,
                           N, scales);
        },
        reps, warmup);
    fp8_tflops = flops / (fp8_ms * 1e-3) / 1e12;
    std::printf("rate fp8  %lldx%lldx%lld  median %.3f ms  %.1f TFLOP/s\n", s.M, s.N, s.K, fp8_ms,
                fp8_tflops);
  }
  return {bf16_tflops, fp8_tflops};
}

std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> shapes;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    Shape s;
    if (std::sscanf(item.c_str(), "%lldx%lldx%lld", &s.M, &s.N, &s.K) != 3 || s.M <= 0 ||
        s.N <= 0 || s.K <= 0)
      throw std::invalid_argument("--shapes: '" + item + "' is not MxNxK with positive sizes");
    shapes.push_back(s);
    start = end + 1;
  }
  return shapes;
}

int run(int argc, char** argv) {
  int device = 0, reps = 20, warmup = 5;
  bool want_fp8 = true;
  std::string shape_list = "4096x4096x4096,8192x8192x8192,16384x16384x16384";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--device") device = std::stoi(value());
    else if (arg == "--shapes") shape_list = value();
    else if (arg == "--reps") reps = std::stoi(value());
    else if (arg == "--warmup") warmup = std::stoi(value());
    else if (arg == "--no-fp8") want_fp8 = false;
    else throw std::invalid_argument("unknown argument '" + arg + "' (usage: matmul_rate [--device I] "
                                     "[--shapes MxNxK,...] [--reps R] [--warmup W] [--no-fp8])");
  }
  if (reps < 1 || warmup < 0) throw std::invalid_argument("--reps must be >= 1, --warmup >= 0");
  const std::vector<Shape> shapes = parse_shapes(shape_list);

  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count <= device) {
    std::printf("matmul_rate: no usable CUDA device %d (%s)\n", device,
                status != cudaSuccess ? cudaGetErrorString(status) : "too few devices");
    return 77;
  }
  CublasLtGemm gemm(device);
  const bool fp8 = want_fp8 && gemm.fp8_supported();
  std::printf("device %d: %s; fp8 %s\n", device, gemm.device_name().c_str(),
              fp8 ? "yes" : (want_fp8 ? "no (needs compute capability 9.0+)" : "not asked"));

  check_bf16(gemm, 256, 192, 320);
  if (fp8) check_fp8(gemm, 256, 192, 320);
  DSEEK_CUDA_CHECK(cudaDeviceSynchronize());
  if (failures > 0) {
    std::printf("{\"bench\":\"matmul_rate\",\"check\":\"failed\",\"failures\":%d}\n", failures);
    return 1;
  }

  double best_bf16 = 0.0, best_fp8 = 0.0;
  for (const Shape& s : shapes) {
    const auto [bf16_rate, fp8_rate] = measure(gemm, s, reps, warmup, fp8);
    best_bf16 = std::max(best_bf16, bf16_rate);
    best_fp8 = std::max(best_fp8, fp8_rate);
  }
  std::string fp8_field = fp8 ? std::to_string(best_fp8) : std::string("null");
  std::printf("{\"bench\":\"matmul_rate\",\"check\":\"ok\",\"device\":\"%s\",\"bf16_tflops\":%.3f,"
              "\"fp8_tflops\":%s,\"reps\":%d,\"warmup\":%d,\"shapes\":\"%s\"}\n",
              gemm.device_name().c_str(), best_bf16, fp8_field.c_str(), reps, warmup,
              shape_list.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "matmul_rate: %s\n", error.what());
    return 1;
  }
}
