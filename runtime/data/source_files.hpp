// The input files of `dseek data prepare`: the regular files under a directory, in a
// deterministic order (byte order of the relative paths), whatever the file system's
// own order. Symbolic links are not followed, so link loops cannot trap the walk.
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

// Throws DataError naming `root` when it is not a readable directory.
SourceListing list_source_files(const std::filesystem::path& root, const SourceFilter& filter);

}  // namespace dseek::data
