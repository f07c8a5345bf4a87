// Checkpoints of pipeline-parallel jobs (train/state/checkpointing.hpp): the stages
// gather the whole model state to rank 0, which writes one ordinary checkpoint; every
// stage of a resumed job takes its own ranges out of it, whatever layout wrote it.
//
// Same layout (P = 2 -> P = 2): the pipeline is deterministic for a fixed layout and a
// resumed stage holds the very bits it wrote (params, both moments, AdamW's step count),
// so the resumed half of the run must end with the uninterrupted run's params_sha256 and
// report its losses bitwise.
//
// Across layouts (P = 1 -> P = 2 and P = 2 -> P = 1): both continue from the same
// checkpoint bits, then differ only by the pipeline's summation order (see
// test_pipeline.cpp): losses and val_loss within its parity tolerance, 1e-5 relative.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>

#include "pipeline/pp_job.hpp"
#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace dseek::testing::pp;
namespace fs = std::filesystem;

namespace {

constexpr double kLossTolerance = 1e-5;  // relative, the pipeline parity tolerance

// 8 steps; the first half ends after step 4 with the checkpoint of step 4.
const std::vector<std::string> kFirstHalf = {"checkpoint.every_steps=4", "train.stop_after_steps=4"};
const char* kStep4 = "checkpoints/step-00000004";

JobRun run_ok(int stages, const fs::path& dir, const std::vector<std::string>& extra) {
  JobRun run = run_job(stages, dir, small_settings(extra));
  INFO(run.report);
  REQUIRE(run.ok);
  REQUIRE(static_cast<int>(run.stages.size()) == stages);
  return run;
}

}  // namespace

TEST_CASE("pipeline checkpoints: P=2 resumed from its own checkpoint ends bitwise as the "
          "uninterrupted run, and one node continues from it", "[pp][checkpoint]") {
  ScratchDir straight_dir("pp-ckpt-straight"), first_dir("pp-ckpt-first"),
      second_dir("pp-ckpt-second"), down_dir("pp-ckpt-2-to-1");
  const JobRun straight = run_ok(2, straight_dir.path(), {});
  const auto& straight_losses = straight.stages[0].losses;
  REQUIRE(straight_losses.size() == 8);

  // The first half: ONE checkpoint, written by rank 0, of the whole model.
  const JobRun first = run_ok(2, first_dir.path(), kFirstHalf);
  const fs::path checkpoint = first_dir.path() / kStep4;
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));
  const auto committed = events_named(first.stages[0].lines, "checkpoint_committed");
  REQUIRE(committed.size() == 1);
  CHECK(number_field(committed[0], "step") == 4);
  CHECK(events_named(first.stages[1].lines, "checkpoint_committed").empty());
  REQUIRE(first.stages[0].losses.size() == 4);
  CHECK(std::equal(first.stages[0].losses.begin(), first.stages[0].losses.end(),
                   straight_losses.begin()));

  // P = 2 -> P = 2: the rest of the run, bitwise.
  const JobRun second = run_ok(2, second_dir.path(), resume_from(checkpoint));
  for (int s = 0; s < 2; ++s) {
    const auto& stage = second.stages[static_cast<size_t>(s)];
    const std::string resumed = resumed_event(second, s);
    CHECK(number_field(resumed, "step") == 4);
    CHECK(number_field(resumed, "written_pipeline") == 2);
    CHECK(number_field(resumed, "pipeline") == 2);
    REQUIRE(stage.losses.size() == 4);
    CHECK(std::equal(stage.losses.begin(), stage.losses.end(), straight_losses.begin() + 4));
    CHECK(stage.params_sha256 == straight.stages[0].params_sha256);
  }
  CHECK(second.final_params == straight.final_params);

  // P = 2 -> P = 1: one node continues from the pipeline's checkpoint, as the pipeline
  // itself did (the straight run's second half).
  const JobRun down = run_ok(1, down_dir.path(), resume_from(checkpoint));
  const std::string resumed = resumed_event(down, 0);
  CHECK(number_field(resumed, "written_pipeline") == 2);
  CHECK(number_field(resumed, "pipeline") == 1);
  const std::vector<double> pipeline_rest(straight_losses.begin() + 4, straight_losses.end());
  const double loss_error = max_relative_difference(down.stages[0].losses, pipeline_rest);
  const double val_error =
      max_relative_difference({down.stages[0].val_losses.back()}, {straight.stages[0].val_losses.back()});
  WARN("P=2 checkpoint resumed by one node: max relative loss difference " << loss_error
       << ", final val_loss " << val_error);
  CHECK(loss_error <= kLossTolerance);
  CHECK(val_error <= kLossTolerance);
}

TEST_CASE("pipeline checkpoints: a single node's checkpoint resumed by a P=2 job with a "
          "balanced split continues as the single node does", "[pp][checkpoint]") {
  ScratchDir first_dir("pp-ckpt-single-first"), second_dir("pp-ckpt-single-second"),
      up_dir("pp-ckpt-1-to-2");
  run_ok(1, first_dir.path(), kFirstHalf);
  const fs::path checkpoint = first_dir.path() / kStep4;
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));
  const JobRun single = run_ok(1, second_dir.path(), resume_from(checkpoint));
  const JobRun up = run_ok(2, up_dir.path(),
                           resume_from(checkpoint) +
                               std::vector<std::string>{"parallel.partition=\"balanced\""});
  for (int s = 0; s < 2; ++s) {
    const std::string resumed = resumed_event(up, s);
    CHECK(number_field(resumed, "written_pipeline") == 1);
    CHECK(number_field(resumed, "written_world_size") == 1);
    CHECK(number_field(resumed, "pipeline") == 2);
  }
  REQUIRE(up.stages[0].losses.size() == 4);
  const double loss_error = max_relative_difference(up.stages[0].losses, single.stages[0].losses);
  const double val_error = max_relative_difference(up.stages[0].val_losses, single.stages[0].val_losses);
  WARN("single-node checkpoint resumed by P=2: max relative loss difference " << loss_error
       << ", val_loss " << val_error);
  CHECK(loss_error <= kLossTolerance);
  CHECK(val_error <= kLossTolerance);
}

TEST_CASE("pipeline checkpoints: a corrupt checkpoint fails the resumed pipeline naming the file",
          "[pp][checkpoint]") {
  ScratchDir dir("pp-ckpt-corrupt");
  run_ok(1, dir.path() / "first", kFirstHalf);
  const fs::path checkpoint = dir.path() / "first" / kStep4;
  REQUIRE(fs::exists(checkpoint / "params.bin"));
  {
    std::fstream file(checkpoint / "params.bin", std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(100);
    const char byte = static_cast<char>(file.get());
    file.seekp(100);
    file.put(static_cast<char>(~byte));
  }
  const JobRun bad = run_job(2, dir.path() / "resumed", small_settings(resume_from(checkpoint)),
                             std::chrono::seconds(60));
  INFO(bad.report);
  CHECK_FALSE(bad.ok);
  CHECK(bad.report.find((checkpoint / "params.bin").string()) != std::string::npos);
}

TEST_CASE("pipeline checkpoints: interleaved chunks (two per stage) resume bitwise, and P=4 "
          "continues from their checkpoint", "[pp][checkpoint]") {
  const std::vector<std::string> interleaved = {"parallel.schedule=\"interleaved\"",
                                                "parallel.virtual_stages=2"};
  ScratchDir straight_dir("pp-ckpt-il-straight"), first_dir("pp-ckpt-il-first"),
      second_dir("pp-ckpt-il-second"), four_dir("pp-ckpt-il-to-4");
  const JobRun straight = run_ok(2, straight_dir.path(), interleaved);
  run_ok(2, first_dir.path(), interleaved + kFirstHalf);
  const fs::path checkpoint = first_dir.path() / kStep4;
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));
  const JobRun second = run_ok(2, second_dir.path(), interleaved + resume_from(checkpoint));
  const std::vector<double> rest(straight.stages[0].losses.begin() + 4, straight.stages[0].losses.end());
  CHECK(second.stages[0].losses == rest);
  CHECK(second.stages[0].params_sha256 == straight.stages[0].params_sha256);
  CHECK(second.final_params == straight.final_params);

  // Four stages of one block each: the middle stages hold neither embedding nor head.
  const JobRun four = run_ok(4, four_dir.path(), resume_from(checkpoint));
  CHECK(number_field(resumed_event(four, 3), "pipeline") == 4);
  const double loss_error = max_relative_difference(four.stages[0].losses, rest);
  WARN("interleaved P=2 checkpoint resumed by P=4: max relative loss difference " << loss_error);
  CHECK(loss_error <= kLossTolerance);
}

TEST_CASE("pipeline checkpoints: dseek launch writes them through the node's checkpoint_writer, "
          "and a failed write leaves training going", "[pp][checkpoint][launch]") {
  ScratchDir run("pp-ckpt-launch");
  const auto result = run_process(
      tiny_launch(run.path(), 2, 8,
                  std::vector<std::string>{"--set", "parallel.pipeline=2", "--set",
                                           "train.micro_batch_size=2", "--set", "train.threads=1",
                                           "--set", "checkpoint.every_steps=4"} +
                      faults("{kind=\"fail_checkpoint_write\", step=4}")),
      std::chrono::seconds(120), launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const auto failed = node_events(run.path(), 0, "checkpoint_failed");
  REQUIRE(failed.size() == 1);
  CHECK(number_field(failed[0], "step") == 4);
  CHECK(string_field(failed[0], "error").find("params.bin") != std::string::npos);
  const auto committed = node_events(run.path(), 0, "checkpoint_committed");
  REQUIRE(committed.size() == 1);
  CHECK(number_field(committed[0], "step") == 8);
  CHECK(string_field(committed[0], "writer") == "actor");
  CHECK(node_events(run.path(), 1, "checkpoint_committed").empty());
  CHECK(node_events(run.path(), 1, "train_done").size() == 1);
  CHECK_FALSE(fs::exists(run.path() / "checkpoints/step-00000004"));
  CHECK(fs::exists(run.path() / "checkpoints/step-00000008/COMMITTED"));
}
