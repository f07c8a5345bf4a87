// Which world epoch a node's training may train in next (epoch_loop.hpp): the job's
// first world must be whole; after a
// failure, a later epoch of the whole world again (the lost node restarted and rejoined),
// or, once elastic.rejoin_seconds passed, one of the survivors if they are at least
// elastic.min_nodes; a world short only of nodes the SDC audit evicted at once.
#pragma once

#include <chrono>
#include <cstdint>

#include "actors/cluster/cluster_messages.hpp"
#include "runtime/config/job_config.hpp"

namespace dseek::actors {

using WorldClock = std::chrono::steady_clock;

double ms_since(WorldClock::time_point t);

struct WorldPolicy {
  const config::JobConfig& config;
  bool first;                      // the job's first world: all nodes
  std::uint64_t after_epoch;       // the epoch that failed (later ones only)
  std::uint64_t after_coordinator; // ... of this coordinator (any epoch of a new one is later)
  WorldClock::time_point failed_at;
  // Nodes the SDC audit evicted (epoch_loop.cpp): they never come back, so a world
  // without them is whole and taken at once.
  std::int64_t evicted = 0;

  bool accepts(const epoch_started& e) const;
  // Accept `e` or a later epoch (the one a worker restart announced: epoch_loop.cpp).
  void accept_from(const epoch_started& e) {
    after_epoch = e.epoch - 1;
    after_coordinator = e.coordinator_id;
  }
  // Accept only epochs later than `e` (it failed, ended, or this rank stood by in it).
  void accept_after(const epoch_started& e) {
    after_epoch = e.epoch;
    after_coordinator = e.coordinator_id;
  }
  // How long to wait for an accepted world: cluster.start_timeout_s from `waited_from`,
  // plus elastic.rejoin_seconds after a failure.
  WorldClock::time_point wait_limit(WorldClock::time_point waited_from) const;
};

}  // namespace dseek::actors
