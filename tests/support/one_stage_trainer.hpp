// The one trainer (runtime/train/pipeline/stage_trainer.hpp) on one stage that holds the
// whole model, stepped in-process by the tests of one replica's numerics (loss scaling,
// the offload, compressed reductions, fp8 checkpoints), optionally over a GradientReducer
// of the test's (its rank and world size: this replica's slice of the global batch).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/checkpoint/precision_state.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/device_backend.hpp"
#include "runtime/train/gradient_reducer.hpp"
#include "runtime/train/optimizer_shards.hpp"
#include "runtime/train/pipeline/single_stage_links.hpp"
#include "runtime/train/pipeline/stage_trainer.hpp"
#include "support/reducer_replica_group.hpp"

namespace dseek::testing {

class OneStageTrainer {
 public:
  // `reducer` null: one node; otherwise replica reducer->rank() of reducer->world_size().
  OneStageTrainer(const config::JobConfig& config, train::BatchSource& batches,
                  train::GradientReducer* reducer = nullptr,
                  const train::OptimizerShardsFactory& make_optimizer = {},
                  const train::BackendFactory& make_backend = {});

  train::StepReport train_step(int64_t step) { return stage_->train_step(step).step; }
  void set_after_reduction(train::GradientHook hook) { stage_->set_after_reduction(std::move(hook)); }
  // Parameters and AdamW moments, whole, in layout order (collective under ZeRO).
  void snapshot(float* params, float* adam_m, float* adam_v) {
    stage_->copy_whole_state(params, adam_m, adam_v, /*gather_moments=*/true);
  }
  void restore(const float* params, const float* adam_m, const float* adam_v,
               int64_t optimizer_steps) {
    stage_->restore_state(params, adam_m, adam_v, optimizer_steps);
  }
  checkpoint::PrecisionState precision_state() { return stage_->gather_precision_state(); }
  // A checkpoint's precision state, written by state.fp8.replicas whole-model replicas.
  bool restore_precision_state(const checkpoint::PrecisionState& state);
  int64_t optimizer_steps() const { return stage_->optimizer_steps(); }
  std::string params_sha256();
  model::GptModel& model() { return stage_->whole_model(); }
  backend::Backend& backend() { return stage_->backend(); }
  int64_t micro_batch() const { return stage_->micro_batch_size(); }

 private:
  std::unique_ptr<ReducerReplicaGroup> replicas_;
  train::SingleStageLinks links_;
  std::unique_ptr<train::PipelineStageTrainer> stage_;
};

}  // namespace dseek::testing
