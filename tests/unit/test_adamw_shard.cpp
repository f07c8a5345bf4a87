// AdamW on a shard of the flat buffer (ZeRO stage 1 and 2): optimizers that each own some
// ranges, put together, give the whole-buffer optimizer's parameters and moments bit for
// bit when they are given the whole gradient's norm, with the decay of each element
// right where a range cuts through tensors; moments are allocated for the shard only;
// bad ranges are refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/model/param_layout.hpp"
#include "runtime/optim/adamw.hpp"
#include "support/random_values.hpp"

using dseek::model::GptShape;
using dseek::model::ParamLayout;
using dseek::model::ParamRange;
using dseek::optim::AdamW;
using dseek::optim::AdamWSettings;
using dseek::testing::random_values;

namespace {
const GptShape kShape{.dim = 16, .layers = 2, .heads = 2, .context = 8, .vocab = 32};

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// Cuts [0, total) into `pieces` ranges at odd places (through tensors of both decays),
// dealt round-robin to `owners` shards.
std::vector<std::vector<ParamRange>> deal(size_t total, size_t pieces, size_t owners) {
  std::vector<std::vector<ParamRange>> shards(owners);
  size_t offset = 0;
  for (size_t i = 0; i < pieces; ++i) {
    const size_t end = i + 1 == pieces ? total : (total * (i + 1)) / pieces + 7 * i + 3;
    shards[i % owners].push_back({offset, std::min(end, total) - offset});
    offset = std::min(end, total);
  }
  return shards;
}
}  // namespace

TEST_CASE("AdamW shards together equal the whole-buffer AdamW bit for bit", "[optim][zero]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  const ParamLayout layout(kShape);
  const size_t n = layout.total();
  // Clipping active (norm >> 1) so the shared clip scale matters; decay nonzero.
  const AdamWSettings settings{0.9, 0.95, 1e-8, 0.1, 1.0};
  std::vector<float> whole_params = random_values(n, 1, 0.05f);
  std::vector<float> sharded_params = whole_params;

  AdamW whole(*backend, layout, settings);
  const auto shards = deal(n, 9, 3);
  std::vector<std::unique_ptr<AdamW>> parts;
  for (const auto& shard : shards) parts.push_back(std::make_unique<AdamW>(*backend, layout, settings, shard));

  for (int step = 0; step < 3; ++step) {
    const std::vector<float> grads = random_values(n, 100 + static_cast<uint32_t>(step), 0.5f);
    const auto stats = whole.step(whole_params.data(), grads.data(), 1e-2);
    CHECK(stats.clip_scale < 1.0);
    for (auto& part : parts) {
      const auto part_stats = part->step_with_norm(sharded_params.data(), grads.data(), 1e-2, stats.grad_norm);
      CHECK(part_stats.clip_scale == stats.clip_scale);
    }
    REQUIRE(same_bits(whole_params.data(), sharded_params.data(), n));
  }

  std::vector<float> whole_m(n), whole_v(n), sharded_m(n, NAN), sharded_v(n, NAN);
  whole.moments_to_host(whole_m.data(), whole_v.data());
  for (auto& part : parts) part->moments_to_host(sharded_m.data(), sharded_v.data());
  CHECK(same_bits(whole_m.data(), sharded_m.data(), n));
  CHECK(same_bits(whole_v.data(), sharded_v.data(), n));
  for (auto& part : parts) CHECK(part->steps_taken() == 3);
}

TEST_CASE("a sharded AdamW keeps moments for its ranges only and decays per element", "[optim][zero]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  const ParamLayout layout(kShape);
  const size_t n = layout.total();
  // One range across the end of wte (decayed) into wpe (decayed) and one across a
  // LayerNorm gain (not decayed) into the qkv weight (decayed).
  const auto& block = layout.block(0);
  const std::vector<ParamRange> owned{{block.ln1_w + 3, block.qkv_w + 5 - (block.ln1_w + 3)},
                                      {layout.wpe() - 4, 8}};
  AdamW shard(*backend, layout, {0.9, 0.95, 1e-8, 0.5, 0.0}, owned);
  CHECK(shard.owned_count() == owned[0].count + 8);

  // Zero gradients: only weight decay moves a parameter (p *= 1 - lr * wd).
  std::vector<float> params(n, 1.0f), grads(n, 0.0f);
  shard.step(params.data(), grads.data(), 0.1);
  std::vector<bool> touched(n, false);
  for (const auto& range : owned)
    for (size_t i = range.offset; i < range.end(); ++i) touched[i] = true;
  std::vector<bool> decayed(n, false);
  for (const auto& tensor : layout.tensors())
    for (size_t i = 0; i < tensor.size(); ++i) decayed[tensor.offset + i] = tensor.decay;
  const float after_decay = 1.0f * (1.0f - 0.1f * 0.5f);
  for (size_t i = 0; i < n; ++i) {
    INFO("element " << i);
    const float expected = touched[i] && decayed[i] ? after_decay : 1.0f;
    REQUIRE(params[i] == expected);
  }

  // Round trip of the moments through whole-buffer host arrays touches the owned part only.
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  for (size_t i = 0; i < n; ++i) m[i] = v[i] = static_cast<float>(i);
  shard.moments_from_host(m.data(), v.data());
  std::vector<float> m_out(n, -1.0f), v_out(n, -1.0f);
  shard.moments_to_host(m_out.data(), v_out.data());
  for (size_t i = 0; i < n; ++i) {
    INFO("element " << i);
    REQUIRE(m_out[i] == (touched[i] ? m[i] : -1.0f));
    REQUIRE(v_out[i] == (touched[i] ? v[i] : -1.0f));
  }
}

TEST_CASE("a sharded AdamW refuses ranges outside the layout or overlapping", "[optim][zero]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  const ParamLayout layout(kShape);
  const size_t n = layout.total();
  CHECK_THROWS_AS(AdamW(*backend, layout, {}, {{n - 2, 3}}), std::invalid_argument);
  CHECK_THROWS_AS(AdamW(*backend, layout, {}, {{10, 5}, {0, 11}}), std::invalid_argument);
  CHECK_NOTHROW(AdamW(*backend, layout, {}, {{10, 5}, {0, 10}}));
}
