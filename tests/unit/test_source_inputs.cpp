// The inputs of `dseek data prepare` (runtime/data/source_files.hpp): a directory, a
// single file, a glob, several of them; their relative names (a file's is its file name,
// a glob match's its path under the glob's folders before the first wildcard), the sorted
// listing, the same file through two inputs listed once, and the errors, each naming
// the input: a missing file, a glob that matches nothing, two files of one relative name.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/data/source_files.hpp"
#include "support/data_test_files.hpp"
#include "support/test_paths.hpp"

using dseek::data::list_source_files;
using dseek::data::SourceFilter;
using dseek::data::SourceListing;
using namespace dseek::testing;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> names(const SourceListing& listing) {
  std::vector<std::string> out;
  for (const auto& file : listing.files) out.push_back(file.relative);
  return out;
}

}  // namespace

TEST_CASE("data inputs: a directory, a single file, a glob and several inputs",
          "[data][inputs][source_inputs]") {
  ScratchDir dir("source-inputs");
  const fs::path in = dir / "in";
  for (const char* name : {"b.jsonl", "a.jsonl.gz", "c.txt", "en/part-1.gz", "en/part-2.gz",
                           "fr/part-1.gz", "fr/notes.txt", ".hidden.jsonl", "lit[1].txt"})
    write_file(in / name, "x");
  const SourceFilter none;

  CHECK(names(list_source_files(in, none)) ==
        std::vector<std::string>{"a.jsonl.gz", "b.jsonl", "c.txt", "en/part-1.gz", "en/part-2.gz",
                                 "fr/notes.txt", "fr/part-1.gz", "lit[1].txt"});
  CHECK(list_source_files(in, none).hidden == 1);
  // A single file: its file name, hidden or not (it was named).
  CHECK(names(list_source_files(in / "en/part-2.gz", none)) == std::vector<std::string>{"part-2.gz"});
  CHECK(names(list_source_files(in / ".hidden.jsonl", none)) == std::vector<std::string>{".hidden.jsonl"});
  // A glob: its matches under its folders before the first wildcard; * leaves out a
  // leading dot; a matched folder is walked.
  CHECK(names(list_source_files(in / "*.jsonl", none)) == std::vector<std::string>{"b.jsonl"});
  CHECK(names(list_source_files(in / "*/part-*.gz", none)) ==
        std::vector<std::string>{"en/part-1.gz", "en/part-2.gz", "fr/part-1.gz"});
  CHECK(names(list_source_files(in / "[ef]?", none)) ==
        std::vector<std::string>{"en/part-1.gz", "en/part-2.gz", "fr/notes.txt", "fr/part-1.gz"});
  // A name with a wildcard character that exists is that file, not a glob.
  CHECK_FALSE(dseek::data::is_input_glob(in / "lit[1].txt"));
  CHECK(dseek::data::is_input_glob(in / "lit[2].txt"));
  CHECK(names(list_source_files(in / "lit[1].txt", none)) == std::vector<std::string>{"lit[1].txt"});
  // Several inputs: one sorted listing; the same file twice is listed once.
  const std::vector<fs::path> several = {in / "fr", in / "*.txt", in / "a.jsonl.gz", in / "c.txt"};
  CHECK(names(list_source_files(several, none)) ==
        std::vector<std::string>{"a.jsonl.gz", "c.txt", "lit[1].txt", "notes.txt", "part-1.gz"});
  // --include / --exclude on the relative names.
  SourceFilter only_gz;
  only_gz.include = {"*.gz"};
  const auto filtered = list_source_files(std::vector<fs::path>{in / "en", in / "c.txt"}, only_gz);
  CHECK(names(filtered) == std::vector<std::string>{"part-1.gz", "part-2.gz"});
  CHECK(filtered.filtered == 1);
}

TEST_CASE("data inputs: a missing file, an empty glob and one name for two files are errors",
          "[data][inputs][source_inputs]") {
  ScratchDir dir("source-input-errors");
  write_file(dir / "a/x.jsonl", "1");
  write_file(dir / "b/x.jsonl", "2");
  const SourceFilter none;
  CHECK(data_error_of([&] { list_source_files(dir / "none.jsonl", none); }) ==
        "input " + (dir / "none.jsonl").string() + " does not exist");
  CHECK(data_error_of([&] { list_source_files(dir / "a/*.txt", none); }) ==
        "input glob " + (dir / "a/*.txt").string() + " matches no file");
  const std::string twice = data_error_of([&] {
    list_source_files(std::vector<fs::path>{dir / "a/x.jsonl", dir / "b/x.jsonl"}, none);
  });
  CHECK_THAT(twice, Catch::Contains((dir / "a/x.jsonl").string()) &&
                        Catch::Contains((dir / "b/x.jsonl").string()) &&
                        Catch::Contains("same relative name x.jsonl"));
  // A FIFO named as an input is no file to read (it would block the reader).
  const fs::path fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(data_error_of([&] { list_source_files(fifo, none); }),
             Catch::Contains("is not a directory, a regular file or a glob"));
  // Under a walked folder a FIFO and a dangling link are neither listed nor counted.
  fs::create_symlink(dir / "gone", dir / "a/dangling.txt");
  REQUIRE(::mkfifo((dir / "a/pipe.txt").c_str(), 0600) == 0);
  const auto walked = list_source_files(dir / "a", none);
  CHECK(names(walked) == std::vector<std::string>{"x.jsonl"});
  CHECK(walked.hidden + walked.filtered == 0);
}
