// The loss of the coordinator's own node in pipeline jobs: node 0 runs the coordinator
// and a stage. Killed at step 10, `dseek launch` restarts it with a new coordinator on
// the same port, the other nodes' agents join it, the world is rebuilt with the same
// layout and every stage resumes from the newest checkpoint (step 8), or, where a replica
// of node 0's stage survives (D = 2 x P = 2), from memory at step 10 (node 0 from a
// replica's). The same layout resumed from its own state computes the fault-free run's bits
// (test_pipeline_checkpoint.cpp), so every node must end with the fault-free run's
// params_sha256. Three layouts: P = 2, D = 2 x P = 2 and P = 2 x T = 2.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

struct CoordinatorLossJob {
  const char* name;
  int nodes;
  std::vector<std::string> layout;  // --set arguments
  // Replicas of node 0's stage survive: node 0 gets its state from one (source "peer"),
  // the others resume from their memory at step 10, and no checkpoint is read.
  bool from_memory = false;
};

void check_coordinator_loss(const CoordinatorLossJob& job) {
  constexpr int kSteps = 30;
  std::vector<std::string> settings = {"--set", "parallel.pipeline=2", "--set", "train.threads=1",
                                       "--set", "train.eval_every=0", "--set", "checkpoint.every_steps=4",
                                       "--set", "checkpoint.async=false"};
  settings.insert(settings.end(), job.layout.begin(), job.layout.end());
  ScratchDir reference_run(std::string(job.name) + "-reference"), run(job.name);
  const auto reference = run_process(tiny_launch(reference_run.path(), job.nodes, kSteps, settings), 180s, launch_env());
  INFO(reference.output);
  REQUIRE(reference.exit_code == 0);
  const auto reference_done = node_events(reference_run.path(), 0, "train_done");
  REQUIRE(reference_done.size() == 1);

  std::vector<std::string> faulty = settings;
  faulty.insert(faulty.end(), {"--set", R"(faults=[{kind = "kill", node = 0, step = 10}])"});
  const auto result = run_process(tiny_launch(run.path(), job.nodes, kSteps, faulty), 180s, launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Contains("[launch] node 0 killed by signal SIGKILL; restarting (1/"));
  CHECK_THAT(result.output, Contains("[launch] job done: " + std::to_string(job.nodes) + " nodes, 1 restart, exit 0"));
  const auto started = node_events(run.path(), 0, "node_started");
  REQUIRE(started.size() == 2);
  CHECK(number_field(started[1], "incarnation") == 1);
  for (int node = 0; node < job.nodes; ++node) {
    INFO("node " << node);
    const auto recovered = node_events(run.path(), node, "recovered");
    REQUIRE(recovered.size() == 1);
    CHECK(string_field(recovered[0], "source") ==
          (!job.from_memory ? "disk" : node == 0 ? "peer" : "memory"));
    CHECK(number_field(recovered[0], "from_step") == (job.from_memory ? 10 : 8));
    CHECK(number_field(recovered[0], "pipeline") == 2);
    const auto done = node_events(run.path(), node, "train_done");
    REQUIRE(done.size() == 1);
    CHECK(number_field(done[0], "step") == kSteps);
    CHECK(string_field(done[0], "params_sha256") == string_field(reference_done[0], "params_sha256"));
  }
  require_no_node_left(run.path(), job.nodes);
}

}  // namespace

TEST_CASE("pipeline: a killed coordinator node comes back and the pipeline resumes with the fault-free run's bits",
          "[pp][launch][faults]") {
  check_coordinator_loss({"pp-coordinator-kill", 2, {"--set", "train.micro_batch_size=4"}});
}

TEST_CASE("pipeline: a killed coordinator node of a replicated pipeline comes back and both replicas resume",
          "[pp][launch][dp][faults]") {
  check_coordinator_loss(
      {"pp-dp-coordinator-kill", 4, {"--set", "parallel.data=2", "--set", "train.micro_batch_size=2"}, true});
}

TEST_CASE("pipeline: a killed coordinator node of a pipeline of tensor groups comes back and every rank resumes",
          "[pp][launch][tp][faults]") {
  check_coordinator_loss({"pp-tp-coordinator-kill",
                          4,
                          {"--set", "parallel.tensor=2", "--set", "train.micro_batch_size=2", "--set",
                           "parallel.schedule=\"1f1b\""}});
}
