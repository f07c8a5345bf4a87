// A `slow` fault in the fixed-world jobs (pipeline stages, tensor-parallel groups): from
// its step on, the slow node sleeps as each step starts (runtime/train/pipeline/fixed_world_steps.cpp
// hands the node's fault hook no gradients there), so its peer, which needs its
// activations, gradients or all-reduce contributions within the step, waits for it:
// the peer's step time grows by about the sleep while the slow node's own does not, and
// nothing else changes (the same parameters as the fault-free run).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kSteps = 10;
constexpr int kSlowFrom = 4;   // the fault's step (0-based): the 5th step event on
constexpr double kSleepMs = 300.0;

std::vector<double> step_ms(const std::filesystem::path& run_dir, int node) {
  std::vector<double> ms;
  for (const auto& line : node_events(run_dir, node, "step")) ms.push_back(number_field(line, "step_ms"));
  return ms;
}

double median_of(std::vector<double> values) {
  REQUIRE_FALSE(values.empty());
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Runs the 2-node job fault-free and with node `slow_node` slowed; checks the peer's
// step times and the parameters.
void check_slow_node(const char* name, int slow_node, const std::vector<std::string>& layout) {
  std::vector<std::string> settings = {"--set", "train.threads=1", "--set", "train.eval_every=0"};
  settings.insert(settings.end(), layout.begin(), layout.end());
  ScratchDir reference_run(std::string(name) + "-reference"), run(name);
  const auto reference = run_process(tiny_launch(reference_run.path(), 2, kSteps, settings), 120s, launch_env());
  INFO(reference.output);
  REQUIRE(reference.exit_code == 0);

  std::vector<std::string> faulty = settings;
  faulty.insert(faulty.end(), {"--set", "faults=[{kind = \"slow\", node = " + std::to_string(slow_node) +
                                            ", step = " + std::to_string(kSlowFrom) + ", ms = 300}]"});
  const auto result = run_process(tiny_launch(run.path(), 2, kSteps, faulty), 120s, launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const auto injected = node_events(run.path(), slow_node, "fault_injected");
  REQUIRE(injected.size() == 1);
  CHECK(string_field(injected[0], "kind") == "slow");
  CHECK(number_field(injected[0], "ms") == kSleepMs);

  const int peer = 1 - slow_node;
  const auto peer_ms = step_ms(run.path(), peer);
  const auto slow_ms = step_ms(run.path(), slow_node);
  REQUIRE(peer_ms.size() == static_cast<size_t>(kSteps));
  REQUIRE(slow_ms.size() == static_cast<size_t>(kSteps));
  const std::vector<double> peer_before(peer_ms.begin(), peer_ms.begin() + kSlowFrom);
  const std::vector<double> peer_after(peer_ms.begin() + kSlowFrom, peer_ms.end());
  const std::vector<double> slow_before(slow_ms.begin(), slow_ms.begin() + kSlowFrom);
  const std::vector<double> slow_after(slow_ms.begin() + kSlowFrom, slow_ms.end());
  WARN(name << ": peer step ms before " << median_of(peer_before) << ", after " << median_of(peer_after)
            << "; the slow node's own before " << median_of(slow_before) << ", after " << median_of(slow_after));
  // Every step of the peer from the fault on waits out most of the sleep; the slow
  // node's own step (timed after its sleep) does not grow by it. Differences of
  // medians, not absolute times: a loaded machine makes every step slower.
  CHECK(*std::min_element(peer_after.begin(), peer_after.end()) >= 0.75 * kSleepMs);
  CHECK(median_of(peer_after) - median_of(peer_before) >= 0.5 * kSleepMs);
  CHECK(median_of(slow_after) - median_of(slow_before) < 0.5 * kSleepMs);

  const auto expected = node_events(reference_run.path(), 0, "train_done");
  REQUIRE(expected.size() == 1);
  for (int node = 0; node < 2; ++node) {
    INFO("node " << node);
    const auto done = node_events(run.path(), node, "train_done");
    REQUIRE(done.size() == 1);
    CHECK(string_field(done[0], "params_sha256") == string_field(expected[0], "params_sha256"));
  }
  require_no_node_left(run.path(), 2);
}

}  // namespace

TEST_CASE("pipeline: a slow last stage makes the first one wait in every step, and changes nothing else",
          "[pp][launch][faults]") {
  check_slow_node("pp-slow-node", 1,
                  {"--set", "parallel.pipeline=2", "--set", "train.micro_batch_size=4", "--set",
                   "parallel.schedule=\"gpipe\""});
}

TEST_CASE("tensor parallel: a slow rank makes its group wait in every step, and changes nothing else",
          "[pp][tp][launch][faults]") {
  check_slow_node("tp-slow-node", 0, {"--set", "parallel.tensor=2"});
}
