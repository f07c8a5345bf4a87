// A tensor-parallel rank's side of gathered checkpoints (gathered_state.hpp): replica 0's
// group assembles the whole model state (params and AdamW moments, the column and row
// shards put back into whole tensors by the TensorParallelLayout's segments) on its rank
// 0 (world rank 0), which writes; on resume every rank of every replica slices its shard
// back out of the whole checkpoint, whatever layout wrote it. The loss scale and each
// rank's fp8 amax histories go with it (TensorParallelTrainer::gather_precision_state).
#pragma once

#include "runtime/train/gathered_state.hpp"
#include "runtime/train/tensor_parallel_trainer.hpp"

namespace dseek::train {

class TensorCheckpointState final : public GatheredState {
 public:
  explicit TensorCheckpointState(TensorParallelTrainer& trainer) : trainer_(trainer) {}

  const model::ParamLayout& whole_layout() const override { return trainer_.whole_layout(); }
  LayoutSizes sizes() const override;
  bool is_writer() const override { return trainer_.replica() == 0 && trainer_.rank() == 0; }
  // Under ZeRO the other replicas take part too: they hold pieces of the moments; under
  // fp8 too: they hold their own amax histories.
  bool takes_part() const override {
    return trainer_.replica() == 0 || trainer_.shards_optimizer_state() ||
           trainer_.fp8_state_per_replica();
  }
  bool writer_decides(bool value) override { return trainer_.first_rank_decides(value); }
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
  double sum_over_world(double value) override { return trainer_.sum_over_group(value); }

 private:
  TensorParallelTrainer& trainer_;
};

}  // namespace dseek::train
