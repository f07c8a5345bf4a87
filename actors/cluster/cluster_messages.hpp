// Messages of the cluster membership control plane (coordinator <-> node
// agents, and the events both send to their listeners), the error category
// and its codes. Announced by register_cluster_types(), which
// register_message_types() (actors/message_types.hpp) calls: every node must
// announce them, or the remote side receives empty messages.
//
// Protocol (every request has a timeout; see coordinator.hpp, node_agent.hpp):
//   agent -> coord  (hello_atom, node_id, node_nonce) -> join_challenge (with the
//                   coordinator's proof of the secret over the node's nonce)
//   agent -> coord  (join_atom, join_proof)           -> epoch_started | error
//   agent -> coord  (heartbeat_atom, node_id, seq)    -> uint64_t epoch | not_a_member
//   agent -> coord  (leave_atom, node_id, why)        -> ok (orderly leave: node_lost "left",
//                   or "left: <why>" when the node leaves because it failed)
//   agent -> coord  (restarted_atom, node_id, why)    -> epoch_started: the node's workers
//                   restarted (their data plane is gone); a new epoch with the same members
//                   (node_lost "worker restarted: <why>" first, so peers abort theirs)
//   agent -> coord  (replan_atom, node_id, epoch, lost_node, why) -> epoch_started: the
//                   node's data plane could not connect in `epoch`; if that is still the
//                   current epoch, a new one: with the same members (lost_node -1;
//                   node_lost "data plane failed on node N: <why>" first), or without
//                   lost_node (node_lost "unreachable on the data plane from node N: <why>");
//                   an older epoch changes nothing (another rank asked first)
//   agent -> coord  (retire_atom, node_id, why)       -> epoch_started: the SDC audit evicted
//                   node_id, which hosts the coordinator (from its process only): it stays a
//                   member with no worker in the plan (role "retired") until the job ends;
//                   a new epoch without its workers (node_lost "evicted by the SDC audit: <why>")
//   (the coordinator answers restarted, replan, rendezvous and members only from the process of
//   the member concerned, bound to it at the join, or from its own process: not_a_member)
//   member -> coord (rendezvous_atom, epoch, rank, payload) -> rendezvous_result, once every
//                   rank of that epoch's plan contributed (the data plane's address exchange,
//                   with a fresh data-plane key);
//                   error stale_epoch if the epoch is not (or no longer) the current one
//   coord -> agents epoch_started, node_joined, node_lost (asynchronous)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/message.hpp>
#include <caf/meta/type_name.hpp>

namespace dseek::actors {

// -- atoms (CAF 0.17: at most 10 characters) -----------------------------------

using hello_atom = caf::atom_constant<caf::atom("clhello")>;
using join_atom = caf::atom_constant<caf::atom("cljoin")>;
using heartbeat_atom = caf::atom_constant<caf::atom("clheartbt")>;
using members_atom = caf::atom_constant<caf::atom("clmembers")>;
using leave_atom = caf::atom_constant<caf::atom("clleave")>;
using rendezvous_atom = caf::atom_constant<caf::atom("clrendez")>;
using restarted_atom = caf::atom_constant<caf::atom("clrestart")>;
using replan_atom = caf::atom_constant<caf::atom("clreplan")>;
using retire_atom = caf::atom_constant<caf::atom("clretire")>;

// -- the join handshake ----------------------------------------------------------

// The coordinator's answer to hello: a fresh random nonce (hex) the node must
// authenticate with HMAC-SHA256(secret, nonce || decimal node_id). A nonce is
// good for one proof, from this node id and connection, within the challenge
// lifetime. `coordinator_mac` proves the coordinator knows the secret too
// (coordinator_mac() over the node's nonce from the hello): the node checks it
// before it proves anything.
struct join_challenge {
  std::string nonce;
  std::string coordinator_mac;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_challenge& x) {
  return f(caf::meta::type_name("join_challenge"), x.nonce, x.coordinator_mac);
}

// The node's answer. `agent` is the node agent: the coordinator monitors it
// and sends it the membership messages. The secret itself never travels.
struct join_proof {
  std::int64_t node_id = 0;
  std::string host; // where the node can be reached (advertised, for the rank table)
  std::string nonce;
  std::string mac;  // hex HMAC-SHA256(secret, nonce || node_id)
  caf::actor agent;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_proof& x) {
  return f(caf::meta::type_name("join_proof"), x.node_id, x.host, x.nonce, x.mac, x.agent);
}

// -- membership ------------------------------------------------------------------

// One row of the rank table. Ranks are 0..world_size-1 in node id order.
struct member_info {
  std::int64_t node_id = 0;
  std::int32_t rank = 0;
  std::string host;
  std::uint64_t joined_epoch = 0; // the epoch this incarnation of the node joined in
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, member_info& x) {
  return f(caf::meta::type_name("member_info"), x.node_id, x.rank, x.host, x.joined_epoch);
}

// One line of the coordinator's plan: which node runs which worker in an epoch.
// Every member runs cluster.gpus_per_node = G data-parallel workers (its local ranks
// 0..G-1, in the plan in that order): member k of the table holds ranks k*G .. k*G+G-1.
struct worker_assignment {
  std::int64_t node_id = 0;
  std::string role;      // "worker"
  std::int32_t rank = 0; // data-parallel rank
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_assignment& x) {
  return f(caf::meta::type_name("worker_assignment"), x.node_id, x.role, x.rank);
}

// A new world epoch: sent to every member (and the listeners) on every
// membership change. Everything built for an older epoch (communicators) is
// stale from here on. Nodes reconcile their workers to `plan`. Epochs are
// numbered per coordinator incarnation (`coordinator_id`, random): a coordinator
// that was restarted numbers from 1 again, and its epochs are newer than any of
// its predecessor's (is_newer_epoch).
struct epoch_started {
  std::uint64_t epoch = 0;
  std::int32_t world_size = 0;
  std::vector<member_info> members; // the rank table, by rank
  std::vector<worker_assignment> plan;
  std::uint64_t coordinator_id = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, epoch_started& x) {
  return f(caf::meta::type_name("epoch_started"), x.epoch, x.world_size, x.members, x.plan,
           x.coordinator_id);
}

// `candidate` comes after `known`: a later epoch of the same coordinator, or any
// epoch of another one (the old coordinator is gone).
inline bool is_newer_epoch(const epoch_started& candidate, const epoch_started& known) {
  return candidate.coordinator_id != known.coordinator_id || candidate.epoch > known.epoch;
}

// The reply to a rendezvous: every rank's payload, by rank, and the data-plane key of
// the ranks that met in it (fresh from the coordinator's CSPRNG for every rendezvous;
// it masks the UCX tags, comm/ucx/ucx_transport.hpp). It travels only to members over
// the authenticated control plane (TLS across hosts); never printed or logged.
struct rendezvous_result {
  std::uint64_t epoch = 0;
  std::vector<std::string> payloads;
  std::uint64_t data_key = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rendezvous_result& x) {
  return f(caf::meta::type_name("rendezvous_result"), x.epoch, x.payloads, x.data_key);
}

// A node was admitted; `epoch` is the epoch that includes it.
struct node_joined {
  std::int64_t node_id = 0;
  std::string host;
  std::uint64_t epoch = 0;
  bool rejoined = false; // this node id was a member before
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_joined& x) {
  return f(caf::meta::type_name("node_joined"), x.node_id, x.host, x.epoch, x.rejoined);
}

// A member was removed: "down: <reason>" (its process or connection died,
// seen as a down message), "heartbeat timeout", "replaced" (a new incarnation
// with the same id joined) or "left". detection_ms: how long after the
// failure the coordinator noticed it, as far as the coordinator can tell
// (heartbeat timeout: since the last heartbeat; down: 0, the down message is
// the detection). since_heartbeat_ms: age of the last heartbeat at detection.
struct node_lost {
  std::int64_t lost_node = 0;
  std::string reason;
  std::int64_t detection_ms = 0;
  std::int64_t since_heartbeat_ms = 0;
  std::uint64_t epoch = 0; // the new epoch, without the node
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_lost& x) {
  return f(caf::meta::type_name("node_lost"), x.lost_node, x.reason, x.detection_ms,
           x.since_heartbeat_ms, x.epoch);
}

// A join was refused (bad secret, expired challenge, ...). The coordinator
// sends it to its listener (and logs it); the refused agent to its listener.
struct join_refused {
  std::int64_t node_id = 0;
  std::string coordinator; // "host:port" (the agent's view; empty at the coordinator)
  std::string reason;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_refused& x) {
  return f(caf::meta::type_name("join_refused"), x.node_id, x.coordinator, x.reason);
}

// Agent-side events: the agent could not join ("host:port" named), or lost
// the coordinator (down, or heartbeat replies missing), or was evicted (its
// heartbeats were answered with not_a_member; it rejoins).
struct agent_event {
  std::string kind; // "join_failed", "coordinator_lost", "evicted"
  std::int64_t node_id = 0;
  std::string coordinator;
  std::string reason;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, agent_event& x) {
  return f(caf::meta::type_name("agent_event"), x.kind, x.node_id, x.coordinator, x.reason);
}

// -- errors ----------------------------------------------------------------------

constexpr caf::atom_value cluster_category = caf::atom("dseek_clu");

enum class cluster_errc : std::uint8_t {
  // The join proof did not verify (wrong secret). Context: (std::string why).
  auth_failed = 1,
  // The nonce is unknown, used, expired, or was issued to another node id.
  bad_challenge,
  // A heartbeat or request from an actor that is not (any more) the member
  // with that node id.
  not_a_member,
  // No cluster secret configured (setting and DSEEK_CLUSTER_SECRET empty).
  no_secret,
  // The coordinator could not be reached. Context: (std::string "host:port", std::string why).
  connect_failed,
  // The coordinator went away (down or silent). Context: (std::string "host:port", std::string why).
  coordinator_lost,
  // The coordinator refuses joins for now (too many pending challenges).
  busy,
  // A rendezvous for an epoch that is not the current one, or that ended before
  // every rank arrived. Context: (std::string why).
  stale_epoch,
  // A join with a node id that a live member holds (another process, a stale job with
  // the same secret): refused, not a replacement, until the holder is gone (down or
  // heartbeat timeout). Retried by the joining agent. Context: (std::string why).
  node_id_taken,
  // A coordinator of a job with backup coordinators forms epochs only with a majority of
  // cluster.nodes: a join answered so while too few nodes ask (retried, at another
  // candidate when the agent walks the succession), and the coordinator's exit reason
  // when its members fell below the majority. Context: (std::string why).
  no_quorum,
};

std::string to_string(cluster_errc x);
// Found by ADL, as CAF 0.17 expects of an error code enum (caf::error{cluster_errc::...}).
caf::error make_error(cluster_errc x, caf::message context = {});
// spawn_coordinator's and spawn_node_agent's error when no cluster secret is set.
caf::error no_secret_error();
std::string render_cluster_error(std::uint8_t code, caf::atom_value category,
                                 const caf::message& context);

void register_cluster_types(caf::actor_system_config& cfg);

} // namespace dseek::actors
