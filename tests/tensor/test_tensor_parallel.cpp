// Tensor parallelism between processes: T = 2 and 4 ranks of dseek_test_rank (the one
// rank program: dist::run_layout over UCX on loopback, as a node runs it) against the
// single process training the whole model from the same seed on the same batches.
// Bounds: pp_job.hpp's check_tensor_parity (float32 rounding of the split sums).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "pipeline/pp_job.hpp"
#include "support/node_runs.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace dseek::testing::pp;

namespace {

// The small job at 4 steps (6 micro-batches of 2, validation at step 4).
std::vector<std::string> tp_settings(std::vector<std::string> extra = {}) {
  std::vector<std::string> settings = {"train.steps=4"};
  settings.insert(settings.end(), extra.begin(), extra.end());
  return small_settings(settings);
}

JobRun run_ranks(int tensor, const std::string& name, std::vector<std::string> extra = {}) {
  ScratchDir dir("tp-" + name);
  JobRun run = run_job(tensor, dir.path(), tp_settings(std::move(extra)), std::chrono::seconds(240),
                       tensor);
  INFO(run.report);
  REQUIRE(run.ok);
  return run;
}

const JobRun& single_process_run() {
  static const JobRun run = run_ranks(1, "single");
  REQUIRE(run.stages[0].losses.size() == 4);
  return run;
}

}  // namespace

TEST_CASE("T=2 tensor-parallel processes train like the single process", "[tp]") {
  check_tensor_parity("T=2", run_ranks(2, "t2"), single_process_run(), {.tensor = 2});
}

// 4 processes share 2 cores here: slower, and the all-reduce adds 4 contributions, which
// must still give every rank the same bits.
TEST_CASE("T=4 tensor-parallel processes train like the single process", "[tp]") {
  check_tensor_parity("T=4", run_ranks(4, "t4"), single_process_run(), {.tensor = 4});
}

// model.vocab = 320 pads the prepared bytes' vocabulary of 256 (as 50304 pads GPT-2's
// 50257): rank 1 of T=2 holds ids [160, 320), 64 of them padding, which take no part in
// its share of the softmax (GptModel::set_real_vocab, from the data set's index). Against
// the single process with the same padding, within check_tensor_parity's bounds.
TEST_CASE("T=2 tensor-parallel processes with a padded vocabulary train like the single "
          "process", "[tp][padded_vocab]") {
  const JobRun single = run_ranks(1, "padded-single", {"model.vocab=320"});
  const JobRun t2 = run_ranks(2, "padded-t2", {"model.vocab=320"});
  check_tensor_parity("T=2 padded", t2, single, {.tensor = 2, .vocab = 320});
}

// Recompute (model.recompute) inside the ranks: every rank redoes its blocks' forward,
// the attention branch's all-reduce over UCX included. The data plane's all-reduce sums
// in a fixed order, so the recomputed activations, and with them every step, are
// bitwise those of the group without recompute: losses, norms and the final parameters.
TEST_CASE("T=2 tensor-parallel processes with model.recompute = every:1 give the same bits",
          "[tp][recompute]") {
  const JobRun kept = run_ranks(2, "kept");
  const JobRun recomputed = run_ranks(2, "recomputed", {"model.recompute=\"every:1\""});
  for (size_t r = 0; r < 2; ++r) {
    INFO("rank " << r);
    REQUIRE(kept.stages[r].losses.size() == 4);
    CHECK(recomputed.stages[r].losses == kept.stages[r].losses);
    CHECK(recomputed.stages[r].grad_norms == kept.stages[r].grad_norms);
    CHECK(recomputed.stages[r].params_sha256 == kept.stages[r].params_sha256);
  }
  REQUIRE_FALSE(kept.final_params.empty());
  CHECK(recomputed.final_params == kept.final_params);
}
