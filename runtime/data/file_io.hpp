// POSIX file helpers for the data module. They exist because iostreams can neither
// fsync nor report errno, and prepared data sets must be written durably (temp file,
// fsync, rename) with errors that name the file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace dseek::data::io {

// A file opened for writing (created or truncated); closed by the destructor.
class OutputFile {
 public:
  explicit OutputFile(const std::filesystem::path& path);
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&&) = delete;
  OutputFile(const OutputFile&) = delete;
  ~OutputFile();

  void write(const void* data, size_t size);
  // Flushes the data to disk and closes the file.
  void sync_and_close();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// Renames `from` to `to` atomically (same directory).
void rename_file(const std::filesystem::path& from, const std::filesystem::path& to);
// Makes the directory's entries (new and renamed files) durable.
void sync_directory(const std::filesystem::path& dir);
// Reads the whole file into `out`. Returns false with `error` set when it cannot be read.
bool read_file(const std::filesystem::path& path, std::vector<char>& out, std::string& error);
// "<path>: <strerror(errno)>", for error messages.
std::string describe_errno(const std::filesystem::path& path, int error_number);

}  // namespace dseek::data::io
