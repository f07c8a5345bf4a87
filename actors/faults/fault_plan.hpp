// Which of the job's [[faults]] this node injects, and when: at a step boundary (`step`)
// or after a time (`after_seconds`, from the node's start). Each fault fires at most once
// per job: only in the node's first incarnation (a node that `dseek launch` restarted
// after an injected kill must not kill itself again at the same step). No CAF here; the
// node's worker asks the plan at every step and the fault injector actor runs the timers.
#pragma once

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/config/job_config.hpp"

namespace dseek::actors {

class FaultPlan {
 public:
  // Keeps the faults whose `node` is this node or -1 (every node). `incarnation` is how
  // many times this node id was restarted (DSEEK_LAUNCH_RESTART); faults fire only in
  // incarnation 0.
  FaultPlan(const std::vector<config::FaultSpec>& faults, int64_t node_id, int64_t incarnation);

  // The step faults due before 0-based step `step` runs, each returned once.
  std::vector<config::FaultSpec> due_at_step(int64_t step);
  // The faults of step `step` with during = "reduction" (its first gradient bucket is on
  // the wire), each returned once.
  std::vector<config::FaultSpec> due_in_reduction(int64_t step);
  // The timed faults (after_seconds >= 0) not fired yet, with their index, for the
  // injector's timers; claim(index) marks one fired (false if it already was).
  std::vector<std::pair<size_t, config::FaultSpec>> pending_timed();
  bool claim(size_t index);

 private:
  std::mutex mutex_;
  std::vector<config::FaultSpec> faults_;
  std::vector<bool> fired_;
};

}  // namespace dseek::actors
