// DevicePool: best-fit blocks out of large cudaMalloc chunks; see device_pool.hpp.
#include "gpu/device_pool.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <utility>

namespace dseek::gpu {

namespace {
constexpr size_t kAlignment = 256;
size_t round_up(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }
}  // namespace

DevicePool::DevicePool(int device, std::string device_label, size_t chunk_bytes)
    : device_(device), label_(std::move(device_label)), chunk_bytes_(chunk_bytes) {}

DevicePool::~DevicePool() {
  cudaSetDevice(device_);
  // The backend synchronised its stream before destroying the pool; errors here cannot
  // be reported from a destructor and leave nothing to recover.
  for (char* chunk : chunks_) cudaFree(chunk);
}

void DevicePool::add_chunk(size_t min_bytes) {
  const size_t bytes = std::max(chunk_bytes_, min_bytes);
  void* memory = nullptr;
  cudaError_t status = cudaMalloc(&memory, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free allocation error
    throw std::runtime_error(label_ + ": cannot allocate a pool chunk of " +
                             std::to_string(bytes) + " bytes (" + cudaGetErrorString(status) +
                             "); in use " + std::to_string(in_use_) + " bytes, reserved " +
                             std::to_string(reserved_) + " bytes");
  }
  chunks_.push_back(static_cast<char*>(memory));
  reserved_ += bytes;
  insert_free(static_cast<char*>(memory), Block{bytes, chunks_.size() - 1});
}

void DevicePool::insert_free(char* address, Block block) {
  // Merge with the free block just after, then with the one just before, in the same chunk.
  auto next = free_by_address_.find(address + block.bytes);
  if (next != free_by_address_.end() && next->second.chunk == block.chunk) {
    auto range = free_by_size_.equal_range(next->second.bytes);
    for (auto it = range.first; it != range.second; ++it)
      if (it->second == next->first) {
        free_by_size_.erase(it);
        break;
      }
    block.bytes += next->second.bytes;
    free_by_address_.erase(next);
  }
  auto after = free_by_address_.lower_bound(address);
  if (after != free_by_address_.begin()) {
    auto previous = std::prev(after);
    if (previous->second.chunk == block.chunk &&
        previous->first + previous->second.bytes == address) {
      auto range = free_by_size_.equal_range(previous->second.bytes);
      for (auto it = range.first; it != range.second; ++it)
        if (it->second == previous->first) {
          free_by_size_.erase(it);
          break;
        }
      previous->second.bytes += block.bytes;
      free_by_size_.emplace(previous->second.bytes, previous->first);
      return;
    }
  }
  free_by_address_.emplace(address, block);
  free_by_size_.emplace(block.bytes, address);
}

void* DevicePool::allocate(size_t bytes) {
  const size_t rounded = round_up(bytes == 0 ? 1 : bytes);
  auto fit = free_by_size_.lower_bound(rounded);
  if (fit == free_by_size_.end()) {
    add_chunk(rounded);
    fit = free_by_size_.lower_bound(rounded);
  }
  char* address = fit->second;
  free_by_size_.erase(fit);
  auto node = free_by_address_.find(address);
  Block block = node->second;
  free_by_address_.erase(node);
  if (block.bytes > rounded) {  // the tail stays free
    Block tail{block.bytes - rounded, block.chunk};
    free_by_address_.emplace(address + rounded, tail);
    free_by_size_.emplace(tail.bytes, address + rounded);
    block.bytes = rounded;
  }
  used_.emplace(address, block);
  in_use_ += block.bytes;
  peak_ = std::max(peak_, in_use_);
  return address;
}

void DevicePool::release(void* pointer) {
  if (pointer == nullptr) return;
  auto node = used_.find(static_cast<char*>(pointer));
  if (node == used_.end())
    throw std::invalid_argument(label_ + ": release of a pointer this pool did not allocate");
  Block block = node->second;
  used_.erase(node);
  in_use_ -= block.bytes;
  insert_free(static_cast<char*>(pointer), block);
}

}  // namespace dseek::gpu
