// Mixed precision in training runs (train.precision; runtime/model/precision_policy.hpp,
// runtime/optim/loss_scaler.hpp): the tiny job of dp_job.hpp, 40 steps, on one node and
// on 2 data-parallel replicas, in fp32, bf16 and fp8.
//
// Bounds. bf16 rounds the operands of the block matmuls and of the head to 8 significant
// bits; after 40 steps the validation loss stays within 2% of fp32's (measured: 0.0098% on
// one node, 0.0076% on 2 replicas; 0.002% and 0.0015% when the head was fp32). fp8 (3-4
// significant bits, delayed scaling, dynamic loss scaling; the head in bf16) within 5%
// (measured: +3.4% on one node, +4.7% on 2 replicas; 7 of its 40 steps are skipped at
// the high loss scale used here, so it takes fewer updates). The runs are deterministic
// for the fixed thread count, so the measured values do not move between runs.
// Replicas must agree bit for bit, as in fp32: they see the same reduced gradients, so
// they take the same skip decisions and keep the same loss scale (fp8 starts at a loss
// scale of 2^24 here, so that the first steps overflow E5M2 and are skipped).
// fp8 with gradient compression (top-k 5%, INT8, both; ZeRO 0 as compression runs) on 2
// replicas: the overflows forced by 2^24 are skipped before any codec, on every replica,
// at the uncompressed fp8 run's steps and loss scales; the loss falls and the validation
// loss tracks uncompressed fp8 and compressed fp32 (bounds: see the constants); on the
// scrambled test device the CPU's bits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dp/dp_job.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace dseek::testing::dp;

namespace {
constexpr double kBf16ValLossBound = 0.02;  // relative to fp32, see the header comment
constexpr double kFp8ValLossBound = 0.05;
// fp8 with compression, 200 steps (40 are too few: compression's own cost is still
// 36% there). The compression tests' bound, 3% over uncompressed (issue 5,
// tests/integration/test_elastic.cpp), does not hold for fp32 on this job either (top-k
// + INT8 costs it 3.1% at the default seed; over seeds 1, 2, 3: 3.4, 2.7, 0.3%); and fp8
// skips steps the uncompressed run does not (its later overflows follow the parameters).
// So the bounds are fp8's own (kFp8ValLossBound, 5%), on top of compression's: fp8 with a
// codec within 5% of fp32 with it (measured at the default seed: top-k 2.4%, INT8 0.5%,
// top-k + INT8 1.8%, with the head in bf16; 2.7, 0.7 and 1.6% with it in fp32; seeds 1-3,
// head fp32: -1.3 to 4.2%), and its gap over uncompressed fp8 at most 5 points above
// fp32's gap (measured, head bf16: 5.8% against 2.9%, 1.7 against 0.8, 5.4 against 3.1;
// head fp32: 5.9 against 2.9, 1.6 against 0.8, 4.9 against 3.1; seeds 1-3, head fp32:
// 0.1 to 2.6% against 0.3 to 3.4%).

// `label` is the precision, optionally followed by "-" and a tag naming the extra settings.
const JobRun& precision_run(const std::string& label, int ranks,
                            const std::vector<std::string>& extra = {}) {
  static std::map<std::string, JobRun> runs;
  static std::vector<std::unique_ptr<ScratchDir>> dirs;
  const std::string precision = label.substr(0, label.find('-'));
  std::string name = label + "-" + std::to_string(ranks);
  std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c) && c != '-'; }, '_');
  auto it = runs.find(name);
  if (it != runs.end()) return it->second;
  dirs.push_back(std::make_unique<ScratchDir>("precision-" + name));
  std::vector<std::string> settings{"train.steps=40", "train.eval_every=20",
                                    "train.eval_batches=2",
                                    "train.precision=\"" + precision + "\""};
  settings.insert(settings.end(), extra.begin(), extra.end());
  JobRun run = run_job(ranks, dirs.back()->path(), tiny_settings(settings));
  INFO(run.report);
  REQUIRE(run.ok);
  REQUIRE(static_cast<int>(run.replicas.size()) == ranks);
  REQUIRE(run.replicas[0].val_losses.size() == 2);
  return runs.emplace(name, std::move(run)).first->second;
}

double relative(double value, double reference) {
  return std::fabs(value - reference) / reference;
}

// The step events' "skipped" flags in order ('1' skipped, '0' applied).
std::string skip_pattern(const ReplicaRun& replica) {
  std::string pattern;
  for (const auto& line : replica.lines) {
    if (line.find("\"event\":\"step\"") == std::string::npos) continue;
    pattern += line.find("\"skipped\":true") != std::string::npos ? '1' : '0';
  }
  return pattern;
}

// The loss scale of every step event, in order, as written (the step's scale before its
// update: a skipped step shows the scale that overflowed).
std::vector<std::string> loss_scales(const ReplicaRun& replica) {
  const std::string key = "\"loss_scale\":";
  std::vector<std::string> scales;
  for (const auto& line : replica.lines) {
    if (line.find("\"event\":\"step\"") == std::string::npos) continue;
    const size_t at = line.find(key);
    if (at == std::string::npos) {
      scales.emplace_back("none");
      continue;
    }
    const size_t begin = at + key.size();
    scales.push_back(line.substr(begin, line.find_first_of(",}", begin) - begin));
  }
  return scales;
}

// Equal, a skipped step's missing norm (NaN) included.
bool same_norms(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

void require_identical_replicas(const JobRun& run) {
  const auto& first = run.replicas.front();
  for (const auto& replica : run.replicas) {
    CHECK(replica.params_sha256 == first.params_sha256);
    CHECK(replica.losses == first.losses);
    CHECK(replica.val_losses == first.val_losses);
    CHECK(skip_pattern(replica) == skip_pattern(first));
  }
}
}  // namespace

TEST_CASE("mixed precision: bf16 training follows fp32, on one node and on 2 replicas",
          "[dp][precision]") {
  const double fp32 = precision_run("fp32", 1).replicas[0].val_losses.back();
  for (int ranks : {1, 2}) {
    const JobRun& bf16 = precision_run("bf16", ranks);
    require_identical_replicas(bf16);
    const double val = bf16.replicas[0].val_losses.back();
    WARN(ranks << " node(s): val_loss fp32 " << fp32 << ", bf16 " << val << " ("
               << 100 * relative(val, fp32) << "%)");
    CHECK(relative(val, fp32) < kBf16ValLossBound);
    CHECK(bf16.replicas[0].losses.back() < bf16.replicas[0].losses.front());
    // The step events say the precision; bf16 has no loss scale.
    bool said = false;
    for (const auto& line : bf16.replicas[0].lines) {
      if (line.find("\"event\":\"step\"") == std::string::npos) continue;
      said = true;
      CHECK(line.find("\"precision\":\"bf16\"") != std::string::npos);
      CHECK(line.find("loss_scale") == std::string::npos);
    }
    CHECK(said);
  }
}

TEST_CASE("mixed precision: fp8 with loss scaling, the same skips on every replica",
          "[dp][precision]") {
  const double fp32 = precision_run("fp32", 1).replicas[0].val_losses.back();
  const std::vector<std::string> high_scale{"train.loss_scale_init=16777216"};
  const JobRun& one = precision_run("fp8", 1, high_scale);
  const JobRun& two = precision_run("fp8", 2, high_scale);
  require_identical_replicas(two);
  const std::string skips = skip_pattern(two.replicas[0]);
  WARN("fp8 val_loss: 1 node " << one.replicas[0].val_losses.back() << ", 2 replicas "
                               << two.replicas[0].val_losses.back() << ", fp32 " << fp32
                               << "; steps skipped (2 replicas): " << skips);
  REQUIRE(skips.size() == 40);
  CHECK(skips.find('1') != std::string::npos);  // 2^24 overflowed at least once
  CHECK(skips.find('0') != std::string::npos);
  bool skipped_event = false;
  for (const auto& line : two.replicas[1].lines)
    if (line.find("\"event\":\"step_skipped\"") != std::string::npos &&
        line.find("\"loss_scale\"") != std::string::npos)
      skipped_event = true;
  CHECK(skipped_event);
  CHECK(relative(one.replicas[0].val_losses.back(), fp32) < kFp8ValLossBound);
  CHECK(relative(two.replicas[0].val_losses.back(), fp32) < kFp8ValLossBound);
}

TEST_CASE("mixed precision: fp8 under ZeRO 1 and 2 gives ZeRO 0's bits", "[dp][precision]") {
  // Each replica unscales only the gradient shard its optimizer owns under ZeRO 1/2; at
  // 2 replicas the reductions add the same two values in any order (as in fp32), so the
  // skips, losses and final parameters must be identical to ZeRO 0's.
  const std::vector<std::string> high_scale{"train.loss_scale_init=16777216"};
  const JobRun& zero0 = precision_run("fp8", 2, high_scale);
  for (const char* zero : {"parallel.zero=1", "parallel.zero=2"}) {
    INFO(zero);
    std::vector<std::string> extra = high_scale;
    extra.push_back(zero);
    const JobRun& sharded = precision_run(std::string("fp8-") + zero, 2, extra);
    require_identical_replicas(sharded);
    CHECK(sharded.replicas[0].params_sha256 == zero0.replicas[0].params_sha256);
    CHECK(sharded.replicas[0].losses == zero0.replicas[0].losses);
    CHECK(skip_pattern(sharded.replicas[0]) == skip_pattern(zero0.replicas[0]));
  }
}

TEST_CASE("mixed precision: fp8 on the scrambled test device gives the CPU's bits, skips and "
          "loss scales, on one node and on 2 replicas (ZeRO 0 and 1)",
          "[dp][precision][device]") {
  // The scrambled device's memory reads as garbage in place
  // (runtime/backend/scrambled_backend.hpp): the same bits as on the CPU backend mean that
  // the loss scaler's overflow check and unscaling, and the FP8 scales and amaxes, all
  // went through the backend (Backend::sum_squares and Backend::scale), as on a GPU.
  // Exact equality: the same arithmetic in the same order. 2^24 forces skipped steps.
  const std::vector<std::string> high_scale{"train.loss_scale_init=16777216"};
  const std::string scrambled = "train.device=\"scrambled-cpu-for-tests\"";
  struct Case {
    int ranks;
    std::string tag;
    std::vector<std::string> extra;
  };
  const std::vector<Case> cases{{1, "", {}}, {2, "", {}}, {2, "-zero1", {"parallel.zero=1"}}};
  for (const auto& c : cases) {
    INFO(c.ranks << " rank(s)" << c.tag);
    std::vector<std::string> on_cpu = high_scale;
    on_cpu.insert(on_cpu.end(), c.extra.begin(), c.extra.end());
    std::vector<std::string> on_device = on_cpu;
    on_device.push_back(scrambled);
    const JobRun& cpu = precision_run("fp8" + c.tag, c.ranks, on_cpu);
    const JobRun& device = precision_run("fp8-scrambled" + c.tag, c.ranks, on_device);
    require_identical_replicas(device);
    const std::string skips = skip_pattern(device.replicas[0]);
    CHECK(skips.find('1') != std::string::npos);  // the forced overflow was skipped
    CHECK(skips == skip_pattern(cpu.replicas[0]));
    CHECK(loss_scales(device.replicas[0]) == loss_scales(cpu.replicas[0]));
    CHECK(device.replicas[0].losses == cpu.replicas[0].losses);
    CHECK(same_norms(device.replicas[0].grad_norms, cpu.replicas[0].grad_norms));
    CHECK(device.replicas[0].val_losses == cpu.replicas[0].val_losses);
    CHECK(device.replicas[0].params_sha256 == cpu.replicas[0].params_sha256);
  }
}

namespace {

// The overflow phase that 2^24 forces at the start: the steps up to the first applied
// one (same parameters in every run until then), as skip flags and loss scales.
std::string forced_skips(const ReplicaRun& replica) {
  const std::string pattern = skip_pattern(replica);
  return pattern.substr(0, pattern.find('0') + 1);
}

// fp8 with `codec` against fp8 uncompressed, and fp32 with and without it, 2 replicas,
// 200 steps (see kFp8CompressedBound).
void check_fp8_compressed(const std::string& codec) {
  const std::vector<std::string> longer{"train.steps=200", "train.eval_every=100",
                                        "train.eval_batches=8"};
  const std::vector<std::string> high_scale{"train.loss_scale_init=16777216"};
  const std::vector<std::string> compressed{"parallel.zero=0",
                                            "comm.compression=\"" + codec + "\"",
                                            "comm.topk_fraction=0.05"};
  auto settings = [&](std::vector<std::vector<std::string>> parts) {
    std::vector<std::string> all = longer;
    for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
    return all;
  };
  const JobRun& fp32 = precision_run("fp32-long", 2, settings({}));
  const JobRun& fp32_codec = precision_run("fp32-long-" + codec, 2, settings({compressed}));
  const JobRun& fp8 = precision_run("fp8-long", 2, settings({high_scale}));
  const JobRun& fp8_codec = precision_run("fp8-long-" + codec, 2, settings({high_scale, compressed}));
  require_identical_replicas(fp8_codec);  // skips included; and the replica checks passed
  const auto& replica = fp8_codec.replicas[0];
  CHECK(replica.grad_encoded_bytes < replica.grad_bytes);  // the codec ran
  // The forced overflows: skipped before any codec, at the uncompressed run's steps and
  // scales. Later overflows depend on the parameters, which compression changes.
  const std::string forced = forced_skips(replica);
  CHECK(forced.find('1') != std::string::npos);
  CHECK(forced == forced_skips(fp8.replicas[0]));
  const auto scales = loss_scales(replica);
  const auto plain_scales = loss_scales(fp8.replicas[0]);
  REQUIRE(scales.size() == plain_scales.size());
  CHECK(std::vector<std::string>(scales.begin(), scales.begin() + static_cast<long>(forced.size())) ==
        std::vector<std::string>(plain_scales.begin(),
                                 plain_scales.begin() + static_cast<long>(forced.size())));
  CHECK(replica.losses.back() < replica.losses.front() - 1.0);
  const double val = replica.val_losses.back();
  const double fp8_gap = (val - fp8.replicas[0].val_losses.back()) / fp8.replicas[0].val_losses.back();
  const double fp32_gap = (fp32_codec.replicas[0].val_losses.back() - fp32.replicas[0].val_losses.back()) /
                          fp32.replicas[0].val_losses.back();
  const double over_fp32_codec = relative(val, fp32_codec.replicas[0].val_losses.back());
  const std::string skips = skip_pattern(replica);
  const std::string plain_skips = skip_pattern(fp8.replicas[0]);
  WARN("fp8 + " << codec << ", 2 replicas, 200 steps: val_loss " << val << ", "
                << 100 * fp8_gap << "% above fp8 uncompressed (fp32: compression costs "
                << 100 * fp32_gap << "%), " << 100 * over_fp32_codec << "% from fp32 + "
                << codec << "; steps skipped " << std::count(skips.begin(), skips.end(), '1')
                << " (uncompressed fp8: "
                << std::count(plain_skips.begin(), plain_skips.end(), '1')
                << "); exposed communication " << replica.comm_ms << " ms over the run (fp32 + "
                << codec << ", reduced as backward goes: " << fp32_codec.replicas[0].comm_ms
                << " ms)");
  CHECK(over_fp32_codec < kFp8ValLossBound);
  CHECK(fp8_gap < fp32_gap + kFp8ValLossBound);
}

}  // namespace

TEST_CASE("mixed precision: fp8 with top-k compression follows uncompressed fp8 and "
          "skips its forced overflows", "[dp][precision][compression]") {
  check_fp8_compressed("topk");
}

TEST_CASE("mixed precision: fp8 with INT8 compression follows uncompressed fp8 and skips "
          "its forced overflows", "[dp][precision][compression]") {
  check_fp8_compressed("int8");
}

TEST_CASE("mixed precision: fp8 with top-k + INT8 compression follows uncompressed fp8 and "
          "skips its forced overflows", "[dp][precision][compression]") {
  check_fp8_compressed("topk+int8");
}

TEST_CASE("mixed precision: fp8 with compression on the scrambled test device gives the "
          "CPU's bits, skips and loss scales", "[dp][precision][compression][device]") {
  // The codecs encode the host staging of the gradients (the device's gradients are
  // unscaled through the backend, then copied down bucket by bucket); the rest is the
  // device's. AdamW's given second moment runs in the host optimizer (the node's
  // gradient_shard actors) only, so this replica's own AdamW takes v from the reduced
  // gradients (comm.variance_refresh_steps = 0).
  const std::vector<std::string> on_cpu{"train.loss_scale_init=16777216", "parallel.zero=0",
                                        "comm.compression=\"topk+int8\"",
                                        "comm.variance_refresh_steps=0"};
  std::vector<std::string> on_device = on_cpu;
  on_device.push_back("train.device=\"scrambled-cpu-for-tests\"");
  const JobRun& cpu = precision_run("fp8-compressed", 2, on_cpu);
  const JobRun& device = precision_run("fp8-compressed-scrambled", 2, on_device);
  require_identical_replicas(device);
  const std::string skips = skip_pattern(device.replicas[0]);
  CHECK(skips.find('1') != std::string::npos);
  CHECK(skips == skip_pattern(cpu.replicas[0]));
  CHECK(loss_scales(device.replicas[0]) == loss_scales(cpu.replicas[0]));
  CHECK(device.replicas[0].losses == cpu.replicas[0].losses);
  CHECK(same_norms(device.replicas[0].grad_norms, cpu.replicas[0].grad_norms));
  CHECK(device.replicas[0].params_sha256 == cpu.replicas[0].params_sha256);
}

TEST_CASE("mixed precision: an fp8 run stopped at step k and resumed continues the "
          "uninterrupted run bit for bit, on one node and on 2 replicas",
          "[dp][precision][checkpoint]") {
  // The checkpoint keeps the loss scale, its good-step count and the fp8 amax histories
  // (runtime/checkpoint/precision_state.hpp). 2^24 overflows E5M2 in the first steps and
  // a window of 2 doubles the scale back into overflow later, so steps are skipped on both
  // sides of k; a resume that restarted at 2^24 would skip others (their batches never
  // learned), and one from empty amax histories would quantize differently.
  const std::vector<std::string> fp8{"train.precision=\"fp8\"", "train.loss_scale_init=16777216",
                                     "train.loss_scale_window=2"};
  const int64_t k = 5;
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), fp8.begin(), fp8.end());
    return tiny_settings(extra);
  };
  for (int ranks : {1, 2}) {
    INFO(ranks << " rank(s)");
    ScratchDir whole_dir("fp8-whole-" + std::to_string(ranks));
    const JobRun whole = run_job(ranks, whole_dir.path(), with({}));
    INFO(whole.report);
    REQUIRE(whole.ok);
    const std::string skips = skip_pattern(whole.replicas[0]);
    WARN(ranks << " rank(s): fp8 skips " << skips << ", resumed at step " << k);
    REQUIRE(skips.size() == 12);
    REQUIRE(skips.substr(0, k).find('1') != std::string::npos);
    REQUIRE(skips.substr(k).find('1') != std::string::npos);

    ScratchDir dir("fp8-resume-" + std::to_string(ranks));
    const JobRun first = run_job(ranks, dir.path(), with({"train.stop_after_steps=" + std::to_string(k)}));
    INFO(first.report);
    REQUIRE(first.ok);
    REQUIRE(first.replicas[0].losses.size() == static_cast<size_t>(k));
    std::filesystem::remove_all(dir.path() / "rendezvous");
    const JobRun second = run_job(ranks, dir.path(), with({"checkpoint.resume=\"latest\""}));
    INFO(second.report);
    REQUIRE(second.ok);
    for (const auto& replica : second.replicas) {
      // The events file is appended to: the resumed steps k+1..12 follow the first k.
      CHECK(replica.losses == whole.replicas[0].losses);
      CHECK(skip_pattern(replica) == skips);
      CHECK(loss_scales(replica) == loss_scales(whole.replicas[0]));
      CHECK(replica.params_sha256 == whole.replicas[0].params_sha256);
      bool restored = false;
      for (const auto& line : replica.lines)
        if (line.find("\"event\":\"resumed\"") != std::string::npos)
          restored = line.find("\"precision_state\":\"restored\"") != std::string::npos;
      CHECK(restored);
    }
  }
}

TEST_CASE("mixed precision: an fp8 checkpoint of 2 replicas resumes on one node with their "
          "amax histories merged, and as bf16 without them",
          "[dp][precision][checkpoint]") {
  // Another world size sees other slices of the batch: each replica's own histories do
  // not fit it, their cautious merge does (runtime/train/state/trainer_precision_state.cpp). A
  // bf16 run has no loss scale and no amax history: it ignores them
  // (runtime/train/state/precision_resume.hpp). Both train on from the checkpoint.
  const std::vector<std::string> fp8{"train.precision=\"fp8\"", "train.loss_scale_init=16777216",
                                     "train.loss_scale_window=2"};
  ScratchDir merged_dir("fp8-resume-merged"), bf16_dir("fp8-resume-bf16");
  std::vector<std::string> stop = fp8;
  stop.push_back("train.stop_after_steps=5");
  const JobRun first = run_job(2, merged_dir.path(), tiny_settings(stop));
  INFO(first.report);
  REQUIRE(first.ok);
  std::filesystem::remove_all(merged_dir.path() / "rendezvous");
  std::filesystem::copy(merged_dir.path(), bf16_dir.path(),
                        std::filesystem::copy_options::recursive |
                            std::filesystem::copy_options::overwrite_existing);
  struct Case {
    const ScratchDir& dir;
    std::string precision, outcome;
  };
  for (const Case& c : {Case{merged_dir, "fp8", "merged"}, Case{bf16_dir, "bf16", "ignored"}}) {
    INFO("resumed as " << c.precision);
    std::vector<std::string> settings = fp8;
    settings.push_back("train.precision=\"" + c.precision + "\"");
    settings.push_back("checkpoint.resume=\"latest\"");
    const JobRun resumed = run_job(1, c.dir.path(), tiny_settings(settings));
    INFO(resumed.report);
    REQUIRE(resumed.ok);
    const auto& replica = resumed.replicas[0];
    std::string resumed_event;
    for (const auto& line : replica.lines)
      if (line.find("\"event\":\"resumed\"") != std::string::npos) resumed_event = line;
    CHECK_THAT(resumed_event, Catch::Matchers::Contains("\"precision_state\":\"" + c.outcome + "\""));
    // The events file is appended to: node 0's 5 steps, then the resumed 7.
    REQUIRE(replica.losses.size() == 12);
    CHECK(replica.losses.back() < replica.losses.front());
    CHECK(std::isfinite(replica.losses.back()));
  }
}
