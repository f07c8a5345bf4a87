// Checkpoints of pipeline x tensor-parallel jobs (P = 2 stages, each a tensor-parallel
// group of T = 2: four dseek_test_rank processes): each stage's ranks add their shards,
// the stages add theirs, and world rank 0 writes ONE whole checkpoint in the ordinary
// format; every rank of a resumed job takes its shard of its ranges out of it, whatever
// layout wrote it (state/stage_sharded_state.cpp).
//
// Same layout (P2 x T2 -> P2 x T2): the job is deterministic for a fixed layout and a
// resumed rank holds the very bits it wrote (params, both moments, AdamW's step count),
// so the resumed half ends with the uninterrupted run's parameters and losses, bitwise.
// Across layouts (P2 x T2 -> one node, one node -> P2 x T2 interleaved): both continue
// from the same checkpoint bits and then differ by the tensor split's float32 rounding
// (test_pipeline_tensor.cpp): losses and val_loss within 1e-5 relative.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "pipeline/pp_job.hpp"
#include "support/node_runs.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace dseek::testing::pp;
namespace fs = std::filesystem;

namespace {

constexpr double kLossTolerance = 1e-5;  // relative, the pipeline x tensor parity bound

// 8 steps; the first half ends after step 4 with the checkpoint of step 4.
const std::vector<std::string> kFirstHalf = {"checkpoint.every_steps=4", "train.stop_after_steps=4"};
const char* kStep4 = "checkpoints/step-00000004";

JobRun run_ok(int ranks, const fs::path& dir, const std::vector<std::string>& extra) {
  JobRun run = run_job(ranks, dir, small_settings(extra), std::chrono::seconds(180),
                       /*tensor=*/ranks == 1 ? 1 : 2);
  INFO(run.report);
  REQUIRE(run.ok);
  REQUIRE(static_cast<int>(run.stages.size()) == ranks);
  return run;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("pipeline x tensor checkpoints: P2 x T2 resumed from its own checkpoint ends "
          "bitwise as the uninterrupted run, and one node continues from it",
          "[pp][tp][checkpoint]") {
  ScratchDir straight_dir("pxt-ckpt-straight"), first_dir("pxt-ckpt-first"),
      second_dir("pxt-ckpt-second"), down_dir("pxt-ckpt-to-1");
  const JobRun straight = run_ok(4, straight_dir.path(), {});
  const auto& straight_losses = straight.stages[0].losses;
  REQUIRE(straight_losses.size() == 8);

  // The first half: ONE checkpoint, written by world rank 0.
  const JobRun first = run_ok(4, first_dir.path(), kFirstHalf);
  const fs::path checkpoint = first_dir.path() / kStep4;
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));
  REQUIRE(events_named(first.stages[0].lines, "checkpoint_committed").size() == 1);
  for (int rank = 1; rank < 4; ++rank)
    CHECK(events_named(first.stages[static_cast<size_t>(rank)].lines, "checkpoint_committed").empty());

  // P2 x T2 -> P2 x T2: the rest of the run, bitwise, on every rank.
  const JobRun second = run_ok(4, second_dir.path(), resume_from(checkpoint));
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    const auto& losses = second.stages[static_cast<size_t>(rank)].losses;
    const std::string resumed = resumed_event(second, rank);
    CHECK(number_field(resumed, "written_pipeline") == 2);
    CHECK(number_field(resumed, "written_tensor") == 2);
    REQUIRE(losses.size() == 4);
    CHECK(std::equal(losses.begin(), losses.end(), straight_losses.begin() + 4));
    CHECK(second.stages[static_cast<size_t>(rank)].params_sha256 == straight.stages[0].params_sha256);
  }
  CHECK(second.final_params == straight.final_params);

  // P2 x T2 -> one node: continues as the P2 x T2 run itself did.
  const JobRun down = run_ok(1, down_dir.path(), resume_from(checkpoint));
  CHECK(number_field(resumed_event(down, 0), "written_tensor") == 2);
  const std::vector<double> rest(straight_losses.begin() + 4, straight_losses.end());
  const double loss_error = max_relative_difference(down.stages[0].losses, rest);
  const double val_error = max_relative_difference({down.stages[0].val_losses.back()},
                                                   {straight.stages[0].val_losses.back()});
  WARN("P2 x T2 checkpoint resumed by one node: max relative loss difference " << loss_error
       << ", final val_loss " << val_error);
  CHECK(loss_error <= kLossTolerance);
  CHECK(val_error <= kLossTolerance);
}

TEST_CASE("pipeline x tensor checkpoints: a single node's checkpoint resumed by an interleaved "
          "P2 x T2 job continues as the single node does", "[pp][tp][checkpoint]") {
  ScratchDir first_dir("pxt-ckpt-single-first"), second_dir("pxt-ckpt-single-second"),
      up_dir("pxt-ckpt-1-to-4");
  run_ok(1, first_dir.path(), kFirstHalf);
  const fs::path checkpoint = first_dir.path() / kStep4;
  REQUIRE(fs::exists(checkpoint / "COMMITTED"));
  const JobRun single = run_ok(1, second_dir.path(), resume_from(checkpoint));
  const JobRun up = run_ok(4, up_dir.path(),
                           with(resume_from(checkpoint), {"parallel.schedule=\"interleaved\"",
                                                          "parallel.virtual_stages=2"}));
  for (int rank = 0; rank < 4; ++rank) {
    const std::string resumed = resumed_event(up, rank);
    CHECK(number_field(resumed, "written_world_size") == 1);
    CHECK(number_field(resumed, "tensor") == 2);
    CHECK(number_field(resumed, "pipeline") == 2);
  }
  REQUIRE(up.stages[0].losses.size() == 4);
  const double loss_error = max_relative_difference(up.stages[0].losses, single.stages[0].losses);
  const double val_error = max_relative_difference(up.stages[0].val_losses, single.stages[0].val_losses);
  WARN("single-node checkpoint resumed by interleaved P2 x T2: max relative loss difference "
       << loss_error << ", val_loss " << val_error);
  CHECK(loss_error <= kLossTolerance);
  CHECK(val_error <= kLossTolerance);
}
