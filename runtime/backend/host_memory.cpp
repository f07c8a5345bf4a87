// Implementation of host_memory.hpp: the aligned (pageable) host memory of the CPU
// backend and the scrambled test device. The pinned kind is the CUDA backend's
// (gpu/pinned_host_memory.cu).
#include "runtime/backend/host_memory.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace dseek::backend {

namespace {
class AlignedHostMemory final : public HostMemory {
 public:
  void* allocate(size_t bytes) override {
    // Whole cache lines: aligned AVX loads, and no false sharing between the pieces two
    // gradient_shard actors update side by side.
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* pointer = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (pointer == nullptr) throw std::bad_alloc();
    std::memset(pointer, 0, rounded);
    return pointer;
  }
  void release(void* pointer) override { std::free(pointer); }
  bool pinned() const override { return false; }
};
}  // namespace

std::shared_ptr<HostMemory> aligned_host_memory() {
  static const std::shared_ptr<HostMemory> memory = std::make_shared<AlignedHostMemory>();
  return memory;
}

}  // namespace dseek::backend
