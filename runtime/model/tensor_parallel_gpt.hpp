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
// train/tensor_parallel_trainer.hpp.) A row-parallel bias is added by rank 0 only,
// before the all-reduce, so the sum counts it once.
//
// The whole model is run (no layer range): a pipeline stage of a tensor-parallel group
// is not implemented. The embedding and cross-entropy are host loops over the backend's
// buffers, so the CPU backend is required (checked at construction).
//
// Activation recompute (model.recompute) works as in GptModel: a recomputed block runs
// in one shared scratch set and its backward runs its forward again first, including
// the attention branch's all-reduce (every rank of the group recomputes the same
// blocks, so the collectives stay matched). The MLP's all-reduce only produces the
// block's output, which is kept, so the recompute stops before it. The all-reduce sums
// in a fixed order, so the recomputed activations are the first forward's bits.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/device_buffer.hpp"
#include "runtime/model/activation_memory.hpp"
#include "runtime/model/recompute_policy.hpp"
#include "runtime/model/tensor_group.hpp"
#include "runtime/model/tensor_parallel_layout.hpp"

namespace dseek::model {

class TensorParallelGpt {
 public:
  TensorParallelGpt(const GptShape& shape, TensorGroup& group, backend::Backend& backend,
                    int64_t max_batch, RecomputePolicy recompute = {});
  TensorParallelGpt(const TensorParallelGpt&) = delete;
  TensorParallelGpt& operator=(const TensorParallelGpt&) = delete;

  const TensorParallelLayout& layout() const { return layout_; }
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  size_t num_params() const { return layout_.total(); }
  const RecomputePolicy& recompute() const { return recompute_; }
  const ActivationMemory& activation_memory() const { return activation_memory_; }
  size_t activation_bytes() const { return activation_memory_.total(); }

  // The whole model's initial values (initial_value.hpp) at this shard's indices.
  void init_weights(uint64_t seed, double std);
  void zero_grads();

  // Every rank of the group calls these with the same batch; each returns the mean loss.
  double forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T);
  // Accumulates into grads(); dloss as in GptModel::backward.
  void backward(float dloss);

 private:
  struct BlockActivations {
    backend::DeviceBuffer<float> ln1, ln1_mean, ln1_rstd, qkv, atty, att;
    backend::DeviceBuffer<float> residual2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu;
  };
  BlockActivations make_block_activations(size_t BT, size_t att);
  static size_t block_bytes(const BlockActivations& a);
  // Block `layer`'s activations: its own set, or the recompute scratch.
  BlockActivations& activations_of(int64_t layer);
  // `out` null: the recompute before a backward; stops before the MLP's projection.
  void block_forward(int64_t layer, BlockActivations& a, const float* x, float* out);
  void block_backward(int64_t layer, BlockActivations& a, const float* x);
  void embedding_forward();
  void embedding_backward();
  double cross_entropy_forward();
  void cross_entropy_backward(float dloss);

  TensorParallelLayout layout_;
  TensorGroup& group_;
  backend::Backend& backend_;
  int64_t max_batch_;
  RecomputePolicy recompute_;
  int64_t B_ = 0, T_ = 0;

  backend::DeviceBuffer<float> params_, grads_;
  std::vector<int32_t> tokens_, targets_;
  std::vector<backend::DeviceBuffer<float>> residual_;  // input of block l; [L] the output
  std::vector<BlockActivations> blocks_;  // empty sets for recomputed blocks
  BlockActivations recomputed_;           // shared by every recomputed block
  backend::DeviceBuffer<float> lnf_, lnf_mean_, lnf_rstd_, logits_, losses_;
  std::vector<float> token_maxima_, exp_sum_and_target_;  // cross-entropy's all-reduces
  backend::DeviceBuffer<float> dresidual_, dwidth1_, dqkv_, datty_, dhidden_, branch_out_;
  ActivationMemory activation_memory_;
};

}  // namespace dseek::model
