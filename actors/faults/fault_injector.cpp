// Implementation of fault_injector.hpp.
#include "actors/faults/fault_injector.hpp"

#include <cstdio>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include "actors/faults/crash_request.hpp"
#include "actors/faults/fault_actions.hpp"
#include "actors/faults/fault_plan.hpp"
#include "actors/node/node_registry.hpp"

namespace dseek::actors {

namespace {

using fire_atom = caf::atom_constant<caf::atom("dsfire")>;

caf::behavior fault_injector(caf::event_based_actor* self, std::shared_ptr<FaultPlan> plan,
                             std::shared_ptr<FaultActions> actions,
                             std::chrono::steady_clock::time_point node_start,
                             crash_requests crash) {
  names::register_as(self, names::fault_injector);
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [index, fault] : plan->pending_timed()) {
    const auto at = node_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                     std::chrono::duration<double>(fault.after_seconds));
    const auto wait = at > now ? at - now : std::chrono::steady_clock::duration::zero();
    self->delayed_send(self, std::chrono::duration_cast<std::chrono::milliseconds>(wait),
                       fire_atom::value, static_cast<std::uint64_t>(index));
  }
  return {
      [plan, actions](fire_atom, std::uint64_t index) {
        for (const auto& [i, fault] : plan->pending_timed()) {
          if (i != index || !plan->claim(i)) continue;
          char trigger[64];
          std::snprintf(trigger, sizeof trigger, "after %.3g s", fault.after_seconds);
          actions->fire(fault, trigger);
        }
      },
      [crash](crash_atom) { crash_now("fault_injector", crash); },
  };
}

}  // namespace

caf::actor spawn_fault_injector(caf::actor_system& sys, std::shared_ptr<FaultPlan> plan,
                                std::shared_ptr<FaultActions> actions,
                                std::chrono::steady_clock::time_point node_start,
                                crash_requests crash) {
  return sys.spawn(fault_injector, std::move(plan), std::move(actions), node_start, crash);
}

}  // namespace dseek::actors
