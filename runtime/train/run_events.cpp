// Implementation of run_events.hpp.
#include "runtime/train/run_events.hpp"

#include "runtime/train/prefetch_queue.hpp"
#include "runtime/train/prefetching_batches.hpp"

#include <algorithm>
#include <cstdio>

#include "runtime/data/dataset_index.hpp"
#include "runtime/data/vocab_check.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/metrics/node_trace.hpp"
#include "runtime/metrics/step_measures.hpp"

namespace dseek::train {

metrics::EventLog& open_run_events(const config::JobConfig& config, const RunOptions& options,
                                   std::unique_ptr<metrics::EventLog>& own) {
  if (options.events != nullptr) return *options.events;
  own = std::make_unique<metrics::EventLog>(options.run_dir, config.cluster.node_id);
  metrics::attach_step_measures(*own, config);
  metrics::attach_node_trace(*own, options.run_dir, config.cluster.node_id);
  return *own;
}

metrics::Progress open_run_progress(const config::JobConfig& config, const RunOptions& options) {
  return metrics::Progress(metrics::resolve_progress_mode(config.metrics.progress, options.console),
                           config.train.steps, config.metrics.log_every, options.console);
}

std::unique_ptr<DatasetBatches> open_validation(const config::JobConfig& config,
                                                metrics::Progress& progress) {
  try {
    return std::make_unique<DatasetBatches>(config.data.dir, data::Split::validation,
                                            static_cast<uint64_t>(config.train.seed),
                                            config.model.context);
  } catch (const data::DataError& error) {
    // A validation split the index lists but that cannot be read (a shard missing,
    // truncated or corrupt) is lost data, not a run without validation: a permanent data
    // error (exit 3). It was one line and exit 0 with no val_loss (issue 28, finding 4).
    bool listed = false;
    try {
      listed = !data::read_dataset_index(config.data.dir).validation.shards.empty();
    } catch (const data::DataError&) {
      // no readable index: the train split says so
    }
    if (listed)
      throw data::DataError(std::string("the validation split cannot be read: ") + error.what());
    progress.line(std::string("no validation: ") + error.what());
    return nullptr;
  }
}

TrainingBatches open_training_batches(const config::JobConfig& config, const RunOptions& options,
                                      bool reads_batches) {
  TrainingBatches batches;
  batches.dataset = std::make_shared<DatasetBatches>(config.data.dir, data::Split::train,
                                                     static_cast<uint64_t>(config.train.seed),
                                                     config.model.context);
  data::check_model_vocab(batches.dataset->dataset(), config.model.vocab);
  if (config.data.prefetch <= 0 || !reads_batches) return batches;
  if (options.batch_prefetcher) batches.prefetched = options.batch_prefetcher(batches.dataset);
  if (!batches.prefetched)
    batches.prefetched = std::make_unique<PrefetchingBatches>(*batches.dataset, config.data.prefetch);
  return batches;
}

util::JsonLine step_event_fields(int64_t step_number, const StepReport& r) {
  util::JsonLine fields;
  fields.add("step", step_number).add("loss", r.loss).add("lr", r.lr)
      .add("grad_norm", r.grad_norm).add("tokens_per_s", r.tokens_per_s)
      .add("step_ms", r.step_ms).add("compute_ms", r.compute_ms)
      .add("comm_ms", r.comm_ms).add("data_wait_ms", r.data_wait_ms)
      .add("peak_memory_bytes", r.peak_memory_bytes);
  if (r.prefetch_queue_depth >= 0) fields.add("prefetch_queue_depth", r.prefetch_queue_depth);
  if (r.batch_share >= 0) fields.add("batch_share", r.batch_share);
  if (r.offload_overlap) fields.add("offload_wait_ms", r.offload_wait_ms);
  if (!r.precision.empty()) fields.add("precision", r.precision);
  if (r.loss_scale > 0) fields.add("loss_scale", r.loss_scale).add("skipped", r.skipped);
  if (r.sdc_audit_ms > 0) fields.add("sdc_audit_ms", r.sdc_audit_ms);
  if (!r.sdc_cleared_auditors.empty()) fields.add("sdc_cleared_auditors", r.sdc_cleared_auditors);
  return fields;
}

void add_traffic_fields(util::JsonLine& step_event, const StepReport& report) {
  step_event.add("comm_bytes_sent", report.comm_bytes_sent)
      .add("comm_bytes_received", report.comm_bytes_received)
      .add("grad_bytes", report.gradient_bytes)
      .add("grad_encoded_bytes", report.encoded_gradient_bytes);
}

void report_if_skipped(metrics::EventLog& events, metrics::Progress& progress,
                       const StepReport& report) {
  if (!report.skipped) return;
  events.emit("step_skipped", util::JsonLine().add("step", report.step + 1)
                                  .add("loss_scale", report.loss_scale)
                                  .add("reason", "non-finite gradients"));
  progress.line("step " + std::to_string(report.step + 1) +
                " skipped: non-finite gradients at loss scale " + std::to_string(report.loss_scale));
}

double eta_seconds(RunClock::time_point start, int64_t steps_run, int64_t steps_left) {
  const double elapsed = std::chrono::duration<double>(RunClock::now() - start).count();
  return elapsed / static_cast<double>(steps_run) * static_cast<double>(steps_left);
}

void report_model_memory(metrics::EventLog& events, metrics::Progress& progress,
                         std::string_view who, const config::ModelConfig& model,
                         const model::ActivationMemory& memory) {
  events.emit("model_memory",
              util::JsonLine().add("recompute", model.recompute)
                  .add("activation_bytes", static_cast<uint64_t>(memory.total()))
                  .add("kept_bytes", static_cast<uint64_t>(memory.kept))
                  .add("recompute_bytes", static_cast<uint64_t>(memory.recompute))
                  .add("backward_bytes", static_cast<uint64_t>(memory.backward)));
  char mib[32];
  std::snprintf(mib, sizeof mib, "%.1f", static_cast<double>(memory.total()) / (1 << 20));
  progress.line(std::string(who) + "activation memory " + mib + " MiB (model.recompute = " +
                model.recompute + ")");
}

void report_eval(metrics::EventLog& events, metrics::Progress& progress, int64_t step,
                 double val_loss) {
  events.emit("eval", util::JsonLine().add("step", step + 1).add("val_loss", val_loss));
  progress.eval(step, val_loss);
}

void time_run(RunSummary& summary, const config::JobConfig& config, int64_t steps_run,
              RunClock::time_point start) {
  summary.elapsed_s = std::chrono::duration<double>(RunClock::now() - start).count();
  summary.tokens_per_s =
      static_cast<double>(steps_run * config.train.batch_size * config.model.context) /
      std::max(summary.elapsed_s, 1e-9);
}

void emit_run_end(metrics::EventLog& events, const RunSummary& summary,
                  const std::string& stop_reason) {
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
}

std::string run_end_line(std::string_view who, const RunSummary& summary, bool with_val_loss) {
  std::string val_loss;
  if (with_val_loss) {
    val_loss = "val_loss ";
    val_loss += summary.val_loss >= 0 ? std::to_string(summary.val_loss) : std::string("n/a");
    val_loss += ", ";
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "%.*s%s after %lld steps in %s: loss %.4f, %s%.0f tokens/s, params_sha256 %.16s...",
                static_cast<int>(who.size()), who.data(),
                summary.stopped_early ? "stopped" : "done",
                static_cast<long long>(summary.steps_done),
                metrics::format_duration(summary.elapsed_s).c_str(), summary.final_loss,
                val_loss.c_str(), summary.tokens_per_s, summary.params_sha256.c_str());
  return line;
}

}  // namespace dseek::train
