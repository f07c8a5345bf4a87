// plan_rebuild (dist/rebuild_plan.hpp): which rank of a new world gives
// the parameters and each optimizer shard when a ZeRO job recovers from memory, from
// what every rank says it holds; and why no state can be rebuilt when a shard is on no
// rank. The transfers themselves run in the multi-node recovery tests
// (tests/integration/test_elastic.cpp, "[zero]").
#include <catch2/catch.hpp>

#include <vector>

#include "dist/rebuild_plan.hpp"

using dseek::dist::HeldState;
using dseek::dist::plan_rebuild;

namespace {

// A rank of a `world`-rank ZeRO world that owns shard `own` and keeps the replica of
// shard own + 1, both at `step`.
HeldState ring_member(int64_t own, int64_t world, int64_t step) {
  HeldState held;
  held.steps_done = step;
  held.optimizer_steps = step;
  held.sharded_world = world;
  held.own_shard = own;
  held.replica_shard = (own + 1) % world;
  held.replica_steps_done = step;
  return held;
}

HeldState nothing() { return HeldState{}; }

}  // namespace

TEST_CASE("rebuild plan: a lost rank's shard comes from the replica on the rank before it",
          "[zero][recovery]") {
  // World of 3 lost rank 1; it rejoined with nothing, at new rank 2.
  const auto plan = plan_rebuild({ring_member(0, 3, 10), ring_member(2, 3, 10), nothing()});
  REQUIRE(plan.unrecoverable.empty());
  CHECK(plan.steps_done == 10);
  CHECK(plan.params_rank == 0);
  CHECK_FALSE(plan.whole_state);
  CHECK(plan.world == 3);
  CHECK(plan.shard_rank == std::vector<int>{0, 0, 1});
  CHECK(plan.from_replica == std::vector<bool>{false, true, false});
}

TEST_CASE("rebuild plan: with every owner present, no replica is used", "[zero][recovery]") {
  const auto plan = plan_rebuild({ring_member(1, 2, 7), ring_member(0, 2, 7)});
  REQUIRE(plan.unrecoverable.empty());
  CHECK(plan.shard_rank == std::vector<int>{1, 0});
  CHECK(plan.from_replica == std::vector<bool>{false, false});
}

TEST_CASE("rebuild plan: two ring neighbours lost together leave a shard nowhere",
          "[zero][recovery]") {
  // Ranks 1 and 2 of 3 lost: rank 2's shard was on rank 2 and its replica on rank 1.
  const auto plan = plan_rebuild({ring_member(0, 3, 12), nothing(), nothing()});
  CHECK(plan.steps_done == -1);
  CHECK(plan.unrecoverable ==
        "the optimizer shard of rank 2 of the 3-rank world at step 12 is on no node of this "
        "world: neither its own node nor the rank that keeps its replica holds it at that "
        "step (both lost)");
}

TEST_CASE("rebuild plan: a replica one step behind does not complete the newer step",
          "[zero][recovery]") {
  // Rank 0's exchange of step 11 was cut short: it holds its own shard at 11 and rank 1's
  // replica at 10 only; rank 1 is lost. No step has every shard.
  HeldState behind = ring_member(0, 2, 11);
  behind.replica_steps_done = 10;
  const auto plan = plan_rebuild({behind, nothing()});
  CHECK(plan.steps_done == -1);
  CHECK_FALSE(plan.unrecoverable.empty());
  // The other survivor finished the exchange: step 11 is complete from it.
  HeldState ahead = ring_member(2, 3, 11);
  HeldState owner_of_1 = ring_member(1, 3, 11);
  owner_of_1.replica_steps_done = 10;
  const auto other = plan_rebuild({ring_member(0, 3, 11), owner_of_1, nothing()});
  CHECK(other.steps_done == -1);  // shard 2's owner lost and its replica on rank 1 is behind
  const auto complete = plan_rebuild({ring_member(0, 3, 11), ahead, nothing()});
  CHECK(complete.steps_done == 11);  // shard 1 from its replica on rank 0
  CHECK(complete.shard_rank == std::vector<int>{0, 0, 1});
}

TEST_CASE("rebuild plan: a whole state (recovered, no step since) gives everything",
          "[zero][recovery]") {
  HeldState whole;
  whole.steps_done = 5;
  whole.optimizer_steps = 5;
  const auto plan = plan_rebuild({nothing(), whole, ring_member(0, 2, 4)});
  REQUIRE(plan.unrecoverable.empty());
  CHECK(plan.steps_done == 5);
  CHECK(plan.whole_state);
  CHECK(plan.params_rank == 1);
}

TEST_CASE("rebuild plan: nobody holds a state", "[zero][recovery]") {
  const auto plan = plan_rebuild({nothing(), nothing()});
  CHECK(plan.steps_done == -1);
  CHECK(plan.unrecoverable.empty());
}
