// One model chunk of a pipeline stage (a virtual stage: a layer range of the model) as
// PipelineStageTrainer drives it: the GptModel of the range, on this tensor rank when
// parallel.tensor > 1 (pipeline x tensor parallelism), with the precision of
// train.precision. What the trainer needs beyond the model's own calls is here:
//
//   - the ranges it owns and updates, in the model's backward order;
//   - the gradient norm: the whole model's squares are its own; a tensor rank's split
//     tensors are summed over the group, its replicated ones (the same on every rank)
//     counted once (norm_ranges);
//   - the whole model put back together (whole_model_segments): a tensor rank gives
//     its slices, and rank 0 the replicated tensors, so each whole-model float comes
//     from one place.
//
// All ranges are in the chunk's own buffer (the shard's layout, model/
// tensor_parallel_layout.hpp; for tensor size 1 the whole model's, which the pipeline's
// point-to-point checkpoint gathering relies on).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/model/activation_memory.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/model/recompute_policy.hpp"
#include "runtime/model/tensor_group.hpp"
#include "runtime/model/tensor_parallel_layout.hpp"
#include "runtime/numerics/delayed_scaling.hpp"
#include "runtime/optim/adamw.hpp"
#include "runtime/train/optimizer_shards.hpp"

namespace dseek::train {

// Which gradients enter the global norm: `local` counted as they are, `group_split`
// summed over the tensor-parallel group first (empty without one).
struct ChunkNormRanges {
  std::vector<model::ParamRange> local, group_split;
};

struct ChunkSpec {
  model::GptShape shape;
  model::LayerRange range;
  int64_t micro_batch_size = 0;
  int64_t activation_slots = 1;
  model::RecomputePolicy recompute;
  uint64_t seed = 0;
  double init_std = 0.0;
  config::Precision precision = config::Precision::fp32;  // train.precision
  numerics::DelayedScalingSettings fp8;  // train.fp8_amax_history, train.fp8_margin
  // The data's vocabulary where model.vocab pads it (GptModel::set_real_vocab); 0: vocab.
  int64_t real_vocab = 0;
};

class PipelineChunk {
 public:
  // The chunk of `spec`, initialised (init_weights with the spec's seed), over
  // `tensor_group` (null or a group of one: the whole range), which must outlive it.
  PipelineChunk(const ChunkSpec& spec, backend::Backend& backend, model::TensorGroup* tensor_group);

  model::LayerRange range() const { return model_.range(); }
  bool has_embedding() const { return model_.has_embedding(); }
  bool has_head() const { return model_.has_head(); }
  float* params() { return model_.params(); }
  float* grads() { return model_.grads(); }
  size_t buffer_floats() const { return model_.num_params(); }
  void zero_grads() { model_.zero_grads(); }
  model::ActivationMemory activation_memory() const { return model_.activation_memory(); }

  void select_activation_slot(int64_t slot) { model_.select_activation_slot(slot); }
  double forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T);
  // `on_ready` (may be empty) is told each owned range once its gradient is final
  // (model/gpt_model.hpp: during backward, or after it on a tensor rank).
  void backward(float dloss, const model::GradientsReady& on_ready);
  float* stage_input() { return model_.stage_input(); }
  float* stage_output() { return model_.stage_output(); }
  float* stage_input_grad() { return model_.stage_input_grad(); }
  float* stage_output_grad() { return model_.stage_output_grad(); }
  // Recomputed blocks run in `owner`'s scratch set (a chunk of the same shape).
  void share_recompute_scratch(PipelineChunk& owner) {
    model_.share_recompute_scratch(owner.model_);
  }
  // Closes the optimizer step of the model's precision policy (FP8 delayed scaling:
  // model/precision_policy.hpp); after every step, skipped or not.
  void end_precision_step() { model_.precision().end_step(); }
  // The model when it runs the whole width (parallel.tensor = 1); null on a tensor rank.
  model::GptModel* whole_model() { return model_.tensor_ranks() == 1 ? &model_ : nullptr; }
  // The precision policy's fp8 delayed-scaling state (empty unless fp8), over the whole
  // model's layers: only this chunk's range is its own (state/stage_precision_state.cpp).
  numerics::DelayedScalingState fp8_state() { return model_.precision().fp8_state(); }
  void restore_fp8_state(const numerics::DelayedScalingState& state) {
    model_.precision().restore_fp8_state(state);
  }

  // What this chunk's optimizer updates, in the model's backward order: its blocks, the
  // embedding on the first range, lnf and the head's copy of the tied wte on the last.
  std::vector<model::ParamRange> owned_ranges() const {
    return model_.gradient_ranges_in_backward_order();
  }
  // The tied wte in the buffer (this rank's vocabulary rows with tensor parallelism).
  model::ParamRange tied_wte() const;
  // The owned ranges less the head's copy of wte (the embedding's counts).
  ChunkNormRanges norm_ranges() const;
  // This chunk's part of the whole model: (buffer offset, whole-model offset, count).
  std::vector<model::ShardSegment> whole_model_segments() const;
  // Every float of owned_ranges() with its whole-model offset (the head's copy of wte
  // and the replicated tensors included): what a restore from the whole state fills.
  std::vector<model::ShardSegment> owned_segments() const;
  // AdamW over owned_ranges() with the whole model's weight-decay settings; with `only`
  // (ZeRO inside the data group: this replica's pieces, inside owned_ranges()), over
  // those ranges alone. `factory`'s optimizer (in dseek-node the worker group's
  // gradient_shard actors), or a LocalOptimizer (make_optimizer_of).
  std::unique_ptr<OptimizerShards> make_optimizer(
      backend::Backend& backend, const optim::AdamWSettings& settings,
      const OptimizerShardsFactory& factory,
      const std::vector<model::ParamRange>* only = nullptr) const;

 private:
  // The shard's segments inside `range` (segments never straddle an owned range).
  std::vector<model::ShardSegment> segments_in(const model::ParamRange& range) const;
  // The segments of the owned ranges less the head's copy of wte (the embedding's).
  std::vector<model::ShardSegment> counted_segments() const;
  bool is_head_copy_of_wte(const model::ParamRange& r) const {
    return !model_.has_embedding() && r == tied_wte();
  }

  model::GptModel model_;
};

}  // namespace dseek::train
