// Implementation of fixed_world_steps.hpp.
#include "runtime/train/pipeline/fixed_world_steps.hpp"

#include "runtime/train/run_events.hpp"

namespace dseek::train {

RunSummary run_fixed_world_steps(const config::JobConfig& config, const RunOptions& options,
                                 metrics::EventLog& events, metrics::Progress& progress,
                                 Checkpointing& checkpoints, int64_t first_step,
                                 const FixedWorldSteps& steps, std::string& stop_reason) {
  const auto& t = config.train;
  RunSummary summary;
  summary.steps_done = first_step;
  stop_reason.clear();
  const auto start = RunClock::now();
  auto run_eval = [&](int64_t step) {
    if (!steps.evaluate) return;
    summary.val_loss = steps.evaluate();
    report_eval(events, progress, step, summary.val_loss);
  };
  for (int64_t step = first_step; step < t.steps; ++step) {
    // train.stop_after_steps counts the steps of this invocation, as on one node.
    stop_reason = collective_stop_reason(t, options, step - first_step, steps.sum_votes);
    if (!stop_reason.empty()) break;
    if (options.before_step) options.before_step(step);
    // The step's fault hook (a `slow` node sleeps in it): these paths hold no host
    // gradient buffer to hand it, so it runs as the step starts, with none.
    if (options.after_reduction) options.after_reduction(step, nullptr, 0);
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
