// The trainer of a data-parallel replica or a single-node job: the one trainer of every
// layout (pipeline/stage_trainer.hpp) on one stage that holds the whole model, seen
// through the calls a data-parallel job makes (dist/run_data_parallel, the replicas'
// memory between epochs, checkpoints). The single-node job drives it directly
// (run_training.hpp).
//
// Data parallel: given a GradientReducer (gradient_reducer.hpp), replica r of R computes
// sequences [r*B/R, (r+1)*B/R) of the global batch of B = train.batch_size sequences
// (the sample order is a function of (seed, step), so the global batch is the same for
// any R), in micro-batches of train.micro_batch_size (0 = the whole slice). Its loss
// gradient is scaled as the single node scales it (1 / (tokens per micro-batch x
// micro-batches of the GLOBAL batch)), so the sum over replicas is the single-node
// gradient of the mean over the global batch; the reduction overlaps the last
// micro-batch's backward. Clipping uses the norm of that sum; every replica applies the
// same update (ZeRO >= 1: each its shard, then the parameters are gathered). Without a
// reducer the numbers are exactly the single-node ones.
//
// The backend (train.device) may keep its memory off the host (CUDA): parameters and
// gradients reach the host through staging copies (host_staging.hpp), and an optimizer
// that runs on the host (the gradient_shard actors) updates there, overlapped with the
// next step's forward under train.offload_overlap (host_update.hpp). A reducer whose data
// plane reads the backend's memory itself (NCCL) gets the backend's own buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/checkpoint/precision_state.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/device_backend.hpp"
#include "runtime/train/gradient_reducer.hpp"
#include "runtime/train/layout/reducer_replica_group.hpp"
#include "runtime/train/model_of_config.hpp"
#include "runtime/train/optimizer_shards.hpp"
#include "runtime/train/pipeline/single_stage_links.hpp"
#include "runtime/train/pipeline/stage_trainer.hpp"
#include "runtime/train/step_report.hpp"

namespace dseek::train {

class Trainer {
 public:
  // `reducer` null: one node. Otherwise this trainer is replica reducer->rank() of
  // reducer->world_size(); throws std::invalid_argument when train.batch_size does not
  // split evenly into replicas and micro-batches. `make_optimizer` holds the optimizer
  // state and runs the update (optimizer_shards.hpp); empty or null: a LocalOptimizer.
  // `make_backend` gives the backend of train.device (device_backend.hpp); empty:
  // make_runtime_backend.
  Trainer(const config::JobConfig& config, BatchSource& train_batches,
          GradientReducer* reducer = nullptr, const OptimizerShardsFactory& make_optimizer = {},
          const BackendFactory& make_backend = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs optimizer step `step` (0-based) on its global batch (collective with a reducer).
  // Throws ReplicaMismatch (replica_check.hpp) when this replica disagrees with the
  // others' checksums (every train.replica_check_every steps).
  StepReport train_step(int64_t step);

  // Run on the step's final (with replicas: reduced) gradients before the update (fault
  // injection: slow, corrupt_gradient); and, with replicas, told when a replica check
  // names disagreeing ranks (on every replica, before the one in the minority throws).
  using GradientHook = train::GradientHook;
  using DisagreementHook = train::DisagreementHook;
  void set_after_reduction(GradientHook hook) { stage_->set_after_reduction(std::move(hook)); }
  void set_on_disagreement(DisagreementHook hook) { stage_->set_on_disagreement(std::move(hook)); }
  // This replica's data-parallel rank (0 on one node).
  int dp_rank() const;
  // Mean loss over eval_batches fixed batches of `batches` (no gradient). With a
  // reducer each replica evaluates its slice and the mean is over all (collective).
  // `stop`, when given, is asked before each batch and ends the evaluation early when it
  // says true (a stop request: the run's summary drops the partial mean); with a reducer
  // it must answer the same on every replica (a collective vote, run_steps.cpp).
  double evaluate(BatchSource& batches, int64_t eval_batches,
                  const std::function<bool()>& stop = {});

  // Copies parameters and AdamW moments (layout order, model().num_params() floats each)
  // to host memory: the checkpoint snapshot. With a sharded optimizer (ZeRO >= 1) the
  // moments are gathered from every replica: collective, every replica calls it.
  void snapshot(float* params, float* adam_m, float* adam_v);
  // The same without communication: the parameters and only the moments this replica
  // owns (the other ranges of adam_m / adam_v are left as they are). Under ZeRO >= 1
  // the parameters are whole on every replica after a step; the moments are its shard.
  void snapshot_owned(float* params, float* adam_m, float* adam_v);
  // Puts back a checkpoint's state: parameters, moments (this replica's shard of them
  // when sharded) and AdamW's step count.
  void restore(const float* params, const float* adam_m, const float* adam_v,
               int64_t optimizer_steps);
  // The mixed-precision state between steps (loss scale, fp8 amax histories) for a
  // checkpoint, and putting a checkpoint's back (state/trainer_precision_state.cpp; whether to
  // is train/state/precision_resume.hpp's decision). The replicas share the loss scale but
  // not the amax histories (each quantizes its own slice of the batch): under fp8 with
  // replicas precision_state() gathers every replica's (collective:
  // precision_state_is_collective()), and a restore takes this replica's own when the
  // checkpoint has as many replicas (returns true), else their merge (false).
  checkpoint::PrecisionState precision_state();
  bool precision_state_is_collective() const;
  bool restore_precision_state(const checkpoint::PrecisionState& state);
  // Counts an update still running (overlap) as taken: its step is decided.
  int64_t optimizer_steps() const { return stage_->optimizer_steps(); }
  // Whether snapshot() is a collective (ZeRO >= 1 over a reducer).
  bool snapshot_is_collective() const;

  // Whether the offloaded update of a step is left running into the next step's forward
  // (train.offload_overlap, and an optimizer and ZeRO stage it applies to).
  bool overlaps_update() const { return stage_->overlaps_update(); }

  // SHA-256 of the fp32 parameters (the train_done event's params_sha256).
  std::string params_sha256();
  model::GptModel& model() { return stage_->whole_model(); }
  backend::Backend& backend() { return stage_->backend(); }
  int64_t micro_batch() const { return stage_->micro_batch_size(); }
  GradientReducer* reducer() const { return reducer_; }

 private:
  config::JobConfig config_;
  GradientReducer* reducer_;
  std::unique_ptr<ReducerReplicaGroup> replicas_;
  SingleStageLinks links_;
  std::unique_ptr<PipelineStageTrainer> stage_;
};

}  // namespace dseek::train
