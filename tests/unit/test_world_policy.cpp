// Which world epoch a node's training accepts next (actors::WorldPolicy, shared by the
// data-parallel and the pipeline/tensor-parallel paths): the first world whole; after a
// failure only a later epoch, the whole world at once, a smaller one after
// elastic.rejoin_seconds and with at least elastic.min_nodes; never one without a worker
// on this node.
#include <catch2/catch.hpp>

#include <chrono>

#include "actors/control/world_policy.hpp"
#include "runtime/config/load.hpp"

using dseek::actors::epoch_started;
using dseek::actors::WorldClock;
using dseek::actors::WorldPolicy;

namespace {

// Epoch `number` of coordinator `coordinator` with workers on nodes 0..world-1.
epoch_started epoch_of(std::uint64_t number, int world, std::uint64_t coordinator = 7) {
  epoch_started epoch;
  epoch.epoch = number;
  epoch.world_size = world;
  epoch.coordinator_id = coordinator;
  for (int node = 0; node < world; ++node) epoch.plan.push_back({node, "worker", node});
  return epoch;
}

dseek::config::JobConfig four_nodes(double rejoin_seconds) {
  auto config = dseek::config::default_config();
  config.cluster.nodes = 4;
  config.cluster.node_id = 1;
  config.elastic.rejoin_seconds = rejoin_seconds;
  config.elastic.min_nodes = 2;
  return config;
}

}  // namespace

TEST_CASE("the first world is the whole one", "[world_policy]") {
  const auto config = four_nodes(0);
  const WorldPolicy policy{config, true, 0, 0, WorldClock::now()};
  CHECK(policy.accepts(epoch_of(3, 4)));
  CHECK_FALSE(policy.accepts(epoch_of(2, 3)));
  CHECK_FALSE(policy.accepts(epoch_of(0, 4)));  // no epoch yet
  CHECK_FALSE(policy.accepts(epoch_of(3, 1)));  // no worker on node 1
}

TEST_CASE("after a failure a later world: the whole one at once, the survivors after "
          "elastic.rejoin_seconds", "[world_policy]") {
  const auto waiting = four_nodes(3600);
  const WorldPolicy patient{waiting, false, 5, 7, WorldClock::now()};
  CHECK(patient.accepts(epoch_of(6, 4)));
  CHECK_FALSE(patient.accepts(epoch_of(5, 4)));  // the epoch that failed
  CHECK_FALSE(patient.accepts(epoch_of(6, 3)));  // the lost node may still come back
  CHECK(patient.accepts(epoch_of(1, 4, 8)));     // a new coordinator's epochs are later

  const auto at_once = four_nodes(0);
  const WorldPolicy eager{at_once, false, 5, 7, WorldClock::now()};
  CHECK(eager.accepts(epoch_of(6, 3)));
  CHECK(eager.accepts(epoch_of(6, 2)));
  auto three_at_least = four_nodes(0);
  three_at_least.elastic.min_nodes = 3;
  const WorldPolicy bounded{three_at_least, false, 5, 7, WorldClock::now()};
  CHECK(bounded.accepts(epoch_of(6, 3)));
  CHECK_FALSE(bounded.accepts(epoch_of(6, 2)));  // below elastic.min_nodes
  const auto now = WorldClock::now();
  CHECK(eager.wait_limit(now) ==
        now + std::chrono::milliseconds(static_cast<int64_t>(at_once.cluster.start_timeout_s * 1000)));
}
