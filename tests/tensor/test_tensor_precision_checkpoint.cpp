// fp8 training state in tensor-parallel checkpoints (train/state/checkpointing.hpp,
// train/state/stage_precision_state.cpp), through `dseek launch --nodes 2` with
// parallel.tensor = 2: the checkpoint keeps the loss scaler's state and each tensor
// rank's own fp8 amax histories and scales (a rank quantizes its own weight shard, so
// its amaxes differ from the other's), one copy per rank.
//
// The loss scale starts at 2^24 with a window of 2 (as tests/dp/test_mixed_precision.cpp
// does): steps are skipped on both sides of step 5, where the run is cut. Same layout
// (T = 2 -> T = 2): each rank restores its own copy and the resumed half must report the
// uninterrupted run's losses, skips and loss scales bitwise and end with its
// params_sha256. One node (T = 1) resumes the cautious merge of both ranks' copies
// (largest amax, smallest scale) and says "merged"; it trains on to a finite loss.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/step_precision.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {
constexpr int kSteps = 12;
constexpr size_t kCut = 5;
const std::vector<std::string> kJob = {
    "--set", "train.micro_batch_size=4", "--set", "train.threads=1", "--set", "train.eval_every=0",
    "--set", "train.precision=\"fp8\"", "--set", "train.loss_scale_init=16777216",
    "--set", "train.loss_scale_window=2"};
const std::vector<std::string> kTensor = kJob + std::vector<std::string>{"--set", "parallel.tensor=2"};

void launch_ok(const fs::path& run, int nodes, const std::vector<std::string>& extra) {
  const auto result = run_process(tiny_launch(run, nodes, kSteps, extra), 240s, launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
}

std::vector<double> losses(const fs::path& run, int node) {
  std::vector<double> values;
  for (const auto& step : node_events(run, node, "step")) values.push_back(number_field(step, "loss"));
  return values;
}

std::string sha_of(const fs::path& run, int node) {
  const auto done = node_events(run, node, "train_done");
  REQUIRE(done.size() == 1);
  return string_field(done[0], "params_sha256");
}

// Runs `job` on `nodes` nodes up to step kCut with a checkpoint there; returns its path.
fs::path checkpoint_at_cut(const fs::path& run, int nodes, const std::vector<std::string>& job) {
  launch_ok(run, nodes,
            job + std::vector<std::string>{"--set", "checkpoint.every_steps=5", "--set",
                                           "train.stop_after_steps=5"});
  const fs::path checkpoint = run / "checkpoints/step-00000005";
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));
  return checkpoint;
}

// Every node of `resumed` restored its own copy and went on as the uninterrupted run
// `straight` did after the cut: the same losses, skips and loss scales, bit for bit, and
// its final parameters.
void check_resumed_bitwise(const fs::path& resumed, const fs::path& straight, int nodes) {
  const StepPrecision rest = steps_from(step_precision(node_events(straight, 0, "step")), kCut);
  const auto all_losses = losses(straight, 0);
  const std::vector<double> rest_losses(all_losses.begin() + kCut, all_losses.end());
  for (int node = 0; node < nodes; ++node) {
    INFO("node " << node);
    const auto events = node_events(resumed, node, "resumed");
    REQUIRE(events.size() == 1);
    CHECK(string_field(events[0], "precision_state") == "restored");
    CHECK(losses(resumed, node) == rest_losses);
    const StepPrecision resumed_steps = step_precision(node_events(resumed, node, "step"));
    CHECK(resumed_steps.skips == rest.skips);
    CHECK(resumed_steps.scales == rest.scales);
    CHECK(sha_of(resumed, node) == sha_of(straight, 0));
  }
}

std::vector<std::string> resume_from(const fs::path& checkpoint) {
  return {"--set", "checkpoint.resume=\"" + checkpoint.string() + "\""};
}
}  // namespace

TEST_CASE("tensor fp8 checkpoints: T=2 cut at step 5 of 12 and resumed continues the "
          "uninterrupted run bit for bit, and one node resumes the merged amax histories",
          "[tp][precision][checkpoint]") {
  ScratchDir straight("tp-fp8-ckpt-straight"), first("tp-fp8-ckpt-first"),
      second("tp-fp8-ckpt-second"), down("tp-fp8-ckpt-to-1");
  launch_ok(straight.path(), 2, kTensor);
  const StepPrecision whole = step_precision(node_events(straight.path(), 0, "step"));
  WARN("fp8 T=2: skipped steps " << whole.skips << ", cut after step " << kCut);
  REQUIRE(whole.skips.size() == kSteps);
  REQUIRE(whole.skips.substr(0, kCut).find('1') != std::string::npos);
  REQUIRE(whole.skips.substr(kCut).find('1') != std::string::npos);
  CHECK(step_precision(node_events(straight.path(), 1, "step")).skips == whole.skips);

  const fs::path checkpoint = checkpoint_at_cut(first.path(), 2, kTensor);
  // The tiny job's 2 layers x 4 matmuls x 3 operands, one copy per tensor rank.
  const auto inspect = run_process({bin("dseek"), "ckpt", "inspect", checkpoint.string()}, 60s);
  INFO(inspect.output);
  CHECK(inspect.exit_code == 0);
  CHECK_THAT(inspect.output,
             Catch::Matchers::Contains("precision: fp8") &&
                 Catch::Matchers::Contains("fp8 scaling of 24 operands x 2 copies (data 1 x tensor 2"));

  const std::vector<std::string> resume = resume_from(checkpoint);
  launch_ok(second.path(), 2, kTensor + resume);
  check_resumed_bitwise(second.path(), straight.path(), 2);

  launch_ok(down.path(), 1, kJob + resume);
  const auto resumed = node_events(down.path(), 0, "resumed");
  REQUIRE(resumed.size() == 1);
  CHECK(number_field(resumed[0], "written_tensor") == 2);
  CHECK(string_field(resumed[0], "precision_state") == "merged");
  const auto single = losses(down.path(), 0);
  const auto all_losses = losses(straight.path(), 0);
  REQUIRE(single.size() == all_losses.size() - kCut);
  WARN("fp8 T=2 checkpoint resumed by one node (merged): skips "
       << step_precision(node_events(down.path(), 0, "step")).skips << ", last loss "
       << single.back() << " (T=2: " << all_losses.back() << ")");
  CHECK(std::isfinite(single.back()));
  CHECK(single.back() < all_losses.front());
}

// Data x tensor (D = 2 replicas of a T = 2 group, no ZeRO): a copy per (replica, tensor
// rank), for which every replica takes part in the snapshot
// (PipelineStageTrainer::fp8_state_per_replica); the same layout resumes bitwise.
TEST_CASE("tensor fp8 checkpoints: D=2 x T=2 keeps each replica's and rank's amax histories "
          "and resumes bit for bit", "[tp][precision][checkpoint][dp]") {
  const std::vector<std::string> grid =
      kTensor + std::vector<std::string>{"--set", "parallel.data=2", "--set",
                                         "train.micro_batch_size=2"};
  ScratchDir straight("tp-dp-fp8-ckpt-straight"), first("tp-dp-fp8-ckpt-first"),
      second("tp-dp-fp8-ckpt-second");
  launch_ok(straight.path(), 4, grid);
  const StepPrecision whole = step_precision(node_events(straight.path(), 0, "step"));
  WARN("fp8 D=2 x T=2: skipped steps " << whole.skips);
  REQUIRE(whole.skips.size() == kSteps);
  const fs::path checkpoint = checkpoint_at_cut(first.path(), 4, grid);
  const auto inspect = run_process({bin("dseek"), "ckpt", "inspect", checkpoint.string()}, 60s);
  INFO(inspect.output);
  CHECK_THAT(inspect.output, Catch::Matchers::Contains("x 4 copies (data 2 x tensor 2"));
  launch_ok(second.path(), 4, grid + resume_from(checkpoint));
  check_resumed_bitwise(second.path(), straight.path(), 4);
}
