// Activation recompute (model.recompute, runtime/model/recompute_policy.hpp): a model
// that recomputes some blocks gives bitwise the losses, outputs and gradients of one
// that keeps every activation (the CPU backend is deterministic for a thread count, and
// the recompute runs the same ops on the same inputs), with strictly fewer activation
// bytes; for the whole model and for a middle range (a pipeline stage) whose activation
// slots hold several micro-batches at once, and for tensor-parallel ranks
// (test_tensor_parallel_gpt.cpp). And the config key's values.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/config/load.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/model/recompute_policy.hpp"
#include "support/small_gpt.hpp"

using dseek::model::GptModel;
using dseek::model::GptShape;
using dseek::model::LayerRange;
using dseek::model::RecomputePolicy;
using Catch::Matchers::Contains;

namespace {

// Five blocks: every:2 recomputes blocks 0, 2, 4 and every:3 blocks 0, 3 of the whole
// model, so the four settings keep 5, 2, 3 and 0 blocks' activation sets.
const GptShape kShape{.dim = 16, .layers = 5, .heads = 2, .context = 8, .vocab = 32};
const std::vector<RecomputePolicy> kRecomputed = {RecomputePolicy{1}, RecomputePolicy{2},
                                                  RecomputePolicy{3}};

// Bitwise equality (a == on floats would let -0 equal 0; NaN never appears here).
bool same_bits(const float* a, const float* b, size_t count) {
  return std::memcmp(a, b, count * sizeof(float)) == 0;
}

struct WholeRun {
  std::vector<double> losses;
  std::vector<float> grads;
  size_t activation_bytes = 0;
};

// Two micro-batches accumulated, as the trainer does.
WholeRun train_whole(const RecomputePolicy& recompute) {
  auto backend = dseek::backend::make_cpu_backend(2);
  const int64_t B = 2, T = kShape.context;
  GptModel model(kShape, LayerRange{0, kShape.layers}, *backend, B, 1, recompute);
  dseek::testing::init_nontrivial(model, 11, 0.1);
  WholeRun run;
  model.zero_grads();
  for (uint32_t micro = 0; micro < 2; ++micro) {
    const auto batch = dseek::testing::random_batch(B, T, kShape.vocab, 30 + micro);
    run.losses.push_back(model.forward(batch.tokens.data(), batch.targets.data(), B, T));
    model.backward(1.0f / static_cast<float>(B * T) / 2.0f);
  }
  run.grads.assign(model.grads(), model.grads() + model.num_params());
  run.activation_bytes = model.activation_bytes();
  return run;
}

struct StageRun {
  std::vector<std::vector<float>> outputs;      // stage_output() of each micro-batch
  std::vector<std::vector<float>> input_grads;  // stage_input_grad() after each backward
  std::vector<float> grads;
  size_t activation_bytes = 0;
};

// A middle range [1, 4) with three activation slots, in a 1F1B-like order: forward 0,
// forward 1, backward 0, forward 2, backward 1, backward 2. Between a micro-batch's
// forward and its backward other forwards run, so a recomputed block's shared scratch
// set holds another micro-batch's activations when its backward starts.
StageRun train_stage(const RecomputePolicy& recompute) {
  auto backend = dseek::backend::make_cpu_backend(2);
  const int64_t B = 2, T = kShape.context;
  const size_t floats = static_cast<size_t>(B * T * kShape.dim);
  GptModel stage(kShape, LayerRange{1, 4}, *backend, B, 3, recompute);
  REQUIRE_FALSE(stage.has_embedding());
  REQUIRE_FALSE(stage.has_head());
  dseek::testing::init_nontrivial(stage, 12, 0.1);
  auto values = [&](uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(floats);
    for (float& x : v) x = normal(rng);
    return v;
  };
  StageRun run;
  run.outputs.resize(3);
  stage.zero_grads();
  auto forward = [&](int64_t micro) {
    stage.select_activation_slot(micro);
    const auto input = values(100 + static_cast<uint32_t>(micro));
    std::memcpy(stage.stage_input(), input.data(), floats * sizeof(float));
    stage.forward(nullptr, nullptr, B, T);
    run.outputs[static_cast<size_t>(micro)].assign(stage.stage_output(),
                                                   stage.stage_output() + floats);
  };
  auto backward = [&](int64_t micro) {
    stage.select_activation_slot(micro);
    const auto output_grad = values(200 + static_cast<uint32_t>(micro));
    std::memcpy(stage.stage_output_grad(), output_grad.data(), floats * sizeof(float));
    stage.backward(1.0f);
    run.input_grads.emplace_back(stage.stage_input_grad(), stage.stage_input_grad() + floats);
  };
  forward(0);
  forward(1);
  backward(0);
  forward(2);
  backward(1);
  backward(2);
  run.grads.assign(stage.grads(), stage.grads() + stage.num_params());
  run.activation_bytes = stage.activation_bytes();
  return run;
}

}  // namespace

TEST_CASE("recompute: the whole model's losses and gradients are bitwise those without",
          "[model][recompute]") {
  const WholeRun kept = train_whole(RecomputePolicy{});
  size_t previous_bytes = 0;
  for (const RecomputePolicy& recompute : kRecomputed) {
    INFO("model.recompute = " << recompute.text());
    const WholeRun run = train_whole(recompute);
    CHECK(run.losses == kept.losses);
    REQUIRE(run.grads.size() == kept.grads.size());
    CHECK(same_bits(run.grads.data(), kept.grads.data(), kept.grads.size()));
    // Fewer kept sets, less memory: every:1 < every:2 (2 kept) < every:3 (3 kept) < none.
    CHECK(run.activation_bytes < kept.activation_bytes);
    CHECK(run.activation_bytes > previous_bytes);
    previous_bytes = run.activation_bytes;
  }
}

TEST_CASE("recompute: a middle range with several activation slots is bitwise unchanged",
          "[model][recompute]") {
  const StageRun kept = train_stage(RecomputePolicy{});
  for (const RecomputePolicy& recompute : kRecomputed) {
    INFO("model.recompute = " << recompute.text());
    const StageRun run = train_stage(recompute);
    for (size_t micro = 0; micro < 3; ++micro) {
      INFO("micro-batch " << micro);
      CHECK(run.outputs[micro] == kept.outputs[micro]);
      CHECK(same_bits(run.input_grads[micro].data(), kept.input_grads[micro].data(),
                      kept.input_grads[micro].size()));
    }
    CHECK(same_bits(run.grads.data(), kept.grads.data(), kept.grads.size()));
    CHECK(run.activation_bytes < kept.activation_bytes);
  }
}

TEST_CASE("recompute: the activation memory counts the kept sets and one shared scratch set",
          "[model][recompute]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  const int64_t slots = 3;
  GptModel none(kShape, LayerRange{1, 4}, *backend, 2, slots);
  GptModel every1(kShape, LayerRange{1, 4}, *backend, 2, slots, RecomputePolicy{1});
  GptModel every2(kShape, LayerRange{1, 4}, *backend, 2, slots, RecomputePolicy{2});
  CHECK(none.activation_memory().recompute == 0);
  CHECK(none.activation_memory().backward == every1.activation_memory().backward);
  // One block's set is what every:1 saves per block and slot, less the one scratch set.
  const size_t block_set = every1.activation_memory().recompute;
  REQUIRE(block_set > 0);
  CHECK(none.activation_memory().kept - every1.activation_memory().kept == 3 * slots * block_set);
  // every:2 on a 3-block range recomputes its blocks 0 and 2 (the whole model's 1 and 3).
  CHECK(none.activation_memory().kept - every2.activation_memory().kept == 2 * slots * block_set);
  CHECK(every2.activation_memory().recompute == block_set);
}

TEST_CASE("recompute: model.recompute accepts none and every:N, and names the key otherwise",
          "[config][recompute]") {
  using dseek::config::ConfigError;
  using dseek::config::load_config_text;
  CHECK(load_config_text("", "x.toml").model.recompute == "none");
  CHECK(load_config_text("[model]\nrecompute = \"every:1\"\n", "x.toml").model.recompute ==
        "every:1");
  CHECK(load_config_text("", "x.toml", {"model.recompute=every:12"}).model.recompute ==
        "every:12");
  CHECK(dseek::model::parse_recompute_policy("every:12")->every == 12);
  CHECK(dseek::model::parse_recompute_policy("none")->every == 0);
  for (const char* bad : {"every:0", "every:-1", "every:+2", "every:", "every:2 ", "every:x",
                          "Every:2", "all", ""}) {
    INFO("model.recompute = \"" << bad << "\"");
    CHECK_FALSE(dseek::model::parse_recompute_policy(bad));
    try {
      load_config_text("[model]\nrecompute = \"" + std::string(bad) + "\"\n", "x.toml");
      FAIL("accepted");
    } catch (const ConfigError& error) {
      CHECK_THAT(error.what(), Contains("x.toml") && Contains("model.recompute") &&
                                   Contains("every:N"));
    }
  }
}

TEST_CASE("recompute: model chunks of one stage can share one scratch set",
          "[model][recompute]") {
  // Two chunks of an interleaved stage, [1, 3) and [3, 5), with two slots each; their
  // forwards and backwards alternate, so each chunk's recompute overwrites what the
  // other left in the shared set. Outputs and gradients are those of unshared chunks.
  const int64_t B = 2, T = kShape.context;
  const size_t floats = static_cast<size_t>(B * T * kShape.dim);
  auto run = [&](bool share) {
    auto backend = dseek::backend::make_cpu_backend(2);
    GptModel first(kShape, LayerRange{1, 3}, *backend, B, 2, RecomputePolicy{1});
    GptModel second(kShape, LayerRange{3, 5}, *backend, B, 2, RecomputePolicy{1});
    if (share) second.share_recompute_scratch(first);
    CHECK((second.activation_memory().recompute == 0) == share);
    for (GptModel* m : {&first, &second}) {
      dseek::testing::init_nontrivial(*m, 13, 0.1);
      m->zero_grads();
    }
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> input(floats), output_grad(floats);
    auto batch = dseek::testing::random_batch(B, T, kShape.vocab, 8);
    std::vector<float> results;
    for (int64_t micro = 0; micro < 2; ++micro) {
      for (float& x : input) x = normal(rng);
      first.select_activation_slot(micro);
      std::memcpy(first.stage_input(), input.data(), floats * sizeof(float));
      first.forward(nullptr, nullptr, B, T);
      second.select_activation_slot(micro);
      std::memcpy(second.stage_input(), first.stage_output(), floats * sizeof(float));
      results.push_back(static_cast<float>(second.forward(nullptr, batch.targets.data(), B, T)));
    }
    for (int64_t micro = 0; micro < 2; ++micro) {
      second.select_activation_slot(micro);
      second.backward(1.0f / static_cast<float>(B * T));
      first.select_activation_slot(micro);
      std::memcpy(first.stage_output_grad(), second.stage_input_grad(), floats * sizeof(float));
      first.backward(1.0f / static_cast<float>(B * T));
      results.insert(results.end(), first.stage_input_grad(), first.stage_input_grad() + floats);
    }
    results.insert(results.end(), first.grads(), first.grads() + first.num_params());
    results.insert(results.end(), second.grads(), second.grads() + second.num_params());
    return results;
  };
  const std::vector<float> own = run(false), shared = run(true);
  REQUIRE(own.size() == shared.size());
  CHECK(same_bits(own.data(), shared.data(), own.size()));
}
