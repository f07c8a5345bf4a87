// What the tests of `dseek data prepare --nodes N` share: a node's command line, N
// nodes run at once on this host (nodes 1..N-1 in the background, node 0 in the
// foreground, every wait bounded), a data set's files to compare byte for byte, and
// report.json's numbers.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "actors/spawned_process.hpp"
#include "support/data_test_files.hpp"
#include "support/process.hpp"

namespace dseek::testing {

inline std::vector<std::string> node_args(std::vector<std::string> args, int nodes, int node) {
  args.insert(args.end(), {"--nodes", std::to_string(nodes), "--node-id", std::to_string(node),
                           "--node-wait", "60"});
  return args;
}

// Every file of a data set but report.json (it has timings), by name.
inline std::map<std::string, std::string> data_set(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name != "report.json") files[name] = read_file(entry.path());
  }
  return files;
}

// report.json's `"key":N` or `"key":[N,...]`, as numbers (a list's in order).
inline std::vector<uint64_t> report_numbers(const std::string& report, const std::string& key) {
  std::smatch match;
  const std::regex pattern("\"" + key + "\":(\\[[0-9,]*\\]|[0-9]+)");
  REQUIRE(std::regex_search(report, match, pattern));
  std::string list = match[1];
  if (list.front() == '[') list = list.substr(1, list.size() - 2);
  std::vector<uint64_t> numbers;
  for (size_t at = 0; at < list.size();) {
    size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    numbers.push_back(std::stoull(list.substr(at, end - at)));
    at = end + 1;
  }
  return numbers;
}

// Nodes 1..N-1 in the background (their logs in `logs`), node 0 in the foreground:
// node 0's result; every other node must exit 0.
inline ProcessResult run_nodes(const std::vector<std::string>& args, int nodes,
                               const std::filesystem::path& logs) {
  using namespace std::chrono_literals;
  std::filesystem::create_directories(logs);
  std::vector<dseek::test::SpawnedProcess> others;
  for (int node = 1; node < nodes; ++node) {
    others.push_back(dseek::test::SpawnedProcess::start(
        node_args(args, nodes, node), (logs / ("node-" + std::to_string(node) + ".log")).string()));
  }
  ProcessResult first = run_process(node_args(args, nodes, 0), 120s);
  for (int node = 1; node < nodes; ++node) {
    INFO("node " << node << ": " << read_file(logs / ("node-" + std::to_string(node) + ".log")));
    CHECK(others[static_cast<size_t>(node - 1)].wait_for(60s) == 0);
  }
  return first;
}

}  // namespace dseek::testing
