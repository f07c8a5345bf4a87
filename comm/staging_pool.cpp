// Size-classed free lists of page-aligned, pre-faulted buffers (see staging_pool.hpp).
#include "comm/staging_pool.hpp"

#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

namespace dseek::comm {

StagingPool::Lease& StagingPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = other.pool_;
    data_ = other.data_;
    capacity_ = other.capacity_;
    other.pool_ = nullptr;
    other.data_ = nullptr;
    other.capacity_ = 0;
  }
  return *this;
}

void StagingPool::Lease::reset() {
  if (pool_ != nullptr && data_ != nullptr) pool_->give_back(data_, capacity_);
  pool_ = nullptr;
  data_ = nullptr;
  capacity_ = 0;
}

StagingPool::~StagingPool() {
  for (std::byte* p : all_) std::free(p);
}

StagingPool::Lease StagingPool::acquire(size_t bytes) {
  const size_t capacity = std::bit_ceil(bytes < 4096 ? size_t{4096} : bytes);
  auto& list = free_[capacity];
  if (!list.empty()) {
    std::byte* p = list.back();
    list.pop_back();
    return Lease(this, p, capacity);
  }
  auto* p = static_cast<std::byte*>(std::aligned_alloc(4096, capacity));
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, capacity);  // fault the pages in now, not in the middle of a transfer
  all_.push_back(p);
  allocated_ += capacity;
  return Lease(this, p, capacity);
}

void StagingPool::give_back(std::byte* data, size_t capacity) { free_[capacity].push_back(data); }

}  // namespace dseek::comm
