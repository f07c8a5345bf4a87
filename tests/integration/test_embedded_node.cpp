// The examples of a node embedded in another CAF application (apps/examples/embedded_*,
// actors/node/embedded_node.hpp) reach the parameters `dseek launch` reaches with the
// same config:
// - embedded_node_example: a one-node job, every event printed (and dseek-node too);
// - embedded_job_example: node 1 of a 2-node job whose node 0 is a standalone dseek-node
//   started by the test (its own coordinator port, a cluster secret in the environment),
//   paused, checkpointed while paused, resumed;
// - embedded_restart_example: the same 2-node job, the embedded node crashed by a fault
//   and started again by the host's supervisor, the job recovering as from a lost node.
// Every wait is bounded; no node process outlives its test.
#include <catch2/catch.hpp>

#include <filesystem>
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

// An example's command line for the tiny job: `example` and its `leading` arguments, then
// tiny_job()'s config, run dir and --set values with `extra` (dseek-node CONFIG RUN_DIR
// --set K=V ... becomes example [leading] CONFIG RUN_DIR K=V ...).
std::vector<std::string> tiny_example(const char* example_name, const fs::path& run_dir, int steps,
                                      const std::vector<std::string>& leading = {},
                                      const std::vector<std::string>& extra = {}) {
  const auto node = tiny_job(run_dir, steps, extra);
  REQUIRE(node.size() >= 5);
  REQUIRE(node[1] == "--config");
  REQUIRE(node[3] == "--run-dir");
  std::vector<std::string> example = {bin(example_name)};
  example.insert(example.end(), leading.begin(), leading.end());
  example.push_back(node[2]);
  example.push_back(node[4]);
  for (size_t i = 5; i + 1 < node.size(); i += 2) {
    REQUIRE(node[i] == "--set");
    example.push_back(node[i + 1]);
  }
  return example;
}

std::vector<std::string> tiny_example(const fs::path& run_dir, int steps) {
  return tiny_example("dseek_embedded_node_example", run_dir, steps);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One training thread per node, no evaluation but the last: two nodes share 2 cores.
const std::vector<std::string> kTwoNodeJob = {"--set", "train.threads=1", "--set",
                                              "train.eval_every=0"};
const std::vector<std::string> kSecret = {"DSEEK_CLUSTER_SECRET=embedded-example-secret"};

// Node `node_id` of a 2-node job whose coordinator (on node 0) listens on `port`.
std::vector<std::string> member(int port, int node_id) {
  return {"--set", "cluster.nodes=2", "--set", "cluster.coordinator=127.0.0.1:" + std::to_string(port),
          "--set", "cluster.node_id=" + std::to_string(node_id)};
}

}  // namespace

TEST_CASE("an application that embeds a node trains the tiny job to the parameters "
          "dseek launch and dseek-node reach", "[embed][integration]") {
  constexpr int steps = 12;
  ScratchDir embedded("embedded-node");
  const auto example = run_process(tiny_example(embedded.path(), steps), 120s);
  INFO(example.output);
  REQUIRE(example.exit_code == 0);
  // It printed the node's events as they came, its status, then the result.
  CHECK(example.output.find("event: node_started ") != std::string::npos);
  CHECK(example.output.find("event: train_done ") != std::string::npos);
  CHECK(example.output.find("event: node_stopping ") != std::string::npos);
  CHECK(example.output.find("result: exit code 0, " + std::to_string(steps) + " steps") !=
        std::string::npos);
  const std::string params = final_params_sha256(embedded.path(), 0, steps);
  REQUIRE(params.size() == 64);
  CHECK(example.output.find("params_sha256 " + params) != std::string::npos);
  // The result comes after the node's last event.
  CHECK(example.output.find("result: ") > example.output.find("event: node_stopping "));

  ScratchDir launched("embedded-node-launch");
  const auto launch = run_process(tiny_launch(launched.path(), 1, steps), 120s, launch_env());
  INFO(launch.output);
  REQUIRE(launch.exit_code == 0);
  CHECK(final_params_sha256(launched.path(), 0, steps) == params);

  ScratchDir standalone("embedded-node-standalone");
  const auto node = run_process(tiny_job(standalone.path(), steps), 120s);
  INFO(node.output);
  REQUIRE(node.exit_code == 0);
  CHECK(final_params_sha256(standalone.path(), 0, steps) == params);
}

TEST_CASE("an embedded node joins a job with a standalone dseek-node, pauses it, checkpoints "
          "it while paused and resumes it, and the job reaches the parameters of dseek launch",
          "[embed][integration]") {
  // Steps enough after PAUSE_AFTER for the pause to be agreed on a loaded machine.
  constexpr int steps = 40;
  constexpr int pause_after = 6;
  // Checkpoints every 5 steps, all kept: the one asked for stays on disk.
  const auto job = kTwoNodeJob + std::vector<std::string>{"--set", "checkpoint.every_steps=5",
                                                          "--set", "checkpoint.keep_last=100"};
  ScratchDir run("embedded-job");
  const int port = free_port();
  SpawnedProcess node0 = SpawnedProcess::start(tiny_job(run.path(), steps, job + member(port, 0)),
                                               (run.path() / "node0.log").string(), kSecret);
  const auto example = run_process(
      tiny_example("dseek_embedded_job_example", run.path(), steps, {std::to_string(pause_after)},
                   job + member(port, 1)),
      240s, kSecret);
  INFO(example.output);
  const auto node0_code = node0.wait_for(120s);
  REQUIRE(example.exit_code == 0);
  REQUIRE(node0_code == 0);

  // The pause held both nodes at one step boundary, after at least PAUSE_AFTER steps.
  const auto paused0 = node_events(run.path(), 0, "train_paused");
  const auto paused1 = node_events(run.path(), 1, "train_paused");
  REQUIRE(paused0.size() == 1);
  REQUIRE(paused1.size() == 1);
  const int at = static_cast<int>(number_field(paused1[0], "step"));
  CHECK(number_field(paused0[0], "step") == at);
  CHECK(at >= pause_after);
  CHECK(at < steps);
  CHECK(contains(example.output, "paused: the job holds after step " + std::to_string(at) + "\n"));
  // The checkpoint of that step, committed by the job's writer (rank 0: node 0) and
  // answered to the embedding program on node 1.
  CHECK(contains(example.output, "checkpoint: step " + std::to_string(at) + " committed\n"));
  for (int node : {0, 1}) {
    const auto asked = node_events(run.path(), node, "checkpoint_now");
    REQUIRE(asked.size() == 1);
    CHECK(number_field(asked[0], "step") == at);
    CHECK(contains(asked[0], "\"committed\":true"));
  }
  CHECK_FALSE(event_with(run.path(), 0, "checkpoint_committed", "step", at).empty());
  // Paused, nothing trained; then both nodes resumed at the same step.
  CHECK(contains(example.output, "status: paused at step " + std::to_string(at) + "\n"));
  CHECK(contains(example.output, "resumed\n"));
  for (int node : {0, 1}) {
    const auto resumed = node_events(run.path(), node, "train_resumed");
    REQUIRE(resumed.size() == 1);
    CHECK(number_field(resumed[0], "step") == at);
    CHECK(number_field(resumed[0], "paused_ms") >= 400);
  }
  // The job's end, as dseek launch reaches it with the same config.
  const std::string params = final_params_sha256(run.path(), 1, steps);
  REQUIRE(params.size() == 64);
  CHECK(final_params_sha256(run.path(), 0, steps) == params);
  CHECK(contains(example.output, "result: exit code 0, " + std::to_string(steps) + " steps"));
  CHECK(contains(example.output, "params_sha256 " + params));
  require_no_node_left(run.path(), 2);

  ScratchDir launched("embedded-job-launch");
  const auto launch = run_process(tiny_launch(launched.path(), 2, steps, job), 180s, launch_env());
  INFO(launch.output);
  REQUIRE(launch.exit_code == 0);
  CHECK(final_params_sha256(launched.path(), 0, steps) == params);
}

TEST_CASE("a host supervisor restarts an embedded node that crashed, and the job recovers as "
          "from a lost node and reaches the parameters of dseek launch with the same fault",
          "[embed][integration][faults]") {
  constexpr int steps = 20;
  const auto job = kTwoNodeJob + faults(R"({kind = "crash_actor", actor = "node", node = 1, step = 8})");
  ScratchDir run("embedded-restart");
  const int port = free_port();
  SpawnedProcess node0 = SpawnedProcess::start(tiny_job(run.path(), steps, job + member(port, 0)),
                                               (run.path() / "node0.log").string(), kSecret);
  const auto example = run_process(
      tiny_example("dseek_embedded_restart_example", run.path(), steps, {}, job + member(port, 1)),
      240s, kSecret);
  INFO(example.output);
  const auto node0_code = node0.wait_for(120s);
  REQUIRE(example.exit_code == 0);
  REQUIRE(node0_code == 0);

  // The crash, the host supervisor's restart, the second incarnation's result.
  CHECK(contains(example.output, "event: fault_injected "));
  CHECK(contains(example.output, "supervisor: dseek-node restarted ("));
  CHECK(contains(example.output, "restarts 1\n"));
  CHECK(contains(example.output, "result: exit code 0, " + std::to_string(steps) + " steps"));
  CHECK(node_events(run.path(), 1, "node_started").size() == 2);
  const auto crash = fault_of(run.path(), 1, "crash_actor");
  REQUIRE_FALSE(crash.empty());
  CHECK(string_field(crash, "actor") == "node");
  // To node 0 it was a lost node that came back: the job recovered and trained on.
  CHECK_FALSE(node_events(run.path(), 0, "node_lost").empty());
  CHECK_FALSE(node_events(run.path(), 0, "recovered").empty());
  const std::string params = final_params_sha256(run.path(), 0, steps);
  REQUIRE(params.size() == 64);
  CHECK(contains(example.output, "params_sha256 " + params));
  require_no_node_left(run.path(), 2);

  ScratchDir launched("embedded-restart-launch");
  const auto launch = run_process(tiny_launch(launched.path(), 2, steps, job), 180s, launch_env());
  INFO(launch.output);
  REQUIRE(launch.exit_code == 0);
  CHECK(final_params_sha256(launched.path(), 0, steps) == params);
}
