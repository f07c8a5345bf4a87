// train::StageMemorySync over the data plane (runtime/train/state/stage_memory.hpp): the
// layout's ranks all-gather, over the world's communicator, which steps each holds in
// memory at its new position (whole copies, and under ZeRO its pieces and its ring
// neighbour's); every rank then computes the same choice, the newest step that the
// ranks of every position hold: a whole copy, or every shard of the data group that
// trained it (rebuild_plan.hpp's plan). Within each data group (the replicas of
// one stage and tensor rank) the lowest replica with a whole copy broadcasts it, or the
// givers of the parameters and of each shard broadcast theirs, and every rank restores
// it. Under ZeRO each step's keep sends this rank's pieces to the replica before it in
// the ring (ring_exchange.hpp; replica r keeps r + 1's, and with cluster.gpus_per_node
// ranks a node the same rank of the next node's, so that a node's loss does not take a
// piece and its copy together while the group spans nodes), and reports what that
// costs in a peer_replica event after the epoch's first step and the job's last.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "runtime/metrics/event_log.hpp"
#include "dist/rebuild_plan.hpp"
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
            train::PipelineStage& stage, metrics::EventLog& events) override;

 private:
  // Every replica's ranges of the data group (collective).
  std::vector<std::vector<model::ParamRange>> all_ranges(const std::vector<model::ParamRange>& mine);
  // `state` from the replica `root` (its copy `own` when it is this rank).
  void restore_whole_copy(const train::StageStateCopy* own, int root, std::vector<float>& state,
                          int64_t& optimizer_steps);
  // `state` put together by `plan` (collective over the data group); true when this
  // rank had no copy of the step or a piece of the group came from a replica of a lost
  // rank's (the recovered event's source "peer", else "memory").
  bool rebuild_sharded(const train::ShardedStageCopy& kept, const RebuildPlan& plan,
                       const std::vector<HeldState>& held, std::vector<float>& state,
                       int64_t& optimizer_steps);
  // How many replicas apart the ring's neighbours are in the data group.
  int ring_stride() const;
  // The peer_replica event.
  void report_ring(const train::ShardedStageCopy& kept, int64_t steps_done,
                   metrics::EventLog& events) const;

  const config::JobConfig& config_;
  comm::Communicator& world_;
  comm::Communicator* data_group_;
  // Under ZeRO: the ring of this epoch's data group (keep).
  bool ring_ready_ = false;
  std::vector<model::ParamRange> successor_ranges_;
  std::vector<float> outgoing_, incoming_;
  int successor_ = -1;
  int64_t steps_kept_ = 0;
  double last_exchange_ms_ = 0.0, total_exchange_ms_ = 0.0;
};

}  // namespace dseek::dist
