// The first pass's token file (see token_spill.hpp), with POSIX calls for ftruncate.
#include "runtime/data/token_spill.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "runtime/data/file_io.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::data {
namespace {
constexpr size_t kBufferTokens = 1 << 18;
}

TokenSpill::TokenSpill(std::filesystem::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw DataError("cannot create " + io::describe_errno(path_, errno));
  buffer_.reserve(kBufferTokens);
}

TokenSpill::~TokenSpill() {
  if (fd_ >= 0) ::close(fd_);
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

void TokenSpill::append(const uint32_t* tokens, size_t count) {
  while (count > 0) {
    if (buffer_.size() == kBufferTokens) flush();
    size_t take = std::min(count, kBufferTokens - buffer_.size());
    buffer_.insert(buffer_.end(), tokens, tokens + take);
    tokens += take;
    count -= take;
  }
}

void TokenSpill::flush() {
  const char* bytes = reinterpret_cast<const char*>(buffer_.data());
  size_t left = buffer_.size() * sizeof(uint32_t);
  while (left > 0) {
    ssize_t wrote = ::write(fd_, bytes, left);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) throw DataError("cannot write " + io::describe_errno(path_, errno));
    bytes += wrote;
    left -= static_cast<size_t>(wrote);
  }
  flushed_ += buffer_.size();
  buffer_.clear();
}

void TokenSpill::truncate(uint64_t tokens) {
  if (tokens >= size()) return;
  if (tokens >= flushed_) {
    buffer_.resize(static_cast<size_t>(tokens - flushed_));
    return;
  }
  buffer_.clear();
  const off_t bytes = static_cast<off_t>(tokens * sizeof(uint32_t));
  if (::ftruncate(fd_, bytes) != 0 || ::lseek(fd_, bytes, SEEK_SET) != bytes) {
    throw DataError("cannot cut back " + io::describe_errno(path_, errno));
  }
  flushed_ = tokens;
}

void TokenSpill::finish() { flush(); }

}  // namespace dseek::data
