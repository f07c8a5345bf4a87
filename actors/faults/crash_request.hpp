// The crash_actor fault: every actor of a node's tree answers crash_atom by throwing, so
// its supervisor sees a real crash (a down message with the exception) and restarts it.
// Tests and [[faults]] kind = "crash_actor" send it through the fault injector.
//
// Only then: a node's registered actors can be reached by anyone who connects to one of
// its ports (CAF's remote lookup), so a node's actors obey crash requests only when its
// job configures a crash_actor fault (crash_requests_of); elsewhere a request is ignored
// and said. The policy is each node's, handed to its actors when they are spawned: two
// nodes in one process may differ.
#pragma once

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <caf/atom.hpp>

#include "runtime/config/job_config.hpp"

namespace dseek::actors {

using crash_atom = caf::atom_constant<caf::atom("dscrash")>;

enum class crash_requests { ignored, obeyed };

// A node of `config`'s job obeys crash requests only when the job injects crash_actor faults.
inline crash_requests crash_requests_of(const config::JobConfig& config) {
  const bool injects = std::any_of(config.faults.begin(), config.faults.end(), [](const auto& f) {
    return f.kind == config::FaultKind::crash_actor;
  });
  return injects ? crash_requests::obeyed : crash_requests::ignored;
}

// Throws the injected crash of `actor_name` (the exception its supervisor sees).
[[noreturn]] inline void throw_injected_crash(const std::string& actor_name) {
  throw std::runtime_error("injected fault: crash_actor " + actor_name);
}

// The handler an actor puts in its behavior:
//   [=](crash_atom) { crash_now("health_monitor", crash); }
// Throws, unless `policy` ignores crash requests: then it says so and returns.
inline void crash_now(const std::string& actor_name, crash_requests policy) {
  if (policy == crash_requests::ignored) {
    std::fprintf(stderr, "dseek: a crash request for %s was ignored: no crash_actor fault is "
                         "configured ([[faults]])\n", actor_name.c_str());
    return;
  }
  throw_injected_crash(actor_name);
}

} // namespace dseek::actors
