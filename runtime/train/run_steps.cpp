// Implementation of run_steps.hpp.
#include "runtime/train/run_steps.hpp"

#include <array>
#include <chrono>
#include <thread>

#include "runtime/train/run_events.hpp"
#include "runtime/train/step_control.hpp"

namespace dseek::train {

namespace {

using namespace std::chrono_literals;

// How often the ranks of a paused job vote on going on.
constexpr auto kPausePoll = 50ms;

// Whether any rank that steps together votes yes (collective).
bool anyone(const StepFunctions& steps, bool vote) {
  std::array<double, 1> votes{vote ? 1.0 : 0.0};
  if (steps.sum_votes) steps.sum_votes(votes);
  return votes[0] > 0;
}

bool signalled(const RunOptions& options) { return options.stop != nullptr && options.stop->load(); }

// What ends an evaluation early: a stop request (RunOptions::stop_request, else stop).
const std::atomic<bool>* stop_request_of(const RunOptions& options) {
  return options.stop_request != nullptr ? options.stop_request : options.stop;
}

// What the ranks agreed on at a step boundary: any rank's vote counts for all.
struct BoundaryVotes {
  bool stop = false, pause = false, checkpoint = false;
};

// One collective over every rank that steps together, after `done` steps. A checkpoint
// request is taken by the vote (none before the first step); one whose vote did not
// complete (the communicator failed) is put back for the next boundary.
BoundaryVotes vote_at_boundary(const RunOptions& options, const StepFunctions& steps,
                               int64_t done) {
  StepControl* control = options.control;
  const bool pause = control != nullptr && control->pause.load();
  const bool checkpoint = control != nullptr && done > 0 && control->checkpoint.exchange(false);
  std::array<double, 3> votes{signalled(options) ? 1.0 : 0.0, pause ? 1.0 : 0.0,
                              checkpoint ? 1.0 : 0.0};
  try {
    if (steps.sum_votes) steps.sum_votes(votes);
  } catch (...) {
    if (checkpoint) control->checkpoint = true;
    throw;
  }
  return {votes[0] > 0, votes[1] > 0, votes[2] > 0};
}

// Why the run stops before `step`, or "" to go on. Every rank must stop at the same step
// (the steps are collective), so a signal or the time limit seen by any rank stops all
// of them; stop_after_steps is the same everywhere already.
std::string stop_reason_before(const config::TrainConfig& t, const StepFunctions& steps,
                               const BoundaryVotes& votes, int64_t steps_run,
                               RunClock::duration trained) {
  if (votes.stop) return "signal";
  if (t.stop_after_steps > 0 && steps_run >= t.stop_after_steps) return "stop_after_steps";
  if (t.stop_after_minutes > 0 &&
      anyone(steps, std::chrono::duration<double>(trained).count() >= t.stop_after_minutes * 60))
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
  // A checkpoint asked for at a step boundary: on every rank; the writer's outcome on all.
  auto checkpoint_now = [&](int64_t done) {
    const bool committed = checkpoints.now(done);
    events.emit("checkpoint_now", util::JsonLine().add("step", done).add("committed", committed));
    progress.line("checkpoint of step " + std::to_string(done) + " asked for: " +
                  (committed ? "committed" : "not written (see the checkpoint events)"));
  };
  RunClock::duration paused_total{};
  // Holds the run at `done` steps until no rank asks for the pause; true: a stop came
  // while paused.
  auto hold = [&](int64_t done) {
    const auto paused_at = RunClock::now();
    events.emit("train_paused", util::JsonLine().add("step", done));
    progress.line("paused after step " + std::to_string(done) + " (a pause request)");
    if (options.pause_changed) options.pause_changed(true, done);
    BoundaryVotes votes;
    do {
      std::this_thread::sleep_for(kPausePoll);
      votes = vote_at_boundary(options, steps, done);
      if (votes.checkpoint) checkpoint_now(done);
    } while (votes.pause && !votes.stop);
    const auto paused = RunClock::now() - paused_at;
    paused_total += paused;
    if (options.pause_changed) options.pause_changed(false, done);
    if (votes.stop) return true;
    events.emit("train_resumed",
                util::JsonLine().add("step", done).add(
                    "paused_ms", std::chrono::duration<double, std::milli>(paused).count()));
    progress.line("resumed at step " + std::to_string(done));
    return false;
  };
  for (int64_t step = first_step; step < t.steps; ++step) {
    const BoundaryVotes votes = vote_at_boundary(options, steps, step);
    if (votes.checkpoint) checkpoint_now(step);
    stop_reason = stop_reason_before(t, steps, votes, step - first_step,
                                     RunClock::now() - start - paused_total);
    if (stop_reason.empty() && votes.pause && hold(step)) stop_reason = "signal";
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
