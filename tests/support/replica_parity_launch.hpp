// The launch check shared by the paths that run replicas of a pipeline or of a
// tensor-parallel group (tests/pipeline/test_pipeline_launch.cpp,
// tests/tensor/test_tensor_launch.cpp): `dseek launch --nodes 4` with parallel.data = 2
// replicas of a 2-rank group against `dseek launch --nodes 1` of the same config
// (the same global batch, the same micro-batches).
//
// What it checks: the layout printed and logged at start, node k being world rank k
// with the coordinates of runtime/train/layout/parallel_groups.hpp; every node reporting the
// same loss bits at every step (the loss is summed over the group and the replicas in a
// fixed order); every node ending with the same params_sha256 (the replicas stay
// identical without ever comparing parameters: their summed gradients are the same
// bits); and the losses of every step and the final val_loss within `relative` of the
// single node's. Not bitwise: each replica accumulates its half of the micro-batches
// and the two halves are then added, where the single node adds all of them into one
// buffer in order (float32 rounding, ~1e-7 relative per gradient element, that AdamW
// carries into the following steps); the group's own splits add their rounding on top.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace dseek::testing {

struct ReplicaParityJob {
  std::string name;                 // scratch directories' prefix
  // --set arguments of both runs: by default micro-batches of 2, one thread each, no
  // periodic evaluation (the final val_loss is still compared).
  std::vector<std::string> shared = {"--set", "train.micro_batch_size=2", "--set",
                                     "train.threads=1", "--set", "train.eval_every=0"};
  std::vector<std::string> group;   // --set arguments of the group (its size 2, data 2)
  std::string layout_line;          // printed at start
  int pipeline = 1, tensor = 1;     // the group's shape
  int steps = 8;
  double relative = 1e-5;
};

inline std::vector<double> step_losses(const std::filesystem::path& run, int node) {
  std::vector<double> values;
  for (const auto& step : node_events(run, node, "step")) values.push_back(number_field(step, "loss"));
  return values;
}

inline void check_replicas_match_single_node(const ReplicaParityJob& job) {
  using namespace std::chrono_literals;
  using Catch::Matchers::Contains;
  constexpr int kNodes = 4;
  ScratchDir single(job.name + "-single"), group(job.name);
  const auto reference =
      run_process(tiny_launch(single.path(), 1, job.steps, job.shared), 180s, launch_env());
  INFO(reference.output);
  REQUIRE(reference.exit_code == 0);
  const auto result = run_process(
      tiny_launch(group.path(), kNodes, job.steps, job.shared + job.group), 300s, launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Contains(job.layout_line));
  for (int node = 0; node < kNodes; ++node) {
    INFO("node " << node);
    const auto layout = node_events(group.path(), node, "parallel_layout");
    REQUIRE(layout.size() == 1);
    CHECK(number_field(layout[0], "rank") == node);
    CHECK(number_field(layout[0], "replica") == node / (job.pipeline * job.tensor));
    CHECK(number_field(layout[0], "stage") == (node / job.tensor) % job.pipeline);
    CHECK(number_field(layout[0], "tensor_rank") == node % job.tensor);
  }

  const auto expected = step_losses(single.path(), 0);
  REQUIRE(static_cast<int>(expected.size()) == job.steps);
  const auto node0 = step_losses(group.path(), 0);
  double worst = 0.0;
  for (int node = 0; node < kNodes; ++node) {
    const auto losses = step_losses(group.path(), node);
    REQUIRE(losses.size() == expected.size());
    for (size_t s = 0; s < expected.size(); ++s) {
      INFO("node " << node << " step " << s + 1 << ": single " << expected[s] << ", group "
                   << losses[s]);
      CHECK(losses[s] == node0[s]);
      const double difference = std::abs(losses[s] - expected[s]) / std::abs(expected[s]);
      worst = std::max(worst, difference);
      CHECK(difference <= job.relative);
    }
  }
  const auto done_single = node_events(single.path(), 0, "train_done");
  REQUIRE(done_single.size() == 1);
  const double val_single = number_field(done_single[0], "val_loss");
  std::string sha;
  double val_group = 0.0;
  for (int node = 0; node < kNodes; ++node) {
    const auto done = node_events(group.path(), node, "train_done");
    REQUIRE(done.size() == 1);
    CHECK(number_field(done[0], "step") == job.steps);
    if (node == 0) {
      sha = string_field(done[0], "params_sha256");
      val_group = number_field(done[0], "val_loss");
    }
    CHECK(string_field(done[0], "params_sha256") == sha);
    CHECK(number_field(done[0], "val_loss") == val_group);
  }
  const double val_difference = std::abs(val_group - val_single) / std::abs(val_single);
  // The measured differences, for the figures quoted in the tests' comments.
  WARN(job.name << ": worst step loss difference " << worst << " relative, val_loss " << val_group
                << " vs " << val_single << " (" << val_difference << " relative)");
  CHECK(val_difference <= job.relative);
}

}  // namespace dseek::testing
