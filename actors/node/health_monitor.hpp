// The health_monitor actor of a node: the worker reports every completed step to it,
// and it raises a `worker_stalled` event when no step completed for much longer than
// steps usually take (a collective or a kernel that hangs inside this process, which the
// coordinator's heartbeats cannot see: the node still answers them). It clears with
// `worker_resumed`. (The gradient checksums of the distributed issue report here too.)
//
//   (get_atom) -> int64_t: the last completed step it heard of (tests, tools).
#pragma once

#include <chrono>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

namespace dseek::actors {

struct health_settings {
  // A step is overdue after max(min_stall, stall_factor x the slowest recent step).
  std::chrono::milliseconds min_stall{10000};
  double stall_factor = 10.0;
  std::chrono::milliseconds check_interval{500};
};

caf::actor spawn_health_monitor(caf::actor_system& sys, health_settings settings = {});

}  // namespace dseek::actors
