// Implementation of pinned_host_memory.hpp.
#include <cuda_runtime.h>

#include <cstring>

#include "gpu/cuda_check.hpp"
#include "gpu/pinned_host_memory.hpp"

namespace dseek::gpu {

namespace {
class PinnedHostMemory final : public backend::HostMemory {
 public:
  explicit PinnedHostMemory(int device) : device_(device) {}
  void* allocate(size_t bytes) override {
    DSEEK_CUDA_CHECK(cudaSetDevice(device_));
    void* pointer = nullptr;
    // cudaHostAlloc returns page-aligned memory: more than the 64 bytes promised.
    DSEEK_CUDA_CHECK(cudaHostAlloc(&pointer, bytes == 0 ? 64 : bytes, cudaHostAllocPortable));
    std::memset(pointer, 0, bytes);
    return pointer;
  }
  void release(void* pointer) override {
    if (pointer != nullptr) DSEEK_CUDA_CHECK(cudaFreeHost(pointer));
  }
  bool pinned() const override { return true; }

 private:
  int device_;
};
}  // namespace

std::shared_ptr<backend::HostMemory> pinned_host_memory(int device) {
  return std::make_shared<PinnedHostMemory>(device);
}

}  // namespace dseek::gpu
