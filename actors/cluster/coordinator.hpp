// The cluster coordinator: membership, rank table and world epochs.
//
//   coordinator_config cc;
//   cc.settings.secret = "...";            // or DSEEK_CLUSTER_SECRET
//   cc.listener = events;                  // optional
//   auto coord = spawn_coordinator(sys, cc);          // expected<caf::actor>
//   auto port = publish_coordinator(sys, *coord, 7420); // expected<uint16_t>
//
// Nodes join through a node_agent (node_agent.hpp): hello -> a random nonce;
// join_proof with HMAC-SHA256(secret, nonce || node_id) -> admitted, or
// refused with auth_failed / bad_challenge (logged on stderr, sent to the
// listener as join_refused; the members and the epoch are not touched).
//
// Every membership change starts a new epoch (numbered from 1) and sends
// every member (and the listener) node_joined / node_lost and then
// epoch_started with the rank table (ranks in node id order) and the plan (ranks_per_node
// workers a member, numbered in the table's order). The
// coordinator process is not itself a member: a node that trains runs an
// agent, the coordinator's node included (it joins its local coordinator).
// A node id that comes back (a restarted process) rejoins in a later epoch; a
// new incarnation of a node id that is still a member replaces it (node_lost
// "replaced", then node_joined, in one epoch).
//
// Failure detection: the coordinator monitors every member's agent: a dead
// process or connection is a down message (~ms). A hung node (SIGSTOP, a
// stuck host) is declared lost when no heartbeat came for
// settings.heartbeat_timeout. Heartbeats of a node that is no longer a member
// are answered with not_a_member (the agent then rejoins).
//
// With a quorum (coordinator failover, coordinator_succession.hpp) it forms epochs only
// with a majority of the job's nodes: see coordinator_config::quorum.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/cluster_settings.hpp"
#include "runtime/metrics/trace_spans.hpp"

namespace dseek::actors {

// The coordinator's interface (the implementation is dynamically typed: it
// also takes down messages and its own timers). Remote agents hold it as a
// caf::actor.
using coordinator_actor = caf::typed_actor<
    caf::replies_to<hello_atom, std::int64_t, std::string>::with<join_challenge>,
    caf::replies_to<join_atom, join_proof>::with<epoch_started>,
    // (node id, sequence number) -> the current epoch; error not_a_member.
    caf::replies_to<heartbeat_atom, std::int64_t, std::uint64_t>::with<std::uint64_t>,
    // The current epoch and rank table (epoch 0: nobody joined yet).
    caf::replies_to<members_atom>::with<epoch_started>,
    // Orderly leave of a member (node_lost "left", or "left: <why>" for a node that
    // leaves because it failed; a new epoch).
    caf::replies_to<leave_atom, std::int64_t, std::string>::with<caf::ok_atom>,
    // A member's workers restarted (node id, why): a new epoch with the same members.
    caf::replies_to<restarted_atom, std::int64_t, std::string>::with<epoch_started>,
    // A member's data plane could not connect in an epoch (node id, epoch, the node it
    // could not reach or -1, why): a new epoch if that one is still current, without the
    // unreachable node when one is named (cluster_messages.hpp).
    caf::replies_to<replan_atom, std::int64_t, std::uint64_t, std::int64_t,
                    std::string>::with<epoch_started>,
    // The SDC audit evicted the member that hosts this coordinator (node id, why; from
    // its own process only): it stays without workers in the plan, a new epoch.
    caf::replies_to<retire_atom, std::int64_t, std::string>::with<epoch_started>,
    // (epoch, rank, payload) -> every rank's payload once all arrived.
    caf::replies_to<rendezvous_atom, std::uint64_t, std::int32_t, std::string>::with<
        rendezvous_result>>;

struct coordinator_config {
  ClusterSettings settings;
  // Optional: gets node_joined, node_lost, epoch_started, join_refused.
  caf::actor listener;
  // Log lines on stderr ("[dseek coordinator] ..."): joins, losses, refusals.
  bool log = true;
  // Workers per member (cluster.gpus_per_node, the same on every node): the plan gives
  // member k of the table the data-parallel ranks k*G .. k*G+G-1, and a rendezvous
  // completes once each of those ranks of every member contributed.
  std::int32_t ranks_per_node = 1;
  // Coordinator failover (cluster.backup_coordinators set): the majority of the job's
  // nodes this coordinator needs to form an epoch (0: none, any world goes). A join
  // while fewer members and held joins than this exist is held for up to quorum_hold
  // and admitted with the others once they make the majority (one epoch for all), else
  // answered cluster_errc::no_quorum. When failures (not orderly leaves) drop the
  // members below it, the coordinator says so and exits with no_quorum: its members
  // walk the succession to the coordinator of the majority.
  std::int32_t quorum = 0;
  std::chrono::milliseconds quorum_hold{1000};
  // The trace clock of the coordinator's node, which members measure their clock offset
  // against (null: the system clock).
  std::shared_ptr<const metrics::TraceRecorder> trace;
};

// Errors: cluster_errc::no_secret when neither the setting nor
// DSEEK_CLUSTER_SECRET gives a secret.
caf::expected<caf::actor> spawn_coordinator(caf::actor_system& sys, coordinator_config cfg);

// io::publish on a loopback port, behind a handshake gate (handshake_gate.hpp) on
// host:port: port 0 picks a free port. Returns the gate's port. With tls,
// openssl::publish: only peers with a certificate of the cluster CA connect (the
// actor system must have loaded caf::openssl::manager).
caf::expected<std::uint16_t> publish_coordinator(caf::actor_system& sys,
                                                 const caf::actor& coordinator,
                                                 std::uint16_t port,
                                                 const std::string& host = "127.0.0.1",
                                                 bool tls = false);

} // namespace dseek::actors
