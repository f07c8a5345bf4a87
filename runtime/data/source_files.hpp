// The input files of `dseek data prepare`: every regular file under a directory, in a
// deterministic order (byte order of the relative paths), whatever the file system's
// own order. Symbolic links are not followed, so link loops cannot trap the walk.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dseek::data {

struct SourceFile {
  std::string relative;         // with '/' separators: also the key of the split hash
  std::filesystem::path path;   // to open it
};

// Throws DataError naming `root` when it is not a readable directory.
std::vector<SourceFile> list_source_files(const std::filesystem::path& root);

}  // namespace dseek::data
