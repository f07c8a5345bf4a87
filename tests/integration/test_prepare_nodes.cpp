// `dseek data prepare --nodes N --node-id I` as N processes on this host sharing the
// output folder: for 1, 2 and 3 nodes on 1 and 2 workers the data set (every shard and
// the index) is byte for byte the one-node run's, on a corpus whose exact and near
// duplicates lie in files of different nodes (so they are caught only if dedup sees
// every node's documents; the near copy of f2's document is in f3, on another node for
// 2 and 3 nodes, so its LSH bands and its candidate's signature come from other nodes),
// also when a writer crashes on each node. Node 0 holds at most one MinHash signature
// at a time, each node only its LSH bands' bucket entries. A node killed with
// kill -9 makes the others fail naming it after their --node-wait; the rerun reuses the
// finished parts and writes the same data set. A node run with other settings or one
// that failed is named too; --nodes without --node-id is refused. `dseek launch --nodes 3
// data prepare ...` writes the same data set; a bad argument fails there once, before
// any node starts, and a node that fails is named.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "actors/spawned_process.hpp"
#include "support/data_test_files.hpp"
#include "support/node_runs.hpp"
#include "support/prepare_node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kFiles = 7;  // node k of N owns the files whose index is k modulo N

std::string document(uint64_t seed, int words) { return random_words("doc", seed, words); }

// Files f0..f6 of JSON lines (listed in that order). Exact copies: a document of f0 in
// f5 (owners 0 and 1 of 2, 0 and 2 of 3) and one of f1 in f2; near copies (one word
// changed in 120): one of f2 in f3 and one of f1 in f4. And a document too short.
void make_corpus(const std::filesystem::path& dir) {
  std::map<int, std::vector<std::string>> files;
  for (int f = 0; f < kFiles; ++f)
    for (int d = 0; d < 6; ++d)
      files[f].push_back(document(static_cast<uint64_t>(f * 100 + d), 120));
  files[5].insert(files[5].begin() + 2, files[0][3]);
  files[2].push_back(files[1][0]);
  std::string near = files[2][4];
  near.replace(near.size() - 5, 5, "zzord");
  files[3].insert(files[3].begin() + 1, near);
  near = files[1][5];
  near.replace(near.size() - 5, 5, "yyord");
  files[4].push_back(near);
  files[6].push_back("tiny");
  for (const auto& [f, docs] : files) {
    std::string lines;
    for (const std::string& text : docs) lines += "{\"text\": \"" + text + "\"}\n";
    write_file(dir / ("f" + std::to_string(f) + ".jsonl"), lines);
  }
}

std::vector<std::string> prepare_args(const std::filesystem::path& in,
                                      const std::filesystem::path& out, int workers) {
  return {bin("dseek"), "data", "prepare", "--input", in.string(), "--output", out.string(),
          "--workers", std::to_string(workers), "--piece-bytes", "1500", "--min-chars", "10",
          "--fim-rate", "0.5", "--val-fraction", "0.1", "--shard-tokens", "20000",
          "--no-progress"};
}

// `dseek launch --nodes N data prepare ...` of prepare_args() (which start with dseek).
std::vector<std::string> launch_args(std::vector<std::string> args, int nodes) {
  args.erase(args.begin());
  args.insert(args.begin(), {bin("dseek"), "launch", "--nodes", std::to_string(nodes)});
  return args;
}

size_t count(const std::string& text, const std::string& word) {
  size_t found = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++found;
  return found;
}

// The corpus in DIR/in and its one-node data set in DIR/one.
void prepare_one_node(const std::filesystem::path& dir, int workers) {
  make_corpus(dir / "in");
  auto one = run_process(prepare_args(dir / "in", dir / "one", workers), 60s);
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
}

}  // namespace

TEST_CASE("dseek data prepare on 1, 2 and 3 nodes writes the one-node data set byte for byte",
          "[data][pipeline][cli][prepare-nodes]") {
  ScratchDir dir("prepare-nodes");
  prepare_one_node(dir.path(), 2);
  // The duplicates are there to be caught: 2 exact, 2 near, across nodes' files.
  const std::string report = read_file(dir / "one/report.json");
  CHECK_THAT(report, Catch::Contains("\"exact_duplicate\":2") &&
                         Catch::Contains("\"near_duplicate\":2") &&
                         Catch::Contains("\"too_short\":1"));
  const auto expected = data_set(dir / "one");
  REQUIRE(expected.count("index.capnp") == 1);
  REQUIRE(expected.size() >= 4);  // the index and several shards
  const uint64_t one_signatures = report_numbers(report, "near_signatures_held")[0];
  const uint64_t one_entries = report_numbers(report, "node_band_entries_held")[0];
  REQUIRE(one_signatures > 0);
  REQUIRE(one_entries % one_signatures == 0);
  const uint64_t bands = one_entries / one_signatures;
  for (int nodes : {1, 2, 3}) {
    for (int workers : {1, 2}) {
      const std::string name = "n" + std::to_string(nodes) + "w" + std::to_string(workers);
      INFO(name);
      std::filesystem::create_directories(dir / "logs" / name);
      auto first = run_nodes(prepare_args(dir / "in", dir / name, workers), nodes,
                             dir / "logs" / name);
      INFO(first.output);
      REQUIRE(first.exit_code == 0);
      CHECK(data_set(dir / name) == expected);
      CHECK_FALSE(std::filesystem::exists(dir / name / ".parts"));
      if (nodes == 1) continue;
      CHECK_THAT(first.output, Catch::Contains("files are this node's"));
      // Near dedup by LSH band: node 0 held one signature at a time (read back), not
      // every kept text's as one node does (the bound: at most 1, against 40 or more);
      // the nodes' bucket entries add up to every text with a signature that is not an
      // exact copy (one node's kept texts and the 2 near copies) in every band.
      const std::string nodes_report = read_file(dir / name / "report.json");
      CHECK(report_numbers(nodes_report, "near_signatures_held")[0] <= 1);
      CHECK(one_signatures >= 40);
      const auto entries = report_numbers(nodes_report, "node_band_entries_held");
      REQUIRE(entries.size() == static_cast<size_t>(nodes));
      uint64_t total = 0;
      for (uint64_t held : entries) {
        CHECK(held > 0);
        total += held;
      }
      CHECK(total == (one_signatures + 2) * bands);
    }
  }
  auto verify = run_process({bin("dseek"), "data", "verify", (dir / "n3w2").string()}, 30s);
  CHECK(verify.exit_code == 0);

  // A writer that crashes on every node: its file's part is not written, the node runs
  // that file again; the same data set.
  auto args = prepare_args(dir / "in", dir / "crashed", 2);
  args.insert(args.end(), {"--inject-crash", "write:2"});
  std::filesystem::create_directories(dir / "logs/crashed");
  auto crashed = run_nodes(args, 2, dir / "logs/crashed");
  INFO(crashed.output);
  REQUIRE(crashed.exit_code == 0);
  CHECK_THAT(crashed.output, Catch::Contains("1 files again (a writer crashed in them"));
  CHECK(data_set(dir / "crashed") == expected);
}

TEST_CASE("a node killed during dseek data prepare is named, and the rerun writes the same data",
          "[data][pipeline][cli][prepare-nodes]") {
  ScratchDir dir("prepare-nodes-kill");
  prepare_one_node(dir.path(), 1);
  const auto args = prepare_args(dir / "in", dir / "out", 1);

  // Node 1 writes slowly and is killed; nodes 0 and 2, which wait for every node's parts
  // before their hash partitions, wait 3 s for it and fail naming it.
  auto waiting = [&](std::vector<std::string> node_command) {
    node_command.back() = "3";  // --node-wait 3
    return node_command;
  };
  auto slow = node_args(args, 3, 1);
  slow.insert(slow.end(), {"--slow-writer-ms", "5000"});
  auto killed = dseek::test::SpawnedProcess::start(slow, (dir / "node-1.log").string());
  auto third = dseek::test::SpawnedProcess::start(waiting(node_args(args, 3, 2)),
                                                  (dir / "node-2.log").string());
  std::this_thread::sleep_for(1s);
  killed.signal(SIGKILL);
  CHECK(killed.wait_for(10s) == 128 + SIGKILL);
  auto failed = run_process(waiting(node_args(args, 3, 0)), 60s);
  INFO(failed.output);
  CHECK(failed.exit_code != 0);
  CHECK_THAT(failed.output,
             Catch::Contains("node 1 of 3 has not finished (its first file f1.jsonl) after 3 s"));
  CHECK(third.wait_for(30s) != 0);
  CHECK_THAT(read_file(dir / "node-2.log"), Catch::Contains("node 1 of 3 has not finished"));
  CHECK_FALSE(std::filesystem::exists(dir / "out/index.capnp"));  // never a data set
  REQUIRE(std::filesystem::exists(dir / "out/.parts"));

  // Node 0 takes any failed marker for this run's: the others start first, and node 0
  // once they have started (removed their markers of the run before, then written
  // node-K.started anew).
  auto start_marker = [&](int node) {
    return dir / ("out/.parts/node-" + std::to_string(node) + ".started");
  };
  auto started_at = [&](int node) {
    std::error_code error;
    return std::filesystem::last_write_time(start_marker(node), error);
  };
  auto wait_started = [&](int node, std::filesystem::file_time_type before) {
    for (int tries = 0; tries < 300 && started_at(node) == before; ++tries)
      std::this_thread::sleep_for(50ms);
    REQUIRE(started_at(node) != before);
  };
  // A node run with other settings is named (by node 0; it and the others fail).
  auto other = node_args(args, 3, 1);
  other.insert(other.end(), {"--min-chars", "11"});
  const auto node_2_before = started_at(2);
  auto odd = dseek::test::SpawnedProcess::start(other, (dir / "node-1-other.log").string());
  auto second = dseek::test::SpawnedProcess::start(waiting(node_args(args, 3, 2)),
                                                   (dir / "node-2-other.log").string());
  wait_started(2, node_2_before);
  auto mismatch = run_process(node_args(args, 3, 0), 60s);
  CHECK(mismatch.exit_code != 0);
  // (Node 1 and the others each see the other's fingerprint: node 0 names node 1 or
  // tells node 1's failure, whichever it sees first.)
  CHECK_THAT(mismatch.output, Catch::Contains("node 1 of 3 prepared with other settings") ||
                                  (Catch::Contains("node 1 of 3 failed: node ") &&
                                   Catch::Contains("prepared with other settings")));
  CHECK(odd.wait_for(60s) != 0);
  CHECK(second.wait_for(60s) != 0);

  // The rerun of the three.
  const std::vector<std::filesystem::file_time_type> before = {started_at(1), started_at(2)};
  std::vector<dseek::test::SpawnedProcess> others;
  for (int node : {1, 2}) {
    others.push_back(dseek::test::SpawnedProcess::start(
        node_args(args, 3, node), (dir / ("node-" + std::to_string(node) + "-again.log")).string()));
  }
  for (int node : {1, 2}) wait_started(node, before[static_cast<size_t>(node - 1)]);
  auto again = run_process(node_args(args, 3, 0), 60s);
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("3 files are this node's, 3 of them finished before"));
  for (auto& node : others) CHECK(node.wait_for(60s) == 0);
  CHECK(data_set(dir / "out") == data_set(dir / "one"));
}

TEST_CASE("dseek data prepare --nodes needs --node-id, and refuses what one node decides",
          "[data][pipeline][cli][prepare-nodes]") {
  ScratchDir dir("prepare-nodes-refused");
  make_corpus(dir / "in");
  auto with = [&](std::vector<std::string> extra) {
    auto args = prepare_args(dir / "in", dir / "out", 1);
    args.insert(args.end(), extra.begin(), extra.end());
    return run_process(args, 30s);
  };
  auto alone = with({"--nodes", "2"});
  CHECK(alone.exit_code == 2);
  CHECK_THAT(alone.output, Catch::Contains("--nodes N and --node-id I (0..N-1) go together"));
  auto beyond = with({"--nodes", "2", "--node-id", "2"});
  CHECK(beyond.exit_code == 2);
  auto max_bytes = with({"--nodes", "2", "--node-id", "0", "--max-bytes", "100"});
  CHECK(max_bytes.exit_code != 0);
  CHECK_THAT(max_bytes.output, Catch::Contains("--max-bytes cuts the corpus"));
  CHECK_FALSE(std::filesystem::exists(dir / "out/index.capnp"));

  // A node that failed (--strict: a malformed line in its file) is named with its error.
  write_file(dir / "strict/a.jsonl", "{\"text\": \"" + document(1, 50) + "\"}\n");
  write_file(dir / "strict/b.jsonl", "{\"text\": \"" + document(2, 50) + "\"}\n{broken\n");
  auto strict = prepare_args(dir / "strict", dir / "strict-out", 1);
  strict.push_back("--strict");
  auto second = run_process(node_args(strict, 2, 1), 30s);
  CHECK(second.exit_code != 0);
  auto first = run_process(node_args(strict, 2, 0), 30s);
  INFO(first.output);
  CHECK(first.exit_code != 0);
  CHECK_THAT(first.output, Catch::Contains("node 1 of 2 failed: ") && Catch::Contains("b.jsonl"));
}

TEST_CASE("dseek launch --nodes 3 data prepare writes the one-node data set, and a mistake fails once",
          "[data][pipeline][cli][prepare-nodes][launch]") {
  ScratchDir dir("prepare-nodes-launch");
  prepare_one_node(dir.path(), 1);

  auto args = launch_args(prepare_args(dir / "in", dir / "three", 1), 3);
  args.insert(args.end(), {"--node-wait", "60"});
  auto launched = run_process(args, 120s);
  INFO(launched.output);
  REQUIRE(launched.exit_code == 0);
  CHECK(data_set(dir / "three") == data_set(dir / "one"));
  CHECK_FALSE(std::filesystem::exists(dir / "three/.parts"));
  // Of the 7 files node 0 owns f0, f3, f6; nodes 1 and 2 two each.
  for (int node = 0; node < 3; ++node)
    CHECK_THAT(launched.output, Catch::Contains("[node " + std::to_string(node) +
                                                "] data prepare: node " + std::to_string(node) +
                                                " of 3: " + (node == 0 ? "3" : "2") +
                                                " files are this node's"));
  CHECK_THAT(launched.output, Catch::Contains("[node 0] prepared ") &&
                                  Catch::Contains("[launch] node 2 exited with status 0"));

  // A bad value: said once by the launcher (exit 2), no node starts, no output.
  auto bad = run_process(launch_args(prepare_args(dir / "in", dir / "bad", 0), 3), 30s);
  INFO(bad.output);
  CHECK(bad.exit_code == 2);
  CHECK(count(bad.output, "bad value '0' for --workers") == 1);
  CHECK(count(bad.output, "[launch] starting") == 0);
  CHECK_FALSE(std::filesystem::exists(dir / "bad"));
  // The launcher decides every node's place.
  auto placed = launch_args(prepare_args(dir / "in", dir / "bad", 1), 2);
  placed.insert(placed.end(), {"--node-id", "1"});
  auto refused = run_process(placed, 30s);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("--node-id of data prepare is decided by dseek launch"));
  auto missing = run_process(launch_args(prepare_args(dir / "none", dir / "bad", 1), 2), 30s);
  CHECK(missing.exit_code != 0);
  CHECK(count(missing.output, "none does not exist") == 1);

  // A node that fails (--strict: a malformed line in node 1's file) is named; node 0
  // names it with its error; the launch fails.
  write_file(dir / "strict/a.jsonl", "{\"text\": \"" + document(1, 50) + "\"}\n");
  write_file(dir / "strict/b.jsonl", "{\"text\": \"" + document(2, 50) + "\"}\n{broken\n");
  auto strict = launch_args(prepare_args(dir / "strict", dir / "strict-out", 1), 2);
  strict.insert(strict.end(), {"--strict", "--node-wait", "60"});
  auto failed = run_process(strict, 120s);
  INFO(failed.output);
  CHECK(failed.exit_code == 1);
  CHECK_THAT(failed.output, Catch::Contains("[launch] node 1 exited with status") &&
                                Catch::Contains("[node 0] ") &&
                                Catch::Contains("node 1 of 2 failed: ") &&
                                Catch::Contains("[launch] node(s) 0, 1 failed"));
  CHECK_FALSE(std::filesystem::exists(dir / "strict-out/index.capnp"));
}
