// Creating, mapping and unlinking the per-rank shm segments (see shared_segments.hpp).
#include "comm/shm/shared_segments.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "comm/types.hpp"

namespace dseek::comm {

namespace {
constexpr size_t kFlagBytes = 4096;

std::string segment_name(const std::string& base, int rank) { return base + "-" + std::to_string(rank); }

[[noreturn]] void fail(const std::string& what) {
  throw CommError(ErrorKind::transport, "shared-memory all-reduce: " + what + ": " + std::strerror(errno) +
                                            " (set CommOptions::shared_memory = false to use UCX only)");
}

std::byte* map_segment(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail("mmap " + name);
  return static_cast<std::byte*>(p);
}
}  // namespace

SharedSegments::SharedSegments(int rank, int ranks, size_t chunk_bytes, const std::string& name_base,
                               const std::function<void()>& barrier)
    : rank_(rank), ranks_(ranks), chunk_bytes_((chunk_bytes + 4095) / 4096 * 4096),
      segment_bytes_(kFlagBytes + 2 * kSlots * (chunk_bytes_ + kSlotSlack)), bases_(static_cast<size_t>(ranks), nullptr) {
  if (chunk_bytes_ == 0) throw CommError(ErrorKind::invalid_argument, "shared-memory all-reduce: chunk of 0 bytes");
  own_name_ = segment_name(name_base, rank);
  try {
    const int fd = ::shm_open(own_name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) fail("shm_open " + own_name_);
    own_linked_ = true;
    if (::ftruncate(fd, static_cast<off_t>(segment_bytes_)) != 0) {
      ::close(fd);
      fail("ftruncate " + own_name_);
    }
    bases_[static_cast<size_t>(rank)] = map_segment(fd, segment_bytes_, own_name_);
    ::close(fd);
    // Fault every page in now (ftruncate zero-fills: the flags start at 0), not in the
    // middle of the first all-reduce.
    std::memset(bases_[static_cast<size_t>(rank)], 0, segment_bytes_);
    new (bases_[static_cast<size_t>(rank)]) Flags();
    barrier();  // every segment exists
    for (int r = 0; r < ranks; ++r) {
      if (r == rank) continue;
      const std::string name = segment_name(name_base, r);
      const int peer_fd = ::shm_open(name.c_str(), O_RDWR, 0);
      if (peer_fd < 0) fail("shm_open " + name);
      bases_[static_cast<size_t>(r)] = map_segment(peer_fd, segment_bytes_, name);
      ::close(peer_fd);
    }
    barrier();  // every rank mapped every segment: the names can go
    ::shm_unlink(own_name_.c_str());
    own_linked_ = false;
  } catch (...) {
    release();
    throw;
  }
}

SharedSegments::~SharedSegments() { release(); }

void SharedSegments::release() {
  for (std::byte*& base : bases_) {
    if (base != nullptr) ::munmap(base, segment_bytes_);
    base = nullptr;
  }
  if (own_linked_) ::shm_unlink(own_name_.c_str());
  own_linked_ = false;
}

SharedSegments::Flags& SharedSegments::flags(int r) const {
  return *std::launder(reinterpret_cast<Flags*>(bases_[static_cast<size_t>(r)]));
}
std::byte* SharedSegments::staging(int r, int slot) const {
  return bases_[static_cast<size_t>(r)] + kFlagBytes + static_cast<size_t>(slot) * (chunk_bytes_ + kSlotSlack);
}
std::byte* SharedSegments::result(int r, int slot) const {
  return bases_[static_cast<size_t>(r)] + kFlagBytes + static_cast<size_t>(kSlots + slot) * (chunk_bytes_ + kSlotSlack);
}

}  // namespace dseek::comm
