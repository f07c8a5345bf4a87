// The step loop of the fixed-world training path (pipeline/run_stage.hpp: pipeline and
// tensor-parallel layouts): the collective stop vote before each step, the step hooks
// (RunOptions::before_step, then after_reduction with no gradients), the step, its
// progress line, evaluation every train.eval_every steps and at the end, the gathered
// checkpoints after each step and at the end, and the run's timing. Each path supplies
// its step (which emits its own step event, with its own fields) and its evaluation,
// and ends the run itself (parameters gathered, params_sha256, train_done).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "runtime/config/job_config.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/train/state/checkpointing.hpp"
#include "runtime/train/run_training.hpp"
#include "runtime/train/trainer.hpp"

namespace dseek::train {

struct FixedWorldSteps {
  // Trains step `step` (0-based), emits its step event, and returns its report.
  std::function<StepReport(int64_t step)> train_step;
  // The validation loss; null when the run has no validation data.
  std::function<double()> evaluate;
  // This rank's stop vote summed over every rank that steps together (collective).
  std::function<double(double)> sum_votes;
};

// Runs steps [first_step, train.steps) until done or a collective stop. Returns the
// summary (steps_done, final_loss, val_loss, stopped_early, timing) and sets
// `stop_reason` ("" when the run went to its end).
RunSummary run_fixed_world_steps(const config::JobConfig& config, const RunOptions& options,
                                 metrics::EventLog& events, metrics::Progress& progress,
                                 Checkpointing& checkpoints, int64_t first_step,
                                 const FixedWorldSteps& steps, std::string& stop_reason);

}  // namespace dseek::train
