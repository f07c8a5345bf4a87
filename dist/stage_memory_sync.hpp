// train::StageMemorySync over the data plane (runtime/train/state/stage_memory.hpp): the
// layout's ranks all-gather, over the world's communicator, which steps each holds in
// memory at its new position; every rank then computes the same choice, the newest
// step that a rank of every position holds; within each data group (the replicas of one
// stage and tensor rank) the lowest replica holding it broadcasts it, and every rank
// restores it. The dist/state_sync.hpp of pipeline and tensor-parallel layouts.
#pragma once

#include "comm/communicator.hpp"
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

 private:
  const config::JobConfig& config_;
  comm::Communicator& world_;
  comm::Communicator* data_group_;
};

}  // namespace dseek::dist
