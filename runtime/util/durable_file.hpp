// POSIX file helpers for files that must survive a crash: prepared data sets and
// checkpoints are written to a temporary name, fsynced, renamed, and their directory
// fsynced. iostreams can neither fsync nor report errno, hence these.
//
// Each helper throws the caller's error type (DataError, CheckpointError) with a message
// that names the file, so a failed checkpoint stays distinguishable from a broken data
// set; the work is done once, in durable_file.cpp.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace dseek::util {

// "<path>: <strerror(error_number)>", for error messages.
std::string describe_errno(const std::filesystem::path& path, int error_number);

// The untyped core: each returns false (or -1) and sets `error` to a message naming
// the file.
namespace file_core {
int open_for_write(const std::filesystem::path& path, std::string& error);
bool write_all(int fd, const void* data, size_t size, const std::filesystem::path& path,
               std::string& error);
bool sync_and_close(int& fd, const std::filesystem::path& path, std::string& error);
bool sync_directory(const std::filesystem::path& dir, std::string& error);
bool rename_path(const std::filesystem::path& from, const std::filesystem::path& to,
                 std::string& error);
void close_quietly(int fd);
}  // namespace file_core

// Reads the whole file into `out` (to end of file, not trusting its size). Returns false
// with `error` set when it cannot be read.
bool read_all(const std::filesystem::path& path, std::vector<char>& out, std::string& error);

// A file created (or truncated) for writing; closed by the destructor.
template <class Error>
class OutputFile {
 public:
  explicit OutputFile(const std::filesystem::path& path) : path_(path) {
    std::string error;
    fd_ = file_core::open_for_write(path, error);
    if (fd_ < 0) throw Error(error);
  }
  OutputFile(OutputFile&& other) noexcept
      : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}
  OutputFile& operator=(OutputFile&&) = delete;
  OutputFile(const OutputFile&) = delete;
  ~OutputFile() { file_core::close_quietly(fd_); }

  void write(const void* data, size_t size) {
    std::string error;
    if (!file_core::write_all(fd_, data, size, path_, error)) throw Error(error);
  }
  // Flushes the data to disk (fsync), then closes the file.
  void sync_and_close() {
    std::string error;
    if (!file_core::sync_and_close(fd_, path_, error)) throw Error(error);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// Makes a directory's entries (new and renamed files) durable.
template <class Error>
void sync_directory(const std::filesystem::path& dir) {
  std::string error;
  if (!file_core::sync_directory(dir, error)) throw Error(error);
}

// Renames atomically (within one file system).
template <class Error>
void rename_path(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::string error;
  if (!file_core::rename_path(from, to, error)) throw Error(error);
}

template <class Error>
std::vector<char> read_whole(const std::filesystem::path& path) {
  std::vector<char> out;
  std::string error;
  if (!read_all(path, out, error)) throw Error("cannot read " + error);
  return out;
}

}  // namespace dseek::util
