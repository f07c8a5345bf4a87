// What each fault kind does to this node, for real:
//   kill           the process dies by SIGKILL (no cleanup, as a crashed host)
//   hang           the process stops (SIGSTOP) for `seconds` (a forked waker sends
//                  SIGCONT) or forever: no heartbeat, no step, no reply
//   crash_actor    the named actor of the node's tree throws (its supervisor restarts it)
//   drop_messages  the node's agent stops sending that fraction of its heartbeats
//   slow           every later step takes `ms` longer (inside the step, before the update)
//   corrupt_gradient  the step's reduced gradient on this node is altered before the
//                  update (as a bad memory or a bad kernel would): the replica checks
//                  catch it; with where = "local" the node's own gradient before the
//                  reduction (a faulty GPU: every replica's sum is poisoned alike, the
//                  SDC audit finds it); where = "audit": only its recomputations for
//                  the audit (a wrong auditor); every_step = true: at every step from
//                  then on
//   fail_connect   the node's next data-plane connect (its next epoch) fails after the
//                  rendezvous, as if a peer were unreachable (control/data_plane_link.hpp)
// Each writes a `fault_injected` event to the node's log first, synchronously, so the
// line is on disk before a kill or a stop.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/fwd.hpp>

#include "runtime/config/job_config.hpp"

namespace dseek::metrics {
class EventLog;
}

namespace dseek::actors {

// The actor names crash_actor accepts. On a node with several worker groups
// (cluster.gpus_per_node > 1), "worker@R", "gradient_shard@R", "data_prefetcher@R" and
// "pipeline_stage@R" name that actor of the group of local rank R ("worker" is "worker@0").
const std::vector<std::string>& crashable_actors();
// Throws std::invalid_argument naming the fault and the known names when a crash_actor
// fault names no actor of the tree (of a node with `local_ranks` worker groups).
void check_fault_targets(const std::vector<config::FaultSpec>& faults, int64_t local_ranks = 1);

class FaultActions {
 public:
  FaultActions(caf::actor_system& sys, std::shared_ptr<metrics::EventLog> events);

  // Injects one fault; `trigger` says what fired it ("step 12", "after 3.0 s").
  void fire(const config::FaultSpec& fault, const std::string& trigger);
  // As each step starts: the slow sleep. Inside a step, on the gradients `where` names
  // (the reduced ones, this rank's own before the reduction, an audit's recomputation):
  // a pending corruption of `grads` (kept pending while `count` is 0).
  void sleep_if_slow();
  void corrupt_if_due(config::FaultWhere where, float* grads, size_t count);
  // Whether a fired fail_connect is pending: true once, for the next connect.
  bool take_connect_failure() { return fail_connect_next_.exchange(false); }
  // Shared with the node agent (node_agent_config::drop_heartbeats).
  std::shared_ptr<std::atomic<double>> drop_heartbeats() const { return drop_heartbeats_; }

 private:
  caf::actor_system& sys_;
  std::shared_ptr<metrics::EventLog> events_;
  std::atomic<int64_t> slow_ms_{0};
  // corrupt_gradient by FaultWhere: once (next) or at every step.
  struct Corruption {
    std::atomic<bool> next{false}, always{false};
  };
  Corruption corrupt_[3];
  std::atomic<bool> fail_connect_next_{false};
  std::shared_ptr<std::atomic<double>> drop_heartbeats_ = std::make_shared<std::atomic<double>>(0.0);
};

}  // namespace dseek::actors
