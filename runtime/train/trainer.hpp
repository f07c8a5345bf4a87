// The one trainer of every layout (pipeline/stage_trainer.hpp) on one stage that holds
// the whole model, driven in-process: what the benchmarks (`dseek bench`) and the tests
// of one replica's numerics (loss scaling, the offload, compressed reductions, fp8
// checkpoints) step directly, without the run loop (pipeline/run_stage.hpp) around it.
//
// Data parallel: given a GradientReducer (gradient_reducer.hpp), replica r of R computes
// sequences [r*B/R, (r+1)*B/R) of the global batch of B = train.batch_size sequences, in
// micro-batches of train.micro_batch_size (0 = the whole slice), its loss gradient scaled
// so that the sum over replicas is the single-node gradient of the mean over the global
// batch. Without a reducer the numbers are exactly the single-node ones.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/backend/backend.hpp"
#include "runtime/checkpoint/precision_state.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/device_backend.hpp"
#include "runtime/train/gradient_reducer.hpp"
#include "runtime/train/layout/reducer_replica_group.hpp"
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
  StepReport train_step(int64_t step);
  // Run on the step's final (with replicas: reduced) gradients before the update.
  void set_after_reduction(GradientHook hook) { stage_->set_after_reduction(std::move(hook)); }

  // Copies parameters and AdamW moments (layout order, model().num_params() floats each)
  // to host memory (under ZeRO >= 1 the moments gathered from every replica: collective).
  void snapshot(float* params, float* adam_m, float* adam_v);
  // Puts back a checkpoint's state: parameters, moments and AdamW's step count.
  void restore(const float* params, const float* adam_m, const float* adam_v,
               int64_t optimizer_steps);
  // The loss scale and fp8 amax histories between steps, and putting a checkpoint's back
  // (its own when it was written by as many replicas, else their merge: returns false).
  checkpoint::PrecisionState precision_state() { return stage_->gather_precision_state(); }
  bool restore_precision_state(const checkpoint::PrecisionState& state);
  // Counts an update still running (overlap) as taken: its step is decided.
  int64_t optimizer_steps() const { return stage_->optimizer_steps(); }

  // SHA-256 of the fp32 parameters.
  std::string params_sha256();
  model::GptModel& model() { return stage_->whole_model(); }
  backend::Backend& backend() { return stage_->backend(); }
  int64_t micro_batch() const { return stage_->micro_batch_size(); }

 private:
  config::JobConfig config_;
  std::unique_ptr<ReducerReplicaGroup> replicas_;
  SingleStageLinks links_;
  std::unique_ptr<PipelineStageTrainer> stage_;
};

}  // namespace dseek::train
