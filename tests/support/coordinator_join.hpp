// Joins a member to an in-process coordinator by hand (hello, proof, join), for unit
// tests that talk to the coordinator without a node agent: `agent` (a scoped actor)
// stands for the member's agent.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/scoped_actor.hpp>
#include <catch2/catch.hpp>

#include "actors/cluster/cluster_settings.hpp"
#include "actors/cluster/coordinator.hpp"

namespace dseek::testing {

// Joins node `node_id` to `coordinator` with `agent` as its agent; returns the epoch.
inline actors::epoch_started join_coordinator(caf::scoped_actor& agent, const caf::actor& coordinator,
                                              std::int64_t node_id, const std::string& secret) {
  using namespace std::chrono_literals;
  actors::join_challenge challenge;
  agent->request(coordinator, 5s, actors::hello_atom::value, node_id, actors::make_nonce())
      .receive([&](actors::join_challenge& c) { challenge = c; },
               [](caf::error&) { FAIL("no challenge"); });
  actors::join_proof proof{node_id, "127.0.0.1", challenge.nonce,
                           actors::join_mac(secret, challenge.nonce, node_id),
                           caf::actor_cast<caf::actor>(agent)};
  actors::epoch_started epoch;
  agent->request(coordinator, 5s, actors::join_atom::value, proof)
      .receive([&](actors::epoch_started& e) { epoch = e; },
               [](caf::error&) { FAIL("join refused"); });
  return epoch;
}

}  // namespace dseek::testing
