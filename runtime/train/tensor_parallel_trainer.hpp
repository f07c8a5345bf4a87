// Training of one rank of a tensor-parallel group (parallel.tensor = T, no pipeline),
// optionally one of D replicas of the group (parallel.data = D): model::TensorParallelGpt
// holds this rank's Megatron shard, every rank of a group reads its replica's slice of
// the global batch (the whole batch with one replica; the same tokens on every rank of
// the group), and a step is the single-node Trainer's step with the model split:
//
//   - micro-batches of train.micro_batch_size (default: the whole slice) accumulate into
//     the shard's gradients with the loss scaled as the single-node trainer scales it
//     (1 / (tokens per micro-batch x micro-batches of the global batch));
//   - with replicas, the shard's gradients (and the loss) are then summed over the data
//     group (the same tensor rank in every replica, replica_group.hpp): every replica
//     holds the whole batch's gradient, the same bits on each, before the norm;
//   - the global gradient norm counts every parameter of the whole model once: the
//     squares of the sharded tensors are summed over the group, those of the replicated
//     tensors (wpe, LayerNorms, row-parallel biases) are added once, since every rank
//     holds the same values (tensor_group.hpp);
//   - mixed precision (train.precision, model/precision_policy.hpp) runs the shard's
//     block matmuls in bf16 or fp8 (tensor_parallel_gpt.hpp); fp8 scales the loss
//     (optim/loss_scaler.hpp): the decision to skip a step comes from the global norm,
//     the same on every rank and replica, so an overflow anywhere skips it everywhere,
//     and the gradients are unscaled on the backend; every rank closes its FP8
//     delayed-scaling step after each step, skipped or not;
//   - AdamW with the LR schedule updates the shard: an elementwise update, so each shard
//     moves as its part of the whole model would, weight decay taken from the whole
//     model's tensor of each element (ParamLayout's decay flag).
//
// ZeRO (parallel.zero = 1 or 2, with D > 1 replicas): the rank's shard is cut into one
// piece per replica of its data group (data_group_shards.hpp): the replica sum becomes
// a reduce-scatter, this replica keeps AdamW moments for its piece only and updates it,
// the norm adds the replicas' squares of their pieces, and the parameters are
// all-gathered after the update. 1 and 2 run the same (the reduction follows backward).
//
// The shard computes on the backend of train.device (device_backend.hpp); what goes to
// the host data plane (the model's all-reduces, tensor_parallel_gpt.hpp; the replicas'
// gradient sum; gathered parameters and checkpoints) moves through the backend's copy
// calls, staged on the host (on the CPU backend the staging is the buffers themselves).
//
// The update runs on the OptimizerShards `optimizer_shards` makes (in dseek-node the
// worker group's gradient_shard actors, RunOptions::optimizer_shards), a LocalOptimizer
// without one; the shard's ranges carry their decay flags (OptimizerSpec::decay_ranges).
//
// gather_params() puts the whole model back together on every rank (collective), for
// the params_sha256 a single-node run of the same config can be compared with.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/backend/device_buffer.hpp"
#include "runtime/checkpoint/precision_state.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/model/tensor_group.hpp"
#include "runtime/model/tensor_parallel_gpt.hpp"
#include "runtime/optim/adamw.hpp"
#include "runtime/optim/loss_scaler.hpp"
#include "runtime/optim/lr_schedule.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/data_group_shards.hpp"
#include "runtime/train/device_backend.hpp"
#include "runtime/train/gathered_state.hpp"
#include "runtime/train/host_staging.hpp"
#include "runtime/train/replica_group.hpp"
#include "runtime/train/trainer.hpp"

namespace dseek::train {

class TensorParallelTrainer {
 public:
  // Every rank of `group` constructs one with the same config; `replica_group` is its data
  // group (null: one replica). `make_backend` builds the backend of train.device (empty:
  // make_runtime_backend). Throws std::invalid_argument when the replicas or
  // train.micro_batch_size do not split train.batch_size evenly.
  TensorParallelTrainer(const config::JobConfig& config, BatchSource& batches,
                        model::TensorGroup& group, ReplicaGroup* replica_group = nullptr,
                        const BackendFactory& make_backend = {},
                        const OptimizerShardsFactory& optimizer_shards = {});
  ~TensorParallelTrainer();
  TensorParallelTrainer(const TensorParallelTrainer&) = delete;
  TensorParallelTrainer& operator=(const TensorParallelTrainer&) = delete;

  // Optimizer step `step` (0-based), collective over the group. The loss, norm and
  // learning rate are the same on every rank.
  StepReport train_step(int64_t step);
  // Mean loss over `eval_batches` batches of `batches` (forward only), on every rank
  // (each replica evaluates its slice; collective over the group and the replicas).
  double evaluate(BatchSource& batches, int64_t eval_batches);
  // The whole model's parameters (ParamLayout order) on every rank: collective.
  std::vector<float> gather_params();
  // Checkpoints (tensor_checkpoint_state.hpp). The whole model state (ParamLayout order)
  // on rank 0 of the group: each rank puts its segments (the replicated tensors: rank 0
  // only) into whole buffers filled with -0.0, the exact identity of float addition, and
  // a sum over the group assembles them bit for bit (collective; rank 0 passes the three
  // whole buffers, the others null).
  void gather_state_to_first(float* params, float* adam_m, float* adam_v);
  // The shard's params and moments sliced out of the whole state (the layout's segments).
  void restore_state(const float* params, const float* adam_m, const float* adam_v,
                     int64_t optimizer_steps);
  int64_t optimizer_steps() const { return optimizer_->steps_taken(); }
  const model::ParamLayout& whole_layout() const { return model_->layout().whole(); }
  // Rank 0's `value` on every rank of the group (collective).
  bool first_rank_decides(bool value);
  // Parameters of this rank's shard (its slices plus the replicated tensors).
  size_t shard_params() const { return model_->num_params(); }
  // ZeRO inside the data group, and the parameters whose moments this rank holds.
  bool shards_optimizer_state() const { return zero_ != nullptr; }
  size_t optimizer_params() const { return moments_.count; }
  // Who runs the update (OptimizerShards::describe).
  std::string optimizer_description() const { return optimizer_->describe(); }
  const model::ActivationMemory& activation_memory() const {
    return model_->activation_memory();
  }
  int rank() const { return group_.rank(); }
  int ranks() const { return group_.size(); }
  int replica() const { return replicas_ != nullptr ? replicas_->replica() : 0; }
  int replicas() const { return replicas_ != nullptr ? replicas_->replicas() : 1; }
  // The sum over the group and its replicas of one flag or count (stop requests):
  // collective.
  double sum_over_group(double value);
  // Mixed precision in checkpoints (tensor_parallel_precision_state.cpp): under fp8 with
  // several replicas every replica takes part (each keeps its own amax histories); the
  // loss scaler's state and every rank's fp8 state, one copy per (replica, tensor rank)
  // (train/sharded_precision_state.hpp), on rank 0 of replica 0 (collective over the
  // group, and the replicas under fp8_state_per_replica); the restore on every rank:
  // true when it took its own copy, false when merged.
  bool fp8_state_per_replica() const;
  checkpoint::PrecisionState gather_precision_state();
  bool restore_precision_state(const checkpoint::PrecisionState& state,
                               const LayoutSizes& written_by);

 private:
  class TimedGroup;
  // A contiguous run of the shard whose elements share one weight-decay setting.
  void plan_update_runs();
  double global_grad_norm();
  // The moments as whole-shard host arrays (ZeRO: all-gathered over the replicas).
  void moments_to_host(std::vector<float>& m_shard, std::vector<float>& v_shard);
  // fp8: whether the step is applied (see the top); if so, unscales the gradients and
  // `norm`.
  bool apply_loss_scale(double& norm, StepReport& report);
  // The step's timings and memory, once it is done.
  StepReport finish_report(StepReport& report, std::chrono::steady_clock::time_point start);

  config::JobConfig config_;
  BatchSource& batches_;
  model::TensorGroup& group_;
  ReplicaGroup* replicas_;
  std::unique_ptr<TimedGroup> timed_group_;
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::TensorParallelGpt> model_;
  std::unique_ptr<optim::LossScaler> loss_scaler_;  // fp8 only
  optim::AdamWSettings settings_;
  optim::LrSchedule lr_schedule_;
  ReplicaSlice slice_;
  int64_t micro_batch_ = 0;
  std::vector<optim::DecayRange> runs_;  // the optimizer's ranges with their decay
  std::vector<model::ParamRange> sharded_, replicated_;  // for the norm (ZeRO: in the piece)
  std::unique_ptr<DataGroupShards> zero_;                  // null without ZeRO
  model::ParamRange moments_;  // the shard's floats the optimizer holds (ZeRO: the piece)
  // The update: RunOptions::optimizer_shards's (dseek-node: the gradient_shard actors)
  // or a LocalOptimizer; over runs_.
  std::unique_ptr<OptimizerShards> optimizer_;
  std::unique_ptr<HostStaging> grads_host_;   // for the replicas' sum
  std::unique_ptr<HostStaging> params_host_;  // ZeRO: the pieces' all-gather
  std::vector<int32_t> inputs_, targets_;
};

}  // namespace dseek::train
