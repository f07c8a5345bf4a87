// Recovery of pipeline and tensor-parallel jobs from memory: each rank keeps copies of
// its own state (parameters and AdamW moments of what it owns, PipelineStage::
// copy_owned_state) of the two newest completed steps, with the position it was taken
// at, for the node's lifetime (a worker group's restart keeps them). At an epoch's start
// the layout's ranks agree (StageMemorySync, implemented over the data plane by
// dist/stage_memory_sync.hpp) on the newest step that a replica of every (stage, tensor
// rank) of the new layout holds at that position; a rank without it receives it from
// one, and all resume there: no checkpoint is read. Two copies, because a failure can
// leave ranks one step apart (one finished step k's update, a peer had not), never more
// (every step's collectives join every rank to the step before).
//
// Under ZeRO (parallel.zero >= 1) a replica holds pieces of its moments only: with
// elastic.shard_replica each rank keeps one copy whose moments are its own pieces, and
// its ring neighbour's pieces in the data group (sent after every step), and the
// agreement puts the
// position's whole state back together from them. Not under fp8 (its amax histories are
// not kept), nor under ZeRO without elastic.shard_replica: those recover from the newest
// checkpoint, and the agreement says why.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/train/layout/memory_placement.hpp"
#include "runtime/train/state/memory_recovery.hpp"
#include "runtime/train/pipeline/stage.hpp"

namespace dseek::metrics {
class EventLog;
}

namespace dseek::train {

// Where a rank's state belongs: ranks at equal positions own the same floats (the
// replicas of one stage and tensor rank, in any epoch of the same pipeline split).
struct StagePosition {
  int64_t pipeline = 1, tensor = 1;  // the layout's P and T
  int64_t stage = 0, tensor_rank = 0;
  std::vector<model::LayerRange> ranges;  // the plan's layer split
  bool operator==(const StagePosition&) const = default;
};

// The position of a built stage.
StagePosition position_of(const PipelineStageInfo& info);

struct StageStateCopy {
  int64_t steps_done = -1;  // -1: empty
  int64_t optimizer_steps = 0;
  StagePosition position;
  std::vector<float> state;  // copy_owned_state's floats
};

// Under ZeRO: this rank's copy (its pieces of the moments valid, own_ranges) and its
// ring neighbour's pieces (replica_ranges of the same packing, packed in `replica`), each
// of its step; shard numbers are replicas of a data group of `sharded_world`.
struct ShardedStageCopy {
  StageStateCopy own;
  int64_t sharded_world = 0, own_shard = -1, replica_shard = -1;
  int64_t replica_steps_done = -1;
  std::vector<model::ParamRange> own_ranges, replica_ranges;
  std::vector<float> replica;
};

class StageMemory {
 public:
  // After every completed step: this rank's state, in place of the older copy.
  void keep(int64_t steps_done, const StagePosition& at, PipelineStage& stage);
  // Under ZeRO (the sync's keep fills it).
  ShardedStageCopy& sharded() { return sharded_; }
  const ShardedStageCopy& sharded() const { return sharded_; }
  // The copy of `steps_done` taken at `at`; null if none.
  const StageStateCopy* find(int64_t steps_done, const StagePosition& at) const;
  const std::array<StageStateCopy, 2>& copies() const { return copies_; }
  // What it holds, for the placement of a re-planned layout (layout/memory_placement.hpp).
  std::vector<StageHolding> holdings() const;

 private:
  std::array<StageStateCopy, 2> copies_;
  ShardedStageCopy sharded_;
};

// The agreement of an epoch's ranks (see the top). Collective over the layout's ranks,
// after the stage is built and before its first step.
class StageMemorySync {
 public:
  virtual ~StageMemorySync() = default;
  // Restores `stage` to the agreed step and returns it, or returns steps_done -1 (and
  // leaves `stage` as it is) when no step is held by a replica of every position.
  virtual MemoryRecovery recover(StageMemory& memory, const StagePosition& here,
                                 PipelineStage& stage) = 0;
  // After every completed step: keeps this rank's state in `memory` (under ZeRO
  // collective over the data group: the pieces go to the ring neighbour).
  virtual void keep(StageMemory& memory, int64_t steps_done, const StagePosition& at,
                    PipelineStage& stage, metrics::EventLog& events) = 0;
};

// Why `config`'s job cannot recover from memory ("" when it can).
std::string why_no_memory_recovery(const config::JobConfig& config);

}  // namespace dseek::train
