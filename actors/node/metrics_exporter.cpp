// Implementation of metrics_exporter.hpp.
#include "actors/node/metrics_exporter.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/node/node_registry.hpp"
#include "runtime/metrics/event_log.hpp"

namespace dseek::actors {

namespace {

caf::behavior metrics_exporter(caf::event_based_actor* self,
                               std::shared_ptr<metrics::EventLog> events) {
  names::register_as(self, names::metrics_exporter);
  return {
      [events](const node_event& e) { events->emit_raw(e.event, e.fields_json); },
      [](crash_atom) { crash_now("metrics_exporter"); },
  };
}

}  // namespace

caf::actor spawn_metrics_exporter(caf::actor_system& sys,
                                  std::shared_ptr<metrics::EventLog> events) {
  return sys.spawn(metrics_exporter, std::move(events));
}

}  // namespace dseek::actors
