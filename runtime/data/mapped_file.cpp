// Read-only whole-file mappings (see mapped_file.hpp).
#include "runtime/data/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "runtime/data/file_io.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::data {

MappedFile MappedFile::open(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) throw DataError("missing file " + path.string());
    throw DataError("cannot open " + io::describe_errno(path, errno));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    int saved = errno;
    ::close(fd);
    throw DataError("cannot stat " + io::describe_errno(path, saved));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    throw DataError(path.string() + " is not a regular file");
  }
  size_t size = static_cast<size_t>(info.st_size);
  if (size == 0) {  // mmap rejects empty ranges; an empty span is what callers expect
    ::close(fd);
    return MappedFile(path, nullptr, 0);
  }
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  int saved = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (data == MAP_FAILED) throw DataError("cannot map " + io::describe_errno(path, saved));
  return MappedFile(path, static_cast<const unsigned char*>(data), size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace dseek::data
