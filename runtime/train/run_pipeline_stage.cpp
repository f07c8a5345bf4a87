// Implementation of run_pipeline_stage.hpp.
#include "runtime/train/run_pipeline_stage.hpp"

#include <unistd.h>

#include <array>
#include <chrono>
#include <memory>

#include "runtime/data/token_dataset.hpp"
#include "runtime/metrics/chrome_trace.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/pipeline_stage_trainer.hpp"
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

std::string format_costs(const std::vector<double>& costs) {
  std::string text;
  for (double cost : costs) {
    if (!text.empty()) text += ' ';
    char value[32];
    std::snprintf(value, sizeof value, "%.3f", cost);
    text += value;
  }
  return text;
}

// The plan as printed and logged: schedule, split, and for a balanced split the costs
// it was chosen on.
util::JsonLine plan_event(const PipelinePlan& plan, const config::JobConfig& config) {
  util::JsonLine event;
  event.add("schedule", std::string(schedule_name(plan.shape.kind)))
      .add("stages", plan.shape.stages).add("micro_batches", plan.shape.micro_batches)
      .add("micro_batch_size", plan.micro_batch_size)
      .add("virtual_stages", plan.shape.chunks())
      .add("partition", config.parallel.partition)
      .add("ranges", describe_partition(plan.ranges))
      .add("bubble_theory", theoretical_bubble(plan.shape));
  if (!plan.stage_costs.empty()) {
    event.add("embedding_ms", plan.costs.embedding).add("head_ms", plan.costs.head)
        .add("block_ms", format_costs(plan.costs.blocks)).add("stage_cost_ms", format_costs(plan.stage_costs));
  }
  return event;
}
}  // namespace

PipelineRunSummary run_pipeline_stage(const config::JobConfig& config, const RunOptions& options,
                                      PipelineLinks& links) {
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

  // The profile of a balanced split runs on stage 0 with the threads it will train with.
  auto profile_backend = backend::make_cpu_backend(static_cast<int>(t.threads));
  PipelinePlan plan = plan_pipeline(config, links, *profile_backend);
  profile_backend.reset();
  const util::JsonLine plan_fields = plan_event(plan, config);
  events.emit("pipeline_plan", plan_fields);
  progress.line("dseek pipeline: " + std::string(schedule_name(plan.shape.kind)) + ", " +
                std::to_string(plan.shape.stages) + " stages x " +
                std::to_string(plan.shape.chunks()) + " chunks, " +
                std::to_string(plan.shape.micro_batches) + " micro-batches of " +
                std::to_string(plan.micro_batch_size) + "; " + config.parallel.partition +
                " split " + describe_partition(plan.ranges) +
                (plan.stage_costs.empty() ? "" : " (stage cost ms " + format_costs(plan.stage_costs) + ")"));

  PipelineStageTrainer trainer(config, train_batches, links, plan);
  const double theory = theoretical_bubble(plan.shape);
  util::JsonLine started;
  started.add("config", config.source).add("pid", static_cast<int64_t>(::getpid()))
      .add("stage", trainer.stage()).add("stages", plan.shape.stages)
      .add("stage_params", static_cast<uint64_t>(trainer.owned_params()))
      .add("dim", config.model.dim).add("layers", config.model.layers)
      .add("batch_size", t.batch_size).add("steps", t.steps).add("threads", t.threads)
      .add("data", config.data.dir);
  events.emit("run_started", started);

  PipelineRunSummary result;
  RunSummary& summary = result.run;
  std::string stop_reason;
  const auto start = Clock::now();
  auto run_eval = [&](int64_t step) {
    if (!val_batches) return;
    summary.val_loss = trainer.evaluate(*val_batches, t.eval_batches);
    events.emit("eval", util::JsonLine().add("step", step + 1).add("val_loss", summary.val_loss));
    progress.eval(step, summary.val_loss);
  };
  for (int64_t step = 0; step < t.steps; ++step) {
    // A signal seen by any stage stops them all at the same step (the steps are collective).
    std::array<double, 1> stop{options.stop != nullptr && options.stop->load() ? 1.0 : 0.0};
    links.sum_over_stages(stop);
    if (stop[0] > 0) {
      stop_reason = "signal";
      break;
    }
    if (t.stop_after_steps > 0 && step >= t.stop_after_steps) {
      stop_reason = "stop_after_steps";
      break;
    }
    if (options.before_step) options.before_step(step);
    const PipelineStepReport r = trainer.train_step(step);
    summary.steps_done = step + 1;
    summary.final_loss = r.step.loss;
    util::JsonLine step_event;
    step_event.add("step", step + 1).add("loss", r.step.loss).add("lr", r.step.lr)
        .add("grad_norm", r.step.grad_norm).add("tokens_per_s", r.step.tokens_per_s)
        .add("step_ms", r.step.step_ms).add("compute_ms", r.step.compute_ms)
        .add("comm_ms", r.step.comm_ms).add("data_wait_ms", r.step.data_wait_ms)
        .add("stage", trainer.stage()).add("bubble", r.bubble).add("bubble_theory", theory)
        .add("busy_ms", r.busy_ms).add("pipeline_ms", r.pipeline_ms);
    events.emit("step", step_event);
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    const double eta = elapsed / static_cast<double>(step + 1) * static_cast<double>(t.steps - step - 1);
    progress.step(step, r.step.loss, r.step.lr, r.step.tokens_per_s, eta);
    const bool last = step + 1 == t.steps;
    if (!last && t.eval_every > 0 && (step + 1) % t.eval_every == 0) run_eval(step);
  }
  summary.stopped_early = !stop_reason.empty();
  if (summary.steps_done > 0) run_eval(summary.steps_done - 1);
  summary.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  summary.tokens_per_s = static_cast<double>(summary.steps_done * t.batch_size * config.model.context) /
                         std::max(summary.elapsed_s, 1e-9);
  result.final_params = trainer.gather_params();
  summary.params_sha256 =
      util::sha256_hex(result.final_params.data(), result.final_params.size() * sizeof(float));
  const auto spans = trainer.gather_trace_spans();
  if (trainer.stage() == 0) {
    std::vector<std::string> names;
    for (int64_t s = 0; s < plan.shape.stages; ++s) names.push_back("stage " + std::to_string(s));
    const auto trace_path = options.run_dir / "trace.json";
    metrics::write_chrome_trace(trace_path, spans, names);
    events.emit("trace_written", util::JsonLine().add("path", trace_path.string())
                                     .add("spans", static_cast<uint64_t>(spans.size())));
  }
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
                "stage %lld %s after %lld steps in %s: loss %.4f, %.0f tokens/s, params_sha256 %.16s...",
                static_cast<long long>(trainer.stage()), summary.stopped_early ? "stopped" : "done",
                static_cast<long long>(summary.steps_done),
                metrics::format_duration(summary.elapsed_s).c_str(), summary.final_loss,
                summary.tokens_per_s, summary.params_sha256.c_str());
  progress.line(line);
  return result;
}

}  // namespace dseek::train
