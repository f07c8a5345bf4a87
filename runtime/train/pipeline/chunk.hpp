// One model chunk of a pipeline stage (a virtual stage: a layer range of the model) as
// PipelineStageTrainer drives it, whichever model computes it: a GptModel
// (parallel.tensor = 1) or this tensor rank's TensorParallelGpt shard of the range
// (pipeline x tensor parallelism). The trainer runs one stage trainer for both; what
// differs between the two models is here:
//
//   - the chunk's flat buffers: GptModel's are the whole model's layout (a range only
//     touches its tensors), TensorParallelGpt's are the shard's layout;
//   - the gradient norm: a GptModel chunk's squares are its own; a tensor rank's split
//     tensors are summed over the group, its replicated ones (the same on every rank)
//     counted once (norm_ranges);
//   - the whole model put back together (whole_model_segments): a tensor rank gives
//     its slices, and rank 0 the replicated tensors, so each whole-model float comes
//     from one place.
//
// All ranges are in the chunk's own buffer (a whole-model chunk's is the whole layout,
// which the pipeline's point-to-point checkpoint gathering relies on).
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

class PipelineChunk {
 public:
  virtual ~PipelineChunk() = default;

  virtual model::LayerRange range() const = 0;
  virtual bool has_embedding() const = 0;
  virtual bool has_head() const = 0;
  virtual float* params() = 0;
  virtual float* grads() = 0;
  virtual size_t buffer_floats() const = 0;
  virtual void zero_grads() = 0;
  virtual model::ActivationMemory activation_memory() const = 0;

  virtual void select_activation_slot(int64_t slot) = 0;
  virtual double forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T) = 0;
  // `on_ready` (may be empty) is told each owned range once its gradient is final: as
  // backward finishes it for a GptModel, after the whole backward for a tensor shard.
  virtual void backward(float dloss, const model::GradientsReady& on_ready) = 0;
  virtual float* stage_input() = 0;
  virtual float* stage_output() = 0;
  virtual float* stage_input_grad() = 0;
  virtual float* stage_output_grad() = 0;
  // Recomputed blocks run in `owner`'s scratch set (a chunk of the same kind and shape).
  virtual void share_recompute_scratch(PipelineChunk& owner) = 0;
  // Closes the optimizer step of the model's precision policy (FP8 delayed scaling:
  // model/precision_policy.hpp); after every step, skipped or not.
  virtual void end_precision_step() = 0;
  // The GptModel of a whole-model chunk (parallel.tensor = 1); null for a tensor shard.
  virtual model::GptModel* whole_model() { return nullptr; }
  // The precision policy's fp8 delayed-scaling state (empty unless fp8), over the whole
  // model's layers: only this chunk's range is its own (state/stage_precision_state.cpp).
  virtual numerics::DelayedScalingState fp8_state() = 0;
  virtual void restore_fp8_state(const numerics::DelayedScalingState& state) = 0;

  // What this chunk's optimizer updates: its blocks, the embedding on the first range,
  // lnf and the head's copy of the tied wte on the last.
  virtual std::vector<model::ParamRange> owned_ranges() const = 0;
  // The tied wte in the buffer (this rank's vocabulary rows with tensor parallelism).
  virtual model::ParamRange tied_wte() const = 0;
  // The owned ranges less the head's copy of wte (the embedding's counts).
  virtual ChunkNormRanges norm_ranges() const = 0;
  // This chunk's part of the whole model: (buffer offset, whole-model offset, count).
  virtual std::vector<model::ShardSegment> whole_model_segments() const = 0;
  // Every float of owned_ranges() with its whole-model offset (the head's copy of wte
  // and the replicated tensors included): what a restore from the whole state fills.
  virtual std::vector<model::ShardSegment> owned_segments() const = 0;
  // AdamW over owned_ranges() with the whole model's weight-decay settings; with `only`
  // (ZeRO inside the data group: this replica's pieces, inside owned_ranges()), over
  // those ranges alone. `factory`'s optimizer (in dseek-node the worker group's
  // gradient_shard actors), or a LocalOptimizer (make_optimizer_of).
  virtual std::unique_ptr<OptimizerShards> make_optimizer(
      backend::Backend& backend, const optim::AdamWSettings& settings,
      const OptimizerShardsFactory& factory,
      const std::vector<model::ParamRange>* only = nullptr) const = 0;
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
};

// The chunk, initialised (init_weights with the spec's seed): a GptModel without
// `tensor_group` (or with a group of one), else this rank's TensorParallelGpt shard.
std::unique_ptr<PipelineChunk> make_pipeline_chunk(const ChunkSpec& spec, backend::Backend& backend,
                                                   model::TensorGroup* tensor_group);
// The tensor-parallel kind alone (pipeline/chunk_tensor.cpp); `group` must outlive it.
std::unique_ptr<PipelineChunk> make_tensor_parallel_chunk(const ChunkSpec& spec,
                                                          backend::Backend& backend,
                                                          model::TensorGroup& group);

}  // namespace dseek::train
