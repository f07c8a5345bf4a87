// Mixed precision through pipeline stages (train.precision = "bf16"): the stages' GptModel
// ranges get the same precision policy as the single node, so P = 2 in bf16 follows the
// single node in bf16 as fp32 pipelines follow fp32 (same operands, rounded the same
// way; the sums differ by float order). Bound: 1e-4 relative on every step's loss and
// the validation loss: a summation-order difference that moves an operand across a bf16
// rounding boundary changes it by 2^-8 relative, so this is looser than fp32's 1e-5
// (measured: 1.1e-6).
// fp8 is refused in pipelines (its scaling steps are not closed there): config tests.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "pipeline/pp_job.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace dseek::testing::pp;

TEST_CASE("pipeline: P=2 in bf16 follows the single node in bf16", "[pp][precision]") {
  const std::vector<std::string> bf16{"train.precision=\"bf16\""};
  ScratchDir single_dir("pp-bf16-single"), pipeline_dir("pp-bf16-p2");
  const JobRun single = run_job(1, single_dir.path(), small_settings(bf16));
  const JobRun pipeline = run_job(2, pipeline_dir.path(), small_settings(bf16));
  INFO(single.report << "\n" << pipeline.report);
  REQUIRE(single.ok);
  REQUIRE(pipeline.ok);
  const auto& reference = single.stages[0];
  const auto& first = pipeline.stages[0];
  REQUIRE(first.losses.size() == reference.losses.size());
  REQUIRE_FALSE(first.losses.empty());
  double worst = 0.0;
  for (size_t i = 0; i < first.losses.size(); ++i)
    worst = std::max(worst, std::abs(first.losses[i] - reference.losses[i]) / reference.losses[i]);
  REQUIRE(first.val_losses.size() == reference.val_losses.size());
  for (size_t i = 0; i < first.val_losses.size(); ++i)
    worst = std::max(worst, std::abs(first.val_losses[i] - reference.val_losses[i]) /
                                reference.val_losses[i]);
  WARN("bf16 P=2 vs one node: max relative loss difference " << worst);
  CHECK(worst <= 1e-4);
  for (const auto& stage : pipeline.stages) CHECK(stage.params_sha256 == first.params_sha256);
}
