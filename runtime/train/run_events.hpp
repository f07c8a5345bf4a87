// What every training run (run_training, run_pipeline_stage) opens,
// reports and ends with in the same way: its event log and progress display, the
// validation batches, the fields every step event starts with, eval reporting, the
// collective stop check of the fixed-world paths, and the train_done / train_stopped
// event and summary line. Kept in one place so the paths write the same events.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/config/job_config.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/model/activation_memory.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/run_training.hpp"
#include "runtime/train/step_report.hpp"
#include "runtime/util/json_line.hpp"

namespace dseek::train {

using RunClock = std::chrono::steady_clock;

// The caller's shared event log (options.events), else one opened into `own`.
metrics::EventLog& open_run_events(const config::JobConfig& config, const RunOptions& options,
                                   std::unique_ptr<metrics::EventLog>& own);

metrics::Progress open_run_progress(const config::JobConfig& config, const RunOptions& options);

// The validation batches, or nothing when the data set has no validation split big
// enough for one sample.
std::unique_ptr<DatasetBatches> open_validation(const config::JobConfig& config,
                                                metrics::Progress& progress);

// The training split of data.dir, its vocabulary checked against model.vocab (naming
// both), and with data.prefetch > 0 made ready that many steps ahead by the caller's
// prefetcher (RunOptions::batch_prefetcher: the node's data_prefetcher actor) or else a
// thread of the run's own. `reads_batches` false (a pipeline stage between the first
// and the last): no prefetcher, the stage reads no batch.
struct TrainingBatches {
  // Shared: a prefetcher outside this run may still hold it when the run ends.
  std::shared_ptr<DatasetBatches> dataset;
  std::unique_ptr<BatchSource> prefetched;
  BatchSource& source() { return prefetched ? *prefetched : *dataset; }
};
TrainingBatches open_training_batches(const config::JobConfig& config, const RunOptions& options,
                                      bool reads_batches = true);

// The fields every "step" event starts with; a path appends its own after them.
// Events number steps from 1: `step_number` is the count of completed steps.
util::JsonLine step_event_fields(int64_t step_number, const StepReport& report);
// A step of a job with a data group: its traffic (comm_bytes_sent/received, grad_bytes,
// grad_encoded_bytes) on the step event; and, after it, when the loss scaler skipped
// the update, a step_skipped event and a console line.
void add_traffic_fields(util::JsonLine& step_event, const StepReport& report);
void report_if_skipped(metrics::EventLog& events, metrics::Progress& progress,
                       const StepReport& report);

// Seconds left, from the pace of the `steps_run` steps this invocation ran since `start`.
double eta_seconds(RunClock::time_point start, int64_t steps_run, int64_t steps_left);

// The "model_memory" event at the start of a run (model.recompute and the bytes of the
// activation buffers this rank's model allocated) and its progress line; `who` is empty
// or ends with a space ("stage 1 ").
void report_model_memory(metrics::EventLog& events, metrics::Progress& progress,
                         std::string_view who, const config::ModelConfig& model,
                         const model::ActivationMemory& memory);

// Writes the "eval" event after the 0-based `step` and shows it.
void report_eval(metrics::EventLog& events, metrics::Progress& progress, int64_t step,
                 double val_loss);

// Sets summary.elapsed_s since `start` and tokens_per_s over the `steps_run` steps of
// this invocation.
void time_run(RunSummary& summary, const config::JobConfig& config, int64_t steps_run,
              RunClock::time_point start);

// train_done, or train_stopped with its reason when the run stopped early.
void emit_run_end(metrics::EventLog& events, const RunSummary& summary,
                  const std::string& stop_reason);

// The summary line a run ends with: "<who>done after N steps in ..."; `who` is empty or
// ends with a space ("stage 1 ").
std::string run_end_line(std::string_view who, const RunSummary& summary, bool with_val_loss);

}  // namespace dseek::train
