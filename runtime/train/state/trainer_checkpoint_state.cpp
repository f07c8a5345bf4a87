// Implementation of trainer_checkpoint_state.hpp.
#include "runtime/train/state/trainer_checkpoint_state.hpp"

#include <array>

#include "runtime/numerics/delayed_scaling.hpp"

namespace dseek::train {

TrainerCheckpointState::TrainerCheckpointState(const config::JobConfig& config, Trainer& trainer)
    : config_(config), trainer_(trainer),
      collective_(trainer.snapshot_is_collective() || trainer.precision_state_is_collective()) {}

LayoutSizes TrainerCheckpointState::sizes() const {
  LayoutSizes sizes;
  if (trainer_.reducer() != nullptr) {
    sizes.data = static_cast<uint32_t>(trainer_.reducer()->world_size());
    sizes.zero = static_cast<uint32_t>(config_.parallel.zero);
  }
  return sizes;
}

bool TrainerCheckpointState::writer_decides(bool value) {
  if (!collective_) return value;
  std::array<double, 1> decision{is_writer() && value ? 1.0 : 0.0};
  trainer_.reducer()->sum_over_ranks(decision);
  return decision[0] > 0.0;
}

void TrainerCheckpointState::gather_whole(float* params, float* adam_m, float* adam_v) {
  if (params == nullptr && trainer_.snapshot_is_collective()) {
    const size_t n = trainer_.model().num_params();
    own_params_.resize(n);
    own_m_.resize(n);
    own_v_.resize(n);
    params = own_params_.data();
    adam_m = own_m_.data();
    adam_v = own_v_.data();
  }
  if (params != nullptr) trainer_.snapshot(params, adam_m, adam_v);
}

bool TrainerCheckpointState::restore_precision_state(const checkpoint::PrecisionState& state,
                                                     const LayoutSizes& written_by) {
  if (written_by.tensor > 1 && !state.fp8.empty()) {
    checkpoint::PrecisionState merged = state;
    merged.fp8 = numerics::merged_state(state.fp8);
    trainer_.restore_precision_state(merged);
    return false;
  }
  return trainer_.restore_precision_state(state);
}

double TrainerCheckpointState::sum_over_world(double value) {
  if (trainer_.reducer() == nullptr) return value;
  std::array<double, 1> sum{value};
  trainer_.reducer()->sum_over_ranks(sum);
  return sum[0];
}

}  // namespace dseek::train
