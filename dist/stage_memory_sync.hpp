// train::StageMemorySync over the data plane (runtime/train/state/stage_memory.hpp): the
// layout's ranks all-gather, over the world's communicator, which steps each holds in
// memory at its new position (whole copies, and under ZeRO its pieces and its ring
// neighbour's); every rank then computes the same choice, the newest step that the
// ranks of every position hold: a whole copy, or every shard of the data group that
// trained it (sharded_state_sync.hpp's plan). Within each data group (the replicas of
// one stage and tensor rank) the lowest replica with a whole copy broadcasts it, or the
// givers of the parameters and of each shard broadcast theirs, and every rank restores
// it. Under ZeRO each step's keep sends this rank's pieces to the replica before it
// (replica r keeps r + 1's), as dist/peer_shard_replica.hpp does in a data-parallel job.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "dist/sharded_state_sync.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/train/state/stage_memory.hpp"

namespace dseek::dist {

class CommStageMemorySync final : public train::StageMemorySync {
 public:
  // `world`: the layout's ranks; `data_group`: this rank's replicas (null: one). Both
  // must outlive the sync.
  CommStageMemorySync(const config::JobConfig& config, comm::Communicator& world,
                      comm::Communicator* data_group)
      : config_(config), world_(world), data_group_(data_group) {}
  train::MemoryRecovery recover(train::StageMemory& memory, const train::StagePosition& here,
                                train::PipelineStage& stage) override;
  void keep(train::StageMemory& memory, int64_t steps_done, const train::StagePosition& at,
            train::PipelineStage& stage) override;

 private:
  // Every replica's ranges of the data group (collective).
  std::vector<std::vector<model::ParamRange>> all_ranges(const std::vector<model::ParamRange>& mine);
  // `state` from the replica `root` (its copy `own` when it is this rank).
  void restore_whole_copy(const train::StageStateCopy* own, int root, std::vector<float>& state,
                          int64_t& optimizer_steps);
  // `state` put together by `plan` (collective over the data group); true when this
  // rank had no copy of the step or some of the moments it `needed` came from another
  // rank (the recovered event's source "peer", else "memory": a survivor rebuilds what
  // it needs from its own pieces and its replica of a lost one's).
  bool rebuild_sharded(const train::ShardedStageCopy& kept, const RebuildPlan& plan,
                       const std::vector<HeldState>& held,
                       const std::vector<model::ParamRange>& needed, std::vector<float>& state,
                       int64_t& optimizer_steps);

  const config::JobConfig& config_;
  comm::Communicator& world_;
  comm::Communicator* data_group_;
  // Under ZeRO: the ring of this epoch's data group (keep).
  bool ring_ready_ = false;
  std::vector<model::ParamRange> successor_ranges_;
  std::vector<float> outgoing_, incoming_;
};

}  // namespace dseek::dist
