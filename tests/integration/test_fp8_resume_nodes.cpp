// An fp8 job of 2 dseek-node processes (`dseek launch --nodes 2`) whose node 0 is killed
// (kill -9 at a step, no restarts: the job ends) and which is then resumed from its last
// checkpoint continues the run that was never killed bit for bit: the same skipped
// steps, loss scales and final params_sha256. The checkpoint goes through the node's
// checkpoint_writer actor and keeps the loss scale, its good-step count and both
// replicas' fp8 amax histories (runtime/checkpoint/precision_state.hpp); 2^24 as the
// initial loss scale forces skipped steps early, a window of 2 brings them back later.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "runtime/checkpoint/store.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kFp8Job = {
    "--set", "train.threads=1", "--set", "train.eval_every=0",
    "--set", "train.precision=\"fp8\"", "--set", "train.loss_scale_init=16777216",
    "--set", "train.loss_scale_window=2", "--set", "checkpoint.every_steps=3"};
constexpr int kSteps = 16;

struct StepRecord {
  bool skipped = false;
  double loss_scale = 0;
  double loss = 0;
};

// Node `node`'s steps; a resumed run appends to the same events.jsonl, so the last
// report of a step wins.
std::map<int, StepRecord> steps_of(const fs::path& run, int node) {
  std::map<int, StepRecord> by_step;
  for (const auto& line : node_events(run, node, "step")) {
    StepRecord record;
    record.skipped = line.find("\"skipped\":true") != std::string::npos;
    record.loss_scale = number_field(line, "loss_scale");
    record.loss = number_field(line, "loss");
    by_step[static_cast<int>(number_field(line, "step"))] = record;
  }
  return by_step;
}

}  // namespace

TEST_CASE("an fp8 job killed and resumed from its checkpoint continues bit for bit",
          "[checkpoint][nodes][faults][precision]") {
  ScratchDir straight("fp8-nodes-straight"), run("fp8-nodes-kill");
  auto reference = run_process(tiny_launch(straight.path(), 2, kSteps, kFp8Job), 120s, launch_env());
  INFO(reference.output);
  REQUIRE(reference.exit_code == 0);
  const auto expected = steps_of(straight.path(), 0);
  REQUIRE(expected.size() == static_cast<size_t>(kSteps));

  auto killed = tiny_launch(run.path(), 2, kSteps,
                            kFp8Job + faults(R"({kind = "kill", node = 0, step = 8})") +
                                std::vector<std::string>{"--set", "cluster.max_restarts=0"});
  killed.insert(killed.begin() + 2, {"--stop-grace", "1"});
  auto first = run_process(killed, 120s, launch_env());
  INFO(first.output);
  REQUIRE(first.exit_code != 0);
  const auto committed = dseek::checkpoint::list_committed(run / "checkpoints");
  REQUIRE_FALSE(committed.empty());
  const int64_t k = committed.back().step;
  auto inspect = run_process({bin("dseek"), "ckpt", "inspect", committed.back().path.string()}, 60s);
  INFO(inspect.output);
  CHECK_THAT(inspect.output, Contains("precision: fp8") && Contains("x 2 replica(s)"));
  // The overflows of the forced start and of the later doubling, on both sides of k.
  std::string skips;
  for (const auto& [step, record] : expected) skips += record.skipped ? '1' : '0';
  WARN("fp8 on 2 nodes: skips " << skips << ", resumed from step " << k);
  REQUIRE(k > 0);
  CHECK(skips.substr(0, static_cast<size_t>(k)).find('1') != std::string::npos);
  CHECK(skips.substr(static_cast<size_t>(k)).find('1') != std::string::npos);

  auto resumed = run_process(tiny_launch(run.path(), 2, kSteps,
                                         kFp8Job + std::vector<std::string>{
                                                       "--set", "checkpoint.resume=\"latest\""}),
                             120s, launch_env());
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  const std::string expected_sha =
      string_field(node_events(straight.path(), 0, "train_done").at(0), "params_sha256");
  for (int node : {0, 1}) {
    INFO("node " << node);
    const auto resumed_events = node_events(run.path(), node, "resumed");
    REQUIRE(resumed_events.size() == 1);
    CHECK(number_field(resumed_events[0], "step") == k);
    CHECK(string_field(resumed_events[0], "precision_state") == "restored");
    const auto got = steps_of(run.path(), node);
    REQUIRE(got.size() == static_cast<size_t>(kSteps));
    for (int step = static_cast<int>(k); step < kSteps; ++step) {
      INFO("step " << step);
      CHECK(got.at(step).skipped == expected.at(step).skipped);
      CHECK(got.at(step).loss_scale == expected.at(step).loss_scale);
      CHECK(got.at(step).loss == expected.at(step).loss);
    }
    const auto done = node_events(run.path(), node, "train_done");
    REQUIRE_FALSE(done.empty());
    CHECK(string_field(done.back(), "params_sha256") == expected_sha);
  }
  require_no_node_left(run.path(), 2);
}
