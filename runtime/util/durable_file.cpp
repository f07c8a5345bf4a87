// Implementation of durable_file.hpp.
#include "runtime/util/durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dseek::util {

std::string describe_errno(const std::filesystem::path& path, int error_number) {
  return path.string() + ": " + std::strerror(error_number);
}

namespace file_core {

int open_for_write(const std::filesystem::path& path, std::string& error) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) error = "cannot create " + describe_errno(path, errno);
  return fd;
}

bool write_all(int fd, const void* data, size_t size, const std::filesystem::path& path,
               std::string& error) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t written = ::write(fd, bytes, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      error = "cannot write " + describe_errno(path, errno);
      return false;
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

bool sync_and_close(int& fd, const std::filesystem::path& path, std::string& error) {
  if (::fsync(fd) != 0) {
    error = "cannot sync " + describe_errno(path, errno);
    return false;
  }
  int closing = std::exchange(fd, -1);
  if (::close(closing) != 0) {
    error = "cannot close " + describe_errno(path, errno);
    return false;
  }
  return true;
}

bool sync_directory(const std::filesystem::path& dir, std::string& error) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open directory " + describe_errno(dir, errno);
    return false;
  }
  int result = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory; the files themselves are synced.
  if (result != 0 && saved != EINVAL && saved != EROFS) {
    error = "cannot sync directory " + describe_errno(dir, saved);
    return false;
  }
  return true;
}

bool rename_path(const std::filesystem::path& from, const std::filesystem::path& to,
                 std::string& error) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    error = "cannot rename " + from.string() + " to " + describe_errno(to, errno);
    return false;
  }
  return true;
}

void close_quietly(int fd) {
  if (fd >= 0) ::close(fd);
}

}  // namespace file_core

bool read_all(const std::filesystem::path& path, std::vector<char>& out, std::string& error) {
  out.clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = describe_errno(path, errno);
    return false;
  }
  struct stat info {};
  if (::fstat(fd, &info) == 0 && info.st_size > 0) out.reserve(static_cast<size_t>(info.st_size));
  // Read to end of file rather than trusting st_size: the file may change meanwhile.
  char chunk[1 << 16];
  bool ok = true;
  for (;;) {
    ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      error = describe_errno(path, errno);
      ok = false;
      break;
    }
    if (got == 0) break;
    out.insert(out.end(), chunk, chunk + got);
  }
  ::close(fd);
  return ok;
}

}  // namespace dseek::util
