// fp8 training state in pipeline checkpoints (train/state/checkpointing.hpp,
// train/state/stage_precision_state.cpp): the checkpoint keeps the loss scaler's
// scale and good-step count and every layer's fp8 amax histories and scales, assembled by
// layer index from the stages that run them, so a resume continues the run it resumes.
//
// The loss scale starts at 2^24, which overflows E5M2 in the first steps, and a window
// of 2 doubles it back into overflow later (as the data-parallel test does,
// tests/dp/test_mixed_precision.cpp): steps are skipped on both sides of step 5, where
// the run is cut. A resume that restarted the scale at 2^24 would skip other steps (their
// batches never learned), and one from empty amax histories would quantize its first
// steps with other scales: either changes the skip pattern, the scales or the bits.
//
// Same layout (P = 2 -> P = 2): deterministic for a fixed layout, so the resumed half must
// report the uninterrupted run's losses, skips and loss scales bitwise and end with its
// params_sha256. Another layout (P = 1, and P = 2 with interleaved chunks: stage 0 then
// runs layers 0 and 2) takes each layer's state wherever it was written ("restored": the
// same data and tensor sizes); it differs from the pipeline by summation order only, so
// its losses stay within the fp8 pipeline bound of test_pipeline_precision.cpp (1e-4
// relative) and it skips the same steps with the same scales. A layer whose state were
// missing would get scale 0 from the assembly and its loss would not be finite.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/pp_job.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/step_precision.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace dseek::testing::pp;
namespace fs = std::filesystem;

namespace {

constexpr size_t kCut = 5;
constexpr double kOtherLayoutBound = 1e-4;  // relative, test_pipeline_precision.cpp's fp8 bound

const std::vector<std::string> kFp8 = {"train.precision=\"fp8\"", "train.loss_scale_init=16777216",
                                       "train.loss_scale_window=2", "train.steps=12"};
const std::vector<std::string> kFirstPart = {"checkpoint.every_steps=5", "train.stop_after_steps=5"};

JobRun run_ok(int stages, const fs::path& dir, const std::vector<std::string>& extra) {
  JobRun run = run_job(stages, dir, small_settings(kFp8 + extra), std::chrono::seconds(240));
  INFO(run.report);
  REQUIRE(run.ok);
  REQUIRE(static_cast<int>(run.stages.size()) == stages);
  return run;
}

}  // namespace

TEST_CASE("pipeline fp8 checkpoints: P=2 cut at step 5 of 12 and resumed continues the "
          "uninterrupted run bit for bit, and P=1 or another split restores it",
          "[pp][precision][checkpoint]") {
  ScratchDir straight_dir("pp-fp8-ckpt-straight"), first_dir("pp-fp8-ckpt-first"),
      second_dir("pp-fp8-ckpt-second"), single_dir("pp-fp8-ckpt-to-1"),
      split_dir("pp-fp8-ckpt-interleaved");
  const JobRun straight = run_ok(2, straight_dir.path(), {});
  const StepPrecision whole = step_precision(straight.stages[0].lines);
  WARN("fp8 P=2: skipped steps " << whole.skips << ", cut after step " << kCut);
  REQUIRE(whole.skips.size() == 12);
  REQUIRE(whole.skips.substr(0, kCut).find('1') != std::string::npos);
  REQUIRE(whole.skips.substr(kCut).find('1') != std::string::npos);
  const StepPrecision rest = steps_from(whole, kCut);
  const std::vector<double> rest_losses(straight.stages[0].losses.begin() + kCut,
                                        straight.stages[0].losses.end());

  run_ok(2, first_dir.path(), kFirstPart);
  const fs::path checkpoint = first_dir.path() / "checkpoints/step-00000005";
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));
  // The manifest keeps it: 4 layers x 4 matmuls x 3 operands, one copy (one replica).
  const auto inspect = run_process({bin("dseek"), "ckpt", "inspect", checkpoint.string()},
                                   std::chrono::seconds(60));
  INFO(inspect.output);
  CHECK(inspect.exit_code == 0);
  CHECK_THAT(inspect.output, Catch::Matchers::Contains("precision: fp8") &&
                                 Catch::Matchers::Contains("fp8 scaling of 48 operands x 1 replica(s)"));

  // P = 2 -> P = 2: bitwise.
  const JobRun second = run_ok(2, second_dir.path(), resume_from(checkpoint));
  for (int s = 0; s < 2; ++s) {
    INFO("stage " << s);
    const auto& stage = second.stages[static_cast<size_t>(s)];
    CHECK(string_field(resumed_event(second, s), "precision_state") == "restored");
    CHECK(stage.losses == rest_losses);
    CHECK(step_precision(stage.lines).skips == rest.skips);
    CHECK(step_precision(stage.lines).scales == rest.scales);
    CHECK(stage.params_sha256 == straight.stages[0].params_sha256);
  }

  // P = 1, and P = 2 with interleaved chunks (ranges of one layer, two per stage).
  struct Layout {
    const ScratchDir& dir;
    int stages;
    std::vector<std::string> settings;
  };
  const std::vector<std::string> interleaved = {"parallel.schedule=\"interleaved\"",
                                                "parallel.virtual_stages=2"};
  for (const Layout& layout : {Layout{single_dir, 1, {}}, Layout{split_dir, 2, interleaved}}) {
    INFO(layout.stages << " stage(s) " << (layout.settings.empty() ? "" : "interleaved"));
    const JobRun other = run_ok(layout.stages, layout.dir.path(),
                                layout.settings + resume_from(checkpoint));
    const std::string resumed = resumed_event(other, 0);
    CHECK(number_field(resumed, "written_pipeline") == 2);
    CHECK(string_field(resumed, "precision_state") == "restored");
    const double difference = max_relative_difference(other.stages[0].losses, rest_losses);
    WARN("fp8 P=2 checkpoint resumed on " << layout.stages << " stage(s)"
         << (layout.settings.empty() ? "" : " interleaved") << ": max relative loss difference "
         << difference << ", skips " << step_precision(other.stages[0].lines).skips);
    CHECK(difference <= kOtherLayoutBound);
    CHECK(step_precision(other.stages[0].lines).skips == rest.skips);
    CHECK(step_precision(other.stages[0].lines).scales == rest.scales);
  }
}

// Data x pipeline (D = 2 replicas of P = 2 stages): each replica quantizes its own slice
// of the batch, so the checkpoint keeps a copy per replica and every replica takes part
// in the snapshot (PipelineStageTrainer::fp8_state_per_replica). Resumed on the same
// layout each replica restores its own: bitwise, as above. Resumed on one replica
// (P = 2) the copies are merged and the run says so.
TEST_CASE("pipeline fp8 checkpoints: D=2 x P=2 keeps each replica's amax histories and "
          "resumes bit for bit, and one replica resumes them merged",
          "[pp][precision][checkpoint][dp]") {
  ScratchDir straight_dir("pxd-fp8-ckpt-straight"), first_dir("pxd-fp8-ckpt-first"),
      second_dir("pxd-fp8-ckpt-second"), one_dir("pxd-fp8-ckpt-to-one-replica");
  auto run_replicated = [](const fs::path& dir, const std::vector<std::string>& extra) {
    JobRun run = run_job(4, dir, small_settings(kFp8 + extra), std::chrono::seconds(240),
                         /*tensor=*/1, /*data=*/2);
    INFO(run.report);
    REQUIRE(run.ok);
    REQUIRE(run.stages.size() == 4);
    return run;
  };
  const JobRun straight = run_replicated(straight_dir.path(), {});
  const StepPrecision whole = step_precision(straight.stages[0].lines);
  WARN("fp8 D=2 x P=2: skipped steps " << whole.skips);
  REQUIRE(whole.skips.size() == 12);
  const StepPrecision rest = steps_from(whole, kCut);
  const std::vector<double> rest_losses(straight.stages[0].losses.begin() + kCut,
                                        straight.stages[0].losses.end());

  run_replicated(first_dir.path(), kFirstPart);
  const fs::path checkpoint = first_dir.path() / "checkpoints/step-00000005";
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));
  const auto inspect = run_process({bin("dseek"), "ckpt", "inspect", checkpoint.string()},
                                   std::chrono::seconds(60));
  INFO(inspect.output);
  CHECK_THAT(inspect.output, Catch::Matchers::Contains("fp8 scaling of 48 operands x 2 replica(s)"));

  const JobRun second = run_replicated(second_dir.path(), resume_from(checkpoint));
  for (size_t rank = 0; rank < second.stages.size(); ++rank) {
    INFO("rank " << rank);
    const auto& stage = second.stages[rank];
    CHECK(string_field(resumed_event(second, static_cast<int>(rank)), "precision_state") == "restored");
    CHECK(stage.losses == rest_losses);
    CHECK(step_precision(stage.lines).skips == rest.skips);
    CHECK(step_precision(stage.lines).scales == rest.scales);
    CHECK(stage.params_sha256 == straight.stages[0].params_sha256);
  }

  const JobRun one = run_ok(2, one_dir.path(), resume_from(checkpoint));
  const std::string resumed = resumed_event(one, 0);
  CHECK(number_field(resumed, "written_data") == 2);
  CHECK(string_field(resumed, "precision_state") == "merged");
  REQUIRE(one.stages[0].losses.size() == rest_losses.size());
  WARN("fp8 D=2 x P=2 checkpoint resumed by one replica (merged): skips "
       << step_precision(one.stages[0].lines).skips << ", max relative loss difference "
       << max_relative_difference(one.stages[0].losses, rest_losses));
  CHECK(std::isfinite(one.stages[0].losses.back()));
}

// Through `dseek launch` the stage's trainer lives in the node's pipeline_stage actor
// (actors/worker_group/pipeline_stage.hpp) and the node's checkpoint_writer writes: the loss
// scale and amax histories travel through the actor's requests, and the resume is
// bitwise as above.
TEST_CASE("pipeline fp8 checkpoints: dseek launch (pipeline_stage actors) resumes an fp8 "
          "P=2 job bit for bit", "[pp][precision][checkpoint][launch]") {
  ScratchDir straight("pp-fp8-launch-straight"), first("pp-fp8-launch-first"),
      second("pp-fp8-launch-second");
  const std::vector<std::string> job = {
      "--set", "parallel.pipeline=2", "--set", "train.micro_batch_size=2", "--set",
      "train.threads=1", "--set", "train.precision=\"fp8\"", "--set",
      "train.loss_scale_init=16777216", "--set", "train.loss_scale_window=2"};
  auto launch_ok = [](const fs::path& run, const std::vector<std::string>& settings) {
    const auto result = run_process(tiny_launch(run, 2, 12, settings), std::chrono::seconds(240),
                                    launch_env());
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
  };
  launch_ok(straight.path(), job);
  const StepPrecision whole = step_precision(node_events(straight.path(), 0, "step"));
  WARN("fp8 P=2 launched: skipped steps " << whole.skips);
  REQUIRE(whole.skips.size() == 12);
  REQUIRE(whole.skips.substr(kCut).find('1') != std::string::npos);
  const StepPrecision rest = steps_from(whole, kCut);
  launch_ok(first.path(), job + std::vector<std::string>{"--set", "checkpoint.every_steps=5",
                                                         "--set", "train.stop_after_steps=5"});
  const fs::path checkpoint = first.path() / "checkpoints/step-00000005";
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));
  launch_ok(second.path(),
            job + std::vector<std::string>{"--set", "checkpoint.resume=\"" + checkpoint.string() + "\""});
  const auto done = node_events(straight.path(), 0, "train_done");
  REQUIRE(done.size() == 1);
  for (int node = 0; node < 2; ++node) {
    INFO("node " << node);
    const auto resumed = node_events(second.path(), node, "resumed");
    REQUIRE(resumed.size() == 1);
    CHECK(string_field(resumed[0], "precision_state") == "restored");
    const StepPrecision steps = step_precision(node_events(second.path(), node, "step"));
    CHECK(steps.skips == rest.skips);
    CHECK(steps.scales == rest.scales);
    const auto resumed_done = node_events(second.path(), node, "train_done");
    REQUIRE(resumed_done.size() == 1);
    CHECK(string_field(resumed_done[0], "params_sha256") == string_field(done[0], "params_sha256"));
  }
}
