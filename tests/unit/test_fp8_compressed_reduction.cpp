// fp8's dynamic loss scaling with gradient compression, in one process
// (runtime/train/pipeline/stage_trainer.cpp; the reducer's side,
// dist/comm_gradient_reducer.hpp): the compressing reducer's skip_step()
// leaves every error-feedback residual and the second-moment schedule as a reducer that
// never saw the step, and refuses once a bucket is on the wire; a trainer whose fp8
// steps overflow (a loss scale of 2^20 that doubles after every good step, so overflows
// recur after residuals exist) skips them before any codec: residuals, parameters and
// AdamW state unchanged across a skipped step, never a non-finite residual, residuals
// in the units of the unscaled gradient, the scale halved; its scale sequence is that of the same trainer reducing uncompressed, and the
// codec sees unscaled gradients (the INT8 run's norm is the uncompressed run's within
// INT8's rounding); another replica's overflow skips a step whose local gradients were
// finite; on the scrambled test device it gives the CPU backend's bits.
// The data plane is IdenticalRanksCommunicator (support/): 2 ranks holding the same
// values, so the sums are exact; the same over real UCX ranks is
// tests/dp/test_fp8_compression.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dist/comm_gradient_reducer.hpp"
#include "dist/reducer_settings.hpp"
#include "runtime/config/load.hpp"
#include "support/one_stage_trainer.hpp"
#include "support/identical_ranks_communicator.hpp"
#include "support/random_batches.hpp"
#include "support/random_values.hpp"

using namespace dseek;
using dseek::testing::IdenticalRanksCommunicator;
using dseek::testing::RandomBatches;

namespace {

using Residuals = std::vector<std::vector<float>>;

Residuals residuals_of(const dist::CommGradientReducer& reducer) {
  Residuals all;
  for (size_t b = 0; b < reducer.buckets().size(); ++b) {
    const auto r = reducer.residual(b);
    all.emplace_back(r.begin(), r.end());
  }
  return all;
}

bool all_finite(const Residuals& residuals) {
  for (const auto& bucket : residuals)
    for (float v : bucket)
      if (!std::isfinite(v)) return false;
  return true;
}

float max_abs(const Residuals& residuals) {
  float m = 0.0f;
  for (const auto& bucket : residuals)
    for (float v : bucket) m = std::max(m, std::fabs(v));
  return m;
}

bool any_nonzero(const Residuals& residuals) {
  for (const auto& bucket : residuals)
    for (float v : bucket)
      if (v != 0.0f) return true;
  return false;
}

// One reducer step on `values` (copied into `grads`), every range reported.
void reduce(dist::CommGradientReducer& reducer, std::vector<float>& grads,
            const std::vector<float>& values, const std::vector<model::ParamRange>& order,
            int64_t step) {
  grads = values;
  reducer.begin_step(step);
  for (const auto& range : order) reducer.gradients_ready(range);
  reducer.finish();
}

// The bits of a buffer, so that NaNs compare too.
std::vector<uint32_t> bits(const float* data, size_t n) {
  std::vector<uint32_t> out(n);
  std::memcpy(out.data(), data, n * sizeof(float));
  return out;
}

// The tiny fp8 model of test_loss_scaler.cpp, as replica 0 of 2; 2^20 overflows E5M2
// at first, and a window of 1 doubles the scale after every good step, so overflows
// come back once the residuals hold something.
std::vector<std::string> fp8_settings(const std::string& compression) {
  return {"model.dim=32", "model.layers=2", "model.heads=2", "model.context=16",
          "model.vocab=64", "train.batch_size=4", "train.threads=1", "train.steps=12",
          "train.warmup_steps=0", "train.precision=\"fp8\"", "train.loss_scale_init=1048576",
          "train.loss_scale_window=1", "cluster.nodes=2", "parallel.data=2",
          "comm.compression=\"" + compression + "\"", "comm.topk_fraction=0.1"};
}

// The trainer over a reducer over 2 identical ranks, with buckets small enough for several.
struct CompressedReplica {
  explicit CompressedReplica(const std::vector<std::string>& settings)
      : config(config::load_config_text("", "x.toml", settings)),
        comm(0, 2),
        reducer(comm, small_buckets(dist::reducer_settings(config))),
        trainer(config, batches, &reducer) {}
  static dist::ReducerSettings small_buckets(dist::ReducerSettings settings) {
    settings.bucket_bytes = 8 * 1024;
    return settings;
  }
  // Parameters and both AdamW moments.
  std::vector<float> state() {
    const size_t n = trainer.model().num_params();
    std::vector<float> s(3 * n);
    trainer.snapshot(s.data(), s.data() + n, s.data() + 2 * n);
    return s;
  }
  config::JobConfig config;
  RandomBatches batches;
  IdenticalRanksCommunicator comm;
  dist::CommGradientReducer reducer;
  testing::OneStageTrainer trainer;
};

}  // namespace

TEST_CASE("compressing reducer: a skipped step leaves the residuals and the refreshes as "
          "a reducer that never saw it", "[comm][precision][compression]") {
  const size_t total = 3000;
  const std::vector<model::ParamRange> order{{2000, 1000}, {1000, 1000}, {0, 1000}};
  dist::ReducerSettings settings;
  settings.compression = dseek::config::Compression::topk;
  settings.topk_fraction = 0.1;
  settings.variance_refresh_steps = 2;  // refreshes at steps 0, 2, 4, ...
  settings.bucket_bytes = 4000;         // a bucket per range
  IdenticalRanksCommunicator comm_a(0, 2), comm_b(0, 2);
  dist::CommGradientReducer skipping(comm_a, settings), plain(comm_b, settings);
  CHECK(skipping.carries_state_between_steps());
  std::vector<float> grads_a(total), grads_b(total);
  skipping.attach(grads_a.data(), total, order);
  plain.attach(grads_b.data(), total, order);
  const auto g0 = testing::random_values(total, 1, 1.0f);
  const auto g2 = testing::random_values(total, 2, 1.0f);
  const auto g3 = testing::random_values(total, 3, 1.0f);

  reduce(skipping, grads_a, g0, order, 0);
  reduce(plain, grads_b, g0, order, 0);
  const Residuals after_step0 = residuals_of(skipping);
  REQUIRE(any_nonzero(after_step0));  // top-k 10% left most of the gradient behind

  // Step 1 skipped (not a refresh step); step 2 then matches the reducer that skipped
  // straight to it, bit for bit: the output, the residuals and the refreshed estimate.
  skipping.begin_step(1);
  skipping.skip_step();
  CHECK(residuals_of(skipping) == after_step0);
  CHECK_THROWS_AS(skipping.finish(), std::logic_error);  // the step is over
  reduce(skipping, grads_a, g2, order, 2);
  reduce(plain, grads_b, g2, order, 2);
  CHECK(bits(grads_a.data(), total) == bits(grads_b.data(), total));
  CHECK(residuals_of(skipping) == residuals_of(plain));
  REQUIRE(skipping.refreshed_second_moment() != nullptr);
  REQUIRE(plain.refreshed_second_moment() != nullptr);
  CHECK(bits(skipping.refreshed_second_moment(), total) ==
        bits(plain.refreshed_second_moment(), total));

  // A refresh that falls on a skipped step (4) is done by the next step (5), which is
  // not a refresh step of its own; then the schedule goes on (6).
  reduce(skipping, grads_a, g3, order, 3);
  skipping.begin_step(4);
  skipping.skip_step();
  CHECK(skipping.refreshed_second_moment() == nullptr);
  reduce(skipping, grads_a, g2, order, 5);
  CHECK(skipping.refreshed_second_moment() != nullptr);
  reduce(skipping, grads_a, g3, order, 6);
  CHECK(skipping.refreshed_second_moment() != nullptr);
  reduce(skipping, grads_a, g0, order, 7);
  CHECK(skipping.refreshed_second_moment() == nullptr);

  // Too late once a bucket is on the wire: its residual has taken the step.
  skipping.begin_step(8);
  skipping.gradients_ready(order[0]);
  CHECK_THROWS_WITH(skipping.skip_step(), Catch::Matchers::Contains("can no longer be skipped"));
  skipping.detach();

  dist::ReducerSettings uncompressed;
  IdenticalRanksCommunicator comm_c(0, 2);
  CHECK_FALSE(dist::CommGradientReducer(comm_c, uncompressed).carries_state_between_steps());
}

TEST_CASE("fp8 with compression: an overflow skips the step before any codec, the "
          "residuals unchanged and always finite", "[train][precision][compression]") {
  for (const char* codec : {"topk", "int8", "topk+int8"}) {
    INFO(codec);
    // The default comm.variance_refresh_steps (20): step 0 overflows, so its refresh is
    // done by the first step applied, the first that needs AdamW's given v.
    CompressedReplica replica(fp8_settings(codec));
    int skipped_with_residual = 0, applied = 0;
    float expected_scale = 1048576.0f;
    for (int64_t step = 0; step < 12; ++step) {
      INFO("step " << step);
      const Residuals before = residuals_of(replica.reducer);
      const auto state_before = replica.state();
      const auto report = replica.trainer.train_step(step);
      CHECK(report.loss_scale == expected_scale);
      CHECK(std::isfinite(report.loss));
      const Residuals after = residuals_of(replica.reducer);
      CHECK(all_finite(after));
      if (report.skipped) {
        CHECK(after == before);
        CHECK(replica.state() == state_before);
        if (any_nonzero(before)) ++skipped_with_residual;
        expected_scale /= 2.0f;
      } else {
        ++applied;
        CHECK(std::isfinite(report.grad_norm));
        CHECK(replica.state() != state_before);
        // One scale: what a codec left behind is no larger than what it sent (top-k
        // drops entries below the smallest kept one, INT8 rounds within half a block's
        // scale), and the reduced gradient is 2 x what each identical rank sent,
        // unscaled. A residual kept in loss-scaled units is ~2^17 times larger.
        const float* reduced = replica.trainer.model().grads();
        float reduced_max = 0.0f;
        for (size_t i = 0; i < replica.trainer.model().num_params(); ++i)
          reduced_max = std::max(reduced_max, std::fabs(reduced[i]));
        CHECK(max_abs(after) <= reduced_max);
        expected_scale *= 2.0f;  // a window of 1
      }
    }
    CHECK(applied >= 3);
    CHECK(skipped_with_residual >= 1);  // an overflow after the residuals held something
  }
}

TEST_CASE("fp8 with compression: another replica's overflow skips the step on this one, "
          "whose own gradients were finite", "[train][precision][compression]") {
  // The other replica's flag (what each replica contributes to the step's first small
  // collective) says it overflowed, at step 4 only; a twin
  // replica without it shows that this one's own step 4 would have gone through.
  auto settings = fp8_settings("topk+int8");
  settings.push_back("train.loss_scale_window=1000");
  CompressedReplica replica(settings), twin(settings);
  bool inject = false;
  replica.comm.after_all_gather = [&inject](void* out, size_t count, comm::DataType type) {
    const size_t slot = sizeof(double);  // the overflow flag of each replica
    if (!inject || type != comm::DataType::u8 || count != 2 * slot) return;
    const double overflowed = 1.0;
    std::memcpy(static_cast<std::byte*>(out) + slot, &overflowed, sizeof overflowed);
    inject = false;
  };
  for (int64_t step = 0; step < 4; ++step) {
    replica.trainer.train_step(step);
    twin.trainer.train_step(step);
  }
  const Residuals before = residuals_of(replica.reducer);
  REQUIRE(any_nonzero(before));
  const auto state_before = replica.state();
  REQUIRE_FALSE(twin.trainer.train_step(4).skipped);
  inject = true;
  const auto skipped = replica.trainer.train_step(4);
  CHECK_FALSE(inject);  // the flag went in
  CHECK(skipped.skipped);
  CHECK(std::isfinite(skipped.loss));
  CHECK(residuals_of(replica.reducer) == before);
  CHECK(replica.state() == state_before);
  const auto next = replica.trainer.train_step(5);
  CHECK(next.loss_scale == skipped.loss_scale / 2);
}

TEST_CASE("fp8 with compression: the uncompressed run's loss scales, and unscaled "
          "gradients into the codec", "[train][precision][compression]") {
  // The scale doubles after 1000 good steps here: it falls from 2^20 until a step goes
  // through, then stays, as in a real run.
  auto compressed = fp8_settings("int8");
  compressed.push_back("train.loss_scale_window=1000");
  auto uncompressed = compressed;
  uncompressed.push_back("comm.compression=\"none\"");
  CompressedReplica plain(uncompressed), int8(compressed);
  bool compared_norm = false;
  for (int64_t step = 0; step < 8; ++step) {
    INFO("step " << step);
    const auto a = plain.trainer.train_step(step);
    const auto b = int8.trainer.train_step(step);
    CHECK(a.skipped == b.skipped);
    CHECK(a.loss_scale == b.loss_scale);
    if (!a.skipped && !b.skipped && !compared_norm) {
      // The first applied step sees the same parameters: the INT8 sum is the exact one
      // within its rounding (a scale of max|g| / 127 per block of 256). Gradients still
      // multiplied by the loss scale (2^17 or so) would be that many times larger.
      CHECK(b.grad_norm == Approx(a.grad_norm).epsilon(0.02));
      compared_norm = true;
    }
  }
  CHECK(compared_norm);
}

TEST_CASE("fp8 with compression on the scrambled test device takes the CPU backend's steps "
          "bit for bit", "[train][precision][compression][scrambled]") {
  // AdamW's given second moment runs on the host optimizer only (the gradient_shard
  // actors), so this trainer's own AdamW takes v from the reduced gradients here.
  auto settings = fp8_settings("topk+int8");
  settings.push_back("comm.variance_refresh_steps=0");
  auto on_device = settings;
  on_device.push_back("train.device=\"scrambled-cpu-for-tests\"");
  CompressedReplica cpu(settings), device(on_device);
  bool skipped = false;
  for (int64_t step = 0; step < 8; ++step) {
    INFO("step " << step);
    const auto a = cpu.trainer.train_step(step);
    const auto b = device.trainer.train_step(step);
    skipped = skipped || a.skipped;
    CHECK(a.skipped == b.skipped);
    CHECK(a.loss_scale == b.loss_scale);
    CHECK(a.loss == b.loss);
    CHECK(residuals_of(cpu.reducer) == residuals_of(device.reducer));
    const size_t n = cpu.trainer.model().num_params();
    std::vector<float> p(n), q(n);
    cpu.trainer.backend().copy_to_host(p.data(), cpu.trainer.model().params(), n * sizeof(float));
    device.trainer.backend().copy_to_host(q.data(), device.trainer.model().params(),
                                          n * sizeof(float));
    CHECK(bits(p.data(), n) == bits(q.data(), n));
  }
  CHECK(skipped);
}
