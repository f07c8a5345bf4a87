// `dseek data prepare --nodes N --node-id I` with each node on its own host of the
// namespace test bed (scripts/hosts/testbed.sh: own network, hostname, PID namespace,
// /dev/shm and SysV IPC), the output folder one folder every host sees (a folder under
// /tmp: the test bed's hosts keep this machine's file systems, as hosts keep a cluster
// file system). The nodes do not talk over the network: they exchange only files in
// OUT/.parts (parts, hash and band lists, markers), so what could tie them to one host
// is what those files hold (a pid means nothing in another PID namespace) and how they
// are waited for. Root only (label: hosts; exit 77, skipped, otherwise); every case
// removes its test bed, and with it every process it started there, also on failure.
//
// The corpus is the byte-range tests' one large JSON Lines file
// (tests/support/range_corpus.hpp: one byte range per node), with a near copy of one more
// document of the first range at the end: exact and near copies of documents of node 0's
// range lie in the last node's range, so they are dropped only if dedup, partitioned by
// hash and by LSH band over the hosts, sees every host's documents. On 3 hosts the third
// reads its own copy of the input at another path and names the output folder by
// another path (a symbolic link): a part's key is the file's relative name, range and
// bytes, not its place. A node killed in its host: node 0 names it (and the host it
// started on) when its --node-wait is over, nothing but the parts is left, and the same
// commands again on both hosts write the one-node data set.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "actors/spawned_process.hpp"
#include "support/data_test_files.hpp"
#include "support/node_runs.hpp"
#include "support/prepare_node_runs.hpp"
#include "support/process.hpp"
#include "support/range_corpus.hpp"
#include "support/test_bed.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using dseek::test::SpawnedProcess;

namespace {

// range_corpus's documents and, at the end, a near copy of document 5 (one word of 120
// changed). 94 documents: document 3's exact copy and this near copy in the last range.
std::vector<std::string> hosts_documents() {
  std::vector<std::string> docs = range_corpus::documents();
  std::string near = docs[5];
  near.replace(near.size() - 5, 5, "qqord");
  docs.push_back(near);
  return docs;
}

// DIR/in/big.jsonl, and its one-node data set in DIR/one (on this host, outside the test
// bed): the data set every run on the hosts must write, file for file.
std::map<std::string, std::string> prepare_reference(const fs::path& dir) {
  range_corpus::make_input(dir / "in", "jsonl", hosts_documents());
  auto one = run_process(range_corpus::prepare_args(dir / "in", dir / "one", 1, "jsonl"), 120s);
  INFO(one.output);
  REQUIRE(one.exit_code == 0);
  const std::string report = read_file(dir / "one/report.json");
  // Document 3's exact copy; the near copies of documents 40 (and its exact copy) and 5.
  CHECK_THAT(report, Catch::Contains("\"documents_in\":94") &&
                         Catch::Contains("\"exact_duplicate\":1") &&
                         Catch::Contains("\"near_duplicate\":3"));
  auto expected = data_set(dir / "one");
  REQUIRE(expected.count("index.capnp") == 1);
  return expected;
}

// The copies are on other nodes than their originals: documents 3 and 5 end before the
// first range's nominal end (so they are range 0's, node 0's), their copies at the end
// begin after the last range's nominal start (the last node's).
void check_copies_across_ranges(const fs::path& input, int nodes) {
  const std::string text = read_file(input);
  const std::vector<std::string> docs = hosts_documents();
  const size_t size = text.size();
  for (int d : {3, 5}) {
    INFO("document " << d << " on " << nodes << " nodes");
    const size_t original = text.find(docs[static_cast<size_t>(d)]);
    REQUIRE(original != std::string::npos);
    CHECK(original + docs[static_cast<size_t>(d)].size() < size / static_cast<size_t>(nodes));
  }
  const size_t exact_copy = text.rfind(docs[3]);
  const size_t near_copy = text.rfind(docs.back());
  const size_t last_start = size * static_cast<size_t>(nodes - 1) / static_cast<size_t>(nodes);
  CHECK(exact_copy > last_start);
  CHECK(near_copy > last_start);
}

// Node `node` of `nodes` as host `node` of `bed`, waiting up to `wait_s` for the others,
// its output in `log`.
SpawnedProcess start_node(const TestBed& bed, const std::vector<std::string>& args, int nodes,
                          int node, int wait_s, const fs::path& log,
                          const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = node_args(args, nodes, node);
  argv.back() = std::to_string(wait_s);  // --node-wait
  argv.insert(argv.end(), extra.begin(), extra.end());
  return SpawnedProcess::start(bed.as_host(node, argv), log.string());
}

// The prepare command, `workers` workers, into `out`.
std::vector<std::string> args_into(const fs::path& dir, const fs::path& out, int workers) {
  return range_corpus::prepare_args(dir / "in", out, workers, "jsonl");
}

// What is in the output folder, by name.
std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) names.insert(entry.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("hosts: data prepare on 2 and 3 hosts sharing the output folder writes the one-node data set",
          "[hosts][prepare-hosts][data]") {
  ScratchDir dir("prepare-hosts");
  const auto expected = prepare_reference(dir.path());
  TestBed bed(3, 'p');
  for (int nodes : {2, 3}) {
    INFO(nodes << " nodes");
    check_copies_across_ranges(dir / "in/big.jsonl", nodes);
    const fs::path out = dir / ("hosts-" + std::to_string(nodes));
    const fs::path logs = dir / ("logs-" + std::to_string(nodes));
    fs::create_directories(logs);
    // Host 0 on 2 workers, the others on 1 (the data set does not depend on it). On 3
    // hosts, host 2 reads its own copy of the input at another path and reaches the shared
    // output folder by another path (a symbolic link), as hosts with local copies of the
    // corpus and the cluster file system mounted elsewhere would.
    if (nodes == 3) {
      fs::create_directories(dir / "host-2/in");
      fs::copy_file(dir / "in/big.jsonl", dir / "host-2/in/big.jsonl");
      fs::create_directories(out);  // (an empty output folder is taken as a new one)
      fs::create_directory_symlink(out, dir / "host-2/out");
    }
    std::vector<SpawnedProcess> running;
    for (int node = 0; node < nodes; ++node) {
      auto args = node == 2 ? range_corpus::prepare_args(dir / "host-2/in", dir / "host-2/out", 1, "jsonl")
                            : args_into(dir.path(), out, node == 0 ? 2 : 1);
      running.push_back(start_node(bed, args, nodes, node, 60,
                                   logs / ("node-" + std::to_string(node) + ".log")));
    }
    for (int node = 0; node < nodes; ++node) {
      const std::string log = read_file(logs / ("node-" + std::to_string(node) + ".log"));
      INFO("node " << node << ":\n" << log);
      CHECK(running[static_cast<size_t>(node)].wait_for(180s) == 0);
    }
    for (int node = 0; node < nodes; ++node) {
      const std::string log = read_file(logs / ("node-" + std::to_string(node) + ".log"));
      INFO("node " << node << ":\n" << log);
      // Each node ran on its host: its hostname, and pid 1 of that host's PID namespace.
      const std::string n = std::to_string(node), of = " of " + std::to_string(nodes);
      CHECK_THAT(log, Catch::Contains("data prepare: node " + n + of + " runs on host " +
                                      bed.hostname(node) + " as pid 1 ("));
      CHECK_THAT(log, Catch::Contains("data prepare: node " + n + of +
                                      ": 1 files and byte ranges of files (1 ranges) are this "
                                      "node's, 0 of them finished before"));
    }
    CHECK(data_set(out) == expected);
    CHECK_FALSE(fs::exists(out / ".parts"));
    const std::string report = read_file(out / "report.json");
    CHECK_THAT(report, Catch::Contains("\"exact_duplicate\":1") &&
                           Catch::Contains("\"near_duplicate\":3"));
    // The hash partition and the LSH bands were split over the hosts: a figure per node.
    CHECK(report_numbers(report, "node_hashes_held").size() == static_cast<size_t>(nodes));
    CHECK(report_numbers(report, "node_band_entries_held").size() == static_cast<size_t>(nodes));
    CHECK(report_numbers(report, "near_signatures_held")[0] <= 1);
  }
}

TEST_CASE("hosts: a node killed on its host during data prepare is named by the other host "
          "within its wait, no index is written, and the rerun writes the one-node data set",
          "[hosts][prepare-hosts][data][faults]") {
  ScratchDir dir("prepare-hosts-kill");
  const auto expected = prepare_reference(dir.path());
  TestBed bed(2, 'p');
  const fs::path out = dir / "out", parts = out / ".parts";
  const auto args = args_into(dir.path(), out, 1);
  auto files_ending = [&](const std::string& tail) {
    std::vector<fs::path> found;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(parts, error)) {
      const std::string name = entry.path().filename().string();
      if (name.size() > tail.size() && name.ends_with(tail) && !name.starts_with("node-"))
        found.push_back(entry.path());
    }
    return found;
  };
  constexpr int kWait = 10;  // node 0's --node-wait, seconds
  // Node 1 writes its range (the second half of big.jsonl) slowly (0.4 s a piece, ~12
  // pieces); node 0 writes its own and waits for node 1's.
  auto node1 = start_node(bed, args, 2, 1, 60, dir / "node-1.log", {"--slow-writer-ms", "400"});
  auto node0 = start_node(bed, args, 2, 0, kWait, dir / "node-0.log");
  bool in_the_middle = false;
  for (int tries = 0; tries < 1200 && !in_the_middle; ++tries) {  // 60 s at most
    std::this_thread::sleep_for(50ms);
    if (!fs::exists(parts / "node-0.done")) continue;  // node 0's part first
    const auto writing = files_ending(".tmp");
    std::error_code error;
    in_the_middle = writing.size() == 1 && fs::file_size(writing[0], error) > 4000 &&
                    files_ending(".piece").size() == 1;
  }
  INFO("node 0:\n" << read_file(dir / "node-0.log") << "\nnode 1:\n" << read_file(dir / "node-1.log"));
  REQUIRE(in_the_middle);
  // Kill node 1's dseek itself, in its host (by its pid in this machine's PID namespace;
  // in its host's it is pid 1), not the test bed's wrapper around it.
  const std::vector<pid_t> dseek = bed.processes(1, "dseek");
  REQUIRE(dseek.size() == 1);
  REQUIRE_FALSE(node0.wait_for(0ms).has_value());  // node 0 still waits for node 1
  REQUIRE(::kill(dseek[0], SIGKILL) == 0);
  const auto killed_at = std::chrono::steady_clock::now();
  const auto node1_exit = node1.wait_for(10s);
  REQUIRE(node1_exit.has_value());
  CHECK(*node1_exit != 0);
  CHECK(bed.processes(1, "dseek").empty());
  CHECK(files_ending(".piece").size() == 1);  // node 1's range unfinished
  CHECK_FALSE(fs::exists(parts / "node-1.done"));

  // Node 0 names node 1, where it started and its first unit, once its wait is over.
  const auto node0_exit = node0.wait_for(std::chrono::seconds(kWait + 30));
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  const std::string log0 = read_file(dir / "node-0.log");
  INFO("node 0 ended " << after << " s after the kill:\n" << log0);
  REQUIRE(node0_exit.has_value());
  CHECK(*node0_exit != 0);
  CHECK(after <= kWait + 5.0);  // its wait began before the kill
  CHECK_THAT(log0, Catch::Contains("node 1 of 2 has not finished (its first file big.jsonl bytes ") &&
                       Catch::Contains("after " + std::to_string(kWait) + " s (it last started on host " +
                                       bed.hostname(1) + " as pid 1): did it stop?"));
  // No data set: no index, no shard, only the parts for the rerun.
  CHECK_FALSE(fs::exists(out / "index.capnp"));
  CHECK(names_in(out) == std::set<std::string>{".parts"});
  CHECK(fs::exists(parts / "node-0.failed"));

  // The rerun on both hosts: node 1 first (node 0 takes any failed marker for this run's,
  // so it starts once node 1 has written its started marker anew), node 0 reuses its part.
  std::error_code error;
  const auto before = fs::last_write_time(parts / "node-1.started", error);
  auto again1 = start_node(bed, args, 2, 1, 60, dir / "node-1-again.log");
  bool restarted = false;
  for (int tries = 0; tries < 600 && !restarted; ++tries) {  // 30 s at most
    std::this_thread::sleep_for(50ms);
    std::error_code missing;
    const auto now = fs::last_write_time(parts / "node-1.started", missing);
    restarted = !missing && now != before;
  }
  REQUIRE(restarted);
  auto again0 = start_node(bed, args, 2, 0, 60, dir / "node-0-again.log");
  const auto again0_exit = again0.wait_for(180s);
  const auto again1_exit = again1.wait_for(60s);
  const std::string again_log0 = read_file(dir / "node-0-again.log");
  const std::string again_log1 = read_file(dir / "node-1-again.log");
  INFO("node 0:\n" << again_log0 << "\nnode 1:\n" << again_log1);
  CHECK(again0_exit == 0);
  CHECK(again1_exit == 0);
  CHECK_THAT(again_log0, Catch::Contains("1 files and byte ranges of files (1 ranges) are this "
                                         "node's, 1 of them finished before"));
  CHECK_THAT(again_log1, Catch::Contains("1 files and byte ranges of files (1 ranges) are this "
                                         "node's, 0 of them finished before"));
  CHECK(data_set(out) == expected);
  CHECK_FALSE(fs::exists(parts));
}
