// Implementation of metrics_exporter.hpp.
#include "actors/node/metrics_exporter.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/node/node_registry.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/metrics_endpoint.hpp"

namespace dseek::actors {

namespace {

caf::behavior metrics_exporter(caf::event_based_actor* self,
                               std::shared_ptr<metrics::EventLog> events, crash_requests crash) {
  names::register_as(self, names::metrics_exporter);
  return {
      [events](const node_event& e) { events->emit_raw(e.event, e.fields_json); },
      [crash](crash_atom) { crash_now("metrics_exporter", crash); },
  };
}

}  // namespace

caf::actor spawn_metrics_exporter(caf::actor_system& sys,
                                  std::shared_ptr<metrics::EventLog> events,
                                  std::shared_ptr<metrics::MetricsEndpoint> endpoint,
                                  crash_requests crash) {
  // Listening here, in the supervisor's start of the child, makes a port in use fail
  // the start with the endpoint's message instead of a crash of a running actor.
  const uint64_t lease = endpoint ? endpoint->open() : 0;
  auto exporter = sys.spawn(metrics_exporter, std::move(events), crash);
  // However the actor ends (stopped with the node, crashed), its server stops with it.
  if (endpoint)
    exporter->attach_functor([endpoint, lease] { endpoint->close(lease); });
  return exporter;
}

}  // namespace dseek::actors
