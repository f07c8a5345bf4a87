// A node's member of the cluster: connects to the coordinator, joins with the
// cluster secret, heartbeats, and passes the membership events on.
//
//   node_agent_config ac;
//   ac.node_id = 2;
//   ac.coordinator = "10.0.0.1:7420";
//   ac.settings.secret = "...";          // or DSEEK_CLUSTER_SECRET
//   ac.listener = events;                // optional
//   auto agent = spawn_node_agent(sys, ac);   // expected<caf::actor>
//
// Connecting goes through the middleman actor (connect_atom) with
// settings.connect_timeout, so a peer that accepts TCP but never handshakes
// cannot block it. A failed connect or handshake step is retried
// settings.join_retries times, settings.join_retry_delay apart; then the
// agent sends agent_event{"join_failed"} and exits with
// cluster_errc::connect_failed (context: "host:port", why). A refused proof
// (wrong secret) is not retried: join_refused to the listener, exit with
// cluster_errc::auth_failed.
//
// Once joined it heartbeats every settings.heartbeat_interval (a request; the
// reply is the current epoch). The listener gets every epoch_started (once
// per epoch, in order), node_joined and node_lost from the coordinator. If
// the coordinator dies (down message) or leaves a sent heartbeat unanswered for
// settings.heartbeat_timeout, the agent sends agent_event{"coordinator_lost"}
// and exits with cluster_errc::coordinator_lost (a supervisor restarts it and
// it joins again; with a succession, the next candidate). After each join, with measure_clock, it sends the listener
// clock_offset_measured (the offset of this node's trace clock to the coordinator's).
// If the coordinator answers not_a_member (this node was
// declared lost, e.g. after a pause), it sends agent_event{"evicted"} and
// joins again, in a later epoch.
//
// On an orderly stop (exit_reason::user_shutdown from its supervisor) it leaves
// the job first (node_lost "left" on the others, no false failure); after a local
// (leave_atom, why) the leave says "left: why" (the node leaves because it failed). It forwards
// (rendezvous_atom, epoch, rank, payload) to the coordinator for the node's
// workers, (restarted_atom, why) -> epoch_started when the node's worker group
// restarted (the coordinator starts a new epoch), (replan_atom, epoch, lost_node, why)
// -> epoch_started when the node's data plane could not connect, (retire_atom, why) ->
// epoch_started when the SDC audit evicted this node while it hosts the coordinator, and
// crashes on crash_atom (fault injection).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/faults/crash_request.hpp"
#include "runtime/metrics/trace_spans.hpp"
#include "actors/cluster/cluster_settings.hpp"
#include "actors/cluster/coordinator_succession.hpp"

namespace dseek::actors {

struct node_agent_config {
  std::int64_t node_id = 0;
  std::string coordinator = "127.0.0.1:7420"; // host:port
  std::string advertise_host = "127.0.0.1";   // this node's address in the rank table
  ClusterSettings settings;
  // Optional: epoch_started, node_joined, node_lost, join_refused, agent_event.
  caf::actor listener;
  bool log = true; // "[dseek node N] ..." lines on stderr
  // Whether the agent obeys crash requests (the node's: crash_requests_of its job).
  crash_requests crash = crash_requests::obeyed;
  // The node's trace clock, which the clock offset to the coordinator is measured on
  // (null: the system clock).
  std::shared_ptr<const metrics::TraceRecorder> trace;
  // Connect through libcaf_openssl (the actor system must have loaded
  // caf::openssl::manager with the cluster CA, this node's certificate and key). A peer
  // that refuses the certificate closes the connection during the handshake; that
  // failure is retried like any connect failure, and its message names the TLS setup.
  bool tls = false;
  // Fault injection (drop_messages): the fraction of heartbeats this agent does not
  // send, chosen deterministically by sequence number. 1.0 makes the node look hung to
  // the coordinator while it runs; the agent itself counts silence only from the
  // heartbeats it sent, so it does not declare the coordinator lost. Null: none dropped.
  std::shared_ptr<std::atomic<double>> drop_heartbeats;
  // After every join, measure this node's clock against the coordinator's (a few
  // clock_atom rounds) and tell the listener clock_offset_measured: the node traces'
  // offsets (runtime/metrics/node_trace.hpp). dseek-node turns it on.
  bool measure_clock = false;
  // Coordinator failover (cluster.backup_coordinators): the candidates this agent walks
  // (coordinator_succession.hpp); `coordinator` is then the current candidate's. After a
  // failover it tells the listener agent_event{"coordinator_failover"} once joined, and
  // agent_event{"no_quorum"} when its coordinator stopped for want of a majority. Null:
  // only `coordinator`, rejoined after a loss (a restarted coordinator).
  std::shared_ptr<CoordinatorSuccession> succession;
};

// Errors: no_secret; connect_failed for a malformed coordinator address.
caf::expected<caf::actor> spawn_node_agent(caf::actor_system& sys, node_agent_config cfg);

} // namespace dseek::actors
