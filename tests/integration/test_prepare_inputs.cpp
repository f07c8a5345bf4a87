// `dseek data prepare` as a user runs the binary, on what its inputs can be and on a
// corpus with every kind of bad input:
//   - --input a single file (a .jsonl.gz), a glob ('in/*.jsonl', expanded by dseek, in
//     sorted order), several --input, each giving the shards of a directory that holds
//     the same files under the same relative names (source_files.hpp: a single file is
//     named by its file name, a glob's match by its path under the glob's folders);
//     a glob that matches nothing, a missing file and two files of one relative name are
//     errors naming them; 2 nodes on a glob write the one-node data set byte for byte;
//   - an unreadable file (mode 000; as root the command runs without CAP_DAC_OVERRIDE and
//     CAP_DAC_READ_SEARCH, through setpriv, so the mode stops the read): named, counted
//     in the summary and report.json, skipped, the other files' documents all kept;
//     --strict fails naming it;
//   - the whole pipeline on a generated corpus with exact and near duplicates, junk for
//     each quality filter and broken files (truncated .gz and .zst, a malformed JSON
//     line, a line without the text field, the unreadable file): exit 0, every drop
//     counted by reason in the summary and report.json, the kept documents exactly the
//     expected ones (the shards decoded: byte tokenizer, NUL separators), the same data
//     set on 1 and 2 workers; --strict exits non-zero naming the first broken file;
//   - --workers left out runs std::thread::hardware_concurrency() workers.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/data/token_dataset.hpp"
#include "support/data_test_files.hpp"
#include "support/node_runs.hpp"
#include "support/prepare_node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string zstd_of(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const size_t size = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  REQUIRE(!ZSTD_isError(size));
  out.resize(size);
  return out;
}

std::string document(uint64_t seed, int words = 60) { return random_words("doc", seed, words); }

std::string jsonl(const std::vector<std::string>& texts) {
  std::string out;
  for (const std::string& text : texts) out += "{\"text\": \"" + text + "\"}\n";
  return out;
}

std::vector<std::string> prepare(const std::vector<std::string>& inputs, const fs::path& out,
                                 std::vector<std::string> extra = {}) {
  std::vector<std::string> args{bin("dseek"), "data", "prepare"};
  for (const std::string& input : inputs) args.insert(args.end(), {"--input", input});
  args.insert(args.end(), {"--output", out.string(), "--val-fraction", "0", "--no-progress",
                           "--min-chars", "20"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The files of a data set but the index (it names the inputs) and report.json (timings).
std::map<std::string, std::string> shards(const fs::path& dir) {
  auto files = data_set(dir);
  files.erase("index.capnp");
  REQUIRE_FALSE(files.empty());
  return files;
}

// The train split's documents: byte tokens, a NUL between documents.
std::multiset<std::string> documents_of(const fs::path& dir) {
  const auto data = dseek::data::TokenDataset::open(dir, dseek::data::Split::train);
  std::vector<int32_t> ids(data.num_tokens());
  data.read(0, ids.size(), ids.data());
  std::multiset<std::string> docs;
  std::string text;
  for (int32_t id : ids) {
    if (id == 0) {
      if (!text.empty()) docs.insert(text);
      text.clear();
    } else {
      text += static_cast<char>(id);
    }
  }
  if (!text.empty()) docs.insert(text);
  return docs;
}

// As root the mode bits stop no read: the command then runs without the capabilities
// that bypass them (still uid 0, so it can write the output).
std::vector<std::string> without_read_override(std::vector<std::string> args) {
  if (::geteuid() == 0)
    args.insert(args.begin(), {"/usr/bin/setpriv", "--bounding-set=-dac_override,-dac_read_search"});
  return args;
}

void make_unreadable(const fs::path& path, const std::string& content) {
  write_file(path, content);
  REQUIRE(::chmod(path.c_str(), 0) == 0);
}

size_t count(const std::string& text, const std::string& word) {
  size_t found = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++found;
  return found;
}

}  // namespace

TEST_CASE("data prepare --input takes a single file, a glob and several inputs",
          "[data][cli][prepare-inputs]") {
  ScratchDir dir("prepare-inputs");
  const fs::path in = dir / "in";
  const std::string a = jsonl({document(1), document(2), document(3)});
  const std::string b = jsonl({document(4), document(5)});
  const std::string cc = jsonl({document(6), document(7), document(8), document(9)});
  write_file(in / "a.jsonl.gz", gzip(a));
  write_file(in / "b.jsonl", b);
  write_file(in / "c.jsonl", cc);
  write_file(in / "sub/d.jsonl", jsonl({document(10)}));
  // The directories that hold the same files under the same relative names.
  write_file(dir / "only-a/a.jsonl.gz", gzip(a));
  write_file(dir / "b-and-c/b.jsonl", b);
  write_file(dir / "b-and-c/c.jsonl", cc);
  write_file(dir / "a-b-c/a.jsonl.gz", gzip(a));
  write_file(dir / "a-b-c/b.jsonl", b);
  write_file(dir / "a-b-c/c.jsonl", cc);

  struct Case {
    std::string name;
    std::vector<std::string> inputs;
    std::string same_as;
    uint64_t documents;
  };
  const std::vector<Case> cases = {
      {"file", {(in / "a.jsonl.gz").string()}, "only-a", 3},
      {"glob", {(in / "*.jsonl").string()}, "b-and-c", 6},
      {"several", {(in / "a.jsonl.gz").string(), (in / "[bc].jsonl").string()}, "a-b-c", 9},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    auto run = run_process(prepare(c.inputs, dir / ("out-" + c.name)), 60s);
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(report_numbers(read_file(dir / ("out-" + c.name) / "report.json"), "documents_in")[0] ==
          c.documents);
    auto same = run_process(prepare({(dir / c.same_as).string()}, dir / ("dir-" + c.name)), 60s);
    INFO(same.output);
    REQUIRE(same.exit_code == 0);
    CHECK(shards(dir / ("out-" + c.name)) == shards(dir / ("dir-" + c.name)));
  }

  // Errors, each naming what it is about; nothing is written.
  auto none = run_process(prepare({(in / "*.txt").string()}, dir / "bad"), 30s);
  CHECK(none.exit_code != 0);
  CHECK_THAT(none.output, Catch::Contains("input glob " + (in / "*.txt").string() + " matches no file"));
  auto missing = run_process(prepare({(in / "none.jsonl").string()}, dir / "bad"), 30s);
  CHECK(missing.exit_code != 0);
  CHECK_THAT(missing.output, Catch::Contains("input " + (in / "none.jsonl").string() + " does not exist"));
  auto twice = run_process(prepare({(in / "b.jsonl").string(), (dir / "b-and-c/b.jsonl").string()},
                                   dir / "bad"), 30s);
  CHECK(twice.exit_code != 0);
  CHECK_THAT(twice.output, Catch::Contains("have the same relative name b.jsonl"));
  CHECK_FALSE(fs::exists(dir / "bad/index.capnp"));
  // The same file through two inputs is read once.
  auto overlap = run_process(prepare({in.string(), (in / "b.jsonl").string()}, dir / "overlap"), 60s);
  INFO(overlap.output);
  REQUIRE(overlap.exit_code == 0);
  CHECK(report_numbers(read_file(dir / "overlap/report.json"), "documents_in")[0] == 10);
}

TEST_CASE("data prepare on 2 nodes on a glob writes the one-node data set byte for byte",
          "[data][cli][prepare-inputs][prepare-nodes]") {
  ScratchDir dir("prepare-glob-nodes");
  // Five files, an exact copy across two of them (nodes 0 and 1 of 2), a file the glob
  // leaves out.
  for (int f = 0; f < 5; ++f) {
    std::vector<std::string> docs;
    for (int d = 0; d < 5; ++d) docs.push_back(document(static_cast<uint64_t>(100 * f + d), 80));
    if (f == 3) docs.push_back(document(2, 80));
    write_file(dir / "in" / ("part-" + std::to_string(f) + ".jsonl.gz"), gzip(jsonl(docs)));
  }
  write_file(dir / "in/notes.txt", document(999));
  const std::string glob = (dir / "in/part-*.jsonl.gz").string();
  const std::vector<std::string> extra = {"--workers", "2", "--val-fraction", "0.2",
                                          "--shard-tokens", "4000"};
  auto one = run_process(prepare({glob}, dir / "one", extra), 60s);
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  const std::string report = read_file(dir / "one/report.json");
  CHECK(report_numbers(report, "documents_in")[0] == 26);
  CHECK(report_numbers(report, "exact_duplicate")[0] == 1);
  auto two = run_nodes(prepare({glob}, dir / "two", extra), 2, dir / "logs");
  INFO(two.output);
  REQUIRE(two.exit_code == 0);
  CHECK(data_set(dir / "two") == data_set(dir / "one"));
}

TEST_CASE("data prepare names, counts and skips an unreadable file, and --strict fails on it",
          "[data][cli][prepare-inputs]") {
  ScratchDir dir("prepare-unreadable");
  std::vector<std::string> kept;
  for (int f = 0; f < 3; ++f) {
    std::vector<std::string> docs = {document(static_cast<uint64_t>(10 * f)),
                                     document(static_cast<uint64_t>(10 * f + 1))};
    const std::string name = std::string("f") + static_cast<char>('0' + f) + ".jsonl";
    write_file(dir / "in" / name, jsonl(docs));
    write_file(dir / "readable" / name, jsonl(docs));
    kept.insert(kept.end(), docs.begin(), docs.end());
  }
  make_unreadable(dir / "in/locked.txt", document(77));
  auto run = run_process(without_read_override(prepare({(dir / "in").string()}, dir / "out")), 60s);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.output, Catch::Contains("skipping unreadable") && Catch::Contains("locked.txt"));
  CHECK_THAT(run.output, Catch::Contains("1 files skipped (0 binary, 1 unreadable"));
  CHECK_THAT(read_file(dir / "out/report.json"), Catch::Contains("\"unreadable\":1"));
  const auto docs = documents_of(dir / "out");
  CHECK(docs == std::multiset<std::string>(kept.begin(), kept.end()));
  auto readable = run_process(prepare({(dir / "readable").string()}, dir / "readable-out"), 60s);
  REQUIRE(readable.exit_code == 0);
  CHECK(shards(dir / "out") == shards(dir / "readable-out"));

  auto strict = run_process(
      without_read_override(prepare({(dir / "in").string()}, dir / "strict", {"--strict"})), 60s);
  INFO(strict.output);
  CHECK(strict.exit_code != 0);
  CHECK_THAT(strict.output, Catch::Contains("locked.txt"));
  CHECK_FALSE(fs::exists(dir / "strict/index.capnp"));
}

TEST_CASE("data prepare: the whole pipeline on a corpus with duplicates, junk and broken "
          "files", "[data][cli][prepare-inputs][prepare-pipeline]") {
  ScratchDir dir("prepare-whole");
  const fs::path in = dir / "in";
  std::vector<std::string> expected;  // the documents that must be kept
  auto good = [&](uint64_t seed) {
    expected.push_back(document(seed, 80));
    return expected.back();
  };
  // a.jsonl: good documents, a malformed line, a line without "text".
  const std::string dup = good(1);
  std::string near = good(2);
  std::string a = jsonl({dup, near, good(3)});
  a += "{\"text\": \"unterminated\n";
  a += "{\"content\": \"" + document(4, 80) + "\"}\n";
  a += jsonl({good(5)});
  write_file(in / "a.jsonl", a);
  // b.jsonl.gz: an exact copy of a's first document, a near copy (one word of 80
  // changed) of its second, and one document for each quality filter.
  near.replace(near.size() - 5, 5, "zzord");
  std::string repeated;
  for (int i = 0; i < 8; ++i) repeated += "the same line again and again\n";
  const std::vector<std::string> junk = {
      "tiny",                                                      // too_short
      "#$%&*@!#$%&*@!#$%&*@!#$%&*@!#$%&*@!#$%&*@! x",             // symbol_ratio
      "1234567890 0987654321 1234567890 0987654321 12345 a",      // digit_ratio
  };
  std::string b = jsonl({good(6), dup, near});
  for (const std::string& j : junk) b += jsonl({j});
  {
    std::string escaped;
    for (char ch : repeated) escaped += ch == '\n' ? std::string("\\n") : std::string(1, ch);
    b += "{\"text\": \"" + escaped + "\"}\n";  // repeated_lines
  }
  b += jsonl({good(7)});
  write_file(in / "b.jsonl.gz", gzip(b));
  // c.txt: one plain text document.
  write_file(in / "c.txt", good(8));
  // Broken files, whose documents are all lost (a damaged file counts whole).
  const std::string gz = gzip(jsonl({document(20, 80), document(21, 80)}));
  write_file(in / "d-truncated.jsonl.gz", gz.substr(0, gz.size() / 2));
  const std::string zst = zstd_of(jsonl({document(22, 80), document(23, 80)}));
  write_file(in / "e-truncated.jsonl.zst", zst.substr(0, zst.size() / 2));
  make_unreadable(in / "f-locked.txt", document(24, 80));

  std::map<int, ProcessResult> runs;
  for (int workers : {1, 2}) {
    const fs::path out = dir / ("out-w" + std::to_string(workers));
    runs[workers] = run_process(without_read_override(prepare(
                                    {in.string()}, out, {"--workers", std::to_string(workers)})),
                                60s);
    INFO(runs[workers].output);
    REQUIRE(runs[workers].exit_code == 0);
  }
  const std::string& log = runs[2].output;
  INFO(log);
  const std::string report = read_file(dir / "out-w2/report.json");
  INFO(report);
  // Every drop by its reason, in report.json and in the summary table.
  const std::map<std::string, uint64_t> drops = {
      {"exact_duplicate", 1}, {"near_duplicate", 1}, {"too_short", 1},
      {"symbol_ratio", 1},    {"digit_ratio", 1},    {"repeated_lines", 1}};
  for (const auto& [reason, n] : drops) {
    INFO(reason);
    CHECK(report_numbers(report, reason)[0] == n);
  }
  CHECK(report_numbers(report, "documents")[0] == expected.size());
  CHECK(report_numbers(report, "documents_in")[0] == expected.size() + 6);
  CHECK(report_numbers(report, "damaged")[0] == 2);
  CHECK(report_numbers(report, "unreadable")[0] == 1);
  CHECK(report_numbers(report, "malformed")[0] == 1);
  CHECK(report_numbers(report, "missing_field")[0] == 1);
  CHECK_THAT(log, Catch::Contains("3 files skipped (0 binary, 1 unreadable, 0 empty, 2 damaged), "
                                  "1 malformed JSON lines and 1 without \"text\" skipped"));
  CHECK_THAT(log, Catch::Contains("dropped exact_duplicate") && Catch::Contains("dropped near_duplicate"));
  // Each broken file named, the JSON lines with their line numbers.
  for (const std::string name : {"d-truncated.jsonl.gz", "e-truncated.jsonl.zst", "f-locked.txt"})
    CHECK(count(log, name) >= 1);
  CHECK_THAT(log, Catch::Contains("a.jsonl:4") && Catch::Contains("a.jsonl:5"));
  // The kept documents are exactly the expected ones; one worker writes the same.
  CHECK(documents_of(dir / "out-w2") == std::multiset<std::string>(expected.begin(), expected.end()));
  CHECK(data_set(dir / "out-w1") == data_set(dir / "out-w2"));

  // --strict: an error naming the first broken file in corpus order (a.jsonl's line 4).
  auto strict = run_process(
      without_read_override(prepare({in.string()}, dir / "strict", {"--strict", "--workers", "1"})),
      60s);
  INFO(strict.output);
  CHECK(strict.exit_code != 0);
  CHECK_THAT(strict.output, Catch::Contains("a.jsonl:4"));
  CHECK_FALSE(fs::exists(dir / "strict/index.capnp"));
}

TEST_CASE("data prepare without --workers runs one worker per core",
          "[data][cli][prepare-inputs]") {
  ScratchDir dir("prepare-default-workers");
  write_file(dir / "in/a.txt", document(1));
  auto run = run_process({bin("dseek"), "data", "prepare", "--input", (dir / "in").string(),
                          "--output", (dir / "out").string(), "--no-progress"},
                         60s);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  // prepare_pipeline.cpp: std::thread::hardware_concurrency(), at least 1.
  const uint64_t cores = std::max(1u, std::thread::hardware_concurrency());
  CHECK(report_numbers(read_file(dir / "out/report.json"), "workers")[0] == cores);
  CHECK_THAT(run.output, Catch::Contains(", " + std::to_string(cores) + " workers\n"));
}
