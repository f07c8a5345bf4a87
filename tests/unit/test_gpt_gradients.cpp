// The GPT model's backward pass against finite differences (no PyTorch needed), and the
// structural properties the later issues rely on: a chain of layer ranges equals the
// whole model, micro-batch accumulation equals one large batch, and the same inputs
// give bit-identical results.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "runtime/backend/backend.hpp"
#include "runtime/model/gpt_model.hpp"
#include "support/small_gpt.hpp"

using dseek::model::GptModel;
using dseek::model::GptShape;
using dseek::model::LayerRange;

namespace {
const GptShape kShape{.dim = 16, .layers = 2, .heads = 2, .context = 8, .vocab = 32};
}

TEST_CASE("every parameter gradient matches a finite-difference directional derivative",
          "[model][gradients]") {
  // Tolerance: central differences with step 1e-2 along a unit direction in fp32 have
  // a rounding error of ~1e-5 and a truncation error of ~1e-4 relative here; a wrong
  // term in a backward formula is off by O(1). We require 2e-3 relative (+2e-5 abs).
  auto backend = dseek::backend::make_cpu_backend(2);
  GptModel model(kShape, LayerRange{0, kShape.layers}, *backend, 2);
  dseek::testing::init_nontrivial(model, 7, 0.2);
  auto batch = dseek::testing::random_batch(2, kShape.context, kShape.vocab, 3);
  const int64_t N = batch.B * batch.T;

  model.zero_grads();
  model.forward(batch.tokens.data(), batch.targets.data(), batch.B, batch.T);
  model.backward(1.0f / static_cast<float>(N));
  std::vector<float> grads(model.grads(), model.grads() + model.num_params());

  std::mt19937 rng(11);
  std::normal_distribution<double> normal;
  const double step = 1e-2;
  for (const auto& tensor : model.layout().tensors()) {
    std::vector<double> direction(tensor.size());
    double norm = 0.0;
    for (double& d : direction) {
      d = normal(rng);
      norm += d * d;
    }
    double analytic = 0.0;
    for (size_t i = 0; i < direction.size(); ++i) {
      direction[i] /= std::sqrt(norm);
      analytic += direction[i] * grads[tensor.offset + i];
    }
    float* p = model.params() + tensor.offset;
    std::vector<float> saved(p, p + tensor.size());
    auto loss_at = [&](double t) {
      for (size_t i = 0; i < saved.size(); ++i)
        p[i] = static_cast<float>(saved[i] + t * direction[i]);
      return model.forward(batch.tokens.data(), batch.targets.data(), batch.B, batch.T);
    };
    const double numeric = (loss_at(step) - loss_at(-step)) / (2 * step);
    std::memcpy(p, saved.data(), saved.size() * sizeof(float));
    INFO(tensor.name << ": analytic " << analytic << " numeric " << numeric);
    CHECK(std::abs(analytic - numeric) <= 2e-3 * std::abs(numeric) + 2e-5);
  }
}

TEST_CASE("a chain of layer ranges computes what the whole model computes", "[model][ranges]") {
  auto backend = dseek::backend::make_cpu_backend(2);
  GptModel whole(kShape, LayerRange{0, 2}, *backend, 2);
  GptModel first(kShape, LayerRange{0, 1}, *backend, 2);
  GptModel last(kShape, LayerRange{1, 2}, *backend, 2);
  REQUIRE(first.has_embedding());
  REQUIRE_FALSE(first.has_head());
  REQUIRE(last.has_head());
  REQUIRE_FALSE(last.has_embedding());
  for (GptModel* m : {&whole, &first, &last}) dseek::testing::init_nontrivial(*m, 5, 0.1);
  auto batch = dseek::testing::random_batch(2, kShape.context, kShape.vocab, 9);
  const size_t activations = static_cast<size_t>(2 * kShape.context * kShape.dim);
  const float dloss = 1.0f / static_cast<float>(2 * kShape.context);

  for (GptModel* m : {&whole, &first, &last}) m->zero_grads();
  const double whole_loss = whole.forward(batch.tokens.data(), batch.targets.data(), 2, kShape.context);
  whole.backward(dloss);

  first.forward(batch.tokens.data(), nullptr, 2, kShape.context);
  std::memcpy(last.stage_input(), first.stage_output(), activations * sizeof(float));
  const double chained_loss = last.forward(nullptr, batch.targets.data(), 2, kShape.context);
  last.backward(dloss);
  std::memcpy(first.stage_output_grad(), last.stage_input_grad(), activations * sizeof(float));
  first.backward(dloss);

  CHECK(chained_loss == whole_loss);  // the same ops on the same numbers: bit-identical
  const auto& layout = whole.layout();
  for (const auto& tensor : layout.tensors()) {
    // Each tensor belongs to one range, except wte (embedding in the first, head in the
    // last): its gradient is the sum of both, as the pipeline issue will all-reduce it.
    for (size_t i = 0; i < tensor.size(); ++i) {
      const size_t k = tensor.offset + i;
      const float combined = first.grads()[k] + last.grads()[k];
      INFO(tensor.name << "[" << i << "]");
      REQUIRE(std::abs(combined - whole.grads()[k]) <= 1e-6f * (1 + std::abs(whole.grads()[k])));
    }
  }
}

TEST_CASE("gradients accumulated over micro-batches equal those of the whole batch",
          "[model][accumulation]") {
  // Tolerance: the two differ only in float summation order: 1e-5 relative.
  auto backend = dseek::backend::make_cpu_backend(2);
  GptModel model(kShape, LayerRange{0, 2}, *backend, 4);
  dseek::testing::init_nontrivial(model, 1, 0.1);
  auto batch = dseek::testing::random_batch(4, kShape.context, kShape.vocab, 2);
  const int64_t T = kShape.context;

  model.zero_grads();
  const double full_loss = model.forward(batch.tokens.data(), batch.targets.data(), 4, T);
  model.backward(1.0f / static_cast<float>(4 * T));
  std::vector<float> full(model.grads(), model.grads() + model.num_params());

  model.zero_grads();
  double accumulated_loss = 0.0;
  for (int64_t micro = 0; micro < 2; ++micro) {
    const size_t offset = static_cast<size_t>(micro * 2 * T);
    accumulated_loss += model.forward(batch.tokens.data() + offset, batch.targets.data() + offset, 2, T) / 2;
    model.backward(1.0f / static_cast<float>(2 * T) / 2.0f);
  }
  CHECK(accumulated_loss == Approx(full_loss).epsilon(1e-6));
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < full.size(); ++i) {
    diff += std::pow(double(model.grads()[i]) - full[i], 2);
    norm += std::pow(double(full[i]), 2);
  }
  CHECK(std::sqrt(diff / norm) < 1e-5);
}

TEST_CASE("forward and backward are deterministic for a thread count", "[model][determinism]") {
  auto run = [](int threads) {
    auto backend = dseek::backend::make_cpu_backend(threads);
    GptModel model(kShape, LayerRange{0, 2}, *backend, 2);
    dseek::testing::init_nontrivial(model, 3, 0.1);
    auto batch = dseek::testing::random_batch(2, kShape.context, kShape.vocab, 4);
    model.zero_grads();
    model.forward(batch.tokens.data(), batch.targets.data(), 2, kShape.context);
    model.backward(0.01f);
    return std::vector<float>(model.grads(), model.grads() + model.num_params());
  };
  CHECK(run(2) == run(2));
  CHECK(run(1) == run(1));
}

TEST_CASE("token ids outside the vocabulary are rejected with the position", "[model]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  GptModel model(kShape, LayerRange{0, 2}, *backend, 1);
  auto batch = dseek::testing::random_batch(1, kShape.context, kShape.vocab, 4);
  batch.tokens[3] = static_cast<int32_t>(kShape.vocab);
  CHECK_THROWS_WITH(model.forward(batch.tokens.data(), batch.targets.data(), 1, kShape.context),
                    Catch::Contains("position 3"));
}
