// ZeRO inside the data-parallel group of a pipeline (runtime/train/layout/data_group_shards.hpp):
// D = 2 replicas of a P = 2 pipeline (four dseek_test_rank processes on loopback; world
// rank = replica x 2 + stage), each stage's optimizer state sharded over its two
// replicas, against ZeRO 0 on the same layout and the single node on the same global
// batch; the shards really split the moments; and a checkpoint of such a job holds the
// whole optimizer state (it resumes bitwise on its own layout and on one node within
// the parity bound).
//
// Tolerance, and why not bitwise. Against ZeRO 0 on the same layout: the reduce-scatter
// adds the two replicas' gradients as the all-reduce does (a + b, the same bits), but
// the norm adds each replica's squares of its pieces and then the two sums, where ZeRO
// 0 squares the whole stage in one pass: another summation order of the norm (~1e-16
// relative), so the clip scale and through AdamW the parameters may move by float32
// rounding. Against the single node: the pipeline's and the replicas' summation order
// (test_pipeline.cpp, replica_parity_launch.hpp). Bounds: losses, gradient norms and
// val_loss 1e-5 relative, final parameters 2e-5 absolute (the pipeline x tensor tests'
// bounds). A lost piece (a replica's update not gathered), a norm that counts the
// pieces twice or once per replica, or a checkpoint without the other replica's moments
// moves the loss or the resumed run at the 1e-3 level or more.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "pipeline/pp_job.hpp"
#include "support/node_runs.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace dseek::testing::pp;
namespace fs = std::filesystem;

namespace {

constexpr double kRelativeTolerance = 1e-5;
constexpr double kParamTolerance = 2e-5;  // absolute
constexpr int kRanks = 4;                  // data 2 x pipeline 2

// The pp job shape (pp_job.hpp) at 4 steps: each replica 3 micro-batches of 2.
std::vector<std::string> shape_settings(std::vector<std::string> extra = {}) {
  std::vector<std::string> settings = {"train.steps=4"};
  settings.insert(settings.end(), extra.begin(), extra.end());
  return small_settings(settings);
}

JobRun run_replicated(const std::string& name, const std::vector<std::string>& settings) {
  ScratchDir dir("pp-zero-" + name);
  JobRun run = run_job(kRanks, dir.path(), settings, std::chrono::seconds(180), /*tensor=*/1,
                       /*data=*/2);
  INFO(name << "\n" << run.report);
  REQUIRE(run.ok);
  REQUIRE(static_cast<int>(run.stages.size()) == kRanks);
  return run;
}

const JobRun& single_node_run() {
  static ScratchDir dir("pp-zero-single");
  static const JobRun run = run_job(1, dir.path(), shape_settings());
  INFO(run.report);
  REQUIRE(run.ok);
  REQUIRE(run.stages[0].losses.size() == 4);
  return run;
}

const JobRun& zero0_run() {
  static const JobRun run = run_replicated("zero0", shape_settings({"parallel.schedule=\"1f1b\""}));
  return run;
}

double max_parameter_difference(const JobRun& a, const JobRun& b) {
  REQUIRE(a.final_params.size() == b.final_params.size());
  REQUIRE_FALSE(a.final_params.empty());
  double worst = 0.0;
  for (size_t i = 0; i < a.final_params.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a.final_params[i]) - b.final_params[i]));
  return worst;
}

// The run against `reference` (a run of the same global batch): every check of the
// header comment.
void check_matches(const std::string& name, const JobRun& run, const JobRun& reference) {
  INFO(name << "\n" << run.report);
  for (const auto& rank : run.stages) {
    // Every rank reports the global loss and norm and ends with the same whole model.
    CHECK(rank.losses == run.stages[0].losses);
    CHECK(rank.grad_norms == run.stages[0].grad_norms);
    CHECK(rank.params_sha256 == run.stages[0].params_sha256);
  }
  const StageRun& first = run.stages[0];
  const StageRun& expected = reference.stages[0];
  const double loss_error = max_relative_difference(first.losses, expected.losses);
  const double norm_error = max_relative_difference(first.grad_norms, expected.grad_norms);
  const double val_error = max_relative_difference(first.val_losses, expected.val_losses);
  const double param_error = max_parameter_difference(run, reference);
  WARN(name << ": max relative loss difference " << loss_error << ", grad norm " << norm_error
            << ", val_loss " << val_error << ", max parameter difference " << param_error);
  CHECK(loss_error <= kRelativeTolerance);
  CHECK(norm_error <= kRelativeTolerance);
  CHECK(val_error <= kRelativeTolerance);
  CHECK(param_error <= kParamTolerance);
  CHECK(first.losses.back() < first.losses.front());
}

// The run_started event of world rank `rank`.
std::string started_event(const JobRun& run, int rank) {
  const auto events = events_named(run.stages[static_cast<size_t>(rank)].lines, "run_started");
  REQUIRE(events.size() == 1);
  return events.front();
}

}  // namespace

TEST_CASE("pipeline ZeRO: D=2 x P=2 with parallel.zero = 1 (1f1b) matches ZeRO 0 and the "
          "single node, and each replica holds half of its stage's moments", "[pp][dp][zero]") {
  const JobRun& single = single_node_run();
  const JobRun& zero0 = zero0_run();
  const JobRun zero1 = run_replicated(
      "zero1", shape_settings({"parallel.schedule=\"1f1b\"", "parallel.zero=1"}));
  check_matches("zero 1 vs zero 0, same layout", zero1, zero0);
  check_matches("zero 1 vs the single node", zero1, single);

  // The moments are sharded: the two replicas of a stage hold disjoint pieces that add
  // up to what ZeRO 0 holds on each replica (every replica keeping everything would
  // hold twice that between them).
  for (int stage = 0; stage < 2; ++stage) {
    INFO("stage " << stage);
    const double whole = number_field(started_event(zero0, stage), "optimizer_params");
    CHECK(number_field(started_event(zero0, stage), "zero") == 0);
    CHECK(number_field(started_event(zero0, 2 + stage), "optimizer_params") == whole);
    double pieces = 0.0;
    for (int replica = 0; replica < 2; ++replica) {
      const std::string started = started_event(zero1, replica * 2 + stage);
      CHECK(number_field(started, "zero") == 1);
      const double mine = number_field(started, "optimizer_params");
      // Each run cut in two: half, give or take one float per run.
      CHECK(std::abs(mine - whole / 2) <= 8.0);
      pieces += mine;
    }
    CHECK(pieces == whole);
    CHECK(whole > 0.0);
  }
}

TEST_CASE("pipeline ZeRO: D=2 x P=2 with parallel.zero = 2 (1f1b) and zero 1 under gpipe "
          "match the single node", "[pp][dp][zero]") {
  const JobRun& single = single_node_run();
  const JobRun zero2 = run_replicated(
      "zero2", shape_settings({"parallel.schedule=\"1f1b\"", "parallel.zero=2"}));
  check_matches("zero 2 vs the single node", zero2, single);
  const JobRun gpipe = run_replicated(
      "gpipe-zero1", shape_settings({"parallel.schedule=\"gpipe\"", "parallel.zero=1"}));
  check_matches("gpipe zero 1 vs the single node", gpipe, single);
}

// The checkpoint of a ZeRO job holds the whole optimizer state: both replicas' moment
// pieces. Resumed on its own layout the run ends bitwise as the uninterrupted one (a
// missing piece would restart those moments from zero); one node continues from it
// within the parity bound of the single node against the pipeline.
TEST_CASE("pipeline ZeRO: a D=2 x P=2 zero 1 checkpoint resumes bitwise on its layout and on "
          "one node", "[pp][dp][zero][checkpoint]") {
  const std::vector<std::string> zero = {"parallel.schedule=\"1f1b\"", "parallel.zero=1"};
  ScratchDir first_dir("pp-zero-ckpt-first"), down_dir("pp-zero-ckpt-down");
  // 8 steps straight; then 4 steps with the checkpoint of step 4, and the rest resumed.
  const JobRun straight = run_replicated("ckpt-straight", small_settings(zero));
  REQUIRE(straight.stages[0].losses.size() == 8);
  JobRun first = run_job(kRanks, first_dir.path(),
                         small_settings(zero + std::vector<std::string>{
                                                   "checkpoint.every_steps=4",
                                                   "train.stop_after_steps=4"}),
                         std::chrono::seconds(180), /*tensor=*/1, /*data=*/2);
  INFO(first.report);
  REQUIRE(first.ok);
  const fs::path checkpoint = first_dir.path() / "checkpoints/step-00000004";
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));

  const JobRun second = run_replicated("ckpt-second", small_settings(zero + resume_from(checkpoint)));
  for (int rank = 0; rank < kRanks; ++rank) {
    const std::string resumed = resumed_event(second, rank);
    CHECK(number_field(resumed, "step") == 4);
    CHECK(number_field(resumed, "written_data") == 2);
    CHECK(number_field(resumed, "written_pipeline") == 2);
  }
  const auto& straight_losses = straight.stages[0].losses;
  REQUIRE(second.stages[0].losses.size() == 4);
  CHECK(std::equal(second.stages[0].losses.begin(), second.stages[0].losses.end(),
                   straight_losses.begin() + 4));
  CHECK(second.stages[0].params_sha256 == straight.stages[0].params_sha256);

  const JobRun down = run_job(1, down_dir.path(), small_settings(resume_from(checkpoint)));
  INFO(down.report);
  REQUIRE(down.ok);
  CHECK(number_field(resumed_event(down, 0), "written_data") == 2);
  const std::vector<double> rest(straight_losses.begin() + 4, straight_losses.end());
  const double loss_error = max_relative_difference(down.stages[0].losses, rest);
  const double val_error = max_relative_difference({down.stages[0].val_losses.back()},
                                                   {straight.stages[0].val_losses.back()});
  WARN("D=2 x P=2 zero 1 checkpoint resumed by one node: max relative loss difference "
       << loss_error << ", final val_loss " << val_error);
  CHECK(loss_error <= kRelativeTolerance);
  CHECK(val_error <= kRelativeTolerance);
}
