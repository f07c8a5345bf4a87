// The fault_injector actor of a node: runs the timers of the timed [[faults]]
// (after_seconds, counted from the node's start) and fires them through FaultActions.
// Step faults are fired by the worker at its step boundaries (deterministic), through
// the same FaultActions. A restart of this actor re-arms only the timers not yet fired.
#pragma once

#include <chrono>
#include <memory>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/faults/crash_request.hpp"

namespace dseek::actors {

class FaultActions;
class FaultPlan;

caf::actor spawn_fault_injector(caf::actor_system& sys, std::shared_ptr<FaultPlan> plan,
                                std::shared_ptr<FaultActions> actions,
                                std::chrono::steady_clock::time_point node_start,
                                crash_requests crash = crash_requests::obeyed);

}  // namespace dseek::actors
