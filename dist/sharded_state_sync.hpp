// Recovery from memory under ZeRO >= 1: when a data-parallel world is (re)built, its
// ranks put the whole training state of the freshest step back together from the pieces
// they hold (peer_shard_replica.hpp): the parameters from any node that completed that
// step, and each optimizer shard of the world that trained it from the node that owned
// it or, when that node was lost, from the node keeping its replica. Every rank ends
// with the whole state (parameters and moments), from which the trainer of the new
// world (fewer ranks, or the same number when the lost node rejoined) takes its own
// shard: the state is resharded by construction.
//
// The step chosen is the freshest one for which every shard is somewhere at that step
// (a node whose replica transfer was cut short holds its own shard one step ahead of
// the replica it keeps). When no step is complete (two ring neighbours lost together),
// nothing is rebuilt and the reason says which shard is missing: the caller goes to
// the newest checkpoint on disk.
//
// The ZeRO 0 counterpart, where every replica holds everything, is state_sync.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "runtime/train/run_training.hpp"

namespace dseek::dist {

struct ShardedStateAgreement {
  int64_t steps_done = -1;  // -1: no state rebuilt (start fresh, or from disk)
  // Some shard came from a peer's replica (a node's own shard was lost), or this rank
  // had no state of that step itself: the recovered event's source "peer" (else "memory").
  bool from_peer = false;
  // Why no state was rebuilt although some rank had one ("" otherwise).
  std::string unrecoverable;
};

// What one rank holds, as the ranks tell each other (from its TrainingState).
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

// Collective: every rank of `comm` calls it. `state` is this rank's (steps_done -1 for
// none); on return it is the whole state of the chosen step, moments whole
// (sharded_world 0), unless nothing could be rebuilt. `param_count` sizes the buffers.
// Throws comm::CommError when the data plane fails.
ShardedStateAgreement rebuild_sharded_state(comm::Communicator& comm, train::TrainingState& state,
                                            size_t param_count);

}  // namespace dseek::dist
