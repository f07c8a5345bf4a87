// The mixed-precision state a checkpoint keeps (runtime/checkpoint/precision_state.hpp):
// a delayed-scaling history and a loss scaler put back from their saved state go on
// exactly as the originals; a replica's own state is cut out of all replicas', and a
// world of another size gets their cautious merge; an fp8 trainer restored from a snapshot of step k (weights,
// moments and this state) takes steps k.. with the same skips, loss scales, losses and
// parameter bits as the trainer that never stopped, and one restored without the state
// does not (so the comparison can fail); the manifest round-trips the state, reads an
// older manifest without it as "not recorded" and refuses a malformed one; and the
// resume's decision when the checkpoint's precision differs from the config's
// (runtime/train/state/precision_resume.hpp).
#include <catch2/catch.hpp>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/io.h>

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/checkpoint/write.hpp"
#include "runtime/config/load.hpp"
#include "runtime/numerics/delayed_scaling.hpp"
#include "runtime/optim/loss_scaler.hpp"
#include "runtime/train/state/precision_resume.hpp"
#include "support/one_stage_trainer.hpp"
#include "schemas/checkpoint_manifest.capnp.h"
#include "support/random_batches.hpp"
#include "support/test_paths.hpp"

using namespace dseek;
namespace ck = dseek::checkpoint;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

TEST_CASE("delayed scaling: a restored history gives the same scales as the original",
          "[unit][numerics][precision][checkpoint]") {
  const numerics::DelayedScalingSettings settings{4, 1};
  numerics::DelayedScaling original(numerics::Fp8Format::e4m3, settings);
  // Amaxes that rise and fall (the history's max moves as entries age out), an
  // overflowed step (not recorded) and zeros (the scale stays where it was).
  const std::vector<float> amaxes{3.0f, 0.5f, 7.0f, std::numeric_limits<float>::infinity(),
                                  1.0f, 0.25f, 2.0f, 0.0f,  0.0f,  0.0f, 0.0f, 5.0f, 0.125f};
  const size_t k = 6;
  for (size_t s = 0; s < k; ++s) {
    original.record(amaxes[s]);
    original.end_step();
  }
  numerics::DelayedScaling restored(numerics::Fp8Format::e4m3, settings);
  restored.restore(original.history_oldest_first(), original.scale());
  CHECK(restored.scale() == original.scale());
  CHECK(restored.history_max() == original.history_max());
  for (size_t s = k; s < amaxes.size(); ++s) {
    INFO("step " << s);
    original.record(amaxes[s]);
    original.end_step();
    restored.record(amaxes[s]);
    restored.end_step();
    CHECK(restored.scale() == original.scale());  // bitwise: the same float arithmetic
    CHECK(restored.history_oldest_first() == original.history_oldest_first());
  }
  // The zeros above left the scale of the last non-zero history: not a function of the
  // history alone, which is why the state keeps the scale too.
  numerics::DelayedScaling zeros(numerics::Fp8Format::e4m3, {2, 0});
  zeros.record(4.0f);
  zeros.end_step();
  for (int s = 0; s < 2; ++s) zeros.end_step();
  CHECK(zeros.history_max() == 0.0f);
  CHECK(zeros.scale() == numerics::fp8_max(numerics::Fp8Format::e4m3) / 4.0f);
  // Another history length (train.fp8_amax_history changed): the newest amaxes stay.
  numerics::DelayedScaling shorter(numerics::Fp8Format::e4m3, {2, 0});
  shorter.restore({9.0f, 1.0f, 2.0f}, 0.5f);
  CHECK(shorter.history_oldest_first() == std::vector<float>{1.0f, 2.0f});
  CHECK(shorter.scale() == 0.5f);
  numerics::DelayedScaling longer(numerics::Fp8Format::e4m3, {4, 0});
  longer.restore({1.0f, 2.0f}, 0.5f);
  CHECK(longer.history_oldest_first() == std::vector<float>{0.0f, 0.0f, 1.0f, 2.0f});
}

TEST_CASE("delayed scaling: a replica's own state, and the cautious merge of all replicas'",
          "[unit][numerics][precision][checkpoint]") {
  // 2 replicas x 2 tensors, history 2 (replica 0's, then replica 1's).
  numerics::DelayedScalingState state;
  state.replicas = 2;
  state.history_length = 2;
  state.scales = {8.0f, 4.0f, 2.0f, 16.0f};
  state.histories = {1.0f, 3.0f, 0.5f, 0.25f, 2.0f, 1.0f, 0.0f, 0.5f};
  CHECK(state.tensors() == 2);
  const auto second = numerics::replica_state(state, 1);
  CHECK(second.replicas == 1);
  CHECK(second.scales == std::vector<float>{2.0f, 16.0f});
  CHECK(second.histories == std::vector<float>{2.0f, 1.0f, 0.0f, 0.5f});
  const auto merged = numerics::merged_state(state);
  CHECK(merged.replicas == 1);
  CHECK(merged.scales == std::vector<float>{2.0f, 4.0f});  // the smaller of each
  CHECK(merged.histories == std::vector<float>{2.0f, 3.0f, 0.5f, 0.5f});  // the larger
  CHECK_THROWS_WITH(numerics::replica_state(state, 2), Contains("replica 2 of 2"));
}

TEST_CASE("loss scaler: a restored scaler halves and doubles at the original's steps",
          "[unit][optim][precision][checkpoint]") {
  optim::LossScaler original({65536.0, 3});
  const std::vector<bool> finite{false, true, true, false, true, true,
                                 true,  true, true, true,  false, true};
  const size_t k = 5;  // two good steps into a window: the counter matters
  for (size_t s = 0; s < k; ++s) original.update_finite(finite[s]);
  optim::LossScaler restored({65536.0, 3});
  restored.restore(original.scale(), original.good_steps());
  optim::LossScaler fresh_counter({65536.0, 3});
  fresh_counter.restore(original.scale(), 0);
  bool counter_mattered = false;
  for (size_t s = k; s < finite.size(); ++s) {
    INFO("step " << s);
    CHECK(restored.update_finite(finite[s]) == original.update_finite(finite[s]));
    fresh_counter.update_finite(finite[s]);
    CHECK(restored.scale() == original.scale());
    CHECK(restored.good_steps() == original.good_steps());
    counter_mattered = counter_mattered || fresh_counter.scale() != original.scale();
  }
  CHECK(counter_mattered);  // the scale alone would double at the wrong step
  CHECK_THROWS_WITH(restored.restore(0.0f, 0), Contains("loss scale"));
  CHECK_THROWS_WITH(restored.restore(std::numeric_limits<float>::infinity(), 0),
                    Contains("loss scale"));
}

namespace {

struct StepTrace {
  std::vector<double> losses, scales;
  std::string skips;
  std::vector<uint32_t> params;  // bits after the last step
};

std::vector<uint32_t> param_bits(testing::OneStageTrainer& trainer) {
  std::vector<uint32_t> bits(trainer.model().num_params());
  trainer.backend().copy_to_host(bits.data(), trainer.model().params(),
                                 bits.size() * sizeof(float));
  return bits;
}

void run_steps(testing::OneStageTrainer& trainer, int64_t from, int64_t to, StepTrace& trace) {
  for (int64_t step = from; step < to; ++step) {
    const auto report = trainer.train_step(step);
    trace.losses.push_back(report.loss);
    trace.scales.push_back(report.loss_scale);
    trace.skips += report.skipped ? '1' : '0';
  }
  trace.params = param_bits(trainer);
}

}  // namespace

TEST_CASE("trainer: fp8 restored from step k with its precision state continues bit for "
          "bit, and without it does not",
          "[unit][precision][checkpoint]") {
  // 2^24 overflows E5M2 for the first steps; a window of 2 doubles the scale back into
  // overflow later, so skips and scale changes happen on both sides of k.
  const auto config = config::load_config_text(
      "", "x.toml",
      {"model.dim=32", "model.layers=2", "model.heads=2", "model.context=16", "model.vocab=64",
       "train.batch_size=4", "train.threads=1", "train.steps=16", "train.warmup_steps=0",
       "train.precision=\"fp8\"", "train.loss_scale_init=16777216",
       "train.loss_scale_window=2", "train.fp8_amax_history=4"});
  const int64_t steps = 16, k = 7;
  testing::RandomBatches batches;
  testing::OneStageTrainer whole(config, batches);
  StepTrace uninterrupted;
  run_steps(whole, 0, k, uninterrupted);
  // The checkpoint of step k, as Checkpointing takes it.
  const size_t n = whole.model().num_params();
  std::vector<float> params(n), adam_m(n), adam_v(n);
  whole.snapshot(params.data(), adam_m.data(), adam_v.data());
  const int64_t optimizer_steps = whole.optimizer_steps();
  const ck::PrecisionState state = whole.precision_state();
  CHECK(state.precision == "fp8");
  CHECK(state.fp8.scales.size() == 2 * 4 * 3);  // layers x block matmuls x operands
  CHECK(state.fp8.history_length == 4);
  CHECK(state.loss_scale < 16777216.0);
  run_steps(whole, k, steps, uninterrupted);
  INFO("uninterrupted skips " << uninterrupted.skips);
  REQUIRE(uninterrupted.skips.substr(0, k).find('1') != std::string::npos);
  REQUIRE(uninterrupted.skips.substr(k).find('1') != std::string::npos);

  auto resumed_from_k = [&](bool with_state) {
    testing::OneStageTrainer trainer(config, batches);
    trainer.restore(params.data(), adam_m.data(), adam_v.data(), optimizer_steps);
    if (with_state) trainer.restore_precision_state(state);
    StepTrace trace;
    run_steps(trainer, k, steps, trace);
    return trace;
  };
  auto tail = [&](const std::vector<double>& values) {
    return std::vector<double>(values.begin() + k, values.end());
  };
  const StepTrace resumed = resumed_from_k(true);
  CHECK(resumed.skips == uninterrupted.skips.substr(k));
  CHECK(resumed.scales == tail(uninterrupted.scales));
  CHECK(resumed.losses == tail(uninterrupted.losses));
  CHECK(resumed.params == uninterrupted.params);
  // Without the state the resumed run restarts at 2^24 and empty amax histories.
  const StepTrace reset = resumed_from_k(false);
  CHECK(reset.scales != tail(uninterrupted.scales));
  CHECK(reset.params != uninterrupted.params);
}

namespace {

const model::ParamLayout& tiny_layout() {
  static const model::ParamLayout layout(model::GptShape{16, 2, 2, 8, 32});
  return layout;
}

ck::Snapshot fp8_snapshot() {
  ck::Snapshot s;
  s.step = 5;
  s.optimizer_steps = 3;
  s.tensors = tiny_layout().tensors();
  for (auto* buffer : {&s.params, &s.adam_m, &s.adam_v}) buffer->assign(tiny_layout().total(), 0.5f);
  s.precision.precision = "fp8";
  s.precision.loss_scale = 4096.0;
  s.precision.loss_scale_good_steps = 17;
  s.precision.fp8.replicas = 2;  // one operand each
  s.precision.fp8.history_length = 3;
  s.precision.fp8.scales = {448.0f, 0.25f};
  s.precision.fp8.histories = {0.0f, 1.5f, 2.0f, 3.0f, std::ldexp(1.0f, -20), 0.0f};
  return s;
}

// Rewrites the manifest of `dir` through `edit` (on the Cap'n Proto builder).
template <typename Edit>
void rewrite_manifest(const fs::path& dir, Edit edit) {
  const fs::path path = dir / ck::kManifestFile;
  capnp::MallocMessageBuilder builder;
  {
    const int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    capnp::StreamFdMessageReader reader(fd);
    builder.setRoot(reader.getRoot<schema::CheckpointManifest>());
    ::close(fd);
  }
  edit(builder.getRoot<schema::CheckpointManifest>());
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  REQUIRE(fd >= 0);
  capnp::writeMessageToFd(fd, builder);
  ::close(fd);
}

}  // namespace

TEST_CASE("checkpoint manifest: the precision state round-trips, an older manifest reads "
          "as not recorded and a malformed one is refused",
          "[unit][checkpoint][precision]") {
  testing::ScratchDir dir("ckpt-precision");
  const ck::Snapshot snapshot = fp8_snapshot();
  const auto written = ck::write_checkpoint(snapshot, {dir.path(), 3, false});
  const ck::Manifest m = ck::read_manifest(written.path);
  CHECK(m.precision.precision == "fp8");
  CHECK(m.precision.loss_scale == 4096.0);
  CHECK(m.precision.loss_scale_good_steps == 17);
  CHECK(m.precision.fp8.history_length == 3);
  CHECK(m.precision.fp8.replicas == 2);
  CHECK(m.precision.fp8.scales == snapshot.precision.fp8.scales);
  CHECK(m.precision.fp8.histories == snapshot.precision.fp8.histories);  // bitwise floats

  // Written before the state existed: no precision struct; lossScale was always 1.
  // Such manifests are format 1 (no checksum of their own: an edited format 2 one is refused).
  rewrite_manifest(written.path, [](schema::CheckpointManifest::Builder root) {
    root.setFormatVersion(1);
    root.disownPrecision();
    root.setLossScale(1.0);
  });
  const ck::Manifest old = ck::read_manifest(written.path);
  CHECK(old.precision.precision.empty());
  CHECK(old.precision.loss_scale == 1.0);
  CHECK(old.precision.loss_scale_good_steps == 0);
  CHECK(old.precision.fp8.empty());
  CHECK(old.step == 5);

  rewrite_manifest(written.path, [](schema::CheckpointManifest::Builder root) {
    auto precision = root.initPrecision();
    precision.setPrecision("fp8");
    precision.setFp8AmaxHistoryLength(3);
    precision.setFp8Replicas(1);
    precision.initFp8Scales(2);
    precision.initFp8AmaxHistories(5);  // one short
  });
  std::string error;
  try {
    ck::read_manifest(written.path);
  } catch (const ck::CheckpointError& e) {
    error = e.what();
  }
  CHECK_THAT(error, Contains("fp8 amax histories") && Contains(ck::kManifestFile));
}

TEST_CASE("precision resume: fp8 state restored into fp8, ignored by bf16/fp32, fresh from "
          "a checkpoint without it",
          "[unit][checkpoint][precision]") {
  ck::PrecisionState fp8;
  fp8.precision = "fp8";
  auto same = train::precision_resume(fp8, config::Precision::fp8);
  CHECK(same.restore);
  CHECK(same.outcome == "restored");
  CHECK(same.note.empty());
  for (const auto other : {config::Precision::bf16, config::Precision::fp32}) {
    auto ignored = train::precision_resume(fp8, other);
    CHECK_FALSE(ignored.restore);
    CHECK(ignored.outcome == "ignored");
    CHECK_THAT(ignored.note, Contains("train.precision") && Contains(config::name_string(other)));
  }
  ck::PrecisionState bf16;
  bf16.precision = "bf16";
  auto fresh = train::precision_resume(bf16, config::Precision::fp8);
  CHECK_FALSE(fresh.restore);
  CHECK(fresh.outcome == "fresh");
  CHECK_THAT(fresh.note, Contains("bf16") && Contains("train.loss_scale_init"));
  auto older = train::precision_resume(ck::PrecisionState{}, config::Precision::fp8);
  CHECK_FALSE(older.restore);
  CHECK(older.outcome == "fresh");
  CHECK_THAT(older.note, Contains("older checkpoint"));
  auto neither = train::precision_resume(bf16, config::Precision::fp32);
  CHECK_FALSE(neither.restore);
  CHECK(neither.outcome == "none");
  CHECK(neither.note.empty());
}
