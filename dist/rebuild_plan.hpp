// Recovery from memory under ZeRO >= 1 (dist/stage_memory_sync.hpp): which replica of a
// data group gives what when the group's ranks put the whole training state of a step
// back together from the pieces they hold: the parameters from any replica that
// completed that step, and each optimizer shard of the world that trained it from the
// replica that owned it or, when that one was lost, from the replica keeping its copy
// (its ring neighbour). Every rank then holds the whole state, from which the trainer of
// the new world (fewer replicas, or as many when the lost node rejoined) takes its own
// pieces: the state is resharded by construction. When some shard is on no rank (two
// ring neighbours lost together) there is no plan, and the reason says which shard is
// missing: the caller goes to the newest checkpoint on disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "runtime/model/param_layout.hpp"

namespace dseek::dist {

// What one rank holds, as the ranks tell each other.
struct HeldState {
  int64_t steps_done = -1;
  int64_t optimizer_steps = 0;
  int64_t sharded_world = 0;  // 0: whole moments
  int64_t own_shard = -1;
  int64_t replica_shard = -1;
  int64_t replica_steps_done = -1;
};

// Which rank gives what (the same on every rank: computed from every rank's HeldState).
struct RebuildPlan {
  int64_t steps_done = -1;
  int params_rank = -1;            // gives the parameters (and, whole_state, the moments)
  bool whole_state = false;
  int64_t world = 0;               // the world the moments were sharded over
  std::vector<int> shard_rank;     // by shard of that world: the rank that gives it
  std::vector<bool> from_replica;  // ... out of its replica of a lost peer's shard
  std::string unrecoverable;       // no plan: why
};

RebuildPlan plan_rebuild(const std::vector<HeldState>& held);
// The plan for step `step` alone (`unrecoverable` set when some shard or the parameters
// of that step are on no rank).
RebuildPlan plan_for_step(const std::vector<HeldState>& held, int64_t step);

// The root's ranges of a flat buffer to every rank of `comm` (their number, then the
// ranges); collective.
std::vector<model::ParamRange> broadcast_ranges(comm::Communicator& comm,
                                                std::vector<model::ParamRange> ranges, int root);

}  // namespace dseek::dist
