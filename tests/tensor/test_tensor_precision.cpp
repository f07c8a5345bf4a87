// Mixed precision in the tensor-parallel model (train.precision = "bf16" | "fp8" with
// parallel.tensor = 2, model/gpt_model.hpp): `dseek launch --nodes 2` against
// a single-node launch of the same job in the same precision, on the same global batch.
//
// Bounds. In fp32 the split only changes summation order (~1e-7 relative per sum;
// test_tensor_launch.cpp holds it to 1e-6). In bf16 the operands of every block matmul
// are rounded to 8 significant bits: an activation that the split moves by ~1e-7 across
// a bf16 rounding boundary changes by one bf16 step, 2^-8 relative, so a fraction of
// ~1e-7 / 2^-8 ~ 3e-5 of the operands differ by 2^-8 between the runs, with random
// signs (RMS ~2e-5 relative, against ~1e-3 for rounding every operand, which is what
// bf16 does to fp32). The head's matmul runs in bf16 too (each rank its vocabulary slice,
// on the same bf16 lnf and wte rows as the single node). The first step's loss (the same
// weights, forward only) is held to kBf16FirstStepBound = 1e-6 (measured 8.8e-8; 1.3e-8
// when the head was fp32), and the single node's fp32 run must be farther from its bf16
// run than that (measured 1.4e-5; 7.6e-6 with the fp32 head), so a tensor-parallel run
// that computed in fp32 fails. Over 12 AdamW steps the differences grow (Adam's m /
// sqrt(v) turns noise in near-zero gradients into steps of ~lr, as in fp32): every step's
// loss and val_loss within kBf16Bound = 1e-4 (measured 1.3e-5; 3.1e-6 with the fp32
// head), which a wrong slice or a missing all-reduce (1e-2) exceeds.
// In fp8 each rank quantizes its weight shard with that shard's scale (its own amax,
// the whole tensor's or smaller), where the single node scales the whole tensor: the
// weights of the shards whose amax is not the tensor's round to another E4M3 grid (3
// mantissa bits: ~2^-4 relative per element, uncorrelated between the runs), once the
// first step's amaxes enter the histories (the first step has the same scales on both,
// so the same loss). That is a part of fp8's own quantization noise: every step's loss
// and val_loss within kFp8Bound = 2e-3 (measured 3.4e-4 with the head in bf16, 2.7e-4
// when it was fp32), while the single node's bf16 run is 4.4e-2 from its fp8 run, so the
// bound catches a run in bf16 or fp32.
//
// fp8's loss scale starts at 2^24 here, which overflows E5M2 in the first steps: both
// ranks must skip the same steps with the same loss scales (they decide on the same
// global norm), and as the single node does.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {
constexpr int kSteps = 12;
constexpr double kBf16FirstStepBound = 1e-6;
constexpr double kBf16Bound = 1e-4;
constexpr double kFp8Bound = 2e-3;

const std::vector<std::string> kShared = {"--set", "train.micro_batch_size=4", "--set",
                                          "train.threads=1", "--set", "train.eval_every=0"};

struct Run {
  std::vector<double> losses;     // node 0's step events
  std::vector<std::string> skips;  // per node: '1' skipped, '0' applied, per step
  std::vector<std::string> scales;  // per node: the loss_scale fields, comma-separated
  double val_loss = 0.0;
};

std::string field_text(const std::string& line, const std::string& key) {
  const std::string quoted = "\"" + key + "\":";
  const size_t at = line.find(quoted);
  if (at == std::string::npos) return "none";
  const size_t begin = at + quoted.size();
  return line.substr(begin, line.find_first_of(",}", begin) - begin);
}

Run launch(const std::string& name, int nodes, const std::string& precision,
           const std::vector<std::string>& extra = {}) {
  ScratchDir dir(name);
  std::vector<std::string> settings = kShared;
  settings.insert(settings.end(), {"--set", "train.precision=\"" + precision + "\""});
  if (nodes > 1) settings.insert(settings.end(), {"--set", "parallel.tensor=2"});
  settings.insert(settings.end(), extra.begin(), extra.end());
  const auto result = run_process(tiny_launch(dir.path(), nodes, kSteps, settings), 120s,
                                  launch_env());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  Run run;
  for (int node = 0; node < nodes; ++node) {
    std::string skips, scales;
    for (const auto& step : node_events(dir.path(), node, "step")) {
      if (node == 0) run.losses.push_back(number_field(step, "loss"));
      skips += field_text(step, "skipped") == "true" ? '1' : '0';
      scales += field_text(step, "loss_scale") + ",";
    }
    run.skips.push_back(skips);
    run.scales.push_back(scales);
  }
  const auto done = node_events(dir.path(), 0, "train_done");
  REQUIRE(done.size() == 1);
  run.val_loss = number_field(done[0], "val_loss");
  REQUIRE(run.losses.size() == kSteps);
  return run;
}

std::string format_loss(double loss) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", loss);
  return text;
}

std::string losses_text(const Run& run) {
  std::string text;
  for (double loss : run.losses) text += format_loss(loss) + " ";
  return text;
}

double first_step_difference(const Run& a, const Run& reference) {
  if (a.losses.empty() || reference.losses.empty()) return std::numeric_limits<double>::infinity();
  return std::abs(a.losses[0] - reference.losses[0]) / reference.losses[0];
}

// The largest relative difference over every step's loss and the val_loss.
double worst_difference(const Run& a, const Run& reference) {
  if (a.losses.size() != reference.losses.size() || a.losses.empty())
    return std::numeric_limits<double>::infinity();
  double worst = std::abs(a.val_loss - reference.val_loss) / reference.val_loss;
  for (size_t i = 0; i < a.losses.size(); ++i)
    worst = std::max(worst, std::abs(a.losses[i] - reference.losses[i]) / reference.losses[i]);
  return worst;
}
}  // namespace

TEST_CASE("tensor: T=2 in bf16 follows the single node in bf16", "[tp][precision]") {
  const Run single = launch("tp-bf16-single", 1, "bf16");
  const Run group = launch("tp-bf16-group", 2, "bf16");
  const Run fp32 = launch("tp-bf16-fp32-single", 1, "fp32");
  const double first = first_step_difference(group, single);
  const double first_gap_to_fp32 = first_step_difference(fp32, single);
  const double difference = worst_difference(group, single);
  WARN("bf16 T=2 vs one node: first step " << first << " (bound " << kBf16FirstStepBound
       << "), worst step or val_loss " << difference << " (bound " << kBf16Bound
       << "); one node fp32 vs bf16: first step " << first_gap_to_fp32 << ", worst "
       << worst_difference(fp32, single) << "\nlosses bf16 1: " << losses_text(single)
       << "\nlosses bf16 2: " << losses_text(group) << "\nlosses fp32 1: " << losses_text(fp32));
  CHECK(first <= kBf16FirstStepBound);
  CHECK(difference <= kBf16Bound);
  CHECK(first_gap_to_fp32 > kBf16FirstStepBound);  // the bound catches the fp32 path
}

TEST_CASE("tensor: T=2 in fp8 follows the single node in fp8, skipping the same steps",
          "[tp][precision]") {
  const std::vector<std::string> high_scale{"--set", "train.loss_scale_init=16777216"};
  const Run single = launch("tp-fp8-single", 1, "fp8", high_scale);
  const Run group = launch("tp-fp8-group", 2, "fp8", high_scale);
  const Run bf16 = launch("tp-fp8-bf16-single", 1, "bf16");
  const double difference = worst_difference(group, single);
  const double gap_to_bf16 = worst_difference(bf16, single);
  WARN("fp8 T=2 vs one node: worst relative loss difference " << difference << " (bound "
       << kFp8Bound << "); one node bf16 vs fp8: " << gap_to_bf16 << "; skipped steps "
       << group.skips[0] << "\nlosses fp8 1: " << losses_text(single)
       << "\nlosses fp8 2: " << losses_text(group) << "\nlosses bf16 1: " << losses_text(bf16));
  CHECK(difference <= kFp8Bound);
  CHECK(gap_to_bf16 > kFp8Bound);  // the bound catches the bf16 (or fp32) path
  CHECK(group.skips[0].find('1') != std::string::npos);  // 2^24 overflowed
  CHECK(group.skips[0] == group.skips[1]);
  CHECK(group.scales[0] == group.scales[1]);
  CHECK(group.skips[0] == single.skips[0]);
  CHECK(group.scales[0] == single.scales[0]);
}
