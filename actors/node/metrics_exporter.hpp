// The metrics_exporter actor of a node: writes the node's control-plane events (joins,
// losses, epochs, restarts, faults) into the node's events.jsonl, the same file the
// worker's training writes its steps to, and, when metrics.prometheus_port asks for it,
// serves the node's Prometheus endpoint (runtime/metrics/metrics_endpoint.hpp) while it
// runs. The log and the metrics outlive the actor, so a restart of the exporter
// (crash_actor fault) loses at most the events sent while it was down, and its
// successor serves the same counters on the same port.
#pragma once

#include <memory>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/faults/crash_request.hpp"

namespace dseek::metrics {
class EventLog;
class MetricsEndpoint;
}  // namespace dseek::metrics

namespace dseek::actors {

// `endpoint` may be null (no /metrics). Throws when the endpoint cannot listen, with the
// message naming metrics.prometheus_port and the port: the node supervisor's start fails
// with it.
caf::actor spawn_metrics_exporter(caf::actor_system& sys,
                                  std::shared_ptr<metrics::EventLog> events,
                                  std::shared_ptr<metrics::MetricsEndpoint> endpoint,
                                  crash_requests crash = crash_requests::obeyed);

}  // namespace dseek::actors
