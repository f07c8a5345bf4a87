// The health_monitor actor of a node: the worker reports every completed step to it,
// and it raises a `worker_stalled` event when no step completed for much longer than
// steps usually take (a collective or a kernel that hangs inside this process, which the
// coordinator's heartbeats cannot see: the node still answers them). It clears with
// `worker_resumed`. A paused training (training_paused) is not stalled.
//
// The replicas' gradient and parameter checksums (train.replica_check_every) report here
// too: the training thread sends every disagreement it sees (sdc_reporter()), the monitor
// writes the `sdc_detected` event, and when this replica is the one that disagrees it
// drives its removal from the job: it gives the node's membership the reason to leave
// with (the replica check that failed), so that the coordinator takes the node out as a lost node
// and its peers go on without it, while the training thread ends the worker with
// ReplicaMismatch (the node then fails, leaves and is restarted by its launcher, and
// rejoins with a healthy peer's state).
//
//   (get_atom) -> int64_t: the last completed step it heard of (tests, tools).
//   sdc_report -> ok_atom, once the event is on its way to the metrics exporter.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "runtime/train/replica_check.hpp"

namespace dseek::metrics {
class EventLog;
}

namespace dseek::actors {

struct health_settings {
  // A step is overdue after max(min_stall, stall_factor x the slowest recent step).
  std::chrono::milliseconds min_stall{10000};
  double stall_factor = 10.0;
  std::chrono::milliseconds check_interval{500};
};

caf::actor spawn_health_monitor(caf::actor_system& sys, health_settings settings = {});

// For RunOptions::report_disagreement: sends each disagreement to the node's health
// monitor and waits (bounded) until it took it. With no monitor running (being
// restarted, or a training outside the node's tree) it writes sdc_detected to `events`
// itself, so that no disagreement goes unreported.
std::function<void(const train::ReplicaDisagreement&)> sdc_reporter(
    caf::actor_system& sys, std::shared_ptr<metrics::EventLog> events);

}  // namespace dseek::actors
