// Dynamic loss scaling (runtime/optim/loss_scaler.hpp): the scale halves on a non-finite
// step and doubles after train.loss_scale_window good ones; and in the trainer, a step
// whose reduced gradients were made non-finite (an injected Inf) is skipped: parameters,
// AdamW moments and step count untouched, the report says skipped with the scale, and
// the next step runs at half the scale.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runtime/config/load.hpp"
#include "runtime/optim/loss_scaler.hpp"
#include "support/one_stage_trainer.hpp"
#include "support/random_batches.hpp"

using namespace dseek;
using dseek::testing::RandomBatches;

TEST_CASE("loss scaler: halves on overflow, doubles after a window of good steps",
          "[optim][precision]") {
  optim::LossScaler scaler({1024.0, 3});
  CHECK(scaler.scale() == 1024.0f);
  CHECK(scaler.update(2.0));
  CHECK(scaler.update(2.0));
  CHECK(scaler.scale() == 1024.0f);
  CHECK(scaler.update(2.0));  // third good step: doubles
  CHECK(scaler.scale() == 2048.0f);
  CHECK_FALSE(scaler.update(std::numeric_limits<double>::infinity()));
  CHECK(scaler.scale() == 1024.0f);
  CHECK(scaler.good_steps() == 0);
  CHECK_FALSE(scaler.update(std::numeric_limits<double>::quiet_NaN()));
  CHECK(scaler.scale() == 512.0f);
  CHECK(scaler.update(1.0));
  CHECK(scaler.update(1.0));
  CHECK(scaler.scale() == 512.0f);  // the window restarted at the overflow
  CHECK_THROWS_WITH(optim::LossScaler({1000.0, 3}),
                    Catch::Matchers::Contains("train.loss_scale_init"));
  std::vector<float> g{1024.0f, -3.0f, 0.5f};
  optim::unscale_gradients(g.data(), g.size(), 512.0f);
  CHECK(g == std::vector<float>{2.0f, -3.0f / 512.0f, 0.5f / 512.0f});
}

TEST_CASE("loss scaler: the trainer skips a step with an injected overflow",
          "[optim][precision]") {
  auto config = config::load_config_text(
      "", "x.toml",
      {"model.dim=32", "model.layers=2", "model.heads=2", "model.context=16", "model.vocab=64",
       "train.batch_size=4", "train.threads=1", "train.steps=6", "train.warmup_steps=0",
       "train.precision=\"fp8\"", "train.loss_scale_init=1024", "train.loss_scale_window=2"});
  RandomBatches batches;
  testing::OneStageTrainer trainer(config, batches);
  trainer.set_after_reduction([](int64_t step, float* grads, size_t) {
    if (step == 1) grads[3] = std::numeric_limits<float>::infinity();
  });
  const size_t n = trainer.model().num_params();
  auto state = [&] {
    std::vector<float> s(3 * n);
    trainer.snapshot(s.data(), s.data() + n, s.data() + 2 * n);
    return s;
  };
  const auto step0 = trainer.train_step(0);
  CHECK_FALSE(step0.skipped);
  CHECK(step0.loss_scale == 1024.0);
  CHECK(step0.precision == "fp8");
  CHECK(std::isfinite(step0.grad_norm));
  const auto before = state();
  const int64_t adam_steps = trainer.optimizer_steps();
  const auto step1 = trainer.train_step(1);
  CHECK(step1.skipped);
  CHECK(step1.loss_scale == 1024.0);
  CHECK(state() == before);  // parameters and both moments untouched
  CHECK(trainer.optimizer_steps() == adam_steps);
  const auto step2 = trainer.train_step(2);
  CHECK_FALSE(step2.skipped);
  CHECK(step2.loss_scale == 512.0);
  CHECK(state() != before);
  CHECK(trainer.optimizer_steps() == adam_steps + 1);
  trainer.train_step(3);  // second good step after the overflow: the scale doubles
  CHECK(trainer.train_step(4).loss_scale == 1024.0);
}

TEST_CASE("loss scaler: a trainer on the scrambled test device takes the CPU backend's "
          "fp8 steps bit for bit, skipped steps included",
          "[optim][precision][scrambled]") {
  // The scrambled device's memory reads as garbage in place: equal bits mean the scaler's
  // overflow check and unscaling went through the backend. 2^20 overflows E5M2 at first.
  std::vector<std::string> settings{
      "model.dim=32", "model.layers=2", "model.heads=2", "model.context=16", "model.vocab=64",
      "train.batch_size=4", "train.threads=1", "train.steps=6", "train.warmup_steps=0",
      "train.precision=\"fp8\"", "train.loss_scale_init=1048576", "train.loss_scale_window=2"};
  auto cpu_config = config::load_config_text("", "x.toml", settings);
  settings.push_back("train.device=\"scrambled-cpu-for-tests\"");
  auto device_config = config::load_config_text("", "x.toml", settings);
  RandomBatches batches;
  testing::OneStageTrainer cpu(cpu_config, batches), device(device_config, batches);
  const size_t n = cpu.model().num_params();
  // The bits, so that the NaNs of an overflowed step compare too.
  auto to_host = [n](testing::OneStageTrainer& trainer, const float* buffer) {
    std::vector<uint32_t> host(n);
    trainer.backend().copy_to_host(host.data(), buffer, n * sizeof(float));
    return host;
  };
  auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  bool skipped = false;
  for (int64_t step = 0; step < 6; ++step) {
    INFO("step " << step);
    const auto a = cpu.train_step(step);
    const auto b = device.train_step(step);
    skipped = skipped || a.skipped;
    CHECK(a.skipped == b.skipped);
    CHECK(a.loss_scale == b.loss_scale);
    CHECK(a.loss == b.loss);
    CHECK(same(a.grad_norm, b.grad_norm));
    CHECK(to_host(cpu, cpu.model().grads()) == to_host(device, device.model().grads()));
    CHECK(to_host(cpu, cpu.model().params()) == to_host(device, device.model().params()));
  }
  CHECK(skipped);
}
