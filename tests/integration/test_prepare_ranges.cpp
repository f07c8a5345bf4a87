// `dseek data prepare --nodes N` on one large file, split between the nodes by byte
// ranges aligned to document boundaries: a text file with a --text-separator and a JSON
// Lines file, each the only input, on 1, 2 and 3 nodes x 1 and 2 workers, give the
// one-node data set byte for byte. The corpus has an exact copy of a document of the
// first range in the last range, and a near copy in the middle that is itself copied
// exactly at the end: the copies are dropped once, for the same reasons as on one node,
// by exact dedup partitioned by hash over the nodes. Each node holds only its partition
// of the hashes (report.json's dedup_memory.node_hashes_held add up to the distinct
// texts), and near dedup is partitioned by LSH band: each node holds its bands' bucket
// entries, node 0 one bit per document and one signature read back at a time (not every
// kept text's). Exact dedup alone and no dedup split the same way; a NUL in one range makes
// the whole file binary, as on one node; a gzip file is not split. A node killed (kill
// -9) in the middle of its byte range and rerun gives the same data set.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <thread>
#include <numeric>
#include <regex>
#include <string>
#include <vector>

#include "actors/spawned_process.hpp"
#include "support/data_test_files.hpp"
#include "support/node_runs.hpp"
#include "support/prepare_node_runs.hpp"
#include "support/process.hpp"
#include "support/range_corpus.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

using namespace range_corpus;  // its corpus, its input file and its prepare command

// report.json's dedup_memory.node_hashes_held.
std::vector<uint64_t> hashes_held(const std::string& report) {
  return report_numbers(report, "node_hashes_held");
}

// DIR/in prepared on one node (DIR/one) and on `nodes` nodes (DIR/nodes), one worker
// each: the same data set; the nodes' node 0 result.
ProcessResult same_on_nodes(const std::filesystem::path& dir, const std::string& format,
                            int nodes) {
  auto one = run_process(prepare_args(dir / "in", dir / "one", 1, format), 60s);
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  auto first = run_nodes(prepare_args(dir / "in", dir / "nodes", 1, format), nodes, dir / "logs");
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  CHECK(data_set(dir / "nodes") == data_set(dir / "one"));
  return first;
}

}  // namespace

TEST_CASE("one large text or JSON Lines file split by byte ranges over 1, 2 and 3 nodes gives the one-node data set",
          "[data][pipeline][cli][prepare-nodes][ranges]") {
  for (const std::string format : {"text", "jsonl"}) {
    INFO(format);
    ScratchDir dir("prepare-ranges-" + format);
    make_input(dir / "in", format);
    auto one = run_process(prepare_args(dir / "in", dir / "one", 2, format), 60s);
    INFO(one.output);
    REQUIRE(one.exit_code == 0);
    const std::string one_report = read_file(dir / "one/report.json");
    // Every document read once: 92 in; the two exact copies and the near one with its copy.
    CHECK_THAT(one_report, Catch::Contains("\"documents_in\":93") &&
                               Catch::Contains("\"exact_duplicate\":1") &&
                               Catch::Contains("\"near_duplicate\":2"));
    const std::vector<uint64_t> one_held = hashes_held(one_report);
    REQUIRE(one_held.size() == 1);
    CHECK(one_held[0] == 90);  // every kept text's hash
    // Near dedup on one node: every kept text's signature, in every band's buckets.
    CHECK(report_numbers(one_report, "near_signatures_held")[0] == 90);
    const std::vector<uint64_t> one_entries = report_numbers(one_report, "node_band_entries_held");
    REQUIRE(one_entries.size() == 1);
    REQUIRE(one_entries[0] % 90 == 0);
    const uint64_t bands = one_entries[0] / 90;
    REQUIRE(bands > 1);
    const auto expected = data_set(dir / "one");
    REQUIRE(expected.count("index.capnp") == 1);
    for (int nodes : {1, 2, 3}) {
      for (int workers : {1, 2}) {
        std::string name = "n";
        name += std::to_string(nodes) + "w" + std::to_string(workers);
        INFO(name);
        auto first = run_nodes(prepare_args(dir / "in", dir / name, workers, format), nodes,
                               dir / "logs" / name);
        INFO(first.output);
        REQUIRE(first.exit_code == 0);
        CHECK(data_set(dir / name) == expected);
        if (nodes == 1) continue;
        const std::string n = std::to_string(nodes);
        CHECK_THAT(first.output, Catch::Contains(std::string("1 files in ") + n +
                                                 " units of work, " + n +
                                                 " of them byte ranges of a file"));
        const std::string report = read_file(dir / name / "report.json");
        CHECK_THAT(report, Catch::Contains("\"documents_in\":93") &&
                               Catch::Contains("\"exact_duplicate\":1") &&
                               Catch::Contains("\"near_duplicate\":2"));
        // Each node held its partition of the hashes only: together every distinct text
        // that passed clean (91: the partitions decide before near dedup, so the near
        // copy's hash is one of them).
        const std::vector<uint64_t> held = hashes_held(report);
        REQUIRE(held.size() == static_cast<size_t>(nodes));
        CHECK(std::accumulate(held.begin(), held.end(), uint64_t{0}) == 91);
        for (uint64_t h : held) {
          CHECK(h > 0);
          CHECK(h < 91 * 3 / 4);
        }
        CHECK_THAT(first.output, Catch::Contains("the merge none"));
        // Near dedup partitioned by LSH band: node 0 holds at most one signature at a
        // time (the candidate read back), not the 90 of one node (the bound: <= 1, i.e.
        // 1/90 of one node's); each node holds only its bands' bucket entries, of every
        // text with a signature that is not an exact copy (91: the near copy too).
        CHECK(report_numbers(report, "near_signatures_held")[0] <= 1);
        CHECK(report_numbers(report, "near_signatures_read")[0] >= 1);  // the near copy's
        const std::vector<uint64_t> entries = report_numbers(report, "node_band_entries_held");
        REQUIRE(entries.size() == static_cast<size_t>(nodes));
        CHECK(std::accumulate(entries.begin(), entries.end(), uint64_t{0}) == 91 * bands);
        for (size_t p = 0; p < entries.size(); ++p) {
          const uint64_t owned = (bands - p + static_cast<uint64_t>(nodes) - 1) / nodes;
          CHECK(entries[p] == 91 * owned);  // bands b with b modulo N == p
        }
        CHECK(report_numbers(report, "near_kept_bits")[0] == 93);  // one per document
      }
    }
  }
}

TEST_CASE("byte ranges over 3 nodes give the one-node data set with exact dedup alone, or without dedup",
          "[data][pipeline][cli][prepare-nodes][ranges]") {
  ScratchDir dir("prepare-ranges-dedup");
  make_input(dir / "in", "jsonl");
  // Exact dedup alone: the near copy is kept and its copy is an exact duplicate (2);
  // without dedup every document is kept, and the nodes skip the hash partitions.
  for (const auto& [flag, exact] : {std::pair{"--no-near-dedup", 2}, std::pair{"--no-dedup", 0}}) {
    INFO(flag);
    auto args = prepare_args(dir / "in", dir / (std::string("one") + flag), 1, "jsonl");
    args.push_back(flag);
    if (std::string(flag) == "--no-dedup") args.push_back("--no-near-dedup");
    auto one = run_process(args, 60s);
    INFO(one.output);
    REQUIRE(one.exit_code == 0);
    args[6] = (dir / (std::string("three") + flag)).string();  // --output
    auto first = run_nodes(args, 3, dir / "logs" / flag);
    INFO(first.output);
    REQUIRE(first.exit_code == 0);
    CHECK(data_set(dir / (std::string("three") + flag)) ==
          data_set(dir / (std::string("one") + flag)));
    const std::string report = read_file(dir / (std::string("three") + flag) / "report.json");
    CHECK_THAT(report, Catch::Contains("\"exact_duplicate\":" + std::to_string(exact)) &&
                           Catch::Contains("\"near_duplicate\":0"));
  }
}

TEST_CASE("a NUL in one byte range makes the whole separated text file binary on every node",
          "[data][pipeline][cli][prepare-nodes][ranges]") {
  ScratchDir dir("prepare-ranges-binary");
  make_input(dir / "in", "text");
  std::string text = read_file(dir / "in/big.txt");
  text.insert(text.size() - 100, 1, '\0');  // in the last range
  write_file(dir / "in/big.txt", text);
  write_file(dir / "in/small.txt", random_words("small", 1, 200));
  same_on_nodes(dir.path(), "text", 3);
  const std::string report = read_file(dir / "nodes/report.json");
  CHECK_THAT(report, Catch::Contains("\"binary\":1") && Catch::Contains("\"documents_in\":1,"));
}

TEST_CASE("a compressed file is not split by byte ranges between the nodes",
          "[data][pipeline][cli][prepare-nodes][ranges]") {
  ScratchDir dir("prepare-ranges-gz");
  make_input(dir / "in", "gz");
  const ProcessResult first = same_on_nodes(dir.path(), "gz", 2);
  CHECK_THAT(first.output, Catch::Contains("node 0 of 2: 1 files are this node's"));
  CHECK_THAT(first.output, !Catch::Contains("byte ranges"));
}

TEST_CASE("a node killed in the middle of its byte range and rerun gives the one-node data set",
          "[data][pipeline][cli][prepare-nodes][ranges]") {
  ScratchDir dir("prepare-ranges-kill");
  make_input(dir / "in", "jsonl");
  auto one = run_process(prepare_args(dir / "in", dir / "one", 1, "jsonl"), 60s);
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  const auto args = prepare_args(dir / "in", dir / "out", 1, "jsonl");
  const std::filesystem::path parts = dir / "out/.parts";
  auto files_ending = [&](const std::string& tail) {
    std::vector<std::filesystem::path> found;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(parts, error)) {
      const std::string name = entry.path().filename().string();
      if (name.size() > tail.size() && name.ends_with(tail) && !name.starts_with("node-"))
        found.push_back(entry.path());
    }
    return found;
  };
  // Node 0 writes its range (the first half of big.jsonl) and waits; node 1 writes its
  // range slowly (0.4 s a piece, ~11 pieces) and is killed once its part has pieces in it
  // but is not finished.
  auto node0 = dseek::test::SpawnedProcess::start(node_args(args, 2, 0),
                                                  (dir / "node-0.log").string());
  auto slow = node_args(args, 2, 1);
  slow.insert(slow.end(), {"--slow-writer-ms", "400"});
  auto node1 = dseek::test::SpawnedProcess::start(slow, (dir / "node-1.log").string());
  bool in_the_middle = false;
  for (int tries = 0; tries < 600 && !in_the_middle; ++tries) {  // 30 s at most
    std::this_thread::sleep_for(50ms);
    if (!std::filesystem::exists(parts / "node-0.done")) continue;  // node 0's part first
    const auto writing = files_ending(".tmp");
    std::error_code error;
    in_the_middle = writing.size() == 1 && std::filesystem::file_size(writing[0], error) > 4000 &&
                    files_ending(".piece").size() == 1;
  }
  REQUIRE(in_the_middle);
  node1.signal(SIGKILL);
  CHECK(node1.wait_for(10s) == 128 + SIGKILL);
  CHECK(files_ending(".piece").size() == 1);  // node 1's range unfinished
  CHECK_FALSE(std::filesystem::exists(parts / "node-1.done"));
  CHECK_FALSE(node0.wait_for(0ms).has_value());  // node 0 still waits for node 1

  // The rerun of node 1 redoes its range; node 0, still waiting, writes the data set.
  auto again = run_process(node_args(args, 2, 1), 60s);
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("1 files and byte ranges of files (1 ranges) are "
                                           "this node's, 0 of them finished before"));
  CHECK(node0.wait_for(60s) == 0);
  INFO(read_file(dir / "node-0.log"));
  CHECK(data_set(dir / "out") == data_set(dir / "one"));
  CHECK_FALSE(std::filesystem::exists(parts));
}
