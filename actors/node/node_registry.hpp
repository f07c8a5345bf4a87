// The names under which a node's actors register themselves in CAF's local registry.
// A supervisor restarts a crashed actor under a new handle; whoever sends to it looks the
// name up at send time, so nobody holds a stale handle across a restart.
#pragma once

#include <string>
#include <utility>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_registry.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/send.hpp>

namespace dseek::actors::names {

constexpr caf::atom_value metrics_exporter = caf::atom("dsmetrics");
constexpr caf::atom_value health_monitor = caf::atom("dshealth");
constexpr caf::atom_value membership = caf::atom("dsagent");
constexpr caf::atom_value worker = caf::atom("dsworker");
constexpr caf::atom_value fault_injector = caf::atom("dsfaults");
constexpr caf::atom_value data_prefetcher = caf::atom("dsprefetch");
constexpr caf::atom_value pipeline_stage = caf::atom("dsstage");
constexpr caf::atom_value node = caf::atom("dsnode");  // the node actor (embedded_node.hpp)
constexpr caf::atom_value coordinator = caf::atom("dscoord");  // the job's, on its node

// A node runs one worker group per local rank (cluster.gpus_per_node): group 0's actors
// keep the names of a node with one group (`group0`), the others' are `prefix` and their
// local rank (an atom holds at most 10 characters).
inline caf::atom_value of_group(caf::atom_value group0, const char* prefix, int local_rank) {
  return local_rank == 0 ? group0 : caf::atom_from_string(prefix + std::to_string(local_rank));
}

// The worker, data_prefetcher and pipeline_stage of worker group `local_rank`
// ("dsworker", "dsworker1", ...; "dsprefetch", "dsprefet1", ...; "dsstage", "dsstage1", ...).
inline caf::atom_value worker_of(int local_rank) { return of_group(worker, "dsworker", local_rank); }
inline caf::atom_value data_prefetcher_of(int local_rank) {
  return of_group(data_prefetcher, "dsprefet", local_rank);
}
inline caf::atom_value pipeline_stage_of(int local_rank) {
  return of_group(pipeline_stage, "dsstage", local_rank);
}

// The gradient_shard actor number `index` of worker group `local_rank` ("dsshard0", ...
// for group 0; "dsg1s0", ... for the others: an atom holds at most 10 characters).
inline caf::atom_value gradient_shard(int index, int local_rank = 0) {
  if (local_rank == 0) return caf::atom_from_string("dsshard" + std::to_string(index));
  return caf::atom_from_string("dsg" + std::to_string(local_rank) + "s" + std::to_string(index));
}

// Registers `handle` under `name`, replacing a predecessor (CAF 0.17's put() keeps an
// existing entry, dead or not: erase first).
template <class Handle>
void register_handle(caf::actor_system& sys, caf::atom_value name, const Handle& handle) {
  sys.registry().erase(name);
  sys.registry().put(name, caf::actor_cast<caf::strong_actor_ptr>(handle));
}

// Registers `self` under `name`.
template <class Self>
void register_as(Self* self, caf::atom_value name) {
  register_handle(self->system(), name, self->ctrl());
}

// The actor now registered under `name`, or an invalid handle.
inline caf::actor lookup(caf::actor_system& sys, caf::atom_value name) {
  return caf::actor_cast<caf::actor>(sys.registry().get(name));
}

// Sends to the actor registered under `name`; nothing if there is none right now (it is
// being restarted).
template <class... Ts>
void send_to(caf::actor_system& sys, caf::atom_value name, Ts&&... xs) {
  if (auto target = lookup(sys, name))
    caf::anon_send(target, std::forward<Ts>(xs)...);
}

}  // namespace dseek::actors::names
