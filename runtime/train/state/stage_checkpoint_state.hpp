// A pipeline stage's side of gathered checkpoints (state/checkpoint_state.hpp): replica 0's
// stages send their owned ranges and AdamW moments to its stage 0 (world rank 0), which
// writes; on resume every stage of every replica takes its own ranges out of the whole
// checkpoint (any split, any number of stages). With tensor parallelism each stage's
// ranks add their shards first, and stage 0's tensor rank 0 (world rank 0) writes.
// Under ZeRO the other replicas all-gather their moment pieces to replica 0 first. The
// loss scale and fp8 amax histories go with it (PipelineStageTrainer::gather_precision_state).
#pragma once

#include "runtime/train/state/checkpoint_state.hpp"
#include "runtime/train/pipeline/stage.hpp"

namespace dseek::train {

class PipelineCheckpointState final : public CheckpointState {
 public:
  explicit PipelineCheckpointState(PipelineStage& trainer) : trainer_(trainer) {}

  const model::ParamLayout& whole_layout() const override { return trainer_.whole_layout(); }
  LayoutSizes sizes() const override;
  bool is_writer() const override {
    return trainer_.info().replica == 0 && trainer_.info().gathers_state;
  }
  // Under ZeRO the other replicas take part too: they hold pieces of the moments; under
  // fp8 too: they hold their own amax histories.
  bool takes_part() const override {
    const PipelineStageInfo& info = trainer_.info();
    return info.replica == 0 || info.shards_optimizer_state || info.fp8_state_per_replica;
  }
  bool writer_decides(bool value) override { return trainer_.first_stage_decides(value); }
  void gather_whole(float* params, float* adam_m, float* adam_v) override {
    trainer_.gather_state_to_first(params, adam_m, adam_v);
  }
  void restore_whole(const float* params, const float* adam_m, const float* adam_v,
                     int64_t optimizer_steps) override {
    trainer_.restore_state(params, adam_m, adam_v, optimizer_steps);
  }
  int64_t optimizer_steps() const override { return trainer_.optimizer_steps(); }
  checkpoint::PrecisionState gather_precision_state() override {
    return trainer_.gather_precision_state();
  }
  bool restore_precision_state(const checkpoint::PrecisionState& state,
                               const LayoutSizes& written_by) override {
    return trainer_.restore_precision_state(state, written_by);
  }
  double sum_over_world(double value) override { return trainer_.sum_over_world(value); }

 private:
  PipelineStage& trainer_;
};

}  // namespace dseek::train
