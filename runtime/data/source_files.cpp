// Listing the input files of a data set (see source_files.hpp).
#include "runtime/data/source_files.hpp"

#include <glob.h>

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

namespace {

// Appends the regular files under `root` to `files`, named `prefix` + their path under it.
void walk_directory(const std::filesystem::path& root, const std::string& prefix,
                    const SourceFilter& filter, SourceListing& listing) {
  namespace fs = std::filesystem;
  std::error_code error;
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
    const bool hidden = hidden_component(relative);
    relative = prefix + relative;
    const bool included = any_match(filter.include, relative);
    if (hidden && !included) {
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
}

// A file named by an input or matched by a glob, taken as given (no hidden rule).
void add_file(const std::filesystem::path& path, std::string relative, const SourceFilter& filter,
              SourceListing& listing) {
  if ((!filter.include.empty() && !any_match(filter.include, relative)) ||
      any_match(filter.exclude, relative)) {
    ++listing.filtered;
    return;
  }
  listing.files.push_back({std::move(relative), path, std::nullopt});
}

// The folders of a glob before its first component with a wildcard: its matches are
// named under them.
std::filesystem::path glob_base(const std::filesystem::path& pattern) {
  std::filesystem::path base;
  for (const auto& part : pattern) {
    if (part.string().find_first_of("*?[") != std::string::npos) break;
    base /= part;
  }
  return base;
}

void list_input(const std::filesystem::path& input, const SourceFilter& filter,
                SourceListing& listing) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (is_input_glob(input)) {
    glob_t matches{};
    const int status = ::glob(input.c_str(), 0, nullptr, &matches);
    std::vector<std::string> paths;
    for (size_t i = 0; status == 0 && i < matches.gl_pathc; ++i) paths.emplace_back(matches.gl_pathv[i]);
    ::globfree(&matches);
    if (status == GLOB_NOMATCH) throw DataError("input glob " + input.string() + " matches no file");
    if (status != 0) throw DataError("cannot expand the input glob " + input.string());
    const fs::path base = glob_base(input);
    for (const std::string& match : paths) {
      const fs::path path(match);
      const std::string relative =
          base.empty() ? path.generic_string() : path.lexically_relative(base).generic_string();
      if (fs::is_directory(path, error)) {
        walk_directory(path, relative + "/", filter, listing);
      } else if (fs::is_regular_file(path, error)) {
        add_file(path, relative, filter, listing);
      }  // anything else a glob matches (a FIFO, a socket, a dangling link) is no input
    }
    return;
  }
  const fs::file_status status = fs::status(input, error);
  if (!fs::exists(status)) {
    throw DataError("input " + input.string() + " does not exist" +
                    (error && error != std::errc::no_such_file_or_directory
                         ? ": " + error.message()
                         : std::string()));
  }
  if (fs::is_directory(status)) {
    walk_directory(input, "", filter, listing);
  } else if (fs::is_regular_file(status)) {
    add_file(input, input.filename().string(), filter, listing);
  } else {
    throw DataError("input " + input.string() + " is not a directory, a regular file or a glob");
  }
}

}  // namespace

bool is_input_glob(const std::filesystem::path& input) {
  std::error_code error;
  return input.string().find_first_of("*?[") != std::string::npos &&
         !std::filesystem::exists(std::filesystem::symlink_status(input, error));
}

SourceListing list_source_files(const std::vector<std::filesystem::path>& inputs,
                                const SourceFilter& filter) {
  SourceListing listing;
  for (const auto& input : inputs) list_input(input, filter, listing);
  std::stable_sort(listing.files.begin(), listing.files.end(),
                   [](const SourceFile& a, const SourceFile& b) { return a.relative < b.relative; });
  // The same file through two inputs is listed once; two files of one name are an error.
  std::vector<SourceFile> files;
  for (SourceFile& file : listing.files) {
    if (!files.empty() && files.back().relative == file.relative) {
      std::error_code a, b;
      if (std::filesystem::equivalent(files.back().path, file.path, a)) continue;
      throw DataError("inputs " + files.back().path.string() + " and " + file.path.string() +
                      " have the same relative name " + file.relative +
                      " (a single file is named by its file name, a glob's match by its path "
                      "under the glob's folders): give their common folder as --input, with "
                      "--include to choose the files");
    }
    files.push_back(std::move(file));
  }
  listing.files = std::move(files);
  return listing;
}

SourceListing list_source_files(const std::filesystem::path& input, const SourceFilter& filter) {
  return list_source_files(std::vector<std::filesystem::path>{input}, filter);
}

}  // namespace dseek::data
