// Coordinator failover: the order in which a job's coordinator moves when the node that
// runs it is lost for good (cluster.backup_coordinators, runtime/config/
// backup_coordinators.hpp), walked by the node's agent (node_agent.hpp).
//
// The candidates are the primary (cluster.coordinator_node at cluster.coordinator) and
// the backups, in order. A node's agent starts *fresh*: it tries each backup once (a
// backup coordinator exists only after a failover, so at the job's start nothing answers
// there and the agent goes on at once), then the primary. When it loses the coordinator
// it had joined, the walk goes on from the next candidate: a backup of this node's own is
// then started here (its coordinator runs in this process, published on the entry's
// address), any other candidate is tried a few times before the next. A coordinator that
// answers "no majority yet" (coordinator_config::quorum) sends the agent on as well, so
// the nodes of a majority meet at one coordinator, and a cut-off node finds it again when
// its link is back. Shared by the agent's incarnations (a restarted agent goes on where
// the last one was); used from one agent at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

namespace dseek::actors {

struct coordinator_candidate {
  std::int64_t node_id = 0;
  std::string address;  // host:port
  bool backup = false;  // false: the primary (cluster.coordinator)
};

class CoordinatorSuccession {
 public:
  // Starts and publishes a coordinator for `candidate` (one of this node's) in `sys`.
  using HostFunction =
      std::function<caf::expected<caf::actor>(caf::actor_system&, const coordinator_candidate&)>;

  // The primary coordinator when it runs in this process (else null).
  using LocalPrimary = std::function<caf::actor(caf::actor_system&)>;

  // `candidates`: the primary first, then the backups. `local_primary`: set on the
  // primary's node.
  CoordinatorSuccession(std::int64_t this_node, std::vector<coordinator_candidate> candidates,
                        HostFunction host, LocalPrimary local_primary = {});
  ~CoordinatorSuccession();

  // The candidate the agent joins now.
  coordinator_candidate current() const;
  // Join attempts to spend on the current candidate before the next; 0 = as many as
  // the agent's join_retries allow (the primary of a fresh walk: as without failover).
  std::uint32_t attempts_here() const;
  // Whether the walk passed a lost coordinator (hosting a backup is allowed from then on).
  bool failed_over() const;
  // The agent lost the coordinator it had joined: the next candidate.
  void lost();
  // The address of the coordinator lost last, once (for the failover's event); "" after.
  std::string take_lost();
  // The current candidate did not answer, or has no majority: the next.
  void advance();
  // When the current candidate is this node's own backup after a failover: its
  // coordinator runs here (started now if it does not). "" or why it could not start.
  std::string host_if_mine(caf::actor_system& sys);
  // The coordinator this node runs for the job as a backup (null: none).
  caf::actor hosted() const;
  // The current candidate's coordinator when it runs in this process (the hosted
  // backup, or the primary on its node), else null. The agent talks to it directly:
  // a CAF connection of a process to itself, made after peers connected, closes the
  // peers' connections too (remote_link_unreachable on the hosts test bed).
  caf::actor local_current(caf::actor_system& sys) const;
  // Stops it (the node's end, or the walk moved on from it).
  void stop_hosting();

 private:
  void step();  // to the next candidate this walk may use
  void stop_hosting_locked();

  mutable std::mutex mutex_;
  const std::int64_t this_node_;
  const std::vector<coordinator_candidate> candidates_;
  const HostFunction host_;
  const LocalPrimary local_primary_;
  std::size_t index_ = 0;
  bool failed_over_ = false;
  std::string lost_address_;
  caf::actor hosted_;
  std::size_t hosted_index_ = 0;
};

}  // namespace dseek::actors
