// Training of one model replica on one node: micro-batch accumulation, global-norm
// clipping, AdamW with the warm-up + cosine schedule, evaluation, and the timings each
// step reports. The single-node job drives it directly (run_training.hpp); the
// distributed issue wraps it in worker actors and adds the gradient reduction between
// backward and the optimizer step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/optim/adamw.hpp"
#include "runtime/optim/lr_schedule.hpp"
#include "runtime/train/batch_source.hpp"

namespace dseek::train {

struct StepReport {
  int64_t step = 0;
  double loss = 0.0;         // mean over the step's batch
  double lr = 0.0;
  double grad_norm = 0.0;    // before clipping
  double step_ms = 0.0;      // wall time of the whole step
  double compute_ms = 0.0;   // forward, backward and optimizer
  double comm_ms = 0.0;      // exposed communication (0 on one node)
  double data_wait_ms = 0.0; // waiting for batches
  double tokens_per_s = 0.0;
};

class Trainer {
 public:
  Trainer(const config::JobConfig& config, BatchSource& train_batches);

  // Runs optimizer step `step` (0-based) on its global batch.
  StepReport train_step(int64_t step);
  // Mean loss over eval_batches fixed batches of `batches` (no gradient).
  double evaluate(BatchSource& batches, int64_t eval_batches);

  // Copies parameters and AdamW moments (layout order, model().num_params() floats each)
  // to host memory: the checkpoint snapshot.
  void snapshot(float* params, float* adam_m, float* adam_v);
  // Puts back a checkpoint's state: parameters, moments and AdamW's step count.
  void restore(const float* params, const float* adam_m, const float* adam_v,
               int64_t optimizer_steps);
  int64_t optimizer_steps() const { return optimizer_->steps_taken(); }

  // SHA-256 of the fp32 parameters (the train_done event's params_sha256).
  std::string params_sha256();
  model::GptModel& model() { return *model_; }
  backend::Backend& backend() { return *backend_; }
  int64_t micro_batch() const { return micro_batch_; }

 private:
  config::JobConfig config_;
  BatchSource& batches_;
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::GptModel> model_;
  std::unique_ptr<optim::AdamW> optimizer_;
  optim::LrSchedule schedule_;
  int64_t micro_batch_;
  std::vector<int32_t> inputs_, targets_;  // one micro-batch, reused every step
};

// The model shape of a config.
model::GptShape shape_of(const config::ModelConfig& model);

}  // namespace dseek::train
