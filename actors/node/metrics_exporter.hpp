// The metrics_exporter actor of a node: writes the node's control-plane events (joins,
// losses, epochs, restarts, faults) into the node's events.jsonl, the same file the
// worker's training writes its steps to. The log outlives the actor, so a restart of
// the exporter (crash_actor fault) loses at most the events sent while it was down.
// (The Prometheus endpoint, metrics.prometheus_port, is refused by this build.)
#pragma once

#include <memory>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

namespace dseek::metrics {
class EventLog;
}

namespace dseek::actors {

caf::actor spawn_metrics_exporter(caf::actor_system& sys,
                                  std::shared_ptr<metrics::EventLog> events);

}  // namespace dseek::actors
