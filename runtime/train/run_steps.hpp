// The step loop of every training run (run_training.hpp: a data-parallel replica or a
// single node; pipeline/run_stage.hpp: pipeline and tensor-parallel ranks): the
// collective vote before each step (stop, pause, checkpoint now: RunOptions::stop and
// ::control), the pause, the step hook (RunOptions::before_step), the
// step, its progress line, evaluation every train.eval_every steps and at the end, the
// checkpoints after each step and at the end, and the run's timing. Each run supplies
// its step (which emits its own step event, with its own fields) and its evaluation
// (which a stop request interrupts between batches: eval_interrupted, no val_loss), and
// ends the run itself (params_sha256, train_done).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "runtime/config/job_config.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/train/state/checkpointing.hpp"
#include "runtime/train/run_training.hpp"
#include "runtime/train/step_report.hpp"

namespace dseek::train {

struct StepFunctions {
  // Trains step `step` (0-based), emits its step event, and returns its report.
  std::function<StepReport(int64_t step)> train_step;
  // The validation loss; null when the run has no validation data. The ranks vote on
  // `stop_request` before each batch and end early when one has it set, setting
  // `batches_done` (fewer than train.eval_batches: interrupted, the result thrown away).
  std::function<double(const std::atomic<bool>* stop_request, int64_t& batches_done)> evaluate;
  // Votes summed element-wise over every rank that steps together (collective, in
  // place); null: one rank.
  std::function<void(std::span<double> votes)> sum_votes;
};

// Runs steps [first_step, train.steps) until done or a stop: a signal (options.stop)
// seen by any rank, train.stop_after_steps or train.stop_after_minutes of this
// invocation (so a job cut into slices can be resumed again and again with the same
// config; the time paused does not count). At a step boundary where any rank's
// options.control asks, every rank writes a checkpoint (checkpoint_now event) or pauses
// (train_paused; voting every 50 ms, checkpointing when asked, until no rank asks for
// the pause or one stops: train_resumed). Returns the summary (steps_done, final_loss, val_loss, stopped_early, timing)
// and sets `stop_reason` ("" when the run went to its end).
RunSummary run_steps(const config::JobConfig& config, const RunOptions& options,
                     metrics::EventLog& events, metrics::Progress& progress,
                     Checkpointing& checkpoints, int64_t first_step, const StepFunctions& steps,
                     std::string& stop_reason);

}  // namespace dseek::train
