// A tensor-parallel rank's mixed-precision state in gathered checkpoints (declared in
// tensor_parallel_trainer.hpp). The ranks and replicas share the loss scaler's state
// (the same skip decision from the same global norm), so rank 0's stands for all. Every
// rank runs every layer on its own shard, so its fp8 amaxes are its own: each rank's
// whole copy goes into its slot (sharded_precision_state.hpp), and sums over the group
// and, when every replica takes part, over the replicas put the copies together.
#include "runtime/train/loss_scale_checkpoint.hpp"
#include "runtime/train/sharded_precision_state.hpp"
#include "runtime/train/tensor_parallel_trainer.hpp"

namespace dseek::train {

bool TensorParallelTrainer::fp8_state_per_replica() const {
  return config_.train.precision == "fp8" && replicas() > 1;
}

checkpoint::PrecisionState TensorParallelTrainer::gather_precision_state() {
  checkpoint::PrecisionState state = loss_scale_state(config_.train.precision, loss_scaler_.get());
  if (config_.train.precision != "fp8") return state;
  const numerics::DelayedScalingState mine = model_->precision().fp8_state();
  const bool per_replica = fp8_state_per_replica();
  Fp8StateAssembly assembly(static_cast<int64_t>(per_replica ? replicas() : 1) * ranks(),
                            mine.scales.size(), mine.history_length);
  assembly.put(mine, fp8_copy_of(per_replica ? replica() : 0, rank(), ranks()), 0,
               mine.scales.size());
  const std::span<float> buffer = assembly.buffer();
  group_.all_reduce_sum(buffer.data(), buffer.size());
  if (per_replica) replicas_->sum(buffer.data(), buffer.size());
  state.fp8 = assembly.state();
  return state;
}

bool TensorParallelTrainer::restore_precision_state(const checkpoint::PrecisionState& state,
                                                    const LayoutSizes& written_by) {
  restore_loss_scale(loss_scaler_.get(), state);
  LayoutSizes now;
  now.data = static_cast<uint32_t>(replicas());
  now.tensor = static_cast<uint32_t>(ranks());
  const Fp8Restore restore = fp8_state_to_restore(state.fp8, written_by, now, replica(), rank());
  model_->precision().restore_fp8_state(restore.state);
  return restore.own;
}

}  // namespace dseek::train
