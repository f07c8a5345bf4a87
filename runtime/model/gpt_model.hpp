// The GPT-2-style decoder: learned token and position embeddings, pre-LayerNorm blocks
// (causal multi-head attention, GELU MLP of width 4C), a final LayerNorm and an output
// head tied to the token embedding, with a cross-entropy loss.
//
// A GptModel runs a contiguous range of blocks [begin, end). The range that starts at
// block 0 owns the embedding; the one that ends at the last block owns the head and the
// loss. A middle range reads its input activations from stage_input() and leaves the
// gradient for the previous range in stage_input_grad(); the pipeline stages of a later
// issue move those buffers between workers. With the full range it is the whole model.
//
// Parameters and gradients are each one flat buffer laid out by ParamLayout (the whole
// model's layout; a range touches only its own tensors, plus wte for the tied head).
// Every activation buffer is allocated once for the largest micro-batch: a training step
// allocates nothing. A pipeline stage keeps several micro-batches between their forward
// and backward: it asks for `activation_slots` sets of the per-micro-batch activations
// and selects one before each forward and its backward (the backward scratch buffers,
// stage_output_grad() and stage_input_grad(), are shared by all slots).
//
// Activation recompute (recompute_policy.hpp): a recomputed block has no activation set
// of its own in any slot. Its forward runs in one scratch set shared by every
// recomputed block and every slot, and keeps only its output (the next block's input);
// its backward first runs its forward again from its input (the residual stream the
// model keeps, residual[i]) into that scratch set, then backpropagates. The same ops on
// the same inputs give the same bits, so gradients are bitwise those without recompute;
// the cost is one more forward of the block (less its last projection, whose output is
// already kept). The chunks of an interleaved pipeline stage share one such set
// (share_recompute_scratch).
//
// Backward can say when a range of the gradient buffer is final (GradientsReady): the
// head's LayerNorm first, then each block from the last to the first, then the
// embeddings (the tied wte gets its last contribution at the very end). A data-parallel
// trainer starts reducing the late layers while the early ones are still computed.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/device_buffer.hpp"
#include "runtime/model/activation_memory.hpp"
#include "runtime/model/param_layout.hpp"
#include "runtime/model/precision_policy.hpp"
#include "runtime/model/recompute_policy.hpp"

namespace dseek::model {

struct LayerRange {
  int64_t begin = 0;
  int64_t end = 0;  // exclusive
  bool operator==(const LayerRange&) const = default;
};

// Called during backward with a range of the flat gradient buffer that this backward
// will not touch again.
using GradientsReady = std::function<void(ParamRange range)>;
// Called during forward with a range of the flat parameter buffer just before the first
// op that reads it: the embedding (wte and wpe), each block, then the head (the final
// LayerNorm, and wte again for the tied projection). The trainer's CPU offload waits
// there for the chunk's updated parameters (trainer.hpp, train.offload_overlap).
using ParamsNeeded = std::function<void(ParamRange range)>;

class GptModel {
 public:
  GptModel(const GptShape& shape, LayerRange range, backend::Backend& backend,
           int64_t max_micro_batch, int64_t activation_slots = 1,
           RecomputePolicy recompute = {});
  GptModel(const GptModel&) = delete;
  GptModel& operator=(const GptModel&) = delete;

  const ParamLayout& layout() const { return layout_; }
  LayerRange range() const { return range_; }
  bool has_embedding() const { return range_.begin == 0; }
  bool has_head() const { return range_.end == layout_.shape().layers; }
  const RecomputePolicy& recompute() const { return recompute_; }
  const ActivationMemory& activation_memory() const { return activation_memory_; }
  size_t activation_bytes() const { return activation_memory_.total(); }

  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  size_t num_params() const { return layout_.total(); }

  // GPT-2 initialisation as a pure function of (seed, parameter index): N(0, std) for
  // matrices and embeddings, std / sqrt(2 L) for the residual output projections, zero
  // biases, unit LayerNorm gains. Any range or shard of the model gets the same values.
  void init_weights(uint64_t seed, double std);

  // Runs the range on B sequences of T tokens (T <= context). `tokens` (B*T host ints)
  // are needed by the first range; `targets` (B*T) by the last, which returns the mean
  // loss. A range without the head returns 0 and leaves its output in stage_output().
  double forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T);
  // Run by every later forward before it reads a range of params() (ParamsNeeded).
  void set_before_params_read(ParamsNeeded hook) { before_params_read_ = std::move(hook); }

  // Backpropagates the last forward, ACCUMULATING into grads(): the loss gradient is
  // dloss per token (1 / (B*T) for a mean over one micro-batch; divided further by the
  // number of micro-batches for accumulation). A range without the head reads the
  // gradient of its output from stage_output_grad().
  // `on_ready`, when set, is called with each range of gradients as it becomes final, in
  // the order of gradient_ranges_in_backward_order().
  void backward(float dloss, const GradientsReady& on_ready = nullptr);

  // The ranges backward reports to GradientsReady, in its order: for the whole model a
  // partition of the flat buffer ([lnf], block L-1, ..., block 0, [wte, wpe]), each
  // adjacent to the one before it. A range without the embedding reports the head's wte
  // contribution last (the embedding range adds its own: the tied weight is summed
  // across the pipeline by whoever owns it).
  std::vector<ParamRange> gradient_ranges_in_backward_order() const;

  void zero_grads();

  // The precision of the matmuls (train.precision; precision_policy.hpp: the blocks', and
  // the head's in bf16 unless fp32); fp32 until set. The owner calls precision().end_step()
  // after each optimizer step (FP8 delayed scaling).
  void set_precision(PrecisionPolicy policy) { precision_ = std::move(policy); }
  PrecisionPolicy& precision() { return precision_; }

  // The activation set the next forward fills and the next backward reads (0 until
  // changed); std::out_of_range outside [0, activation_slots).
  void select_activation_slot(int64_t slot);
  int64_t activation_slots() const { return static_cast<int64_t>(slots_.size()); }

  // Runs this model's recomputed blocks in `owner`'s scratch set and frees its own: the
  // model chunks of one pipeline stage (interleaved schedule) run one op at a time, so
  // one set serves them all. `owner` must have the same shape and micro-batch size and
  // recompute, and outlive this model's forwards and backwards.
  void share_recompute_scratch(GptModel& owner);

  // Activations crossing range boundaries, (B, T, C); input and output are the
  // selected slot's.
  float* stage_input() { return slot_->residual[0].data(); }
  float* stage_output() { return slot_->residual.back().data(); }
  float* stage_input_grad() { return dresidual_.data(); }
  float* stage_output_grad() { return dresidual_.data(); }

 private:
  struct BlockActivations {
    backend::DeviceBuffer<float> ln1, ln1_mean, ln1_rstd, qkv, atty, att;
    backend::DeviceBuffer<float> residual2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu;
  };
  BlockActivations make_block_activations(size_t BT, size_t att);
  static size_t block_bytes(const BlockActivations& a);
  // `out` null: the recompute before a backward, which stops once the activations
  // backward reads are there (the last projection only produces the kept output).
  void block_forward(int64_t layer, BlockActivations& acts, const float* x, float* out);
  void block_backward(int64_t layer, BlockActivations& acts, const float* x);

  // What one forward leaves for its backward.
  struct ForwardState {
    int64_t B = 0, T = 0;  // shape of the forward; B = 0 before the first
    backend::DeviceBuffer<int32_t> tokens, targets;
    // residual[i] is the input of block begin+i; residual.back() the range's output.
    std::vector<backend::DeviceBuffer<float>> residual;
    std::vector<BlockActivations> blocks;  // empty sets for recomputed blocks
    backend::DeviceBuffer<float> lnf, lnf_mean, lnf_rstd, logits, losses;
  };
  ForwardState make_forward_state(size_t BT, size_t att);
  // Where block begin+i's activations live in the selected slot: its own set, or the
  // recompute scratch.
  BlockActivations& activations_of(size_t i);

  ParamLayout layout_;
  LayerRange range_;
  backend::Backend& backend_;
  int64_t max_batch_;
  RecomputePolicy recompute_;
  int64_t B_ = 0, T_ = 0;  // shape of the selected slot's forward

  backend::DeviceBuffer<float> params_, grads_;
  ParamsNeeded before_params_read_;
  std::vector<ForwardState> slots_;
  ForwardState* slot_ = nullptr;
  BlockActivations recomputed_;  // shared by every recomputed block of every slot
  BlockActivations* recompute_set_ = &recomputed_;  // recomputed_, or another model's
  ActivationMemory activation_memory_;
  // Backward scratch: the residual stream's gradient, and one buffer per width.
  backend::DeviceBuffer<float> dresidual_, dwidth1_, dwidth3_, dwidth4_;
  backend::DeviceBuffer<float> branch_out_;  // attention/MLP branch output before the add
  PrecisionPolicy precision_;
};

}  // namespace dseek::model
