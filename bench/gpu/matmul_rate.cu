// matmul_rate: the card's dense BF16 (and, on compute capability 9.0+, FP8) GEMM rate in
// TFLOP/s through gpu/cublaslt_gemm.hpp -- the denominator of the MFU that
// bench/gpu/gpt2_train prints and bench/gpu/check.sh reports.
//
// Before timing, it checks every product of CublasLtGemm and the conversion kernels
// (bench/gpu/gemm_check.hpp) on small shapes against a plain fp32 kernel fed the same
// rounded values (outputs are filled with NaN first, so an element the GEMM did not
// write fails the check). A rate is only printed for products that computed the right
// thing.
//
//   matmul_rate [--device I] [--shapes MxNxK,...] [--reps R] [--warmup W] [--no-fp8]
//               [--fp8-fast-accumulation]
//
// Each shape is out (M, N) = a (M, K) @ b (N, K)^T, bf16 output, fp32 accumulate; the rate
// is 2 M N K over the median of R timed calls (cudaEvents around each) after W warm-ups.
// The last line is one JSON object: {"bench":"matmul_rate", "bf16_tflops": the best
// shape's median rate, "fp8_tflops": ... or null, ...}. Exit 0; 1 when a check fails or
// CUDA fails; 77 when no CUDA device can be used (as the GPU tests do).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/gpu/device_array.hpp"
#include "bench/gpu/gemm_check.hpp"
#include "gpu/cublaslt_gemm.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/precision_convert.hpp"

namespace {

using dseek::bench::Device;
using dseek::gpu::bf16;
using dseek::gpu::CublasLtGemm;
using dseek::gpu::Fp8Format;
using dseek::gpu::Fp8Output;
using dseek::gpu::Fp8Scales;

struct Shape {
  long long M = 0, N = 0, K = 0;
};

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
      [&] {
        gemm.bf16_forward(d.get(), a.get(), b.get(), static_cast<const bf16*>(nullptr), M, K,
                          N);
      },
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
  bool want_fp8 = true, fp8_fast_accumulation = false;
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
    else if (arg == "--fp8-fast-accumulation") fp8_fast_accumulation = true;
    else
      throw std::invalid_argument("unknown argument '" + arg +
                                  "' (usage: matmul_rate [--device I] [--shapes MxNxK,...] "
                                  "[--reps R] [--warmup W] [--no-fp8] "
                                  "[--fp8-fast-accumulation])");
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

  const int failures = dseek::bench::check_gemm_products(gemm, fp8);
  if (failures > 0) {
    std::printf("{\"bench\":\"matmul_rate\",\"check\":\"failed\",\"failures\":%d}\n", failures);
    return 1;
  }

  // The checks above ran with fp32-promoted accumulation; the rate may use the fast one.
  gemm.set_fp8_fast_accumulation(fp8_fast_accumulation);
  double best_bf16 = 0.0, best_fp8 = 0.0;
  for (const Shape& s : shapes) {
    const auto [bf16_rate, fp8_rate] = measure(gemm, s, reps, warmup, fp8);
    best_bf16 = std::max(best_bf16, bf16_rate);
    best_fp8 = std::max(best_fp8, fp8_rate);
  }
  std::string fp8_field = fp8 ? std::to_string(best_fp8) : std::string("null");
  std::printf("{\"bench\":\"matmul_rate\",\"check\":\"ok\",\"device\":\"%s\",\"bf16_tflops\":%.3f,"
              "\"fp8_tflops\":%s,\"fp8_fast_accumulation\":%s,\"reps\":%d,\"warmup\":%d,"
              "\"shapes\":\"%s\"}\n",
              gemm.device_name().c_str(), best_bf16, fp8_field.c_str(),
              fp8_fast_accumulation ? "true" : "false", reps, warmup, shape_list.c_str());
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
