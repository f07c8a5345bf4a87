// Recovery from memory in pipeline and tensor-parallel jobs (runtime/train/state/
// stage_memory.hpp, dist/stage_memory_sync.hpp), through `dseek launch --nodes 4` with
// parallel.data = 2 and no checkpoints at all: node 3 is killed at step 10 and restarted
// by the launcher; the world forms again with the same layout, nodes 0-2 resume from
// their own memory and node 3 from its stage's replica (source "peer"), at step 10. The
// same layout from the same state computes the same bits, so every node ends with the
// fault-free run's params_sha256; nothing was read from disk (no checkpoint exists).
// A layout re-planned after a loss for good takes its ranks by what they hold; under
// ZeRO the optimizer pieces come back from the ring neighbour that kept them, and
// without elastic.shard_replica the recovery goes to the checkpoint and says why.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

constexpr int kNodes = 4;
constexpr int kSteps = 20;
const std::vector<std::string> kShared = {"--set", "train.micro_batch_size=2", "--set",
                                          "train.threads=1", "--set", "train.eval_every=0",
                                          "--set", "parallel.data=2"};

// `peers`: the nodes whose recovered event says "peer" (the restarted one, and under
// ZeRO its data group's other replica, which gave the restarted one's pieces from its copy).
void check_restarted_node_recovers_from_a_replica(const std::string& name,
                                                  const std::vector<std::string>& layout,
                                                  const std::set<int>& peers = {3}) {
  ScratchDir reference_run(name + "-reference"), run(name);
  const auto reference =
      run_process(tiny_launch(reference_run.path(), kNodes, kSteps, kShared + layout), 180s, launch_env());
  INFO(reference.output);
  REQUIRE(reference.exit_code == 0);
  const std::string expected = final_params_sha256(reference_run.path(), 0, kSteps);

  const auto result = run_process(
      tiny_launch(run.path(), kNodes, kSteps,
                  kShared + layout + faults(R"({kind = "kill", node = 3, step = 10})")),
      180s, launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Contains("[launch] node 3 killed by signal SIGKILL; restarting (1/"));
  for (int node = 0; node < kNodes; ++node) {
    INFO("node " << node);
    const auto recovered = node_events(run.path(), node, "recovered");
    REQUIRE(recovered.size() == 1);
    CHECK(number_field(recovered[0], "from_step") == 10);
    CHECK(number_field(recovered[0], "data") == 2);
    CHECK(string_field(recovered[0], "source") == (peers.count(node) > 0 ? "peer" : "memory"));
    WARN(name << ": node " << node << " recovered from " << string_field(recovered[0], "source")
              << " in " << number_field(recovered[0], "recovery_ms") << " ms");
    CHECK(node_events(run.path(), node, "recovery_without_checkpoint").empty());
    CHECK(final_params_sha256(run.path(), node, kSteps) == expected);
  }
  CHECK_FALSE(std::filesystem::exists(run.path() / "checkpoints"));
  require_no_node_left(run.path(), kNodes);
}

}  // namespace

TEST_CASE("pipeline: a restarted node of D=2 x P=2 gets its stage's state from a replica and "
          "the job ends with the fault-free bits, no checkpoint written or read",
          "[pp][launch][dp][faults]") {
  check_restarted_node_recovers_from_a_replica(
      "pp-memory", {"--set", "parallel.pipeline=2", "--set", "parallel.schedule=\"1f1b\""});
}

TEST_CASE("tensor: a restarted node of D=2 x T=2 gets its tensor rank's state from a replica "
          "and the job ends with the fault-free bits", "[tp][launch][dp][faults]") {
  check_restarted_node_recovers_from_a_replica("tp-memory", {"--set", "parallel.tensor=2"});
}

// Node 1 (replica 0, stage 1) lost for good: the survivors' layout is one replica, and
// its ranks are placed by what they hold (train/layout/memory_placement.hpp): node 0
// (stage 0) and node 3 (stage 1) train from their memory at step 10 and node 2 stands
// by, where the plan's order would have made node 2, which held stage 0, the new stage 1.
TEST_CASE("pipeline: the survivors holding every stage train from memory, the others stand by",
          "[pp][launch][dp][faults]") {
  ScratchDir reference_run("pp-memory-placed-reference"), run("pp-memory-placed");
  const std::vector<std::string> job =
      kShared + std::vector<std::string>{"--set", "parallel.pipeline=2"};
  const auto reference =
      run_process(tiny_launch(reference_run.path(), kNodes, kSteps, job), 180s, launch_env());
  INFO(reference.output);
  REQUIRE(reference.exit_code == 0);
  const auto result = run_process(
      tiny_launch(run.path(), kNodes, kSteps,
                  job + std::vector<std::string>{"--set", "cluster.max_restarts=0", "--set",
                                                 "elastic.rejoin_seconds=1", "--set",
                                                 "elastic.min_nodes=" + std::to_string(kNodes - 1),
                                                 "--stop-grace", "2"} +
                      faults(R"({kind = "kill", node = 1, step = 10})")),
      180s, launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Contains("node 2: rank 1 (standby)"));
  for (int node : {0, 3}) {
    INFO("node " << node);
    const auto layouts = node_events(run.path(), node, "epoch_layout");
    REQUIRE(layouts.size() == 2);
    CHECK(string_field(layouts[1], "role") == "train");
    CHECK(number_field(layouts[1], "rank") == (node == 0 ? 0 : 1));
    const auto recovered = node_events(run.path(), node, "recovered");
    REQUIRE(recovered.size() == 1);
    CHECK(string_field(recovered[0], "source") == "memory");
    CHECK(number_field(recovered[0], "from_step") == 10);
    CHECK(number_field(recovered[0], "data") == 1);
    final_params_sha256(run.path(), node, kSteps);
  }
  const auto standby = node_events(run.path(), 2, "epoch_layout");
  REQUIRE(standby.size() == 2);
  CHECK(string_field(standby[1], "role") == "standby");
  CHECK(node_events(run.path(), 2, "train_done").empty());
  // D = 1 from step 10 on: another summation order than D = 2 (the bound of
  // lost_node_launch.hpp).
  const double expected = number_field(node_events(reference_run.path(), 0, "train_done").at(0), "val_loss");
  const double got = number_field(node_events(run.path(), 0, "train_done").at(0), "val_loss");
  CHECK(std::abs(got - expected) <= 1e-5 * std::abs(expected));
  require_no_node_left(run.path(), kNodes);
}

// Under ZeRO a replica holds pieces of its moments only; each rank also keeps its ring
// neighbour's (state/stage_memory.hpp), so the restarted node's pieces come back from
// the replica that kept them (node 1, replica 0 of node 3's position: its group's
// state was put together from that copy, source "peer" there too), and the bits are the
// fault-free run's.
TEST_CASE("pipeline: under ZeRO 1 a restarted node of D=2 x P=2 gets its stage's state and "
          "its optimizer pieces from a replica and ends with the fault-free bits",
          "[pp][launch][dp][faults][zero]") {
  check_restarted_node_recovers_from_a_replica(
      "pp-memory-zero", {"--set", "parallel.pipeline=2", "--set", "parallel.zero=1"}, {1, 3});
}

TEST_CASE("tensor: under ZeRO 2 a restarted node of D=2 x T=2 gets its tensor rank's state and "
          "optimizer pieces from a replica and ends with the fault-free bits",
          "[tp][launch][dp][faults][zero]") {
  check_restarted_node_recovers_from_a_replica(
      "tp-memory-zero", {"--set", "parallel.tensor=2", "--set", "parallel.zero=2"}, {1, 3});
}

// Without elastic.shard_replica no rank keeps a lost rank's pieces: a node's loss goes
// back to the newest checkpoint, and the recovery says why not memory.
TEST_CASE("pipeline: under ZeRO without shard replicas the recovery reads the checkpoint and "
          "says why not memory", "[pp][launch][dp][faults][zero]") {
  ScratchDir run("pp-memory-zero-disk");
  const auto result = run_process(
      tiny_launch(run.path(), kNodes, kSteps,
                  kShared + std::vector<std::string>{"--set", "parallel.pipeline=2", "--set",
                                                     "parallel.zero=1", "--set",
                                                     "elastic.shard_replica=false", "--set",
                                                     "checkpoint.every_steps=4", "--set",
                                                     "checkpoint.async=false"} +
                      faults(R"({kind = "kill", node = 3, step = 10})")),
      180s, launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  for (int node = 0; node < kNodes; ++node) {
    INFO("node " << node);
    const auto recovered = node_events(run.path(), node, "recovered");
    REQUIRE(recovered.size() == 1);
    CHECK(string_field(recovered[0], "source") == "disk");
    CHECK(number_field(recovered[0], "from_step") == 8);
    CHECK_THAT(string_field(recovered[0], "reason"), Contains("elastic.shard_replica = false"));
  }
  require_no_node_left(run.path(), kNodes);
}
