// Listing the input files of a data set (see source_files.hpp).
#include "runtime/data/source_files.hpp"

#include <algorithm>
#include <system_error>

#include "runtime/data/glob_match.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::data {
namespace {

bool hidden_component(const std::string& relative) {
  size_t start = 0;
  while (start < relative.size()) {
    size_t end = relative.find('/', start);
    if (end == std::string::npos) end = relative.size();
    const std::string_view part(relative.data() + start, end - start);
    if (part.starts_with('.') || part == "CVS" || part == "_darcs") return true;
    start = end + 1;
  }
  return false;
}

bool any_match(const std::vector<std::string>& globs, const std::string& relative) {
  return std::any_of(globs.begin(), globs.end(),
                     [&](const std::string& glob) { return glob_match(glob, relative); });
}

}  // namespace

SourceListing list_source_files(const std::filesystem::path& root, const SourceFilter& filter) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    throw DataError("input " + root.string() + " is not a directory" +
                    (error ? ": " + error.message() : std::string()));
  }
  SourceListing listing;
  // The default options do not descend into symlinked directories; unreadable
  // subdirectories are skipped rather than failing a whole preparation.
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, error);
  if (error) throw DataError("cannot list " + root.string() + ": " + error.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (error) break;
    const fs::directory_entry& entry = *it;
    std::error_code status_error;
    if (entry.is_symlink(status_error)) continue;
    std::string relative = entry.path().lexically_relative(root).generic_string();
    // Without --include globs nothing under a hidden folder can be taken: skip it whole
    // (a .git folder can hold many files).
    if (entry.is_directory(status_error)) {
      if (filter.include.empty() && hidden_component(relative)) it.disable_recursion_pending();
      continue;
    }
    if (!entry.is_regular_file(status_error)) continue;
    const bool included = any_match(filter.include, relative);
    if (hidden_component(relative) && !included) {
      ++listing.hidden;
      continue;
    }
    if ((!filter.include.empty() && !included) || any_match(filter.exclude, relative)) {
      ++listing.filtered;
      continue;
    }
    listing.files.push_back({std::move(relative), entry.path(), std::nullopt});
  }
  if (error) throw DataError("cannot list " + root.string() + ": " + error.message());
  std::sort(listing.files.begin(), listing.files.end(),
            [](const SourceFile& a, const SourceFile& b) { return a.relative < b.relative; });
  return listing;
}

}  // namespace dseek::data
