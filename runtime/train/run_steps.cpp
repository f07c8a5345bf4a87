// Implementation of run_steps.hpp.
#include "runtime/train/run_steps.hpp"

#include <chrono>

#include "runtime/train/run_events.hpp"

namespace dseek::train {

namespace {

// Whether any rank that steps together votes yes (collective).
bool anyone(const StepFunctions& steps, bool vote) {
  const double mine = vote ? 1.0 : 0.0;
  return (steps.sum_votes ? steps.sum_votes(mine) : mine) > 0;
}

bool signalled(const RunOptions& options) { return options.stop != nullptr && options.stop->load(); }

// What ends an evaluation early: a stop request (RunOptions::stop_request, else stop).
const std::atomic<bool>* stop_request_of(const RunOptions& options) {
  return options.stop_request != nullptr ? options.stop_request : options.stop;
}

// Why the run stops before `step`, or "" to go on. Every rank must stop at the same step
// (the steps are collective), so a signal or the time limit seen by any rank stops all
// of them; stop_after_steps is the same everywhere already.
std::string stop_reason_before(const config::TrainConfig& t, const RunOptions& options,
                               const StepFunctions& steps, int64_t steps_run,
                               RunClock::time_point start) {
  if (anyone(steps, signalled(options))) return "signal";
  if (t.stop_after_steps > 0 && steps_run >= t.stop_after_steps) return "stop_after_steps";
  if (t.stop_after_minutes > 0 &&
      anyone(steps, std::chrono::duration<double>(RunClock::now() - start).count() >=
             t.stop_after_minutes * 60))
    return "stop_after_minutes";
  return "";
}

}  // namespace

RunSummary run_steps(const config::JobConfig& config, const RunOptions& options,
                     metrics::EventLog& events, metrics::Progress& progress,
                     Checkpointing& checkpoints, int64_t first_step, const StepFunctions& steps,
                     std::string& stop_reason) {
  const auto& t = config.train;
  RunSummary summary;
  summary.steps_done = first_step;
  stop_reason.clear();
  const auto start = RunClock::now();
  auto run_eval = [&](int64_t step) {
    if (!steps.evaluate) return;
    // A stop request ends a long evaluation between batches, on every rank at the same
    // batch; the run then stops as at a step boundary.
    int64_t batches = 0;
    const double loss = steps.evaluate(stop_request_of(options), batches);
    if (batches < t.eval_batches) {
      summary.val_loss = -1.0;  // a mean over part of the batches is no validation loss
      events.emit("eval_interrupted", util::JsonLine().add("step", step + 1)
                                          .add("batches_done", batches)
                                          .add("eval_batches", t.eval_batches));
      progress.line("evaluation interrupted by a stop request after " + std::to_string(batches) +
                    " of " + std::to_string(t.eval_batches) + " batches (no val_loss)");
      return;
    }
    summary.val_loss = loss;
    report_eval(events, progress, step, summary.val_loss);
  };
  for (int64_t step = first_step; step < t.steps; ++step) {
    stop_reason = stop_reason_before(t, options, steps, step - first_step, start);
    if (!stop_reason.empty()) break;
    if (options.before_step) options.before_step(step);
    const StepReport r = steps.train_step(step);
    summary.steps_done = step + 1;
    summary.final_loss = r.loss;
    progress.step(step, r.loss, r.lr, r.tokens_per_s,
                  eta_seconds(start, step + 1 - first_step, t.steps - step - 1));
    const bool last = step + 1 == t.steps;
    if (!last && t.eval_every > 0 && (step + 1) % t.eval_every == 0) run_eval(step);
    checkpoints.after_step(step + 1);
  }
  summary.stopped_early = !stop_reason.empty();
  if (summary.steps_done > 0) run_eval(summary.steps_done - 1);
  checkpoints.final(summary.steps_done);
  time_run(summary, config, summary.steps_done - first_step, start);
  return summary;
}

}  // namespace dseek::train
