// The pieces data parallelism is built from, without processes: GptModel's backward
// reports each range of gradients once it is final, in the documented order, and the
// ranges partition the buffer; plan_gradient_buckets joins them into contiguous buckets
// within the budget, and the replicas' pieces of the buckets partition the buffer (or,
// for a pipeline stage's chunk, exactly the ranges it owns).
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "dist/gradient_buckets.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/model/gpt_model.hpp"
#include "support/small_gpt.hpp"

using dseek::model::GptModel;
using dseek::model::GptShape;
using dseek::model::LayerRange;
using dseek::model::ParamRange;

namespace {
const GptShape kShape{.dim = 16, .layers = 3, .heads = 2, .context = 8, .vocab = 32};

// Every element of [0, total) covered exactly once by `ranges`.
bool partitions(std::vector<ParamRange> ranges, size_t total) {
  std::sort(ranges.begin(), ranges.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
  size_t next = 0;
  for (const auto& range : ranges) {
    if (range.offset != next) return false;
    next = range.end();
  }
  return next == total;
}
}  // namespace

TEST_CASE("backward reports each range of gradients once it is final, in order", "[model][dp]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  GptModel model(kShape, LayerRange{0, kShape.layers}, *backend, 2);
  dseek::testing::init_nontrivial(model, 3, 0.2);
  const auto batch = dseek::testing::random_batch(2, kShape.context, kShape.vocab, 5);
  const auto order = model.gradient_ranges_in_backward_order();
  REQUIRE(order.size() == static_cast<size_t>(kShape.layers) + 2);
  CHECK(partitions(order, model.num_params()));
  for (size_t i = 1; i < order.size(); ++i) CHECK(order[i].end() == order[i - 1].offset);

  // Two micro-batches: the reports of the second show the final sums.
  model.zero_grads();
  model.forward(batch.tokens.data(), batch.targets.data(), batch.B, batch.T);
  model.backward(0.01f);
  model.forward(batch.tokens.data(), batch.targets.data(), batch.B, batch.T);
  std::vector<ParamRange> reported;
  std::vector<std::vector<float>> at_report;
  model.backward(0.01f, [&](ParamRange range) {
    reported.push_back(range);
    at_report.emplace_back(model.grads() + range.offset, model.grads() + range.end());
  });
  REQUIRE(reported == order);
  for (size_t i = 0; i < reported.size(); ++i) {
    INFO("range " << i);
    const std::vector<float> final_grads(model.grads() + reported[i].offset, model.grads() + reported[i].end());
    CHECK(at_report[i] == final_grads);  // never touched after its report
  }
}

TEST_CASE("gradient buckets are contiguous, within budget, and shard the buffer", "[dp]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  GptModel model(kShape, LayerRange{0, kShape.layers}, *backend, 1);
  const auto order = model.gradient_ranges_in_backward_order();
  const size_t total = model.num_params();
  const size_t block = order[1].count;
  for (size_t budget_floats : {size_t{1}, block, 2 * block + order[0].count, total}) {
    INFO("budget " << budget_floats << " floats");
    for (int world : {1, 2, 3, 5}) {
      std::vector<ParamRange> pieces;
      size_t units = 0;
      std::vector<dseek::dist::GradientBucket> first_plan;
      for (int rank = 0; rank < world; ++rank) {
        const auto buckets =
            dseek::dist::plan_gradient_buckets(order, total, budget_floats * sizeof(float), rank, world);
        if (rank == 0) first_plan = buckets;
        REQUIRE(buckets.size() == first_plan.size());
        size_t packed = 0;
        units = 0;
        for (size_t b = 0; b < buckets.size(); ++b) {
          const auto& bucket = buckets[b];
          CHECK(bucket.range == first_plan[b].range);  // the same plan on every replica
          CHECK(bucket.first_unit == units);
          units += bucket.units;
          CHECK((bucket.units == 1 || bucket.range.count <= budget_floats));
          CHECK(bucket.piece.offset >= bucket.range.offset);
          CHECK(bucket.piece.end() <= bucket.range.end());
          CHECK(bucket.piece_offset == packed);
          packed += bucket.piece.count;
          if (bucket.piece.count > 0) pieces.push_back(bucket.piece);
        }
        CHECK(dseek::dist::shard_of(buckets).size() <= buckets.size());
      }
      CHECK(units == order.size());
      CHECK(partitions(pieces, total));
    }
  }
  // Overlapping or empty ranges, ranges past the buffer, a rank outside the world.
  std::vector<ParamRange> twice = order;
  twice.push_back(order[1]);
  CHECK_THROWS_AS(dseek::dist::plan_gradient_buckets(twice, total, 1024, 0, 2), std::invalid_argument);
  CHECK_THROWS_AS(dseek::dist::plan_gradient_buckets({ParamRange{0, 0}}, total, 1024, 0, 2),
                  std::invalid_argument);
  CHECK_THROWS_AS(dseek::dist::plan_gradient_buckets(order, total - 1, 1024, 0, 2), std::invalid_argument);
  CHECK_THROWS_AS(dseek::dist::plan_gradient_buckets(order, total, 1024, 2, 2), std::invalid_argument);
}

// A pipeline stage's chunk reduces the ranges it owns, which leave gaps in its buffer
// (the last stage: its blocks, lnf and the head's copy of wte, far below them): buckets
// never join across a gap, and the replicas' pieces partition exactly the owned ranges.
TEST_CASE("gradient buckets over ranges with gaps cover those ranges only", "[dp][pp]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  GptModel model(kShape, LayerRange{0, kShape.layers}, *backend, 1);
  const auto whole = model.gradient_ranges_in_backward_order();  // lnf, blocks 2..0, embedding
  const size_t total = model.num_params();
  const size_t wte_count = static_cast<size_t>(kShape.vocab * kShape.dim);
  // lnf, block 2, block 1, then wte alone (not wpe, not block 0).
  const std::vector<ParamRange> owned = {whole[0], whole[1], whole[2], ParamRange{0, wte_count}};
  size_t owned_floats = 0;
  for (const auto& range : owned) owned_floats += range.count;
  for (int world : {1, 2, 3}) {
    INFO("world " << world);
    std::vector<ParamRange> pieces;
    for (int rank = 0; rank < world; ++rank) {
      const auto buckets = dseek::dist::plan_gradient_buckets(owned, total, total * sizeof(float), rank, world);
      // One budget for everything, but the gap before wte splits it in two.
      REQUIRE(buckets.size() == 2);
      CHECK(buckets[0].range == ParamRange{whole[2].offset, whole[0].end() - whole[2].offset});
      CHECK(buckets[0].units == 3);
      CHECK(buckets[1].range == ParamRange{0, wte_count});
      for (const auto& piece : dseek::dist::shard_of(buckets)) pieces.push_back(piece);
    }
    size_t covered = 0;
    for (const auto& piece : pieces) {
      covered += piece.count;
      const bool inside = std::any_of(owned.begin(), owned.end(), [&](const ParamRange& r) {
        return piece.offset >= r.offset && piece.end() <= r.end();
      }) || (piece.offset >= whole[2].offset && piece.end() <= whole[0].end());
      CHECK(inside);
    }
    CHECK(covered == owned_floats);
  }
}
