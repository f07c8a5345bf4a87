// The manual stays true to the tree: every repository path that README.md and docs/*.md
// name in backticks (`runtime/train/pipeline/stage_trainer.hpp`, `tests/...`) exists. A
// file moved or removed without its page changing fails here, naming page and path. The
// README stays short (the manual is docs/); tests/integration/test_doc_commands.cpp runs
// the pages' runnable command blocks.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_paths.hpp"

namespace fs = std::filesystem;

namespace {

// The backticked tokens of `text` that start with one of the repository's folders.
std::vector<std::string> repository_paths(const std::string& text) {
  static const std::regex quoted("`((runtime|comm|gpu|dist|actors|apps|tests|bench|config|"
                                 "scripts|schemas|docs|deploy)/[A-Za-z0-9_./-]*)`");
  std::vector<std::string> paths;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), quoted);
       it != std::sregex_iterator(); ++it)
    paths.push_back((*it)[1].str());
  return paths;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("every repository path the README and docs/ name exists", "[docs][unit]") {
  const fs::path root = dseek::testing::source_dir();
  std::vector<fs::path> pages{root / "README.md"};
  for (const auto& entry : fs::directory_iterator(root / "docs"))
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  size_t named = 0;
  std::string missing;
  for (const fs::path& page : pages) {
    for (const std::string& path : repository_paths(read_file(page))) {
      ++named;
      if (!fs::exists(root / path)) missing += page.filename().string() + ": " + path + "\n";
    }
  }
  INFO(pages.size() << " pages, " << named << " paths named");
  CHECK(named > 50);  // the pages were read (README.md alone names several hundred)
  INFO(missing);
  CHECK(missing.empty());
}

TEST_CASE("the doc path check finds backticked repository paths only", "[docs][unit]") {
  const auto paths = repository_paths(
      "see `runtime/train/trainer.hpp` and `dist/` but not `train.steps`, `/tmp/x` or `a/b`");
  REQUIRE(paths.size() == 2);
  CHECK(paths[0] == "runtime/train/trainer.hpp");
  CHECK(paths[1] == "dist/");
}

TEST_CASE("the README stays a README: at most 12 KB, the manual is in docs/", "[docs][unit]") {
  const fs::path readme = dseek::testing::source_dir() / "README.md";
  CHECK(fs::file_size(readme) <= 12 * 1024);
}
