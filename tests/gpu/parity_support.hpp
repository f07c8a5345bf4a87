// Helpers for the GPU-against-CPU parity tests: both backends side by side, the same
// random inputs uploaded to each, results downloaded and compared.
//
// The comparison is the relative error in the L2 norm, ||gpu - cpu||_2 / ||cpu||_2, over
// a whole output (per tensor). Outputs that an op overwrites are pre-filled with NaN on
// both sides, so an element the GPU never writes shows up as a NaN (counted separately,
// and it makes the norm NaN, which fails every bound). Arguments an op accumulates into
// are pre-filled with the same random values on both sides.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "gpu/cuda_backend.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/backend/device_buffer.hpp"

namespace dseek::gpu_testing {

using backend::Backend;
using backend::DeviceBuffer;

// fp32 parity bound of the brief: relative L2 error below 1e-5.
constexpr double kFp32Tolerance = 1e-5;

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(lo, hi);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(rng);
  return values;
}

inline std::vector<int32_t> random_ids(size_t n, int32_t bound, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, bound - 1);
  std::vector<int32_t> values(n);
  for (int32_t& v : values) v = id(rng);
  return values;
}

inline std::vector<float> nan_filled(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

inline size_t count_nan(const std::vector<float>& values) {
  size_t count = 0;
  for (float v : values) count += std::isnan(v) ? 1 : 0;
  return count;
}

inline double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    diff += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

// The CPU backend (2 threads) and the CUDA backend on device 0.
struct BackendPair {
  std::unique_ptr<Backend> cpu = backend::make_cpu_backend(2);
  std::unique_ptr<Backend> gpu = gpu::make_cuda_backend(0);
};

// One array with a copy in each backend's memory.
template <class T>
struct Mirrored {
  Mirrored(BackendPair& pair, const std::vector<T>& host)
      : cpu_backend(pair.cpu.get()), gpu_backend(pair.gpu.get()),
        cpu(*pair.cpu, host.size()), gpu(*pair.gpu, host.size()) {
    pair.cpu->copy_from_host(cpu.data(), host.data(), host.size() * sizeof(T));
    pair.gpu->copy_from_host(gpu.data(), host.data(), host.size() * sizeof(T));
  }
  std::vector<T> cpu_values() const { return download(*cpu_backend, cpu); }
  std::vector<T> gpu_values() const { return download(*gpu_backend, gpu); }

  static std::vector<T> download(Backend& backend, const DeviceBuffer<T>& buffer) {
    std::vector<T> host(buffer.size());
    backend.copy_to_host(host.data(), buffer.data(), host.size() * sizeof(T));
    return host;
  }

  Backend* cpu_backend;
  Backend* gpu_backend;
  DeviceBuffer<T> cpu, gpu;
};

}  // namespace dseek::gpu_testing

// Checks that `m`'s GPU copy has no unwritten (NaN) element and matches the CPU copy
// within `tolerance` (relative L2).
#define DSEEK_CHECK_PARITY(m, tolerance)                                   \
  do {                                                                     \
    const auto gpu_values_ = (m).gpu_values();                             \
    const auto cpu_values_ = (m).cpu_values();                             \
    INFO(#m << ": relative L2 error "                                      \
            << ::dseek::gpu_testing::relative_l2(gpu_values_, cpu_values_)); \
    CHECK(::dseek::gpu_testing::count_nan(gpu_values_) == 0);              \
    CHECK(::dseek::gpu_testing::count_nan(cpu_values_) == 0);              \
    CHECK(::dseek::gpu_testing::relative_l2(gpu_values_, cpu_values_) < (tolerance)); \
  } while (false)
