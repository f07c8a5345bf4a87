// A read-only memory mapping of a whole file: shards are read in place, never copied
// into the heap, so opening a data set costs no memory beyond the page cache.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <utility>

namespace dseek::data {

class MappedFile {
 public:
  // Maps `path`; throws DataError naming it when it is missing or cannot be mapped.
  static MappedFile open(const std::filesystem::path& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const unsigned char> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile(std::filesystem::path path, const unsigned char* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  void release();

  std::filesystem::path path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dseek::data
