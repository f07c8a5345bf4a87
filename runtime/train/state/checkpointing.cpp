// Implementation of checkpointing.hpp.
#include "runtime/train/state/checkpointing.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "runtime/checkpoint/load.hpp"
#include "runtime/checkpoint/store.hpp"
#include "runtime/checkpoint/writer_thread.hpp"
#include "runtime/config/load.hpp"
#include "runtime/train/state/precision_resume.hpp"
#include "runtime/train/state/sharded_precision_state.hpp"

namespace dseek::train {

namespace {
std::string describe(uint32_t data, uint32_t pipeline, uint32_t tensor, uint32_t zero) {
  std::string text = "data " + std::to_string(data);
  text += " x pipeline " + std::to_string(pipeline);
  text += " x tensor " + std::to_string(tensor);
  if (zero > 0) text += ", ZeRO " + std::to_string(zero);
  return text;
}
}  // namespace

bool checkpoints_enabled(const config::JobConfig& config) {
  return config.checkpoint.every_steps > 0 || config.train.stop_after_steps > 0 ||
         config.train.stop_after_minutes > 0 || !config.checkpoint.resume.empty();
}

Checkpointing::Checkpointing(const config::JobConfig& config,
                             const std::filesystem::path& run_dir, PipelineStage& stage,
                             metrics::EventLog& events, metrics::Progress& progress,
                             const checkpoint::CheckpointSinkFactory& make_sink)
    : config_(config), stage_(stage), events_(events), progress_(progress),
      root_(checkpoint::checkpoint_root(config, run_dir)) {
  const PipelineStageInfo& info = stage.info();
  // Replica 0 holds the whole model; under ZeRO the other replicas hold pieces of the
  // moments, under fp8 amax histories of their own.
  takes_part_ = checkpoints_enabled(config) &&
                (info.replica == 0 || info.shards_optimizer_state || info.fp8_state_per_replica);
  if (!takes_part_ || info.replica != 0 || !info.gathers_state) return;  // not the writer
  const checkpoint::WriteOptions where{root_, config.checkpoint.keep_last, false};
  if (make_sink) writer_ = make_sink(where);
  // The default writes on a thread, or in submit() itself when checkpoint.async is off.
  if (!writer_) writer_ = std::make_unique<checkpoint::CheckpointWriter>(where, config.checkpoint.async);
  auto& snapshot = writer_->buffer();
  snapshot.seed = config.train.seed;
  snapshot.config_toml = config::to_toml(config);
  snapshot.tensors = stage.whole_layout().tensors();
  const size_t n = stage.whole_layout().total();
  snapshot.params.resize(n);
  snapshot.adam_m.resize(n);
  snapshot.adam_v.resize(n);
  const LayoutSizes now = sizes();
  snapshot.world_size = now.world();
  snapshot.data_parallel = now.data;
  snapshot.pipeline_parallel = now.pipeline;
  snapshot.tensor_parallel = now.tensor;
  snapshot.zero_stage = now.zero;
}

Checkpointing::~Checkpointing() = default;

int64_t Checkpointing::resume() {
  const std::string& resume = config_.checkpoint.resume;
  if (resume.empty()) return 0;
  auto loaded = checkpoint::load_for_resume(
      resume, root_, stage_.whole_layout(),
      [&](const std::string& error, const std::filesystem::path& next) {
        if (writer_)
          events_.emit("checkpoint_fallback",
                       util::JsonLine().add("error", error).add("fallback", next.string()));
        progress_.line("checkpoint: " + error + "; falling back to " + next.string());
      });
  // Every rank must continue from the same step: the steps are collective. The ranks
  // agree when the variance of their steps is zero (sums of small integers are exact).
  const double step = loaded ? static_cast<double>(loaded->manifest.step) : 0.0;
  const double ranks = stage_.sum_over_world(1.0);
  const double sum = stage_.sum_over_world(step);
  const double sum_squares = stage_.sum_over_world(step * step);
  if (ranks * sum_squares != sum * sum)
    throw std::runtime_error("checkpoint.resume = \"" + resume + "\": the ranks of this job "
                             "resolved it to different checkpoints under " + root_.string() +
                             " (this one: step " + std::to_string(static_cast<int64_t>(step)) +
                             "); every rank must see the same checkpoint directory");
  if (!loaded) {
    if (writer_) events_.emit("resume_none", util::JsonLine().add("dir", root_.string()));
    progress_.line("checkpoint: no committed checkpoint under " + root_.string() +
                   ", starting from step 0");
    return 0;
  }
  const auto& m = loaded->manifest;
  if (m.seed != config_.train.seed) {
    progress_.line("checkpoint: warning: " + loaded->dir.string() + " was written with seed " +
                   std::to_string(m.seed) + ", this run uses " +
                   std::to_string(config_.train.seed) + " (the sample order changes)");
  }
  stage_.restore_state(loaded->params.data(), loaded->adam_m.data(), loaded->adam_v.data(),
                       m.optimizer_steps);
  // Every rank decides alike from the manifest: restored (its own copy of the amax
  // histories), merged (another data or tensor size), ignored, fresh or none.
  PrecisionResume precision = precision_resume(m.precision, config_.train.precision);
  const LayoutSizes now = sizes();
  if (precision.restore) {
    LayoutSizes written_by;
    written_by.data = m.data_parallel;
    written_by.pipeline = m.pipeline_parallel;
    written_by.tensor = m.tensor_parallel;
    if (!stage_.restore_precision_state(m.precision, written_by)) {
      precision.outcome = "merged";
      precision.note = fp8_merge_note(written_by, now, m.precision.fp8.replicas);
    }
  }
  if (!precision.note.empty()) progress_.line(precision.note);
  events_.emit("resumed",
               util::JsonLine().add("step", m.step).add("path", loaded->dir.string())
                   .add("written_world_size", static_cast<int64_t>(m.world_size))
                   .add("written_zero", static_cast<int64_t>(m.zero_stage))
                   .add("written_data", static_cast<int64_t>(m.data_parallel))
                   .add("written_pipeline", static_cast<int64_t>(m.pipeline_parallel))
                   .add("written_tensor", static_cast<int64_t>(m.tensor_parallel))
                   .add("world_size", static_cast<int64_t>(now.world()))
                   .add("zero", static_cast<int64_t>(now.zero))
                   .add("data", static_cast<int64_t>(now.data))
                   .add("pipeline", static_cast<int64_t>(now.pipeline))
                   .add("tensor", static_cast<int64_t>(now.tensor))
                   .add("precision_state", precision.outcome));
  progress_.line("checkpoint: resumed from " + loaded->dir.string() + " at step " +
                 std::to_string(m.step) + " (written by " +
                 describe(m.data_parallel, m.pipeline_parallel, m.tensor_parallel, m.zero_stage) +
                 "; this job: " + describe(now.data, now.pipeline, now.tensor, now.zero) + ")");
  last_committed_ = m.step;  // no need to write it again
  return m.next_step;
}

LayoutSizes Checkpointing::sizes() const {
  const PipelineStageInfo& info = stage_.info();
  LayoutSizes sizes;
  sizes.data = static_cast<uint32_t>(info.replicas);
  sizes.pipeline = static_cast<uint32_t>(info.plan.shape.stages);
  sizes.tensor = static_cast<uint32_t>(info.tensor_ranks);
  sizes.zero = static_cast<uint32_t>(info.zero);
  return sizes;
}

void Checkpointing::submit(int64_t done) {
  // The loss scale and fp8 state follow the weights, from every rank that takes part.
  if (!writer_) {  // another rank: its part of the collective snapshot, not written
    stage_.gather_state_to_first(nullptr, nullptr, nullptr);
    stage_.gather_precision_state();
    return;
  }
  bool fail = false;
  for (const auto& fault : config_.faults) {
    fail |= fault.kind == config::FaultKind::fail_checkpoint_write && fault.step == done &&
            (fault.node < 0 || fault.node == config_.cluster.node_id);
  }
  const auto start = std::chrono::steady_clock::now();
  auto& snapshot = writer_->buffer();
  stage_.gather_state_to_first(snapshot.params.data(), snapshot.adam_m.data(), snapshot.adam_v.data());
  snapshot.precision = stage_.gather_precision_state();
  snapshot.optimizer_steps = stage_.optimizer_steps();
  snapshot.step = done;
  snapshot_ms_[done] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  writer_->submit(fail);
  // checkpoint.async = false: the step waits for the write, whoever writes.
  if (!config_.checkpoint.async) writer_->wait();
}

void Checkpointing::after_step(int64_t done) {
  if (!takes_part_) return;
  report_finished();
  const int64_t every = config_.checkpoint.every_steps;
  if (every <= 0 || done % every != 0) return;
  if (stage_.first_stage_decides(writer_ && writer_->busy())) {
    if (writer_) {
      events_.emit("checkpoint_skipped",
                   util::JsonLine().add("step", done).add("reason", "previous write in progress")
                       .add("in_progress_step", writer_->in_flight_step()));
    }
    return;
  }
  submit(done);
  report_finished();  // a synchronous write has finished already
}

void Checkpointing::final(int64_t done) {
  if (takes_part_) write_now(done);
}

bool Checkpointing::write_now(int64_t done) {
  if (writer_) writer_->wait();
  report_finished();
  if (stage_.first_stage_decides(writer_ && done > 0 && last_committed_ != done)) {
    submit(done);
    if (writer_) writer_->wait();
    report_finished();
  }
  return writer_ && last_committed_ == done;
}

bool Checkpointing::now(int64_t done) {
  const bool committed = takes_part_ && write_now(done);  // the writer's outcome
  return stage_.sum_over_world(committed ? 1.0 : 0.0) > 0;
}

void Checkpointing::report_finished() {
  if (!writer_) return;
  for (auto& outcome : writer_->take_outcomes()) {
    const double snapshot_ms = snapshot_ms_[outcome.step];
    snapshot_ms_.erase(outcome.step);
    if (outcome.ok) {
      last_committed_ = std::max(last_committed_, outcome.step);
      events_.emit("checkpoint_committed",
                   util::JsonLine().add("step", outcome.step).add("bytes", outcome.result.bytes)
                       .add("snapshot_ms", snapshot_ms).add("write_ms", outcome.result.write_ms)
                       .add("write_cpu_ms", outcome.result.cpu_ms)
                       .add("path", outcome.result.path.string()).add("writer", writer_->kind()));
      progress_.line("checkpoint: step " + std::to_string(outcome.step) + " committed to " +
                     outcome.result.path.string());
    } else {
      events_.emit("checkpoint_failed",
                   util::JsonLine().add("step", outcome.step).add("error", outcome.error));
      progress_.line("checkpoint of step " + std::to_string(outcome.step) +
                     " failed, training goes on: " + outcome.error);
    }
  }
}

}  // namespace dseek::train
