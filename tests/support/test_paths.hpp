// Paths the tests need: the source tree, the build tree, and fresh scratch directories.
#pragma once

#include <filesystem>
#include <string>

namespace dseek::testing {

std::filesystem::path source_dir();
std::filesystem::path binary_dir();
// A new empty directory under the system temp dir, named after `tag`; removed when the
// ScratchDir goes out of scope unless DSEEK_KEEP_TEST_DIRS is set.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace dseek::testing
