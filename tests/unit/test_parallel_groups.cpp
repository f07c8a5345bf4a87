// The 3D rank layout (train::ParallelGroups): tensor-parallel ranks consecutive, then
// stages, then replicas; every rank in exactly one group of each kind; tensor groups on
// one host when a host holds a multiple of T ranks.
#include <catch2/catch.hpp>

#include <set>
#include <tuple>
#include <vector>

#include "runtime/train/layout/parallel_groups.hpp"

using dseek::train::ParallelGroups;

TEST_CASE("a 2 x 2 x 2 world is laid out replica, stage, tensor rank", "[parallel_groups]") {
  const ParallelGroups groups(2, 2, 2);
  REQUIRE(groups.world() == 8);
  CHECK(groups.tensor_group(5) == std::vector<int>{4, 5});
  CHECK(groups.pipeline_group(5) == std::vector<int>{5, 7});
  CHECK(groups.data_group(5) == std::vector<int>{1, 5});
  const auto c = groups.coordinates(6);
  CHECK((c.data == 1 && c.stage == 1 && c.tensor == 0));
  CHECK(groups.tensor_groups_packed(2));
  CHECK(groups.tensor_groups_packed(4));
  CHECK_FALSE(groups.tensor_groups_packed(3));
  CHECK(groups.describe().find("rank 5: replica 1, stage 0, tensor rank 1; tensor group {4,5}, "
                               "pipeline group {5,7}, data group {1,5}") != std::string::npos);
}

TEST_CASE("every rank is in one group of each kind, of the configured size", "[parallel_groups]") {
  for (const auto& [d, p, t] : {std::tuple{1, 1, 2}, std::tuple{1, 2, 2}, std::tuple{3, 2, 4},
                                std::tuple{2, 3, 1}}) {
    const ParallelGroups groups(d, p, t);
    std::set<std::vector<int>> tensor, pipeline, data;
    for (int r = 0; r < groups.world(); ++r) {
      CHECK(groups.rank_of(groups.coordinates(r)) == r);
      tensor.insert(groups.tensor_group(r));
      pipeline.insert(groups.pipeline_group(r));
      data.insert(groups.data_group(r));
    }
    CHECK(tensor.size() == static_cast<size_t>(d * p));
    CHECK(pipeline.size() == static_cast<size_t>(d * t));
    CHECK(data.size() == static_cast<size_t>(p * t));
    for (const auto& g : tensor) CHECK(g.size() == static_cast<size_t>(t));
    for (const auto& g : pipeline) CHECK(g.size() == static_cast<size_t>(p));
    for (const auto& g : data) CHECK(g.size() == static_cast<size_t>(d));
  }
  REQUIRE_THROWS_WITH(ParallelGroups(1, 0, 2), Catch::Contains("parallel.pipeline"));
}
