// Implementation of run_tensor_parallel.hpp.
#include "runtime/train/run_tensor_parallel.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>

#include "runtime/data/token_dataset.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/parallel_groups.hpp"
#include "runtime/train/tensor_parallel_trainer.hpp"
#include "runtime/util/sha256.hpp"

namespace dseek::train {

namespace {
using Clock = std::chrono::steady_clock;

std::unique_ptr<DatasetBatches> open_validation(const config::JobConfig& config,
                                                metrics::Progress& progress) {
  try {
    return std::make_unique<DatasetBatches>(config.data.dir, data::Split::validation,
                                            static_cast<uint64_t>(config.train.seed),
                                            config.model.context);
  } catch (const data::DataError& error) {
    progress.line(std::string("no validation: ") + error.what());
    return nullptr;
  }
}

// The layout as printed (one line per rank) and logged.
void report_layout(const TensorParallelTrainer& trainer, metrics::EventLog& events,
                   metrics::Progress& progress) {
  const ParallelGroups groups(1, 1, trainer.ranks());
  const std::string text = groups.describe();
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) progress.line(line);
  const RankCoordinates me = groups.coordinates(trainer.rank());
  events.emit("parallel_layout",
              util::JsonLine().add("data", 1).add("pipeline", 1).add("tensor", trainer.ranks())
                  .add("world", groups.world()).add("rank", trainer.rank())
                  .add("tensor_rank", me.tensor).add("layout", text));
}
}  // namespace

RunSummary run_tensor_parallel(const config::JobConfig& config, const RunOptions& options,
                               model::TensorGroup& group) {
  const auto& t = config.train;
  std::unique_ptr<metrics::EventLog> own_events;
  if (options.events == nullptr)
    own_events = std::make_unique<metrics::EventLog>(options.run_dir, config.cluster.node_id);
  metrics::EventLog& events = options.events != nullptr ? *options.events : *own_events;
  metrics::Progress progress(metrics::resolve_progress_mode(config.metrics.progress, options.console),
                             t.steps, config.metrics.log_every, options.console);
  DatasetBatches train_batches(config.data.dir, data::Split::train, static_cast<uint64_t>(t.seed),
                               config.model.context);
  auto val_batches = open_validation(config, progress);

  TensorParallelTrainer trainer(config, train_batches, group);
  report_layout(trainer, events, progress);
  util::JsonLine started;
  started.add("config", config.source).add("pid", static_cast<int64_t>(::getpid()))
      .add("tensor_rank", trainer.rank()).add("tensor", trainer.ranks())
      .add("shard_params", static_cast<uint64_t>(trainer.shard_params()))
      .add("dim", config.model.dim).add("layers", config.model.layers)
      .add("batch_size", t.batch_size).add("steps", t.steps).add("threads", t.threads)
      .add("data", config.data.dir);
  events.emit("run_started", started);

  RunSummary summary;
  std::string stop_reason;
  const auto start = Clock::now();
  auto run_eval = [&](int64_t step) {
    if (!val_batches) return;
    summary.val_loss = trainer.evaluate(*val_batches, t.eval_batches);
    events.emit("eval", util::JsonLine().add("step", step + 1).add("val_loss", summary.val_loss));
    progress.eval(step, summary.val_loss);
  };
  for (int64_t step = 0; step < t.steps; ++step) {
    // A signal seen by any rank stops them all at the same step (the steps are collective).
    const bool stop_here = options.stop != nullptr && options.stop->load();
    if (trainer.sum_over_group(stop_here ? 1.0 : 0.0) > 0) {
      stop_reason = "signal";
      break;
    }
    if (t.stop_after_steps > 0 && step >= t.stop_after_steps) {
      stop_reason = "stop_after_steps";
      break;
    }
    if (options.before_step) options.before_step(step);
    const StepReport r = trainer.train_step(step);
    summary.steps_done = step + 1;
    summary.final_loss = r.loss;
    events.emit("step", util::JsonLine().add("step", step + 1).add("loss", r.loss).add("lr", r.lr)
                            .add("grad_norm", r.grad_norm).add("tokens_per_s", r.tokens_per_s)
                            .add("step_ms", r.step_ms).add("compute_ms", r.compute_ms)
                            .add("comm_ms", r.comm_ms).add("data_wait_ms", r.data_wait_ms)
                            .add("tensor_rank", trainer.rank()));
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    const double eta = elapsed / static_cast<double>(step + 1) * static_cast<double>(t.steps - step - 1);
    progress.step(step, r.loss, r.lr, r.tokens_per_s, eta);
    const bool last = step + 1 == t.steps;
    if (!last && t.eval_every > 0 && (step + 1) % t.eval_every == 0) run_eval(step);
  }
  summary.stopped_early = !stop_reason.empty();
  if (summary.steps_done > 0) run_eval(summary.steps_done - 1);
  summary.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  summary.tokens_per_s = static_cast<double>(summary.steps_done * t.batch_size * config.model.context) /
                         std::max(summary.elapsed_s, 1e-9);
  const std::vector<float> params = trainer.gather_params();
  summary.params_sha256 = util::sha256_hex(params.data(), params.size() * sizeof(float));
  util::JsonLine done;
  done.add("step", summary.steps_done).add("loss", summary.final_loss)
      .add("params_sha256", summary.params_sha256).add("elapsed_s", summary.elapsed_s)
      .add("tokens_per_s", summary.tokens_per_s);
  if (summary.val_loss >= 0) done.add("val_loss", summary.val_loss);
  if (summary.stopped_early) {
    done.add("reason", stop_reason);
    events.emit("train_stopped", done);
  } else {
    events.emit("train_done", done);
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "tensor rank %d %s after %lld steps in %s: loss %.4f, %.0f tokens/s, params_sha256 %.16s...",
                trainer.rank(), summary.stopped_early ? "stopped" : "done",
                static_cast<long long>(summary.steps_done),
                metrics::format_duration(summary.elapsed_s).c_str(), summary.final_loss,
                summary.tokens_per_s, summary.params_sha256.c_str());
  progress.line(line);
  return summary;
}

}  // namespace dseek::train
