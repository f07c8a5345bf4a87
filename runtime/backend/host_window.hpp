// A host view of a range of floats in a backend's memory, for code that has to hand the
// values to the host data plane: the tensor-parallel model's all-reduces over the tensor
// group (the UCX data plane moves host memory). Its compute stays on the backend.
//
// On a backend whose memory is host memory (the CPU backend) the window is the range
// itself and nothing is copied, so the CPU path costs nothing. On a device (CUDA, the
// scrambled test device) the range is copied into `scratch` through the backend's copy
// calls when the window opens (unless it is only going to be overwritten), and
// write_back() copies it back. The scratch is the caller's, in the backend's host memory
// (pinned for CUDA) and grown on demand, so a window opened per call allocates only when
// a range is larger than any before.
#pragma once

#include <cstddef>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/host_memory.hpp"

namespace dseek::backend {

class HostWindow {
 public:
  // read: the values are used, not changed; overwrite: every value is written before
  // it is read; update: read and changed.
  enum class Access { read, overwrite, update };

  HostWindow(Backend& backend, float* data, size_t count, Access access,
             HostBuffer<float>& scratch)
      : backend_(backend), data_(data), count_(count), access_(access) {
    if (backend.memory_is_host() || count == 0) {
      host_ = data;
      return;
    }
    if (scratch.size() < count) scratch = HostBuffer<float>(backend.host_memory(), count);
    host_ = scratch.data();
    if (access != Access::overwrite) backend.copy_to_host(host_, data, count * sizeof(float));
  }
  HostWindow(const HostWindow&) = delete;
  HostWindow& operator=(const HostWindow&) = delete;

  float* data() const { return host_; }
  size_t size() const { return count_; }

  // Puts what was written through data() into the backend's range (a no-op in place
  // and for a read window).
  void write_back() {
    if (host_ == data_ || access_ == Access::read) return;
    backend_.copy_from_host(data_, host_, count_ * sizeof(float));
  }

 private:
  Backend& backend_;
  float* data_;  // the backend's memory
  size_t count_;
  Access access_;
  float* host_ = nullptr;
};

}  // namespace dseek::backend
