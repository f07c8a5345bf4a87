// A guard on the suite itself: ctest learns the Catch2 test names through
// catch_discover_tests, which keeps them in a CMake list, and a CMake list splits at ';'.
// A name with a ';' becomes two or three ctest tests that each match no Catch2 case and
// fail -- in CI, far from the change that did it. This reads every test source under
// tests/ and fails naming the file and line of any TEST_CASE whose name holds a ';'.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct NamedCase {
  std::string name;
  int line = 0;
};

// The name of each TEST_CASE that starts a line of `source`: its adjacent string literals joined, as the
// compiler joins them. Escapes are kept as written (a ';' is never escaped).
std::vector<NamedCase> test_case_names(const std::string& source) {
  std::vector<NamedCase> cases;
  const std::string marker = "TEST_CASE(";
  for (size_t at = source.find(marker); at != std::string::npos;
       at = source.find(marker, at + marker.size())) {
    // A test case starts its line; elsewhere the text is a mention (as in this file).
    if (at > 0 && source[at - 1] != '\n') continue;
    NamedCase found;
    found.line = 1 + static_cast<int>(std::count(source.begin(), source.begin() + at, '\n'));
    size_t i = at + marker.size();
    while (i < source.size()) {
      while (i < source.size() && std::isspace(static_cast<unsigned char>(source[i]))) ++i;
      if (i >= source.size() || source[i] != '"') break;
      for (++i; i < source.size() && source[i] != '"'; ++i) {
        if (source[i] == '\\' && i + 1 < source.size()) found.name += source[i++];
        found.name += source[i];
      }
      ++i;  // the closing quote
    }
    cases.push_back(found);
  }
  return cases;
}

}  // namespace

TEST_CASE("test names: the parser joins adjacent string literals of line-starting cases", "[unit][suite]") {
  const auto cases = test_case_names("TEST_CASE(\"a; b \"\n   \"c\", \"[tag]\") {}\n"
                                     "TEST_CASE( \"plain\" , \"[x]\")\n"
                                     "  TEST_CASE(\"indented; not a test case\")");
  REQUIRE(cases.size() == 2);
  CHECK(cases[0].name == "a; b c");
  CHECK(cases[0].line == 1);
  CHECK(cases[1].name == "plain");
  CHECK(cases[1].line == 3);
}

TEST_CASE("test names: no TEST_CASE name holds a semicolon (ctest would split it)",
          "[unit][suite]") {
  const std::filesystem::path tests = std::filesystem::path(DSEEK_SOURCE_DIR) / "tests";
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(tests)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".cpp") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    ++files;
    for (const auto& test : test_case_names(text.str())) {
      INFO(entry.path().string() << ":" << test.line << ": \"" << test.name << "\"");
      CHECK(test.name.find(';') == std::string::npos);
    }
  }
  CHECK(files > 50);  // the tree was found
}
