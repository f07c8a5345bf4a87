// The GPT-2-style decoder, the one model of every layout: learned token and position
// embeddings, pre-LayerNorm blocks (causal multi-head attention, GELU MLP of width 4C), a
// final LayerNorm and an output head tied to the token embedding, with a cross-entropy
// loss. Forward and backward of the blocks: gpt_model.cpp; the embedding and the head:
// gpt_model_ends.cpp.
//
// Tensor parallelism (Megatron-LM), when built over a TensorGroup of T > 1 ranks: this
// rank holds its part of the parameters (tensor_parallel_layout.hpp: heads and MLP width
// split over the group, the embedding and head over the vocabulary, the rest replicated).
// Per block, forward all-reduces twice over the group (the row-parallel attention and
// MLP projections each leave a partial sum of their branch; rank 0 adds their biases
// before the sum, so it counts them once) and backward twice (the column-parallel QKV
// and c_fc layers each leave a partial sum of their input's gradient). The embedding
// all-reduces its lookup, the head its input gradient, and the vocabulary-parallel
// cross-entropy the per-token maxima and (sum of exponentials, target logit) pairs.
// Replicated parameters get identical gradients on every rank from the all-reduced
// activations. Without a group, or with a group of one, the same code runs the whole
// model with no collective and the whole-vocabulary embedding and loss: the same ops as
// before the two models became one, so the bits are unchanged.
//
// A layer range [begin, end) makes the model one pipeline stage's chunk: the range that
// starts at block 0 owns the embedding (and wpe), the one that ends at the last block
// owns lnf, the head and the loss. A middle range reads its input from stage_input() and
// leaves the gradient for the previous range in stage_input_grad(). Under tensor
// parallelism every rank holds the whole (B, T, C) activation after each block, so tensor
// rank t of stage s talks to tensor rank t of stage s+1 (T parallel pipelines that meet
// only in the group's all-reduces). The tied wte: the first and the last range hold the
// same vocabulary rows on the same tensor rank; the pipeline sums their gradients.
//
// Parameters and gradients are each one flat buffer laid out by shard() (the whole
// model's tensor order; for T = 1 exactly layout()). Every activation buffer is allocated
// once for the largest micro-batch: a step allocates nothing. A pipeline stage keeps
// `activation_slots` micro-batches between forward and backward, each in its own set
// (the backward scratch is shared).
//
// Activation recompute (recompute_policy.hpp): a recomputed block has no activation set
// of its own; its forward runs in one scratch set shared by every recomputed block and
// slot (and by the other chunks of a pipeline stage: share_recompute_scratch) and keeps
// only its output; its backward first runs its forward again (the attention branch's
// all-reduce included: every rank recomputes the same blocks), then backpropagates. The
// same ops on the same inputs give the same bits.
//
// Mixed precision (train.precision, precision_policy.hpp): the four block matmuls in the
// policy's format, the head in bf16 unless fp32, never fp8. Under fp8 with T > 1 each
// rank keeps the delayed-scaling state of its own operands and nothing is reduced: no
// FP8 tensor crosses the group (the all-reduces carry fp32 partial sums), so the ranks
// need no common scale.
//
// Backward can say when a range of the gradient buffer is final (GradientsReady): the
// head's LayerNorm first, then each block from the last to the first, then the
// embeddings (the tied wte gets its last contribution at the very end), and a data-
// parallel trainer reduces the late layers while the early ones are computed. A tensor
// rank reports its ranges, in the same order, once its backward is over: the data
// group's reduction must not run between the tensor group's all-reduces.
//
// On a device backend (train.device "cuda", the scrambled test device) the group's
// all-reduces work on host windows of the backend's buffers (backend/host_window.hpp),
// or in place when the group sums backend memory (NCCL); the logits never leave it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/device_buffer.hpp"
#include "runtime/backend/host_memory.hpp"
#include "runtime/model/activation_memory.hpp"
#include "runtime/model/param_layout.hpp"
#include "runtime/model/precision_policy.hpp"
#include "runtime/model/recompute_policy.hpp"
#include "runtime/model/tensor_group.hpp"
#include "runtime/model/tensor_parallel_layout.hpp"

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
// there for the chunk's updated parameters (host_update.hpp, train.offload_overlap).
using ParamsNeeded = std::function<void(ParamRange range)>;

class GptModel {
 public:
  // `group`: the tensor-parallel group this rank computes with (null: none, the whole
  // model); it must outlive the model.
  GptModel(const GptShape& shape, LayerRange range, backend::Backend& backend,
           int64_t max_micro_batch, int64_t activation_slots = 1,
           RecomputePolicy recompute = {}, TensorGroup* group = nullptr);
  GptModel(const GptModel&) = delete;
  GptModel& operator=(const GptModel&) = delete;

  // The whole model's layout; for a tensor rank, shard() says where its part lies.
  const ParamLayout& layout() const { return shard_.whole(); }
  const TensorParallelLayout& shard() const { return shard_; }
  int tensor_ranks() const { return shard_.ranks(); }
  LayerRange range() const { return range_; }
  bool has_embedding() const { return range_.begin == 0; }
  bool has_head() const { return range_.end == layout().shape().layers; }
  const RecomputePolicy& recompute() const { return recompute_; }
  const ActivationMemory& activation_memory() const { return activation_memory_; }
  size_t activation_bytes() const { return activation_memory_.total(); }

  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  // The floats of params() (this rank's part under tensor parallelism).
  size_t num_params() const { return shard_.total(); }

  // GPT-2 initialisation as a pure function of (seed, whole-model parameter index,
  // initial_value.hpp): any range or shard of the model gets the same values.
  void init_weights(uint64_t seed, double std);
  void zero_grads();

  // Runs the range on B sequences of T tokens (T <= context); every rank of the group
  // with the same batch. `tokens` (B*T host ints) are needed by the first range;
  // `targets` (B*T) by the last, which returns the mean loss. A range without the head
  // returns 0 and leaves its output in stage_output().
  double forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T);
  // Run by every later forward before it reads a range of params() (ParamsNeeded).
  void set_before_params_read(ParamsNeeded hook) { before_params_read_ = std::move(hook); }

  // Backpropagates the last forward, ACCUMULATING into grads(): the loss gradient is
  // dloss per token (1 / (B*T) for a mean over one micro-batch; divided further by the
  // number of micro-batches for accumulation). A range without the head reads the
  // gradient of its output from stage_output_grad(). `on_ready`, when set, is called
  // with each range of gradients as it becomes final, in the order of
  // gradient_ranges_in_backward_order().
  void backward(float dloss, const GradientsReady& on_ready = nullptr);

  // The ranges backward reports, in its order: [lnf], block end-1, ..., block begin,
  // then [wte, wpe] on the embedding's range, else the head's wte rows on the head's.
  // For the whole model a partition of the flat buffer, each adjacent to the one before.
  const std::vector<ParamRange>& gradient_ranges_in_backward_order() const {
    return backward_ranges_;
  }

  // The data's vocabulary when model.vocab pads it (llm.c's V within Vp: GPT-2's 50257 in
  // 50304): the ids [real_vocab, vocab) take no part in the loss's softmax (their logits
  // get a zero gradient) and must never be targets. vocab until set, which keeps the
  // fused cross-entropy and its bits; std::invalid_argument outside [1, vocab].
  void set_real_vocab(int64_t real_vocab);
  int64_t real_vocab() const { return real_vocab_; }

  // The precision of the matmuls; fp32 until set. The owner calls
  // precision().end_step() after each optimizer step (FP8 delayed scaling).
  void set_precision(PrecisionPolicy policy) { precision_ = std::move(policy); }
  PrecisionPolicy& precision() { return precision_; }

  // The activation set the next forward fills and the next backward reads (0 until
  // changed); std::out_of_range outside [0, activation_slots).
  void select_activation_slot(int64_t slot);
  int64_t activation_slots() const { return static_cast<int64_t>(slots_.size()); }
  // Runs this model's recomputed blocks in `owner`'s scratch set and frees its own:
  // `owner` must have the same shape, group size, micro-batch size and recompute, and
  // outlive this model's forwards and backwards.
  void share_recompute_scratch(GptModel& owner);

  // Activations crossing range boundaries, (B, T, C), whole on every rank of a group;
  // input and output are the selected slot's.
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
    int64_t B = 0, T = 0;  // shape of the forward; B = 0 before the first
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
  // `out` null: the recompute before a backward, which stops before the MLP's
  // projection (its output is the block's output, which is kept).
  void block_forward(int64_t layer, BlockActivations& a, const float* x, float* out);
  void block_backward(int64_t layer, BlockActivations& a, const float* x);
  // bf16 activations (Backend::layernorm_forward_bf16): a LayerNorm's or the GELU's output
  // that feeds a bf16 matmul is kept as bf16 bits in its float buffer, and that matmul
  // reads them as they are; in fp32 and fp8 it stays fp32.
  void layernorm_for(const backend::MatmulPrecision& consumer, float* out, float* mean,
                     float* rstd, const float* inp, const float* w, const float* b, int N, int C);
  void gelu_for(const backend::MatmulPrecision& consumer, float* out, const float* inp, size_t n);
  void linear_forward(float* out, const float* inp, const float* w, const float* bias, int N,
                      int C, int OC, const backend::MatmulPrecision& precision);
  void linear_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                       const float* w, int N, int C, int OC,
                       const backend::MatmulPrecision& precision);
  // The group's sum of `count` floats of the backend's memory; nothing without a group.
  void all_reduce_on_backend(float* data, size_t count);

  // gpt_model_ends.cpp: the embedding, and the head with its loss.
  backend::VocabSlice vocab_slice() const;
  void embedding_forward();
  void embedding_backward();
  double head_forward();
  void head_backward(float dloss);
  double cross_entropy_forward();
  void cross_entropy_backward(float dloss);

  TensorParallelLayout shard_;
  LayerRange range_;
  TensorGroup* group_;  // null, or a group of more than one rank
  backend::Backend& backend_;
  int64_t max_batch_;
  RecomputePolicy recompute_;
  PrecisionPolicy precision_;
  int64_t B_ = 0, T_ = 0;  // the selected slot's forward
  int64_t real_vocab_ = 0;  // set_real_vocab; the constructor sets vocab

  backend::DeviceBuffer<float> params_, grads_;
  ParamsNeeded before_params_read_;
  std::vector<ForwardState> slots_;
  ForwardState* slot_ = nullptr;
  BlockActivations recomputed_;  // shared by every recomputed block of every slot
  BlockActivations* recompute_set_ = &recomputed_;  // recomputed_, or another model's
  // The vocabulary-parallel cross-entropy's all-reduced values: (N, ranks) row maxima,
  // one column per rank, and the N sums of exponentials followed by the N target logits.
  backend::DeviceBuffer<float> max_slots_, sums_and_targets_;
  backend::HostBuffer<float> host_scratch_;  // the all-reduces' host window (devices)
  // Backward scratch: the residual stream's gradient, and one buffer per width (C, this
  // rank's 3C and 4C).
  backend::DeviceBuffer<float> dresidual_, dwidth1_, dqkv_, dhidden_;
  backend::DeviceBuffer<float> branch_out_;  // attention/MLP branch output before the add
  ActivationMemory activation_memory_;
  std::vector<ParamRange> backward_ranges_;  // set once: backward allocates nothing
  std::vector<ParamRange> ranges_in_backward_order() const;
};

}  // namespace dseek::model
