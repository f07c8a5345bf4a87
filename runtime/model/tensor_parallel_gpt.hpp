// One rank's part of the GPT model under tensor parallelism (Megatron-LM): the same
// network as GptModel, with the parameters of TensorParallelLayout (heads and MLP width
// split over the group, the embedding and head split over the vocabulary).
//
// Per block, forward all-reduces twice over the group (the row-parallel attention output
// projection and the row-parallel MLP projection each leave a partial sum of the branch)
// and backward twice (the column-parallel QKV and c_fc layers each leave a partial sum of
// their input's gradient). The embedding all-reduces its lookup (each rank looks up only
// its vocabulary rows), the head its input gradient, and the vocabulary-parallel
// cross-entropy the per-token maxima and the (sum of exponentials, target logit) pairs.
//
// Replicated parameters (wpe, LayerNorms, row-parallel biases, lnf) get their gradient
// computed identically on every rank from the all-reduced activations: no reduction of
// them over the group is needed. (Data parallelism over replicas of the group sums each
// rank's shard buffer with the same shard of the other replicas:
// train/pipeline/stage_trainer.hpp.) A row-parallel bias is added by rank 0 only,
// before the all-reduce, so the sum counts it once.
//
// A layer range [begin, end) makes it one pipeline stage's chunk of the tensor-parallel
// model, as GptModel's range does (pipeline x tensor parallelism): the range that starts
// at block 0 owns the vocabulary-parallel embedding (and wpe), the one that ends at the
// last block owns lnf, the vocabulary-parallel head and the loss; a middle range only
// its blocks. After each block's forward all-reduce every rank of the group holds the
// whole (B, T, C) activation, replicated, so the stage boundary is simple: tensor rank t
// of stage s sends its copy to tensor rank t of stage s+1 (stage_output() ->
// stage_input()), and the gradient of it comes back the same way (stage_input_grad() ->
// stage_output_grad()), T parallel pipelines that meet only in the group's all-reduces.
// It moves T copies of the activation where Megatron-LM's scatter/gather optimisation
// moves one, which costs bandwidth, not correctness. The tied wte: the first and the
// last range of a pipeline hold the same vocabulary rows on the same tensor rank, so
// their gradients are summed between those two counterparts, as the pipeline does for
// GptModel. With `activation_slots` a stage keeps several micro-batches between their
// forward and backward, each in its own set (the backward scratch is shared).
//
// Mixed precision (train.precision) as in GptModel: the four block matmuls of each rank's
// shard run in the PrecisionPolicy's format, and the vocabulary-parallel head (each rank's
// slice of the logits) in its head() precision: bf16 unless fp32, never fp8.
// Under fp8 each rank keeps the delayed-scaling state (amax histories, scales) of its
// own operands and nothing is reduced over the group: the weights are each rank's shard
// and their scale is that shard's; the operands every rank holds whole (the
// column-parallel layers' input ln1/ln2, the row-parallel layers' output gradient) have
// the same values, so the same amaxes and scales, on every rank; the rest (the
// row-parallel layers' inputs, the column-parallel layers' output gradients) are this
// rank's slice. No FP8 tensor crosses the group (the all-reduces carry fp32 partial
// sums, each already multiplied back by its own scales), so the ranks need no common
// scale, which is what Transformer Engine's amax reduction over the group is for.
// The owner closes each optimizer step with precision().end_step() and scales the loss.
//
// The vocabulary-parallel embedding and cross-entropy are backend ops (backend.hpp,
// vocab_parallel_*), run where the parameters and logits are; only the group's
// all-reduces run on the host data plane: on a device backend (train.device "cuda", the
// scrambled test device) they work on host windows of the backend's buffers
// (backend/host_window.hpp), moved only by the backend's copy calls; on the CPU backend
// the windows are the buffers. So a step moves to the host and back the (B, T, C)
// activations and gradients the group reduces, and for the loss N x (group size) maxima
// and 2N sums (N = B T), never the (B, T, V / T) logits nor the wte rows.
//
// Activation recompute (model.recompute) works as in GptModel (counted from the range's
// first block): a recomputed block runs in one shared scratch set (shared with the
// other chunks of a pipeline stage by share_recompute_scratch) and its backward runs
// its forward again first, including
// the attention branch's all-reduce (every rank of the group recomputes the same
// blocks, so the collectives stay matched). The MLP's all-reduce only produces the
// block's output, which is kept, so the recompute stops before it. The all-reduce sums
// in a fixed order, so the recomputed activations are the first forward's bits.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/device_buffer.hpp"
#include "runtime/backend/host_memory.hpp"
#include "runtime/model/activation_memory.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/model/precision_policy.hpp"
#include "runtime/model/recompute_policy.hpp"
#include "runtime/model/tensor_group.hpp"
#include "runtime/model/tensor_parallel_layout.hpp"

namespace dseek::model {

class TensorParallelGpt {
 public:
  // The whole model (every block, the embedding and the head), one activation slot.
  TensorParallelGpt(const GptShape& shape, TensorGroup& group, backend::Backend& backend,
                    int64_t max_batch, RecomputePolicy recompute = {});
  // Blocks [range.begin, range.end) (a pipeline stage's chunk), `activation_slots`
  // micro-batches between forward and backward.
  TensorParallelGpt(const GptShape& shape, LayerRange range, TensorGroup& group,
                    backend::Backend& backend, int64_t max_batch, int64_t activation_slots,
                    RecomputePolicy recompute = {});
  TensorParallelGpt(const TensorParallelGpt&) = delete;
  TensorParallelGpt& operator=(const TensorParallelGpt&) = delete;

  const TensorParallelLayout& layout() const { return layout_; }
  LayerRange range() const { return range_; }
  bool has_embedding() const { return range_.begin == 0; }
  bool has_head() const { return range_.end == layout_.whole().shape().layers; }
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  size_t num_params() const { return layout_.total(); }
  const RecomputePolicy& recompute() const { return recompute_; }
  // The precision of the matmuls, the head's included (see above); fp32 until set.
  void set_precision(PrecisionPolicy policy) { precision_ = std::move(policy); }
  PrecisionPolicy& precision() { return precision_; }
  const ActivationMemory& activation_memory() const { return activation_memory_; }
  size_t activation_bytes() const { return activation_memory_.total(); }

  // The whole model's initial values (initial_value.hpp) at this shard's indices.
  void init_weights(uint64_t seed, double std);
  void zero_grads();

  // Every rank of the group calls these with the same batch. `tokens` are read by the
  // range with the embedding, `targets` by the one with the head, which returns the mean
  // loss (the others return 0 and leave their output in stage_output()).
  double forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T);
  // Accumulates into grads(); dloss as in GptModel::backward. A range without the head
  // reads its output's gradient from stage_output_grad().
  void backward(float dloss);

  // The activation set the next forward fills and the next backward reads (0 until
  // changed); std::out_of_range outside [0, activation_slots).
  void select_activation_slot(int64_t slot);
  int64_t activation_slots() const { return static_cast<int64_t>(slots_.size()); }
  // As GptModel::share_recompute_scratch: this model's recomputed blocks run in
  // `owner`'s scratch set (same shape, group, micro-batch size and recompute).
  void share_recompute_scratch(TensorParallelGpt& owner);

  // Activations crossing range boundaries, (B, T, C), whole on every rank of the group.
  float* stage_input() { return slot_->residual.front().data(); }
  float* stage_output() { return slot_->residual.back().data(); }
  float* stage_input_grad() { return dresidual_.data(); }
  float* stage_output_grad() { return dresidual_.data(); }

 private:
  struct BlockActivations {
    backend::DeviceBuffer<float> ln1, ln1_mean, ln1_rstd, qkv, atty, att;
    backend::DeviceBuffer<float> residual2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu;
  };
  // What one forward leaves for its backward.
  struct ForwardState {
    int64_t B = 0, T = 0;  // B = 0 before the first forward
    // In the backend's memory: tokens with the embedding, targets with the head.
    backend::DeviceBuffer<int32_t> tokens, targets;
    // residual[i] is the input of block begin+i; residual.back() the range's output.
    std::vector<backend::DeviceBuffer<float>> residual;
    std::vector<BlockActivations> blocks;  // empty sets for recomputed blocks
    backend::DeviceBuffer<float> lnf, lnf_mean, lnf_rstd, logits, losses;
  };
  BlockActivations make_block_activations(size_t BT, size_t att);
  ForwardState make_forward_state(size_t BT, size_t att);
  static size_t block_bytes(const BlockActivations& a);
  // Block begin+i's activations in the selected slot: its own set, or the recompute
  // scratch.
  BlockActivations& activations_of(size_t i);
  // `out` null: the recompute before a backward; stops before the MLP's projection.
  void block_forward(int64_t layer, BlockActivations& a, const float* x, float* out);
  void block_backward(int64_t layer, BlockActivations& a, const float* x);
  // The group's sum of `count` floats of the backend's memory (through a host window).
  void all_reduce_on_backend(float* data, size_t count);
  // This rank's rows of the vocabulary-parallel embedding and head.
  backend::VocabSlice vocab_slice() const;
  void embedding_forward();
  void embedding_backward();
  double cross_entropy_forward();
  void cross_entropy_backward(float dloss);

  TensorParallelLayout layout_;
  LayerRange range_;
  TensorGroup& group_;
  backend::Backend& backend_;
  int64_t max_batch_;
  RecomputePolicy recompute_;
  PrecisionPolicy precision_;
  int64_t B_ = 0, T_ = 0;  // the selected slot's forward

  backend::DeviceBuffer<float> params_, grads_;
  std::vector<ForwardState> slots_;
  ForwardState* slot_ = nullptr;
  BlockActivations recomputed_;  // shared by every recomputed block of every slot
  BlockActivations* recompute_set_ = &recomputed_;  // recomputed_, or another chunk's
  // What the cross-entropy all-reduces: (N, ranks) row maxima, one column per rank, and
  // the N sums of exponentials followed by the N target logits.
  backend::DeviceBuffer<float> max_slots_, sums_and_targets_;
  // The all-reduces' host window scratch (device backends only).
  backend::HostBuffer<float> host_scratch_;
  backend::DeviceBuffer<float> dresidual_, dwidth1_, dqkv_, datty_, dhidden_, branch_out_;
  ActivationMemory activation_memory_;
};

}  // namespace dseek::model
