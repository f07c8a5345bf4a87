// An owning array in a backend's memory (host for the CPU, device for CUDA).
#pragma once

#include <cstddef>
#include <utility>

#include "runtime/backend/backend.hpp"

namespace dseek::backend {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& backend, size_t count)
      : backend_(&backend), data_(static_cast<T*>(backend.allocate(count * sizeof(T)))),
        count_(count) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    DeviceBuffer moved(std::move(other));
    swap(moved);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (data_ != nullptr) backend_->release(data_);
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return count_; }

 private:
  void swap(DeviceBuffer& other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
  }
  Backend* backend_ = nullptr;
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace dseek::backend
