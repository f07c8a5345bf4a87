// Pooled staging buffers for the collectives (chunks in flight, partial sums). Buffers
// are allocated once, pre-faulted, and reused: fresh pages cost ~13 us per 4 KiB here, and
// an allocation per call is what makes OpenMPI's all-reduce collapse at 64 MiB.
// Used from the progress thread only.
#pragma once

#include <cstddef>
#include <map>
#include <vector>

namespace dseek::comm {

class StagingPool {
 public:
  class Lease {
   public:
    Lease() = default;
    Lease(StagingPool* pool, std::byte* data, size_t capacity) : pool_(pool), data_(data), capacity_(capacity) {}
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { reset(); }
    void reset();
    std::byte* data() const { return data_; }
    size_t capacity() const { return capacity_; }

   private:
    StagingPool* pool_ = nullptr;
    std::byte* data_ = nullptr;
    size_t capacity_ = 0;
  };

  StagingPool() = default;
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A buffer of at least `bytes` (rounded up to a power of two, at least 4 KiB).
  Lease acquire(size_t bytes);
  size_t allocated_bytes() const { return allocated_; }

 private:
  void give_back(std::byte* data, size_t capacity);
  std::map<size_t, std::vector<std::byte*>> free_;  // capacity -> free buffers
  std::vector<std::byte*> all_;
  size_t allocated_ = 0;
};

}  // namespace dseek::comm
