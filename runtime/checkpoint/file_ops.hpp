// POSIX file helpers for checkpoints: iostreams can neither fsync nor report errno, and
// a checkpoint must be durable before it is committed, with errors that name the file.
// (A copy in spirit of data/file_io.hpp, throwing CheckpointError instead of DataError
// so the writer can tell a failed checkpoint from a broken data set.)
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace dseek::checkpoint::io {

// A file created (or truncated) for writing; closed by the destructor.
class OutputFile {
 public:
  explicit OutputFile(const std::filesystem::path& path);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();
  void write(const void* data, size_t size);
  void sync_and_close();  // fsync, then close

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

void sync_directory(const std::filesystem::path& dir);
void rename_path(const std::filesystem::path& from, const std::filesystem::path& to);
// The whole file; throws CheckpointError naming it.
std::vector<char> read_whole(const std::filesystem::path& path);
std::string describe_errno(const std::filesystem::path& path, int error_number);

}  // namespace dseek::checkpoint::io
