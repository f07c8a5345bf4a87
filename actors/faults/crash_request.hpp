// The crash_actor fault: every actor of a node's tree answers crash_atom by throwing, so
// its supervisor sees a real crash (a down message with the exception) and restarts it.
// Tests and [[faults]] kind = "crash_actor" send it through the fault injector.
#pragma once

#include <stdexcept>
#include <string>

#include <caf/atom.hpp>

namespace dseek::actors {

using crash_atom = caf::atom_constant<caf::atom("dscrash")>;

// The handler an actor puts in its behavior: [=](crash_atom) { crash_now("health_monitor"); }
[[noreturn]] inline void crash_now(const std::string& actor_name) {
  throw std::runtime_error("injected fault: crash_actor " + actor_name);
}

} // namespace dseek::actors
