// POSIX file helpers of the data module (see file_io.hpp).
#include "runtime/data/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "runtime/data/token_dataset.hpp"

namespace dseek::data::io {

std::string describe_errno(const std::filesystem::path& path, int error_number) {
  return path.string() + ": " + std::strerror(error_number);
}

OutputFile::OutputFile(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw DataError("cannot create " + describe_errno(path, errno));
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t written = ::write(fd_, bytes, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      throw DataError("cannot write " + describe_errno(path_, errno));
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

void OutputFile::sync_and_close() {
  if (::fsync(fd_) != 0) throw DataError("cannot sync " + describe_errno(path_, errno));
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw DataError("cannot close " + describe_errno(path_, errno));
}

void rename_file(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw DataError("cannot rename " + from.string() + " to " + describe_errno(to, errno));
  }
}

void sync_directory(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw DataError("cannot open directory " + describe_errno(dir, errno));
  int result = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory; the data itself is already synced.
  if (result != 0 && saved != EINVAL && saved != EROFS) {
    throw DataError("cannot sync directory " + describe_errno(dir, saved));
  }
}

bool read_file(const std::filesystem::path& path, std::vector<char>& out, std::string& error) {
  out.clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = describe_errno(path, errno);
    return false;
  }
  struct stat info {};
  if (::fstat(fd, &info) == 0 && info.st_size > 0) out.reserve(static_cast<size_t>(info.st_size));
  // Read to end of file rather than trusting st_size: the file may change meanwhile.
  constexpr size_t kChunk = 1 << 16;
  bool ok = true;
  while (true) {
    size_t used = out.size();
    out.resize(used + kChunk);
    ssize_t got = ::read(fd, out.data() + used, kChunk);
    if (got < 0 && errno == EINTR) {
      out.resize(used);
      continue;
    }
    if (got <= 0) {
      out.resize(used);
      if (got < 0) {
        error = describe_errno(path, errno);
        ok = false;
      }
      break;
    }
    out.resize(used + static_cast<size_t>(got));
  }
  ::close(fd);
  return ok;
}

}  // namespace dseek::data::io
