// Device arrays for the GPU benchmarks' host code (bench/gpu): an owning cudaMalloc'd
// array, and copies of float arrays to and from it. Small on purpose: the benchmarks
// need no more, and the runtime's DeviceBuffer goes through a Backend instead.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "gpu/cuda_check.hpp"

namespace dseek::bench {

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

inline Device<float> upload(const std::vector<float>& host) {
  Device<float> device(host.size());
  DSEEK_CUDA_CHECK(cudaMemcpy(device.get(), host.data(), host.size() * sizeof(float),
                              cudaMemcpyHostToDevice));
  return device;
}

inline std::vector<float> download(Device<float>& device) {
  std::vector<float> host(device.size());
  DSEEK_CUDA_CHECK(cudaMemcpy(host.data(), device.get(), host.size() * sizeof(float),
                              cudaMemcpyDeviceToHost));
  return host;
}

// NaN in every element: what a kernel leaves unwritten stays NaN.
inline void fill_nan(Device<float>& device) {
  DSEEK_CUDA_CHECK(cudaMemset(device.get(), 0xff, device.size() * sizeof(float)));
}

}  // namespace dseek::bench
