// The data module's durable file helpers: runtime/util/durable_file.hpp throwing
// DataError, so a failure while preparing or reading a data set reads as one.
#pragma once

#include "runtime/data/token_dataset.hpp"
#include "runtime/util/durable_file.hpp"

namespace dseek::data::io {

using OutputFile = util::OutputFile<DataError>;
using util::describe_errno;

inline void rename_file(const std::filesystem::path& from, const std::filesystem::path& to) {
  util::rename_path<DataError>(from, to);
}
inline void sync_directory(const std::filesystem::path& dir) {
  util::sync_directory<DataError>(dir);
}
// Reads the whole file into `out`; false with `error` set when it cannot be read.
inline bool read_file(const std::filesystem::path& path, std::vector<char>& out,
                      std::string& error) {
  return util::read_all(path, out, error);
}

}  // namespace dseek::data::io
