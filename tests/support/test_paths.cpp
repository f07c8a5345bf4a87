// Implementation of test_paths.hpp.
#include "support/test_paths.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace dseek::testing {

std::filesystem::path source_dir() { return DSEEK_SOURCE_DIR; }
std::filesystem::path binary_dir() { return DSEEK_BINARY_DIR; }

ScratchDir::ScratchDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          ("dseek-test-" + tag + "-" + std::to_string(::getpid()) + "-" +
           std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  if (std::getenv("DSEEK_KEEP_TEST_DIRS") == nullptr) {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
}

}  // namespace dseek::testing
