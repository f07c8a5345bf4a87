// The crash_actor fault: every actor of a node's tree answers crash_atom by throwing, so
// its supervisor sees a real crash (a down message with the exception) and restarts it.
// Tests and [[faults]] kind = "crash_actor" send it through the fault injector.
//
// Only then: a node's registered actors can be reached by anyone who connects to one of
// its ports (CAF's remote lookup), so dseek-node allows crash requests only when a
// crash_actor fault is configured (embedded_node.cpp); elsewhere a request is ignored and said.
#pragma once

#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <caf/atom.hpp>

namespace dseek::actors {

using crash_atom = caf::atom_constant<caf::atom("dscrash")>;

// Whether crash requests are obeyed in this process (default yes: tests of the actors).
inline std::atomic<bool>& crash_requests_allowed() {
  static std::atomic<bool> allowed{true};
  return allowed;
}

// The handler an actor puts in its behavior: [=](crash_atom) { crash_now("health_monitor"); }
// Throws, unless crash requests are not allowed here: then it says so and returns.
inline void crash_now(const std::string& actor_name) {
  if (!crash_requests_allowed().load()) {
    std::fprintf(stderr, "dseek: a crash request for %s was ignored: no crash_actor fault is "
                         "configured ([[faults]])\n", actor_name.c_str());
    return;
  }
  throw std::runtime_error("injected fault: crash_actor " + actor_name);
}

} // namespace dseek::actors
