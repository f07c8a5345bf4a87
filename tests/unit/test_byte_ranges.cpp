// Unit tests of reading a file by byte ranges (SourceFile::range, input_documents.hpp),
// as the nodes of `dseek data prepare --nodes N` split a large file: for separated text
// (a 4-byte separator, one of which straddles the reader's 128 KiB chunks) and JSON
// Lines, the ranges of any cut give every document exactly once, in order, with the
// file's line numbers, the same as reading the whole file; blank documents are skipped
// but counted; a NUL makes a separated text file binary; a compressed file refuses a
// range; split_into_units cuts only what can be read from the middle.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "runtime/data/input_documents.hpp"
#include "runtime/data/prepare.hpp"
#include "runtime/data/work_units.hpp"
#include "support/data_test_files.hpp"
#include "support/test_paths.hpp"

namespace fs = std::filesystem;
namespace data = dseek::data;
using dseek::testing::ScratchDir;
using dseek::testing::write_file;

namespace {

using Documents = std::vector<std::pair<std::string, uint64_t>>;  // text, line

Documents read_all(const data::SourceFile& file, const data::InputOptions& options,
                   data::FileOutcome* outcome = nullptr) {
  data::DocumentReader reader(file, options);
  Documents documents;
  std::string_view text;
  uint64_t line = 0;
  while (reader.next(text, line)) documents.emplace_back(std::string(text), line);
  if (outcome) *outcome = reader.outcome();
  return documents;
}

// The documents of `count` ranges cut at size * r / count, one after the other.
Documents read_by_ranges(const data::SourceFile& whole, uint64_t size, uint32_t count,
                         const data::InputOptions& options) {
  Documents all;
  for (uint32_t r = 0; r < count; ++r) {
    data::SourceFile part = whole;
    part.range = data::ByteRange{size * r / count, size * (r + 1) / count, r, count};
    for (auto& document : read_all(part, options)) all.push_back(std::move(document));
  }
  return all;
}

// Where two readings part (for the failure message).
std::string first_difference(const Documents& got, const Documents& expected) {
  for (size_t i = 0; i < std::min(got.size(), expected.size()); ++i) {
    if (got[i] != expected[i]) {
      return "document " + std::to_string(i) + ": line " + std::to_string(got[i].second) +
             " (" + std::to_string(got[i].first.size()) + " bytes), expected line " +
             std::to_string(expected[i].second) + " (" +
             std::to_string(expected[i].first.size()) + " bytes)";
    }
  }
  return std::to_string(got.size()) + " documents, expected " + std::to_string(expected.size());
}

}  // namespace

TEST_CASE("the byte ranges of a separated text file give every document once, with its number",
          "[data][inputs][ranges]") {
  ScratchDir dir("byte-ranges-text");
  const std::string separator = "\n@@\n";
  // Documents of many lengths; the first ends 2 bytes before the 128 KiB chunk, so its
  // separator straddles it; a blank document (skipped, counted) in the middle.
  std::vector<std::string> texts = {std::string(131070, 'a')};
  for (int d = 0; d < 300; ++d) texts.push_back("doc " + std::to_string(d) + std::string(d * 7 % 1900, 'x'));
  texts.insert(texts.begin() + 100, "  ");
  std::string content;
  Documents expected;
  for (size_t d = 0; d < texts.size(); ++d) {
    content += texts[d] + separator;
    if (d != 100) expected.emplace_back(texts[d], d + 1);
  }
  write_file(dir / "big.txt", content);
  const data::SourceFile whole{"big.txt", dir / "big.txt", std::nullopt};
  data::InputOptions options;
  options.text_separator = separator;
  REQUIRE(read_all(whole, options) == expected);
  for (uint32_t count : {2u, 3u, 5u, 7u, 64u}) {
    const Documents got = read_by_ranges(whole, content.size(), count, options);
    INFO(count << " ranges: " << first_difference(got, expected));
    CHECK(got == expected);
  }

  // Every cut of a small file into two ranges.
  const std::string small = "one\n@@\ntwo\n@@\n\n@@\nthree\n@@\nfour";
  write_file(dir / "small.txt", small);
  const data::SourceFile little{"small.txt", dir / "small.txt", std::nullopt};
  const Documents small_expected = {{"one", 1}, {"two", 2}, {"three", 4}, {"four", 5}};
  REQUIRE(read_all(little, options) == small_expected);
  for (uint64_t cut = 1; cut < small.size(); ++cut) {
    INFO("cut at " << cut);
    Documents both;
    for (uint32_t r = 0; r < 2; ++r) {
      data::SourceFile part = little;
      part.range = data::ByteRange{r == 0 ? 0 : cut, r == 0 ? cut : small.size(), r, 2};
      for (auto& document : read_all(part, options)) both.push_back(std::move(document));
    }
    CHECK(both == small_expected);
  }

  // A NUL anywhere makes the file binary, whatever range holds it.
  write_file(dir / "nul.txt", "one\n@@\ntw" + std::string(1, '\0') + "o\n@@\nthree");
  const data::SourceFile nul{"nul.txt", dir / "nul.txt", std::nullopt};
  data::FileOutcome outcome = data::FileOutcome::taken;
  read_all(nul, options, &outcome);
  CHECK(outcome == data::FileOutcome::binary);
  CHECK(data::file_dropped(outcome));
}

TEST_CASE("the byte ranges of a JSON Lines file give every line once, with the file's line number",
          "[data][inputs][ranges]") {
  ScratchDir dir("byte-ranges-jsonl");
  std::string content;
  Documents expected;
  for (int d = 0; d < 400; ++d) {
    const std::string text = "line " + std::to_string(d) + std::string(d * 13 % 700, 'y');
    if (d % 50 == 7) {
      content += "\n";  // a blank line: skipped, counted
    } else {
      content += "{\"text\": \"" + text + "\"}\n";
      expected.emplace_back(text, d + 1);
    }
  }
  write_file(dir / "big.jsonl", content);
  const data::SourceFile whole{"big.jsonl", dir / "big.jsonl", std::nullopt};
  const data::InputOptions options;
  REQUIRE(read_all(whole, options) == expected);
  for (uint32_t count : {2u, 3u, 4u, 9u, 200u}) {
    const Documents got = read_by_ranges(whole, content.size(), count, options);
    INFO(count << " ranges: " << first_difference(got, expected));
    CHECK(got == expected);
  }

  // A compressed file cannot be read from the middle.
  write_file(dir / "big.jsonl.gz", dseek::testing::gzip(content));
  data::SourceFile packed{"big.jsonl.gz", dir / "big.jsonl.gz", data::ByteRange{0, 10, 0, 2}};
  CHECK_THROWS_AS(read_all(packed, options), data::DataError);
}

TEST_CASE("split_into_units cuts large uncompressed JSON Lines and separated text files only",
          "[data][inputs][ranges]") {
  ScratchDir dir("byte-ranges-units");
  const std::string lines(10000, '\n');
  write_file(dir / "a.jsonl", lines);
  write_file(dir / "b.jsonl.gz", dseek::testing::gzip(lines));
  write_file(dir / "c.txt", lines);
  write_file(dir / "d.jsonl", "{}\n");
  data::SourceListing listing;
  for (const char* name : {"a.jsonl", "b.jsonl.gz", "c.txt", "d.jsonl"})
    listing.files.push_back({name, dir / name, std::nullopt});
  data::PrepareOptions options;
  options.nodes = 3;
  options.split_bytes = 3000;
  data::WorkUnits units = data::split_into_units(listing, options);
  // a.jsonl in 3 ranges; the gzip file, the text file without a separator and the small
  // file whole.
  REQUIRE(units.units.size() == 6);
  CHECK(units.ranges == 3);
  CHECK(units.file == std::vector<uint32_t>{0, 0, 0, 1, 2, 3});
  CHECK(units.units[1].range->begin == 10000 / 3);
  CHECK(units.units[2].range->end == 10000);
  CHECK_FALSE(units.units[3].range.has_value());
  options.input_options.text_separator = "\n\n";
  options.split_bytes = 4000;  // 10000 / 4000: 2 ranges
  units = data::split_into_units(listing, options);
  CHECK(units.ranges == 4);  // a.jsonl and c.txt in 2 each
  CHECK(units.units.size() == 6);
}
