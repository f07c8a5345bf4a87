// Implementation of gathered_checkpointing.hpp.
#include "runtime/train/gathered_checkpointing.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "runtime/checkpoint/load.hpp"
#include "runtime/checkpoint/store.hpp"
#include "runtime/checkpoint/writer_thread.hpp"
#include "runtime/config/load.hpp"

namespace dseek::train {

namespace {
std::string describe(uint32_t data, uint32_t pipeline, uint32_t tensor) {
  std::string text = "data " + std::to_string(data);
  text += " x pipeline " + std::to_string(pipeline);
  text += " x tensor " + std::to_string(tensor);
  return text;
}
}  // namespace

GatheredCheckpointing::GatheredCheckpointing(const config::JobConfig& config,
                                             const std::filesystem::path& run_dir,
                                             GatheredState& state, metrics::EventLog& events,
                                             metrics::Progress& progress,
                                             const checkpoint::CheckpointSinkFactory& make_sink)
    : config_(config), state_(state), events_(events), progress_(progress),
      root_(checkpoint::checkpoint_root(config, run_dir)),
      enabled_(config.checkpoint.every_steps > 0 || config.train.stop_after_steps > 0 ||
               config.train.stop_after_minutes > 0 || !config.checkpoint.resume.empty()) {
  if (!enabled_ || !state.is_writer()) return;
  const checkpoint::WriteOptions where{root_, config.checkpoint.keep_last, false};
  if (make_sink) writer_ = make_sink(where);
  if (!writer_) writer_ = std::make_unique<checkpoint::CheckpointWriter>(where, config.checkpoint.async);
  auto& snapshot = writer_->buffer();
  const LayoutSizes sizes = state.sizes();
  snapshot.seed = config.train.seed;
  snapshot.world_size = sizes.world();
  snapshot.data_parallel = sizes.data;
  snapshot.pipeline_parallel = sizes.pipeline;
  snapshot.tensor_parallel = sizes.tensor;
  snapshot.zero_stage = 0;
  snapshot.config_toml = config::to_toml(config);
  snapshot.tensors = state.whole_layout().tensors();
  const size_t n = state.whole_layout().total();
  snapshot.params.resize(n);
  snapshot.adam_m.resize(n);
  snapshot.adam_v.resize(n);
}

GatheredCheckpointing::~GatheredCheckpointing() = default;

int64_t GatheredCheckpointing::resume() {
  const std::string& resume = config_.checkpoint.resume;
  if (resume.empty()) return 0;
  auto loaded = checkpoint::load_for_resume(
      resume, root_, state_.whole_layout(),
      [&](const std::string& error, const std::filesystem::path& next) {
        if (state_.is_writer())
          events_.emit("checkpoint_fallback",
                       util::JsonLine().add("error", error).add("fallback", next.string()));
        progress_.line("checkpoint: " + error + "; falling back to " + next.string());
      });
  // Every rank must continue from the same step: the steps are collective. The ranks
  // agree when the variance of their steps is zero (sums of small integers are exact).
  const double step = loaded ? static_cast<double>(loaded->manifest.step) : 0.0;
  const double ranks = state_.sum_over_world(1.0);
  const double sum = state_.sum_over_world(step);
  const double sum_squares = state_.sum_over_world(step * step);
  if (ranks * sum_squares != sum * sum)
    throw std::runtime_error("checkpoint.resume = \"" + resume + "\": the ranks of this job "
                             "resolved it to different checkpoints under " + root_.string() +
                             " (this one: step " + std::to_string(static_cast<int64_t>(step)) +
                             "); every rank must see the same checkpoint directory");
  if (!loaded) {
    if (state_.is_writer()) events_.emit("resume_none", util::JsonLine().add("dir", root_.string()));
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
  state_.restore_whole(loaded->params.data(), loaded->adam_m.data(), loaded->adam_v.data(),
                       m.optimizer_steps);
  const LayoutSizes now = state_.sizes();
  events_.emit("resumed",
               util::JsonLine().add("step", m.step).add("path", loaded->dir.string())
                   .add("written_world_size", static_cast<int64_t>(m.world_size))
                   .add("written_data", static_cast<int64_t>(m.data_parallel))
                   .add("written_pipeline", static_cast<int64_t>(m.pipeline_parallel))
                   .add("written_tensor", static_cast<int64_t>(m.tensor_parallel))
                   .add("world_size", static_cast<int64_t>(now.world()))
                   .add("data", static_cast<int64_t>(now.data))
                   .add("pipeline", static_cast<int64_t>(now.pipeline))
                   .add("tensor", static_cast<int64_t>(now.tensor)));
  progress_.line("checkpoint: resumed from " + loaded->dir.string() + " at step " +
                 std::to_string(m.step) + " (written by " +
                 describe(m.data_parallel, m.pipeline_parallel, m.tensor_parallel) +
                 "; this job: " + describe(now.data, now.pipeline, now.tensor) + ")");
  last_committed_ = m.step;  // no need to write it again
  return m.next_step;
}

void GatheredCheckpointing::submit(int64_t done) {
  if (!writer_) {  // a rank of replica 0 other than the writer: its pieces, not written
    state_.gather_whole(nullptr, nullptr, nullptr);
    return;
  }
  bool fail = false;
  for (const auto& fault : config_.faults) {
    fail |= fault.kind == "fail_checkpoint_write" && fault.step == done &&
            (fault.node < 0 || fault.node == config_.cluster.node_id);
  }
  const auto start = std::chrono::steady_clock::now();
  auto& snapshot = writer_->buffer();
  state_.gather_whole(snapshot.params.data(), snapshot.adam_m.data(), snapshot.adam_v.data());
  snapshot.step = done;
  snapshot.optimizer_steps = state_.optimizer_steps();
  snapshot_ms_[done] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  writer_->submit(fail);
  if (!config_.checkpoint.async) writer_->wait();
}

void GatheredCheckpointing::after_step(int64_t done) {
  if (!enabled_ || !state_.takes_part()) return;
  report_finished();
  const int64_t every = config_.checkpoint.every_steps;
  if (every <= 0 || done % every != 0) return;
  if (state_.writer_decides(writer_ && writer_->busy())) {
    if (writer_) {
      events_.emit("checkpoint_skipped",
                   util::JsonLine().add("step", done).add("reason", "previous write in progress")
                       .add("in_progress_step", writer_->in_flight_step()));
    }
    return;
  }
  submit(done);
  report_finished();
}

void GatheredCheckpointing::final(int64_t done) {
  if (!enabled_ || !state_.takes_part()) return;
  if (writer_) writer_->wait();
  report_finished();
  if (state_.writer_decides(writer_ && done > 0 && last_committed_ != done)) {
    submit(done);
    if (writer_) writer_->wait();
    report_finished();
  }
}

void GatheredCheckpointing::report_finished() {
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
