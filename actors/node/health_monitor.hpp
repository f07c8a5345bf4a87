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
// Its interface is health_monitor_actor below.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/node/node_messages.hpp"
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

// What the health monitor accepts and answers (all local: the messages are not
// announced for other processes).
using health_monitor_actor = caf::typed_actor<
    // The worker completed a step: the stall clock starts again (worker_resumed when
    // it had raised worker_stalled).
    caf::reacts_to<step_progress>,
    // The training paused at a step boundary, or goes on: no stall while paused.
    caf::reacts_to<training_paused>,
    // Replicas disagree: the sdc_detected event is on its way to the metrics exporter
    // when ok comes back (and, when this replica disagrees, the node's leave).
    caf::replies_to<sdc_report>::with<caf::ok_atom>,
    // The last completed step it heard of (tests, tools).
    caf::replies_to<caf::get_atom>::with<std::int64_t>,
    // The crash_actor fault: it throws (its supervisor restarts it).
    caf::reacts_to<crash_atom>>;

// Spawns the monitor; it registers itself as the health monitor of `sys` (a restarted
// one replaces its predecessor). Untyped for the supervisor's child spec; the same
// actor as health_monitor_of(sys).
// `crash`: whether it obeys crash requests (the node's: crash_requests_of its job).
caf::actor spawn_health_monitor(caf::actor_system& sys, health_settings settings = {},
                                crash_requests crash = crash_requests::obeyed);

// The health monitor of `sys` now (null while none runs).
health_monitor_actor health_monitor_of(caf::actor_system& sys);

// For RunOptions::report_disagreement: sends each disagreement to the node's health
// monitor and waits (bounded) until it took it. With no monitor running (being
// restarted, or a training outside the node's tree) it writes sdc_detected to `events`
// itself, so that no disagreement goes unreported.
std::function<void(const train::ReplicaDisagreement&)> sdc_reporter(
    caf::actor_system& sys, std::shared_ptr<metrics::EventLog> events);

}  // namespace dseek::actors
