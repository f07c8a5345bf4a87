// Implementation of run_training.hpp.
#include "runtime/train/run_training.hpp"

#include <unistd.h>

#include <array>
#include <memory>

#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/train/state/checkpointing.hpp"
#include "runtime/train/state/trainer_checkpoint_state.hpp"
#include "runtime/train/gradient_reducer.hpp"
#include "runtime/train/run_events.hpp"
#include "runtime/train/run_steps.hpp"
#include "runtime/train/trainer.hpp"

namespace dseek::train {

// Events number steps from 1: "step": 30 is the 30th completed step, and train_done's
// step is the number of steps done.
RunSummary run_training(const config::JobConfig& config, const RunOptions& options) {
  const auto& t = config.train;
  std::unique_ptr<metrics::EventLog> own_events;
  metrics::EventLog& events = open_run_events(config, options, own_events);
  metrics::Progress progress = open_run_progress(config, options);
  TrainingBatches train_batches = open_training_batches(config, options);
  auto val_batches = open_validation(config, progress);
  Trainer trainer(config, train_batches.source(), options.reducer, options.optimizer_shards,
                  options.backend);
  trainer.set_after_reduction(options.after_reduction);
  // Every replica reports a disagreement; the one in the minority then throws
  // ReplicaMismatch out of the step and leaves the job.
  trainer.set_on_disagreement([&events, &trainer, &options](int64_t step,
                                                            const std::string& checked,
                                                            const std::vector<int>& ranks) {
    ReplicaDisagreement disagreement{step, checked, ranks, false};
    for (int rank : ranks)
      disagreement.this_replica = disagreement.this_replica || rank == trainer.dp_rank();
    if (options.report_disagreement)
      options.report_disagreement(disagreement);
    else
      events.emit("sdc_detected", sdc_detected_fields(disagreement));
  });

  util::JsonLine started;
  started.add("config", config.source)
      .add("pid", static_cast<int64_t>(::getpid()))
      .add("params", static_cast<uint64_t>(trainer.model().num_params()))
      .add("dim", config.model.dim).add("layers", config.model.layers)
      .add("heads", config.model.heads).add("context", config.model.context)
      .add("vocab", config.model.vocab).add("batch_size", t.batch_size)
      .add("micro_batch_size", trainer.micro_batch()).add("steps", t.steps)
      .add("threads", t.threads).add("data", config.data.dir)
      .add("train_tokens", train_batches.dataset->dataset().num_tokens())
      .add("host_memory", trainer.backend().host_memory()->kind())
      .add("offload_overlap", trainer.overlaps_update());
  if (options.reducer != nullptr) {
    started.add("dp_rank", options.reducer->rank())
        .add("dp_size", options.reducer->world_size())
        .add("zero", config.parallel.zero)
        .add("compression", config::name_of(config.comm.compression));
  }
  events.emit("run_started", started);
  report_model_memory(events, progress, "", config.model, trainer.model().activation_memory());
  progress.line("dseek: " + std::to_string(trainer.model().num_params()) + " parameters, " +
                std::to_string(train_batches.dataset->dataset().num_tokens()) + " training tokens, " +
                std::to_string(t.steps) + " steps of " + std::to_string(t.batch_size) + " x " +
                std::to_string(config.model.context) + " tokens; events in " +
                events.path().string());

  TrainerCheckpointState checkpoint_state(config, trainer);
  Checkpointing checkpoints(config, options.run_dir, checkpoint_state, events, progress,
                            options.checkpoint_sink);
  int64_t first_step = 0;
  if (options.start_from != nullptr && options.start_from->steps_done >= 0) {
    const auto& state = *options.start_from;
    trainer.restore(state.params.data(), state.adam_m.data(), state.adam_v.data(),
                    state.optimizer_steps);
    first_step = state.steps_done;
  } else {
    first_step = checkpoints.resume();
  }

  StepFunctions steps;
  steps.train_step = [&](int64_t step) {
    const StepReport r = trainer.train_step(step);
    util::JsonLine step_event = step_event_fields(r.step + 1, r);
    if (options.reducer != nullptr) add_traffic_fields(step_event, r);
    events.emit("step", step_event);
    report_if_skipped(events, progress, r);
    return r;
  };
  if (val_batches)
    steps.evaluate = [&](const std::function<bool()>& stop) {
      return trainer.evaluate(*val_batches, t.eval_batches, stop);
    };
  if (options.reducer != nullptr)
    steps.sum_votes = [reducer = options.reducer](double vote) {
      std::array<double, 1> votes{vote};
      reducer->sum_over_ranks(votes);
      return votes[0];
    };
  if (options.after_step)
    steps.after_step = [&](int64_t steps_done) { options.after_step(steps_done, trainer); };
  std::string stop_reason;
  RunSummary summary =
      run_steps(config, options, events, progress, checkpoints, first_step, steps, stop_reason);
  summary.params_sha256 = trainer.params_sha256();
  emit_run_end(events, summary, stop_reason);
  progress.line(run_end_line("", summary, true));
  return summary;
}

}  // namespace dseek::train
