// The data-parallel (and single-node) Trainer's side of checkpoints
// (state/checkpoint_state.hpp): every replica holds the whole model, so replica 0 writes
// its own snapshot; with ZeRO >= 1 the snapshot gathers the optimizer moments from every
// replica and under fp8 every replica's amax histories, so then every replica takes part,
// in space of its own. A resume puts the whole state back on every replica (its shard of
// the moments under ZeRO); a checkpoint written by a tensor-parallel layout keeps an fp8
// copy per tensor rank, none of a replica's own: the replicas take their cautious merge.
#pragma once

#include <vector>

#include "runtime/config/job_config.hpp"
#include "runtime/train/state/checkpoint_state.hpp"
#include "runtime/train/trainer.hpp"

namespace dseek::train {

class TrainerCheckpointState final : public CheckpointState {
 public:
  TrainerCheckpointState(const config::JobConfig& config, Trainer& trainer);

  const model::ParamLayout& whole_layout() const override { return trainer_.model().layout(); }
  LayoutSizes sizes() const override;
  bool is_writer() const override { return trainer_.dp_rank() == 0; }
  bool takes_part() const override { return is_writer() || collective_; }
  bool writer_decides(bool value) override;
  void gather_whole(float* params, float* adam_m, float* adam_v) override;
  void restore_whole(const float* params, const float* adam_m, const float* adam_v,
                     int64_t optimizer_steps) override {
    trainer_.restore(params, adam_m, adam_v, optimizer_steps);
  }
  int64_t optimizer_steps() const override { return trainer_.optimizer_steps(); }
  checkpoint::PrecisionState gather_precision_state() override { return trainer_.precision_state(); }
  bool restore_precision_state(const checkpoint::PrecisionState& state,
                               const LayoutSizes& written_by) override;
  double sum_over_world(double value) override;

 private:
  const config::JobConfig& config_;
  Trainer& trainer_;
  bool collective_;  // snapshots gather sharded state: every replica takes part
  std::vector<float> own_params_, own_m_, own_v_;  // a non-writer's space in a ZeRO snapshot
};

}  // namespace dseek::train
