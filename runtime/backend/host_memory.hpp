// Host memory suited to a backend's copies (Backend::host_memory()): where the CPU
// offload keeps what lives on the host for a device -- the host staging of the parameters
// and gradients (the FP32 master copy the offloaded optimizer updates) and the
// gradient_shard actors' AdamW moments.
//
// For a device that copies by DMA (CUDA) this is page-locked ("pinned") memory
// (cudaHostAlloc): the copy engine reads and writes it directly, so a copy runs at the
// link's full rate and can be asynchronous (Backend::copy_from_host_async); pageable
// memory would be copied through a driver bounce buffer, synchronously. For the CPU
// backend and the scrambled test device it is ordinary 64-byte aligned host memory.
//
// A HostMemory is shared (std::shared_ptr) by everything that allocated from it, so it
// outlives the backend that handed it out: the gradient_shard actors keep their moments
// after a trainer is gone until they are given a new piece.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

namespace dseek::backend {

class HostMemory {
 public:
  virtual ~HostMemory() = default;
  // Zero-filled, at least 64-byte aligned; std::bad_alloc or std::runtime_error (naming
  // the size) when the memory is not there.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* pointer) = 0;
  // Page-locked memory a device reads and writes by DMA (cudaHostAlloc).
  virtual bool pinned() const = 0;
  // "pinned" or "pageable": the word the run_started event reports (host_memory).
  std::string kind() const { return pinned() ? "pinned" : "pageable"; }
};

// Ordinary aligned host memory (std::aligned_alloc): the CPU backend's and the scrambled
// device's. One instance serves every caller.
std::shared_ptr<HostMemory> aligned_host_memory();

// An owning array of `count` T in a HostMemory (zero-filled). Empty when default-built.
template <class T>
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(std::shared_ptr<HostMemory> memory, size_t count)
      : memory_(std::move(memory)),
        data_(count == 0 ? nullptr : static_cast<T*>(memory_->allocate(count * sizeof(T)))),
        count_(count) {}
  HostBuffer(HostBuffer&& other) noexcept { swap(other); }
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    HostBuffer moved(std::move(other));
    swap(moved);
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() {
    if (data_ != nullptr) memory_->release(data_);
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return count_; }
  bool pinned() const { return memory_ != nullptr && memory_->pinned(); }

 private:
  void swap(HostBuffer& other) noexcept {
    std::swap(memory_, other.memory_);
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
  }
  std::shared_ptr<HostMemory> memory_;
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace dseek::backend
