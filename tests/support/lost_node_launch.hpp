// The launch check shared by the training paths that cannot lose a node and go on
// (tests/pipeline/test_pipeline_launch.cpp, tests/tensor/test_tensor_launch.cpp):
// `dseek launch --nodes N` (2, or 4 for replicas) whose last node is killed at step 3
// fails the job at once, with
// no restart, naming the recovery that is missing ("recovery of <jobs> jobs is not
// written yet") in its output and in node 0's training_interrupted event.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace dseek::testing {

// `job`: the --set arguments of the path's job; `jobs`: "pipeline-parallel" etc.
inline void check_lost_node_fails_at_once(const std::string& scratch_name,
                                          const std::vector<std::string>& job,
                                          const std::string& jobs, int nodes = 2) {
  using namespace std::chrono_literals;
  using Catch::Matchers::Contains;
  ScratchDir run(scratch_name);
  const auto start = std::chrono::steady_clock::now();
  const auto result = run_process(
      tiny_launch(run.path(), nodes, 400,
                  job + faults("{kind = \"kill\", node = " + std::to_string(nodes - 1) +
                               ", step = 3}")),
      120s, launch_env());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  INFO(result.output);
  CHECK_FALSE(result.timed_out);
  CHECK(result.exit_code != 0);
  CHECK(elapsed < 60s);
  const std::string missing = "recovery of " + jobs + " jobs is not written yet";
  CHECK_THAT(result.output, Contains(missing));
  CHECK_THAT(result.output, Contains("0 restarts"));
  const auto interrupted = node_events(run.path(), 0, "training_interrupted");
  REQUIRE(interrupted.size() == 1);
  CHECK_THAT(interrupted[0], Contains(missing));
}

}  // namespace dseek::testing
