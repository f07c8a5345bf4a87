// Stage partitioning (runtime/train/pipeline/partition.hpp) on given costs: uniform
// splits the block count; balanced finds the contiguous split with the smallest
// slowest stage (checked against brute force over every split), giving the end stages
// fewer blocks when the embedding and the head are heavy; and the profiling pass
// measures positive costs with the head (V x C matmul) dearer than nothing. Under
// model.recompute a range pays the recompute of the blocks the policy picks in it
// (counted from the range's first block), which can move the cut.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <limits>

#include "runtime/train/pipeline/partition.hpp"

using namespace dseek::train;
using dseek::model::LayerRange;
using Catch::Matchers::Contains;

namespace {
double slowest(const LayerCosts& costs, const std::vector<LayerRange>& ranges) {
  double worst = 0.0;
  for (const auto& range : ranges) worst = std::max(worst, range_cost(costs, range));
  return worst;
}

// The best max cost over every way of cutting the blocks into `parts` non-empty ranges.
double brute_force(const LayerCosts& costs, int64_t parts) {
  const auto L = static_cast<int64_t>(costs.blocks.size());
  double best = std::numeric_limits<double>::infinity();
  std::vector<LayerRange> ranges;
  std::function<void(int64_t)> cut = [&](int64_t begin) {
    if (static_cast<int64_t>(ranges.size()) == parts - 1) {
      ranges.push_back({begin, L});
      best = std::min(best, slowest(costs, ranges));
      ranges.pop_back();
      return;
    }
    for (int64_t end = begin + 1; end <= L - (parts - 1 - static_cast<int64_t>(ranges.size())); ++end) {
      ranges.push_back({begin, end});
      cut(end);
      ranges.pop_back();
    }
  };
  cut(0);
  return best;
}
}  // namespace

TEST_CASE("pipeline partition: uniform", "[pipeline][partition]") {
  CHECK(describe_partition(uniform_partition(8, 4)) == "[0,2) [2,4) [4,6) [6,8)");
  CHECK(describe_partition(uniform_partition(7, 3)) == "[0,3) [3,5) [5,7)");
  CHECK_THROWS_WITH(uniform_partition(3, 4), Contains("model.layers") && Contains("parallel.pipeline"));
}

TEST_CASE("pipeline partition: balanced moves blocks off the heavy end stages",
          "[pipeline][partition]") {
  LayerCosts costs;
  costs.blocks.assign(8, 1.0);
  costs.embedding = 0.5;
  costs.head = 2.0;
  const auto ranges = balanced_partition(costs, 4);
  CHECK(ranges.front().begin == 0);
  CHECK(ranges.back().end == 8);
  // 8 blocks + 2.5 = 10.5 over 4 stages: the head's stage gets 1 block (3.0), the
  // others 2 or 3 (the best max is 3.0).
  CHECK(slowest(costs, ranges) == Approx(3.0));
  CHECK(ranges.back().end - ranges.back().begin == 1);
  CHECK(slowest(costs, ranges) < slowest(costs, uniform_partition(8, 4)));
}

TEST_CASE("pipeline partition: balanced equals brute force on irregular costs",
          "[pipeline][partition]") {
  LayerCosts costs;
  costs.blocks = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  for (double embedding : {0.0, 2.0, 7.0}) {
    for (double head : {0.0, 3.0, 11.0}) {
      costs.embedding = embedding;
      costs.head = head;
      for (int64_t parts = 1; parts <= 5; ++parts) {
        const auto ranges = balanced_partition(costs, parts);
        REQUIRE(static_cast<int64_t>(ranges.size()) == parts);
        for (size_t i = 0; i < ranges.size(); ++i) {
          CHECK(ranges[i].end > ranges[i].begin);
          if (i > 0) CHECK(ranges[i].begin == ranges[i - 1].end);
        }
        CHECK(slowest(costs, ranges) == Approx(brute_force(costs, parts)));
      }
    }
  }
}

TEST_CASE("pipeline partition: the profiling pass measures every part", "[pipeline][partition]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  const dseek::model::GptShape shape{32, 3, 2, 16, 256};
  const LayerCosts costs = profile_layer_costs(shape, *backend, 2, 2);
  REQUIRE(costs.blocks.size() == 3);
  CHECK(costs.embedding > 0.0);
  CHECK(costs.head > 0.0);
  for (double block : costs.blocks) CHECK(block > 0.0);
}

TEST_CASE("pipeline partition: recomputed blocks cost what recomputing them adds, counted per range",
          "[pipeline][partition][recompute]") {
  LayerCosts costs;
  costs.blocks.assign(4, 1.0);
  costs.recompute = {0.0, 0.0, 0.0, 5.0};  // the last block is dear to recompute
  costs.recompute_policy = dseek::model::RecomputePolicy{1};
  // Without recompute the even split is best (2 and 2); recomputing every block, [2,4)
  // costs 2 + 5 and the cut moves to [0,3) [3,4) (3 and 6).
  LayerCosts plain = costs;
  plain.recompute.clear();
  CHECK(describe_partition(balanced_partition(plain, 2)) == "[0,2) [2,4)");
  CHECK(range_cost(costs, {2, 4}) == Approx(7.0));
  CHECK(describe_partition(balanced_partition(costs, 2)) == "[0,3) [3,4)");
  CHECK(slowest(costs, balanced_partition(costs, 2)) == Approx(6.0));
  // every:2 recomputes the 1st, 3rd, ... block of each range: block 3 costs its
  // recompute in [3,4) and [1,4), not in [2,4) or [0,4).
  costs.recompute_policy = dseek::model::RecomputePolicy{2};
  CHECK(range_cost(costs, {3, 4}) == Approx(6.0));
  CHECK(range_cost(costs, {1, 4}) == Approx(8.0));
  CHECK(range_cost(costs, {2, 4}) == Approx(2.0));
  CHECK(range_cost(costs, {0, 4}) == Approx(4.0));
  // And the dynamic programme still finds the best split over every cut.
  costs.blocks = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  costs.recompute = {1, 0.5, 2, 0.5, 2.5, 4.5, 1, 3, 2.5, 1.5};
  costs.head = 3.0;
  for (int64_t every : {1, 2, 3})
    for (int64_t parts = 1; parts <= 5; ++parts) {
      costs.recompute_policy = dseek::model::RecomputePolicy{every};
      CHECK(slowest(costs, balanced_partition(costs, parts)) == Approx(brute_force(costs, parts)));
    }
}

TEST_CASE("pipeline partition: the profiling pass times each block recomputed under a recompute policy",
          "[pipeline][partition][recompute]") {
  auto backend = dseek::backend::make_cpu_backend(1);
  const dseek::model::GptShape shape{128, 3, 4, 64, 256};
  const LayerCosts plain = profile_layer_costs(shape, *backend, 2, 2);
  CHECK(plain.recompute.empty());
  const LayerCosts costs = profile_layer_costs(shape, *backend, 2, 3, dseek::model::RecomputePolicy{2});
  REQUIRE(costs.recompute.size() == 3);
  CHECK(costs.recompute_policy.every == 2);
  double added = 0.0;
  for (double extra : costs.recompute) {
    CHECK(extra >= 0.0);
    added += extra;
  }
  // A block's forward run again: something, and less than the block's forward + backward.
  CHECK(added > 0.0);
  double blocks = 0.0;
  for (double block : costs.blocks) blocks += block;
  CHECK(added < 1.5 * blocks);
}
