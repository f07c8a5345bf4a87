// A pipeline stage's mixed-precision state in gathered checkpoints (the declarations are
// in pipeline/stage_trainer.hpp). The stages share the loss scaler's state (every stage
// takes the same skip decision from the same global norm), so the writer's stands for
// all. The fp8 state is the whole model's, but a stage's chunks only run the layers of
// their ranges: each chunk contributes those layers' operands to its rank's copy
// (state/sharded_precision_state.hpp), and sums over the stages, the tensor group and the
// replicas put the copies together. A restore gives every chunk the whole copy (the
// layers outside its range are unused), so any split finds each layer's state.
#include <stdexcept>

#include "runtime/model/precision_policy.hpp"
#include "runtime/train/pipeline/stage_chunk.hpp"
#include "runtime/train/pipeline/stage_trainer.hpp"
#include "runtime/train/state/sharded_precision_state.hpp"

namespace dseek::train {

namespace {
// The precision that wrote a checkpoint and the loss scaler's scale and good-step count
// (`scaler`: null outside fp8; the scale stays the state's default).
checkpoint::PrecisionState loss_scale_state(config::Precision precision,
                                            const optim::LossScaler* scaler) {
  checkpoint::PrecisionState state;
  state.precision = config::name_string(precision);
  if (scaler != nullptr) {
    state.loss_scale = scaler->scale();
    state.loss_scale_good_steps = scaler->good_steps();
  }
  return state;
}
}  // namespace

bool PipelineStageTrainer::fp8_state_per_replica() const {
  return config_.train.precision == config::Precision::fp8 && replicas() > 1;
}

checkpoint::PrecisionState PipelineStageTrainer::gather_precision_state() {
  checkpoint::PrecisionState state = loss_scale_state(config_.train.precision, loss_scaler_.get());
  if (config_.train.precision != config::Precision::fp8) return state;
  const numerics::DelayedScalingState first = chunks_.front()->model->fp8_state();
  const size_t operands = first.scales.size();
  const size_t per_layer = operands / static_cast<size_t>(config_.model.layers);
  if (per_layer != model::PrecisionPolicy::fp8_operands_per_layer())
    throw std::logic_error("pipeline checkpoint: the fp8 state does not cover the whole model");
  // Only replica 0 takes part without fp8_state_per_replica: one replica, one copy set.
  const int copies_of_replicas = fp8_state_per_replica() ? replicas() : 1;
  Fp8StateAssembly assembly(static_cast<int64_t>(copies_of_replicas) * tensor_ranks(), operands,
                            first.history_length);
  const int64_t copy = fp8_copy_of(fp8_state_per_replica() ? replica() : 0, tensor_rank(),
                                   tensor_ranks());
  for (auto& chunk : chunks_) {
    const model::LayerRange range = chunk->model->range();
    assembly.put(chunk->model->fp8_state(), copy, static_cast<size_t>(range.begin) * per_layer,
                 static_cast<size_t>(range.end - range.begin) * per_layer);
  }
  const std::span<float> buffer = assembly.buffer();
  links_.sum_over_stages(buffer);
  if (tensor_ != nullptr) tensor_->all_reduce_sum(buffer.data(), buffer.size());
  if (fp8_state_per_replica()) replicas_->sum(buffer.data(), buffer.size());
  state.fp8 = assembly.state();
  return state;
}

bool PipelineStageTrainer::restore_precision_state(const checkpoint::PrecisionState& state,
                                                   const LayoutSizes& written_by) {
  if (loss_scaler_)
    loss_scaler_->restore(static_cast<float>(state.loss_scale), state.loss_scale_good_steps);
  LayoutSizes now;
  now.data = static_cast<uint32_t>(replicas());
  now.pipeline = static_cast<uint32_t>(plan_.shape.stages);
  now.tensor = static_cast<uint32_t>(tensor_ranks());
  const Fp8Restore restore = fp8_state_to_restore(state.fp8, written_by, now, replica(), tensor_rank());
  for (auto& chunk : chunks_) chunk->model->restore_fp8_state(restore.state);
  return restore.own;
}

}  // namespace dseek::train
