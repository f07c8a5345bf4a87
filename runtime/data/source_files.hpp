// The input files of `dseek data prepare`: the regular files under a directory (or a
// single file, or a glob's matches: list_source_files below), in a deterministic order
// (byte order of the relative paths), whatever the file system's own order. Symbolic links are not followed, so link loops cannot trap the walk.
// Hidden files and folders (a name starting with '.', which covers .git, .hg, .svn,
// .bzr) and the folders CVS and _darcs are left out unless an --include glob names
// them; with --include globs only matching files are taken; --exclude globs win.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dseek::data {

// A byte range of a file, as nominal offsets [begin, end): on several nodes a large
// uncompressed JSON Lines or separated text file is split between the nodes by such
// ranges (work_units.hpp); the reader aligns them to document boundaries.
struct ByteRange {
  uint64_t begin = 0, end = 0;
  uint32_t index = 0, count = 1;  // range `index` of `count` of the file
};

struct SourceFile {
  std::string relative;         // with '/' separators: also the key of the split hash
  std::filesystem::path path;   // to open it
  std::optional<ByteRange> range;  // only these documents of the file (none: all)
};

struct SourceFilter {
  std::vector<std::string> include;  // globs (glob_match.hpp); empty: every file
  std::vector<std::string> exclude;
};

struct SourceListing {
  std::vector<SourceFile> files;
  uint64_t hidden = 0;    // hidden or version-control files left out
  uint64_t filtered = 0;  // left out by --include/--exclude
};

// The files of `dseek data prepare`'s inputs, each a directory, a single file, or a glob
// (a path with * ? or [ that does not exist as written, expanded by glob(3)), in one
// listing sorted by relative name, so that every node lists the same units in the same
// order. The relative names (the split hash's key, the corpus order, the parts' keys):
//   - a directory's files: their path under it (today's);
//   - a single file: its file name (`--input dir/a.jsonl` is `--input dir` holding a.jsonl);
//   - a glob's matches: their path under the glob's leading folders without a wildcard
//     (`data/*/part-*.gz` names data/en/part-1.gz "en/part-1.gz"); a matched directory's
//     files are named under them the same way.
// The hidden-file rule applies to the files found by walking a directory; a file named
// or matched by a glob is taken as given (glob(3)'s * does not match a leading '.'). The
// --include/--exclude globs apply to every relative name. A file given twice (the same
// file through two inputs) is listed once; two files with the same relative name are an
// error naming both. Throws DataError naming the input when it does not exist, is not a
// directory or a regular file, or is a glob that matches nothing.
SourceListing list_source_files(const std::vector<std::filesystem::path>& inputs,
                                const SourceFilter& filter);
SourceListing list_source_files(const std::filesystem::path& input, const SourceFilter& filter);

// Whether `input` is read as a glob: it holds a wildcard and no file has that name.
bool is_input_glob(const std::filesystem::path& input);

}  // namespace dseek::data
