// Where a pipeline stage's work runs: the run loop of a stage (pipeline/run_stage.hpp,
// pipeline/fixed_world_steps.hpp) and its checkpoints (state/checkpointing.hpp) ask a
// PipelineStage to train a step, evaluate, gather its parameters, its trace or its
// checkpoint pieces, and never see the PipelineStageTrainer behind it.
//
// Two implementations: LocalPipelineStage (below), the trainer on the caller's own
// thread, the default for runtime-only users and tests; and in dseek-node the worker
// group's pipeline_stage actor (actors/worker_group/pipeline_stage.hpp), which owns the trainer
// on a thread of its own while the worker's thread only drives it. The run picks one
// through a PipelineStageFactory (RunOptions::pipeline_stage); the runtime sees only
// this interface, so it knows nothing of actors (as with OptimizerShards).
//
// Every implementation computes the same bits: the same trainer runs the same ops; only
// the thread it runs on differs.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <span>
#include <vector>

#include "runtime/config/job_config.hpp"
#include "runtime/metrics/chrome_trace.hpp"
#include "runtime/model/activation_memory.hpp"
#include "runtime/model/param_layout.hpp"
#include "runtime/model/tensor_group.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/device_backend.hpp"
#include "runtime/train/pipeline/links.hpp"
#include "runtime/train/pipeline/plan.hpp"
#include "runtime/train/pipeline/stage_trainer.hpp"
#include "runtime/train/layout/replica_group.hpp"

namespace dseek::train {

// What a stage is built from: PipelineStageTrainer's arguments. The references must
// outlive the stage (the run that builds it owns them).
struct PipelineStageSpec {
  const config::JobConfig& config;
  BatchSource& batches;    // the training batches
  PipelineLinks& links;    // to the neighbouring stages
  PipelinePlan plan;
  ReplicaGroup* replicas;  // the stage's data group; null: one replica
  model::TensorGroup* tensor = nullptr;  // the stage's tensor group; null: one rank
  BackendFactory make_backend = {};      // train.device's backend; empty: make_runtime_backend
  // Who runs each chunk's optimizer (RunOptions::optimizer_shards: in dseek-node the
  // worker group's gradient_shard actors); empty: LocalOptimizers.
  OptimizerShardsFactory optimizer_shards = {};
  // The trainer's hooks (PipelineStageTrainer::set_after_reduction, set_before_reduction,
  // set_in_recomputation, set_on_disagreement); they run where the trainer runs.
  GradientHook after_reduction = {};
  GradientHook before_reduction = {};
  GradientHook in_recomputation = {};
  DisagreementHook on_disagreement = {};
  // The node's trace (RunOptions::trace; null: none).
  std::shared_ptr<const metrics::TraceRecorder> trace = {};
};

// What a built stage is, fixed for its life (read once, not asked per step).
struct PipelineStageInfo {
  int64_t stage = 0;
  int replica = 0, replicas = 1;
  int tensor_rank = 0, tensor_ranks = 1;
  bool gathers_state = false;  // writes the gathered checkpoint (stage 0, tensor rank 0)
  size_t owned_params = 0;  // its blocks, and the embedding, head and wte at the ends
  // ZeRO inside the data group: the optimizer state is sharded over the replicas, and
  // this rank holds the AdamW moments of optimizer_params parameters.
  bool shards_optimizer_state = false;
  int64_t zero = 0;  // parallel.zero when it shards, else 0
  size_t optimizer_params = 0;
  // fp8 with several replicas: each keeps its own amax histories, so every replica
  // takes part in a checkpoint (PipelineStageTrainer::fp8_state_per_replica).
  bool fp8_state_per_replica = false;
  std::string optimizer;  // who runs its update (OptimizerShards::describe)
  // The floats of copy_owned_state, and the ranges of them holding the moments this
  // rank has (under ZeRO its pieces; state/stage_memory.hpp).
  size_t owned_state_floats = 0;
  std::vector<model::ParamRange> owned_state_moments;
  model::ActivationMemory activation_memory;
  PipelinePlan plan;
  std::string host_memory;       // the backend's host memory (backend::HostMemory::kind)
  bool overlaps_update = false;  // PipelineStageTrainer::overlaps_update
  bool sdc_audit = false;        // PipelineStageTrainer::audits
};

// One stage of the pipeline. Every call but the accessors is collective over the stages
// (and the replicas), as PipelineStageTrainer documents it; a stage that fails throws
// what its trainer threw (a data plane error stays a data plane error).
class PipelineStage {
 public:
  virtual ~PipelineStage() = default;

  virtual const PipelineStageInfo& info() const = 0;
  // The whole model's layout (every stage has the same).
  virtual const model::ParamLayout& whole_layout() const = 0;

  virtual PipelineStepReport train_step(int64_t step) = 0;
  // PipelineStageTrainer::evaluate: a stop request voted on before each batch.
  virtual double evaluate(BatchSource& batches, int64_t eval_batches,
                          const std::atomic<bool>* stop_request, int64_t* batches_done) = 0;
  virtual std::vector<float> gather_params() = 0;
  virtual std::vector<metrics::TraceSpan> gather_trace_spans() = 0;
  // Element-wise sums of a few doubles (votes, counts) over the world (collective).
  virtual std::vector<double> sum_over_world(std::vector<double> values) = 0;
  double sum_over_world(double value) { return sum_over_world(std::vector<double>{value})[0]; }
  virtual bool first_stage_decides(bool value) = 0;
  // Checkpoints: stage 0 passes whole-layout buffers, the others null.
  virtual void gather_state_to_first(float* params, float* adam_m, float* adam_v) = 0;
  virtual void restore_state(const float* params, const float* adam_m, const float* adam_v,
                             int64_t optimizer_steps) = 0;
  virtual int64_t optimizer_steps() = 0;
  // This rank's own state, no communication (PipelineStageTrainer::copy_owned_state):
  // info().owned_state_floats floats; and back.
  virtual void copy_owned_state(float* packed) = 0;
  virtual void restore_owned_state(const float* packed, int64_t optimizer_steps) = 0;
  // The loss scale and fp8 state (PipelineStageTrainer::gather_precision_state: collective;
  // restore_precision_state: true when the stage took its own copy, false when merged).
  virtual checkpoint::PrecisionState gather_precision_state() = 0;
  virtual bool restore_precision_state(const checkpoint::PrecisionState& state,
                                       const LayoutSizes& written_by) = 0;
};

// Makes a run's stage; may return null, meaning "use a LocalPipelineStage".
using PipelineStageFactory =
    std::function<std::unique_ptr<PipelineStage>(const PipelineStageSpec& spec)>;

// The stage `factory` makes, or a LocalPipelineStage when it is empty or returns null.
std::unique_ptr<PipelineStage> make_pipeline_stage(const PipelineStageFactory& factory,
                                                   const PipelineStageSpec& spec);

// The PipelineStageTrainer of `spec`, run on the caller's thread.
class LocalPipelineStage final : public PipelineStage {
 public:
  explicit LocalPipelineStage(const PipelineStageSpec& spec);

  const PipelineStageInfo& info() const override { return info_; }
  const model::ParamLayout& whole_layout() const override { return trainer_.whole_layout(); }
  PipelineStepReport train_step(int64_t step) override { return trainer_.train_step(step); }
  double evaluate(BatchSource& batches, int64_t eval_batches, const std::atomic<bool>* stop_request,
                  int64_t* batches_done) override {
    return trainer_.evaluate(batches, eval_batches, stop_request, batches_done);
  }
  std::vector<float> gather_params() override { return trainer_.gather_params(); }
  std::vector<metrics::TraceSpan> gather_trace_spans() override {
    return trainer_.gather_trace_spans();
  }
  using PipelineStage::sum_over_world;
  std::vector<double> sum_over_world(std::vector<double> values) override {
    trainer_.sum_over_world(std::span<double>(values));
    return values;
  }
  bool first_stage_decides(bool value) override { return trainer_.first_stage_decides(value); }
  void gather_state_to_first(float* params, float* adam_m, float* adam_v) override {
    trainer_.gather_state_to_first(params, adam_m, adam_v);
  }
  void copy_owned_state(float* packed) override { trainer_.copy_owned_state(packed); }
  void restore_owned_state(const float* packed, int64_t optimizer_steps) override {
    trainer_.restore_owned_state(packed, optimizer_steps);
  }
  void restore_state(const float* params, const float* adam_m, const float* adam_v,
                     int64_t optimizer_steps) override {
    trainer_.restore_state(params, adam_m, adam_v, optimizer_steps);
  }
  int64_t optimizer_steps() override { return trainer_.optimizer_steps(); }
  checkpoint::PrecisionState gather_precision_state() override {
    return trainer_.gather_precision_state();
  }
  bool restore_precision_state(const checkpoint::PrecisionState& state,
                               const LayoutSizes& written_by) override {
    return trainer_.restore_precision_state(state, written_by);
  }

 private:
  PipelineStageTrainer trainer_;
  PipelineStageInfo info_;
};

}  // namespace dseek::train
