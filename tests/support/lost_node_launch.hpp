// The node-loss check shared by the pipeline and tensor-parallel paths
// (tests/pipeline/test_pipeline_launch.cpp, tests/tensor/test_tensor_launch.cpp):
// `dseek launch --nodes N` of a job whose last node is killed (or hangs) at step 10 for
// good (cluster.max_restarts = 0; elastic.rejoin_seconds = 1; elastic.min_nodes = N - 1,
// the consent to finish on fewer nodes) against the same job
// without the fault. The survivors re-plan the layout (actors/control/epoch_loop.hpp), the
// ranks of the new layout resume from the newest checkpoint (the one of step 8, written
// by the old layout, checkpoint.every_steps = 4) or, without checkpoints, from step 0,
// or (from_memory) from their memory at step 10, and the job finishes.
//
// What it checks: the launcher exits 0 having given the node up; every survivor saw the
// node lost and logged the new layout (epoch_layout) with its role; the ranks that train
// recovered from the expected step and source into that layout, ended with the same
// params_sha256, and their val_loss is within 1e-5 relative of the fault-free run's; a
// node left over stood by and ended with the job (standby_ended); no node outlives the
// test. Not bitwise: steps 9-20 run on another layout, which sums the gradients in
// another order (float32 rounding, measured ~1e-9 relative on val_loss); any real
// mistake (a step lost or run twice on other data, a stage's slice resharded wrongly)
// moves the loss by 1e-3 or more.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace dseek::testing {

struct LostNodeJob {
  std::string name;              // scratch directories' prefix
  std::vector<std::string> job;  // --set arguments of the path's job
  int nodes = 2;                 // the last one is killed
  int data = 1, pipeline = 1, tensor = 1;  // the layout the survivors train in
  bool checkpoints = true;       // checkpoint.every_steps = 4 (else none: from step 0)
  // "kill", or "hang": the node stops answering, is declared lost by the missing
  // heartbeats, and is killed by the launcher 2 s after the job finished (--stop-grace);
  // or "corrupt_gradient" (with `job` checking replicas): the replicas' checksums name
  // the node, which leaves the job and exits with an error.
  std::string fault = "kill";
  // The kill or hang fires in the data group's gradient reduction (during = "reduction",
  // with replicas), the peers mid-collective, instead of at the step boundary.
  bool during_reduction = false;
  // A replica of every stage survives and keeps its position in the new layout (the
  // last node lost): the survivors resume from their memory at step 10 without reading
  // a checkpoint (runtime/train/state/stage_memory.hpp), source `memory_source`: "memory",
  // or "peer" where a survivor's data group put its state together with a replica of the
  // lost rank's ZeRO pieces.
  bool from_memory = false;
  std::string memory_source = "memory";
  // More checks of the faulty run's directory (null: none).
  std::function<void(const std::filesystem::path& run)> also_check;
};

inline void check_lost_node_recovers(const LostNodeJob& lost) {
  using namespace std::chrono_literals;
  using Catch::Matchers::Contains;
  constexpr int kSteps = 20;
  constexpr double kRelative = 1e-5;
  const int killed = lost.nodes - 1;
  const int trainers = lost.data * lost.pipeline * lost.tensor;
  std::vector<std::string> job = lost.job;
  if (lost.checkpoints)
    job = job + std::vector<std::string>{"--set", "checkpoint.every_steps=4", "--set",
                                         "checkpoint.async=false"};
  ScratchDir reference_run(lost.name + "-reference"), run(lost.name);
  const auto reference =
      run_process(tiny_launch(reference_run.path(), lost.nodes, kSteps, job), 180s, launch_env());
  INFO(reference.output);
  REQUIRE(reference.exit_code == 0);
  const auto reference_done = node_events(reference_run.path(), 0, "train_done");
  REQUIRE(reference_done.size() == 1);

  const auto result = run_process(
      tiny_launch(run.path(), lost.nodes, kSteps,
                  job + std::vector<std::string>{"--stop-grace", "2", "--set",
                                                 "cluster.max_restarts=0", "--set",
                                                 "elastic.rejoin_seconds=1", "--set",
                                                 "elastic.min_nodes=" +
                                                     std::to_string(lost.nodes - 1)} +
                      faults("{kind = \"" + lost.fault + "\", node = " +
                             std::to_string(killed) + ", step = 10" +
                             (lost.during_reduction ? ", during = \"reduction\"" : "") + "}")),
      180s, launch_env());
  INFO(result.output);
  CHECK_FALSE(result.timed_out);
  REQUIRE(result.exit_code == 0);
  if (lost.fault != "hang")
    CHECK_THAT(result.output, Contains("[launch] node " + std::to_string(killed) +
                                       " failed 1 time; the job goes on with " +
                                       std::to_string(lost.nodes - 1) + " node"));
  else
    CHECK_THAT(result.output, Contains("[launch] node(s) " + std::to_string(killed) +
                                       " still running 2 s after the job finished"));
  const int from_step = lost.from_memory ? 10 : lost.checkpoints ? 8 : 0;
  const std::string source = lost.from_memory ? lost.memory_source : lost.checkpoints ? "disk" : "start";
  std::string sha;
  for (int node = 0; node < killed; ++node) {
    INFO("node " << node);
    const auto lost_event = event_with(run.path(), node, "node_lost", "lost_node", killed);
    REQUIRE_FALSE(lost_event.empty());
    if (lost.fault == "hang")
      CHECK_THAT(string_field(lost_event, "reason"), Contains("heartbeat timeout"));
    const auto layouts = node_events(run.path(), node, "epoch_layout");
    REQUIRE(layouts.size() == 2);  // the whole world's, the survivors'
    const std::string& replanned = layouts[1];
    CHECK(number_field(replanned, "world_size") == lost.nodes - 1);
    CHECK(number_field(replanned, "data") == lost.data);
    CHECK(number_field(replanned, "pipeline") == lost.pipeline);
    CHECK(number_field(replanned, "tensor") == lost.tensor);
    const bool trains = node < trainers;
    CHECK(string_field(replanned, "role") == (trains ? "train" : "standby"));
    if (!trains) {
      CHECK(node_events(run.path(), node, "train_done").empty());
      const auto ended = node_events(run.path(), node, "standby_ended");
      REQUIRE(ended.size() == 1);
      CHECK_THAT(string_field(ended[0], "reason"), Contains("finished the job"));
      continue;
    }
    const auto recovered = node_events(run.path(), node, "recovered");
    REQUIRE(recovered.size() == 1);
    CHECK(number_field(recovered[0], "from_step") == from_step);
    CHECK(string_field(recovered[0], "source") == source);
    CHECK(number_field(recovered[0], "pipeline") == lost.pipeline);
    CHECK(number_field(recovered[0], "recovery_ms") < 10000);
    if (lost.from_memory) {
      const std::string resumed = event_with(run.path(), node, "resumed", "step", from_step);
      REQUIRE_FALSE(resumed.empty());
      CHECK(string_field(resumed, "source") == lost.memory_source);
      CHECK(node_events(run.path(), node, "recovery_without_checkpoint").empty());
    } else if (lost.checkpoints) {
      CHECK_FALSE(event_with(run.path(), node, "resumed", "step", from_step).empty());
    } else {
      CHECK(node_events(run.path(), node, "recovery_without_checkpoint").size() == 1);
    }
    const auto done = node_events(run.path(), node, "train_done");
    REQUIRE(done.size() == 1);
    CHECK(number_field(done[0], "step") == kSteps);
    if (sha.empty()) sha = string_field(done[0], "params_sha256");
    CHECK(string_field(done[0], "params_sha256") == sha);
  }
  const auto done = node_events(run.path(), 0, "train_done");
  REQUIRE(done.size() == 1);
  const double expected = number_field(reference_done[0], "val_loss");
  const double got = number_field(done[0], "val_loss");
  const double relative = std::abs(got - expected) / std::abs(expected);
  WARN(lost.name << ": val_loss " << got << " after the node loss, " << expected
                 << " without it: " << relative << " relative (tolerance " << kRelative << ")");
  CHECK(relative <= kRelative);
  if (lost.also_check) lost.also_check(run.path());
  require_no_node_left(run.path(), lost.nodes);
}

}  // namespace dseek::testing
