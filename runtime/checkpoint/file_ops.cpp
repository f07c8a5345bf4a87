// Implementation of file_ops.hpp.
#include "runtime/checkpoint/file_ops.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "runtime/checkpoint/error.hpp"

namespace dseek::checkpoint::io {

std::string describe_errno(const std::filesystem::path& path, int error_number) {
  return path.string() + ": " + std::strerror(error_number);
}

OutputFile::OutputFile(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw CheckpointError("cannot create " + describe_errno(path, errno));
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t written = ::write(fd_, bytes, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      throw CheckpointError("cannot write " + describe_errno(path_, errno));
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

void OutputFile::sync_and_close() {
  if (::fsync(fd_) != 0) throw CheckpointError("cannot sync " + describe_errno(path_, errno));
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw CheckpointError("cannot close " + describe_errno(path_, errno));
}

void sync_directory(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError("cannot open directory " + describe_errno(dir, errno));
  int result = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory; the files themselves are synced.
  if (result != 0 && saved != EINVAL && saved != EROFS) {
    throw CheckpointError("cannot sync directory " + describe_errno(dir, saved));
  }
}

void rename_path(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw CheckpointError("cannot rename " + from.string() + " to " + describe_errno(to, errno));
  }
}

std::vector<char> read_whole(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError("cannot open " + describe_errno(path, errno));
  std::vector<char> out;
  struct stat info {};
  if (::fstat(fd, &info) == 0 && info.st_size > 0) out.reserve(static_cast<size_t>(info.st_size));
  char chunk[1 << 16];
  for (;;) {
    ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      throw CheckpointError("cannot read " + describe_errno(path, saved));
    }
    if (got == 0) break;
    out.insert(out.end(), chunk, chunk + got);
  }
  ::close(fd);
  return out;
}

}  // namespace dseek::checkpoint::io
