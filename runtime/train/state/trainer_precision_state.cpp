// The Trainer's mixed-precision state in checkpoints (trainer.hpp: precision_state,
// restore_precision_state): the dynamic loss scaler's scale and good-step count, and the
// delayed-scaling state of the model's fp8 matmuls, read and put back at a step boundary
// (checkpoint/precision_state.hpp says what and why).
// The replicas take the same skip decisions from the same reduced gradients, so they
// share the loss scaler's state and replica 0's stands for all. The amax histories are
// each replica's own: the inputs and output gradients of its fp8 matmuls come from its
// slice of the global batch (only the weights' amaxes agree). So the checkpoint keeps one
// history set per replica, gathered with one small collective, and a replica resumes its
// own; a world of another size (other slices) resumes their cautious merge
// (numerics::merged_state).
// The error-feedback residuals of gradient compression (pipeline/stage_trainer.cpp)
// are not part of it: they stay out of checkpoints.
#include <span>
#include <vector>

#include "runtime/train/state/loss_scale_checkpoint.hpp"
#include "runtime/train/trainer.hpp"

namespace dseek::train {

bool Trainer::precision_state_is_collective() const {
  return reducer_ != nullptr && reducer_->world_size() > 1 && config_.train.precision == config::Precision::fp8;
}

checkpoint::PrecisionState Trainer::precision_state() {
  checkpoint::PrecisionState state = loss_scale_state(config_.train.precision, stage_->loss_scaler());
  state.fp8 = model().precision().fp8_state();
  if (!precision_state_is_collective()) return state;
  // Every replica's state in its own slot of a zeroed buffer, summed over the replicas:
  // x + 0 is exact, so the sum is a gather (floats survive the round trip through double).
  const auto& mine = state.fp8;
  const size_t per_replica = mine.scales.size() + mine.histories.size();
  const auto world = static_cast<size_t>(reducer_->world_size());
  const auto rank = static_cast<size_t>(reducer_->rank());
  std::vector<double> all(world * per_replica, 0.0);
  double* slot = all.data() + rank * per_replica;
  for (size_t i = 0; i < mine.scales.size(); ++i) slot[i] = mine.scales[i];
  for (size_t i = 0; i < mine.histories.size(); ++i) slot[mine.scales.size() + i] = mine.histories[i];
  reducer_->sum_over_ranks(std::span<double>(all));
  numerics::DelayedScalingState gathered;
  gathered.replicas = static_cast<int64_t>(world);
  gathered.history_length = mine.history_length;
  for (size_t r = 0; r < world; ++r) {
    const double* from = all.data() + r * per_replica;
    for (size_t i = 0; i < mine.scales.size(); ++i)
      gathered.scales.push_back(static_cast<float>(from[i]));
    for (size_t i = 0; i < mine.histories.size(); ++i)
      gathered.histories.push_back(static_cast<float>(from[mine.scales.size() + i]));
  }
  state.fp8 = std::move(gathered);
  return state;
}

bool Trainer::restore_precision_state(const checkpoint::PrecisionState& state) {
  restore_loss_scale(stage_->loss_scaler(), state);
  const int64_t world = reducer_ != nullptr ? reducer_->world_size() : 1;
  const int64_t rank = reducer_ != nullptr ? reducer_->rank() : 0;
  const bool own = state.fp8.replicas == world;
  model().precision().restore_fp8_state(own ? numerics::replica_state(state.fp8, rank)
                                            : numerics::merged_state(state.fp8));
  return own;
}

}  // namespace dseek::train
