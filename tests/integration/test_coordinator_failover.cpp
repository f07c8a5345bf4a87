// Coordinator failover on 127.0.0.1 (cluster.backup_coordinators): three dseek-node
// processes started by the test, each as on its own host (no launcher restarts them).
// When node 0, which runs the coordinator, is killed for good, the survivors move the
// coordinator to node 1 (the first backup), which starts it; the job recovers from the
// survivors' memory and trains to its end. With a majority quorum the survivors of a
// killed node 2 go on at node 0's coordinator: the same two ranks on the same data, so
// both runs end with the same bits. Every wait is bounded; no process outlives its test.
// (The namespace test bed runs the same across hosts, and a partition: tests/hosts/.)
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/spawned_process.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using dseek::test::SpawnedProcess;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

constexpr int kNodes = 3;
constexpr int kSteps = 24;
constexpr int kKillAt = 10;

// The tiny job on 3 nodes with two backup coordinators (nodes 1 and 2, each its own
// port), consent to finish on 2 and a short wait for the lost node; `faults` TOML tables.
std::vector<std::string> failover_job(const std::vector<int>& ports, const std::string& fault_tables) {
  return std::vector<std::string>{
             "--set", "train.threads=1", "--set", "train.eval_every=0",
             "--set", "cluster.nodes=" + std::to_string(kNodes),
             "--set", "cluster.coordinator=127.0.0.1:" + std::to_string(ports[0]),
             "--set", "cluster.backup_coordinators=\"1@127.0.0.1:" + std::to_string(ports[1]) +
                          " 2@127.0.0.1:" + std::to_string(ports[2]) + "\"",
             "--set", "elastic.min_nodes=2", "--set", "elastic.rejoin_seconds=1"} +
         faults(fault_tables);
}

const std::vector<std::string> kSecret = {"DSEEK_CLUSTER_SECRET=failover-test-secret"};

struct Job {
  std::vector<std::unique_ptr<SpawnedProcess>> nodes;
  std::vector<std::optional<int>> codes;
};

// Starts the 3 nodes of `job` and waits (bounded) for each to end.
Job run_job(const fs::path& run, const std::vector<std::string>& job) {
  Job j;
  for (int node = 0; node < kNodes; ++node)
    j.nodes.push_back(std::make_unique<SpawnedProcess>(SpawnedProcess::start(
        tiny_job(run, kSteps, job + std::vector<std::string>{"--set", "cluster.node_id=" + std::to_string(node)}),
        (run / ("node" + std::to_string(node) + ".log")).string(), kSecret)));
  for (auto& node : j.nodes) j.codes.push_back(node->wait_for(180s));
  return j;
}

std::string log_of(const fs::path& run, int node) {
  const auto lines = read_lines(run / ("node" + std::to_string(node) + ".log"));
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

}  // namespace

TEST_CASE("failover: when the coordinator's node dies for good the survivors move the "
          "coordinator to the first backup and finish the job",
          "[cluster][failover][faults][integration]") {
  ScratchDir run("failover-coordinator"), reference("failover-reference");
  const std::vector<int> ports = {free_port(), free_port(), free_port()};
  const auto killed = run_job(
      run.path(), failover_job(ports, "{kind = \"kill\", node = 0, step = " + std::to_string(kKillAt) + "}"));
  INFO("node 1:\n" << log_of(run.path(), 1) << "node 2:\n" << log_of(run.path(), 2));
  REQUIRE(killed.codes[0] == 128 + 9);  // SIGKILL, and nothing restarts it
  REQUIRE(killed.codes[1] == 0);
  REQUIRE(killed.codes[2] == 0);

  for (int node : {1, 2}) {
    INFO("node " << node);
    // The agent moved to node 1's backup coordinator, and said so.
    const auto membership = node_events(run.path(), node, "membership");
    bool failover = false;
    for (const auto& line : membership)
      if (string_field(line, "kind") == "coordinator_failover") {
        failover = true;
        CHECK(string_field(line, "coordinator") == "127.0.0.1:" + std::to_string(ports[1]));
      }
    CHECK(failover);
    // The job recovered from the survivors' memory at the step of the kill.
    const auto recovered = node_events(run.path(), node, "recovered");
    REQUIRE(recovered.size() == 1);
    CHECK(string_field(recovered[0], "source") == "memory");
    CHECK(number_field(recovered[0], "from_step") == kKillAt);
    CHECK(number_field(recovered[0], "world_size") == 2);
  }
  // The recovery time: from the kill on node 0 to training again on node 1.
  const auto kill = fault_of(run.path(), 0, "kill");
  REQUIRE_FALSE(kill.empty());
  const auto recovered = node_events(run.path(), 1, "recovered");
  const double ms = (number_field(recovered[0], "ts") - number_field(kill, "ts")) * 1000;
  WARN("coordinator failover: training again " << ms << " ms after the coordinator's node was killed");
  CHECK(ms > 0);

  // Node 2 killed instead: the coordinator stays on node 0, the survivors are the same
  // two ranks on the same data.
  const auto other = run_job(
      reference.path(), failover_job(ports, "{kind = \"kill\", node = 2, step = " + std::to_string(kKillAt) + "}"));
  INFO("reference node 0:\n" << log_of(reference.path(), 0));
  REQUIRE(other.codes[0] == 0);
  REQUIRE(other.codes[1] == 0);
  const std::string params = final_params_sha256(run.path(), 1, kSteps);
  CHECK(final_params_sha256(run.path(), 2, kSteps) == params);
  CHECK(final_params_sha256(reference.path(), 0, kSteps) == params);
  require_no_node_left(run.path(), kNodes);
  require_no_node_left(reference.path(), kNodes);
}

// The old coordinator's node, restarted after the failover (as its host's engine would,
// incarnation 1: its kill fault does not fire again), finds the job's coordinator on
// node 1's backup and rejoins it as a member (it starts no coordinator of its own),
// recovering from a peer's memory. The job ends with all three nodes on one model.
TEST_CASE("failover: the old coordinator's node, restarted after the failover, rejoins "
          "the new coordinator as a member", "[cluster][failover][faults][integration]") {
  constexpr int steps = 600;  // long enough for node 0 to come back before the end
  ScratchDir run("failover-restarted");
  const std::vector<int> ports = {free_port(), free_port(), free_port()};
  const auto job = failover_job(ports, "{kind = \"kill\", node = 0, step = " + std::to_string(kKillAt) + "}");
  std::vector<std::unique_ptr<SpawnedProcess>> nodes;
  auto start = [&](int node, const std::vector<std::string>& env, const std::string& log) {
    return std::make_unique<SpawnedProcess>(SpawnedProcess::start(
        tiny_job(run.path(), steps, job + std::vector<std::string>{"--set", "cluster.node_id=" + std::to_string(node)}),
        (run.path() / log).string(), env));
  };
  for (int node = 0; node < kNodes; ++node) nodes.push_back(start(node, kSecret, "node" + std::to_string(node) + ".log"));
  REQUIRE(nodes[0]->wait_for(120s) == 128 + 9);  // killed by its fault at step 10
  // The survivors train again at node 1's coordinator; then node 0 comes back.
  REQUIRE_FALSE(wait_for_event(run.path(), 1, "recovered", 60s).empty());
  auto restarted = start(0, kSecret + std::vector<std::string>{"DSEEK_RESTART_COUNT=1"}, "node0-restarted.log");
  const auto codes = std::vector<std::optional<int>>{restarted->wait_for(180s), nodes[1]->wait_for(180s),
                                                     nodes[2]->wait_for(180s)};
  INFO("node 0 before its kill:\n" << log_of(run.path(), 0));
  for (int node = 0; node < kNodes; ++node) {
    INFO("node " << node);
    REQUIRE(codes[static_cast<size_t>(node)] == 0);
  }
  // The restarted node 0 joined node 1's coordinator (and started none of its own), and
  // recovered from a peer's memory.
  std::string restarted_log;
  for (const auto& line : read_lines(run.path() / "node0-restarted.log")) restarted_log += line + "\n";
  INFO(restarted_log);
  CHECK(restarted_log.find("[dseek node 0] joined 127.0.0.1:" + std::to_string(ports[1]) + ":") !=
        std::string::npos);
  CHECK(restarted_log.find("[dseek coordinator]") == std::string::npos);
  const auto rejoined = node_events(run.path(), 0, "recovered");
  REQUIRE_FALSE(rejoined.empty());
  CHECK(number_field(rejoined.back(), "world_size") == kNodes);
  const std::string params = final_params_sha256(run.path(), 1, steps);
  CHECK(final_params_sha256(run.path(), 0, steps) == params);
  CHECK(final_params_sha256(run.path(), 2, steps) == params);
  require_no_node_left(run.path(), kNodes);
}
