// Listing the input files of a data set (see source_files.hpp).
#include "runtime/data/source_files.hpp"

#include <algorithm>
#include <system_error>

#include "runtime/data/token_dataset.hpp"

namespace dseek::data {

std::vector<SourceFile> list_source_files(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    throw DataError("input " + root.string() + " is not a directory" +
                    (error ? ": " + error.message() : std::string()));
  }
  std::vector<SourceFile> files;
  // The default options do not descend into symlinked directories; unreadable
  // subdirectories are skipped rather than failing a whole preparation.
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, error);
  if (error) throw DataError("cannot list " + root.string() + ": " + error.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (error) break;
    const fs::directory_entry& entry = *it;
    std::error_code status_error;
    if (entry.is_symlink(status_error) || !entry.is_regular_file(status_error)) continue;
    files.push_back({entry.path().lexically_relative(root).generic_string(), entry.path()});
  }
  if (error) throw DataError("cannot list " + root.string() + ": " + error.message());
  std::sort(files.begin(), files.end(),
            [](const SourceFile& a, const SourceFile& b) { return a.relative < b.relative; });
  return files;
}

}  // namespace dseek::data
