// A seeded random fault schedule for a soak (`dseek launch --faults-seed N`): the same
// seed, node count and step count give the same schedule on every build and host (its
// own generator, splitmix64, not the library's distributions), so a failing soak is
// replayed from the seed that the launcher printed (as `--set faults=[...]`:
// config::faults_inline_toml). No CAF here.
//
// The schedule holds every kind a node recovers from in place, each at least once: a
// kill (the launcher restarts the node), a hang of 2-4 s of a node other than the
// coordinator's (declared lost by heartbeat timeout, it rejoins when it wakes),
// crash_actor of every actor kind of the job's layout, slow (10-50 ms per step from then
// on) and drop_messages (10-50 % of the heartbeats: spread evenly, never enough in a row
// to lose the node), then 0-3 more of them (no second kill), at random nodes and steps in
// [2, steps - 3]. Kill and hang fire at a step boundary or, one time in three, in the
// step's gradient reduction. A node fires its faults only in its first incarnation
// (fault_plan.hpp), so a node's kill is its last fault: a fault drawn for a killed node
// at or after its kill goes to the next node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/config/job_config.hpp"

namespace dseek::actors {

struct RandomFaultsShape {
  int64_t nodes = 0;
  int64_t steps = 0;
  // A pipeline or tensor-parallel job: crash_actor names its pipeline_stage, not the
  // data-parallel gradient_shard.
  bool staged = false;
  // Its node is never hung (that would need coordinator failover); it may be killed
  // (restarted, it brings up a new coordinator).
  int64_t coordinator_node = 0;
  // Whether its worker groups have gradient_shard actors (an optimizer offloaded to the
  // CPU: config::optimizer_offloaded); without them crash_actor never names one.
  bool gradient_shards = true;
};

// Throws std::invalid_argument when the job is too small for a schedule (fewer than 3
// nodes or 8 steps).
std::vector<config::FaultSpec> random_faults(uint64_t seed, const RandomFaultsShape& shape);

}  // namespace dseek::actors
