// Pipeline x tensor parallelism end to end: P = 2 stages, each a tensor-parallel group of
// T = 2 (four dseek_test_rank processes on loopback over UCX; world rank = stage x 2 +
// tensor rank, dist::run_pipeline), against the single-node run of the same global
// batch, for every schedule.
//
// Tolerance, and why not bitwise. The pipeline alone keeps the single node's kernels and
// changes only summation order (test_pipeline.cpp); tensor parallelism changes the
// arithmetic of every block: the ranks add partial matmuls (over heads, MLP columns,
// vocabulary rows) in the all-reduce where one sgemm adds them inside, and the squares
// of the split tensors reach the norm through an f32 all-reduce. That is float32
// rounding, ~1e-7 relative per sum, so even the first step's loss differs (~1e-7);
// AdamW (lr 2e-3) turns gradient rounding into ~1e-7 relative differences per update.
// Bounds (pp_job.hpp's check_tensor_parity, shared with tests/tensor): losses, gradient
// norms and validation losses 1e-5 relative; final parameters 2e-5 absolute (1% of one
// update), except the attention key biases, whose gradient is zero in exact arithmetic
// (a constant added to every score leaves the softmax unchanged): both runs hold
// rounding noise there, which AdamW's m / sqrt(v) scales to steps of ~lr, so they are
// held to 4 lr. A wrong slice, a missing all-reduce, a wte sum between the wrong
// counterparts or a parameter counted twice in the norm moves losses at the 1e-2 level.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "pipeline/pp_job.hpp"
#include "runtime/model/param_layout.hpp"
#include "support/node_runs.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace dseek::testing::pp;
using Catch::Matchers::Contains;

namespace {

// The pp job shape (pp_job.hpp) at 4 steps: 6 micro-batches of 2, validation at step 4.
std::vector<std::string> shape_settings(std::vector<std::string> extra = {}) {
  std::vector<std::string> settings = {"train.steps=4"};
  settings.insert(settings.end(), extra.begin(), extra.end());
  return small_settings(settings);
}

// Every check of the header comment, for a run laid out data x 2 stages x 2 tensor ranks.
void check_matches_single_node(const std::string& name, const JobRun& run, const JobRun& single,
                               int data) {
  check_tensor_parity(name, run, single, {.data = data, .pipeline = 2, .tensor = 2});
}

const JobRun& single_node_run() {
  static ScratchDir dir("pxt-single");
  static const JobRun run = run_job(1, dir.path(), shape_settings());
  INFO(run.report);
  REQUIRE(run.ok);
  REQUIRE(run.stages[0].losses.size() == 4);
  return run;
}

}  // namespace

TEST_CASE("pipeline x tensor: P=2 x T=2 matches the single-node run for every schedule",
          "[pp][tp]") {
  const JobRun& single = single_node_run();
  struct Schedule {
    std::string name;
    std::vector<std::string> settings;
  };
  const std::vector<Schedule> schedules = {
      {"gpipe", {"parallel.schedule=\"gpipe\""}},
      {"1f1b", {"parallel.schedule=\"1f1b\""}},
      {"interleaved", {"parallel.schedule=\"interleaved\"", "parallel.virtual_stages=2"}},
      {"1f1b-balanced", {"parallel.schedule=\"1f1b\"", "parallel.partition=\"balanced\""}}};
  for (const auto& [name, settings] : schedules) {
    ScratchDir dir("pxt-" + name);
    const JobRun run = run_job(4, dir.path(), shape_settings(settings), std::chrono::seconds(180),
                               /*tensor=*/2);
    check_matches_single_node(name, run, single, 1);
    if (name != "1f1b-balanced") continue;
    // Every rank cuts where stage 0's tensor rank 0 measured.
    const auto plan = events_named(run.stages[0].lines, "pipeline_plan");
    REQUIRE(plan.size() == 1);
    // From the split on: the same text everywhere (ts and node differ).
    const auto split_of = [](const std::string& line) { return line.substr(line.find("\"ranges\"")); };
    CHECK_THAT(plan[0], Contains("\"stage_cost_ms\":"));
    for (const auto& rank : run.stages) {
      const auto mine = events_named(rank.lines, "pipeline_plan");
      REQUIRE(mine.size() == 1);
      CHECK(split_of(mine[0]) == split_of(plan[0]));
    }
  }
}

// Recompute (model.recompute = every:1) inside the tensor-parallel chunks of an
// interleaved stage (two chunks sharing one scratch set): the same ops on the same
// inputs, the block's all-reduce included, so the same bits as without recompute.
TEST_CASE("pipeline x tensor: recompute inside interleaved tensor-parallel chunks gives the "
          "same bits", "[pp][tp][recompute]") {
  const std::vector<std::string> interleaved = {"parallel.schedule=\"interleaved\"",
                                                "parallel.virtual_stages=2"};
  ScratchDir kept_dir("pxt-kept"), recomputed_dir("pxt-recomputed");
  const JobRun kept = run_job(4, kept_dir.path(), shape_settings(interleaved),
                              std::chrono::seconds(180), /*tensor=*/2);
  std::vector<std::string> with_recompute = interleaved;
  with_recompute.push_back("model.recompute=\"every:1\"");
  const JobRun recomputed = run_job(4, recomputed_dir.path(), shape_settings(with_recompute),
                                    std::chrono::seconds(180), /*tensor=*/2);
  INFO(kept.report << "\n" << recomputed.report);
  REQUIRE(kept.ok);
  REQUIRE(recomputed.ok);
  CHECK(recomputed.stages[0].losses == kept.stages[0].losses);
  CHECK(recomputed.final_params == kept.final_params);
  // The recomputed blocks keep no activations of their own: less memory.
  const auto memory_of = [](const JobRun& run) {
    const auto events = events_named(run.stages[0].lines, "model_memory");
    REQUIRE(events.size() == 1);
    return events[0];
  };
  INFO(memory_of(kept) << "\n" << memory_of(recomputed));
  CHECK(number_field(memory_of(recomputed), "activation_bytes") <
        number_field(memory_of(kept), "activation_bytes"));
}

// Eight processes on two cores: two replicas of the 2 x 2 pipeline, each on its half of
// every batch (3 micro-batches of 2), 1F1B only. The replicas' halves of each shard's
// gradient are added after accumulation: more float32 rounding, the same bounds.
TEST_CASE("pipeline x tensor: DP=2 x P=2 x T=2 matches the single-node run", "[pp][tp][dp]") {
  const JobRun& single = single_node_run();
  ScratchDir dir("pxt-dp");
  const JobRun run = run_job(8, dir.path(), shape_settings({"parallel.schedule=\"1f1b\""}),
                             std::chrono::seconds(240), /*tensor=*/2, /*data=*/2);
  check_matches_single_node("dp2-1f1b", run, single, 2);
}
