// The checkpoint module's durable file helpers: runtime/util/durable_file.hpp throwing
// CheckpointError, so the writer can tell a failed checkpoint from a broken data set.
#pragma once

#include "runtime/checkpoint/error.hpp"
#include "runtime/util/durable_file.hpp"

namespace dseek::checkpoint::io {

using OutputFile = util::OutputFile<CheckpointError>;
using util::describe_errno;

inline void sync_directory(const std::filesystem::path& dir) {
  util::sync_directory<CheckpointError>(dir);
}
inline void rename_path(const std::filesystem::path& from, const std::filesystem::path& to) {
  util::rename_path<CheckpointError>(from, to);
}
// The whole file; throws CheckpointError naming it.
inline std::vector<char> read_whole(const std::filesystem::path& path) {
  return util::read_whole<CheckpointError>(path);
}

}  // namespace dseek::checkpoint::io
