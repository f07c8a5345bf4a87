// One pool of device memory per CUDA backend (one backend per device): allocate() carves
// blocks out of large cudaMalloc'd chunks and release() gives them back, so a training
// step, which allocates nothing after the first one, never calls cudaMalloc, and repeated
// allocations of the same sizes (activation buffers of a new model, scratch) reuse
// memory without going to the driver.
//
// Blocks are 256-byte aligned (what cuBLAS and vector loads want). A free block is found
// best-fit; freed neighbours in the same chunk are merged. Chunks are returned to the
// driver only when the pool is destroyed. The pool is not thread-safe on its own: the
// backend serialises calls to it.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace dseek::gpu {

class DevicePool {
 public:
  // `device_label` (e.g. "CUDA device 0 (NVIDIA H200)") names the device in errors.
  DevicePool(int device, std::string device_label, size_t chunk_bytes = size_t{256} << 20);
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  // Not zero-filled: the backend clears on its stream. Throws std::runtime_error when the
  // device is out of memory, with the sizes in use.
  void* allocate(size_t bytes);
  // A pointer that allocate() did not return throws std::invalid_argument.
  void release(void* pointer);

  size_t in_use_bytes() const { return in_use_; }
  size_t peak_bytes() const { return peak_; }
  size_t reserved_bytes() const { return reserved_; }

 private:
  struct Block {
    size_t bytes = 0;
    size_t chunk = 0;  // index into chunks_
  };
  void add_chunk(size_t min_bytes);
  void insert_free(char* address, Block block);

  int device_;
  std::string label_;
  size_t chunk_bytes_;
  std::vector<char*> chunks_;
  std::map<char*, Block> free_by_address_;         // for merging neighbours
  std::multimap<size_t, char*> free_by_size_;      // for best fit
  std::unordered_map<char*, Block> used_;
  size_t in_use_ = 0, peak_ = 0, reserved_ = 0;
};

}  // namespace dseek::gpu
