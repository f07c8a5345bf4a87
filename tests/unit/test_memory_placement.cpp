// The placement of a re-planned layout by what its ranks hold in memory
// (runtime/train/layout/memory_placement.hpp), without processes: an unchanged world and
// a restarted node keep the plan's order; a survivor holding a lost position takes it
// over the plan's next rank; no complete step leaves the plan's order; the holdings'
// text form round-trips and a malformed one holds nothing.
#include <catch2/catch.hpp>

#include "runtime/train/layout/memory_placement.hpp"

using dseek::train::StageHolding;
using dseek::train::SurvivorLayout;

namespace {
// Rank r held (stage, tensor rank) of a P x T layout after `steps` steps.
std::vector<StageHolding> held(int64_t p, int64_t t, int64_t stage, int64_t tensor_rank, int64_t steps) {
  return {StageHolding{p, t, stage, tensor_rank, steps}};
}
}  // namespace

TEST_CASE("memory placement: the ranks holding a position take it", "[layout][recovery]") {
  const SurvivorLayout d2p2{2, 2, 1};
  // D = 2 x P = 2, every rank at its place, node 3 restarted with nothing.
  CHECK(dseek::train::place_by_memory({held(2, 1, 0, 0, 10), held(2, 1, 1, 0, 10),
                                       held(2, 1, 0, 0, 10), {}},
                                      d2p2) == std::vector<int32_t>{0, 1, 2, 3});
  // Node 1 (stage 1) lost for good: survivors 0 (stage 0), 2 (stage 0), 3 (stage 1);
  // one replica: stage 0 from rank 0, stage 1 from rank 2 (node 3).
  const SurvivorLayout d1p2{1, 2, 1};
  CHECK(dseek::train::place_by_memory({held(2, 1, 0, 0, 10), held(2, 1, 0, 0, 10),
                                       held(2, 1, 1, 0, 10)},
                                      d1p2) == std::vector<int32_t>{0, 2});
  // Ranks one step apart: the newest step every position has (9), with copies of both.
  std::vector<StageHolding> two = {{2, 1, 1, 0, 10}, {2, 1, 1, 0, 9}};
  CHECK(dseek::train::place_by_memory({held(2, 1, 0, 0, 9), held(2, 1, 0, 0, 9), two}, d1p2) ==
        std::vector<int32_t>{0, 2});
  // A position nobody holds: the plan's order.
  CHECK(dseek::train::place_by_memory({held(2, 1, 0, 0, 10), held(2, 1, 0, 0, 10), {}}, d1p2) ==
        std::vector<int32_t>{0, 1});
  // Copies of another layout do not count (P = 2 x T = 2 now).
  const SurvivorLayout p2t2{1, 2, 2};
  CHECK(dseek::train::place_by_memory({held(2, 1, 1, 0, 10), held(2, 1, 0, 0, 10), {}, {}}, p2t2) ==
        std::vector<int32_t>{0, 1, 2, 3});
}

TEST_CASE("memory placement: holdings travel as text, and a malformed payload holds nothing",
          "[layout][recovery]") {
  const std::vector<StageHolding> holdings = {{2, 2, 1, 0, 12}, {2, 2, 1, 0, 11}};
  CHECK(dseek::train::decode_holdings(dseek::train::encode_holdings(holdings)) == holdings);
  CHECK(dseek::train::decode_holdings("").empty());
  CHECK(dseek::train::decode_holdings("2,2,1").empty());
  CHECK(dseek::train::decode_holdings("2,2,5,0,3").empty());  // stage outside P
  CHECK(dseek::train::decode_holdings("x;y").empty());
}
