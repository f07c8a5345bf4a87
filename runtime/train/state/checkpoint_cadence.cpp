// Implementation of checkpoint_cadence.hpp.
#include "runtime/train/state/checkpoint_cadence.hpp"

#include <algorithm>
#include <chrono>

#include "runtime/checkpoint/writer_thread.hpp"
#include "runtime/config/load.hpp"

namespace dseek::train {

bool checkpoints_enabled(const config::JobConfig& config) {
  return config.checkpoint.every_steps > 0 || config.train.stop_after_steps > 0 ||
         config.train.stop_after_minutes > 0 || !config.checkpoint.resume.empty();
}

CheckpointCadence::CheckpointCadence(const config::JobConfig& config,
                                     const std::filesystem::path& root, bool is_writer,
                                     const model::ParamLayout& whole_layout,
                                     const checkpoint::CheckpointSinkFactory& make_sink,
                                     metrics::EventLog& events, metrics::Progress& progress,
                                     Participation participation)
    : config_(config), events_(events), progress_(progress),
      participation_(std::move(participation)) {
  if (!is_writer) return;
  const checkpoint::WriteOptions where{root, config.checkpoint.keep_last, false};
  if (make_sink) writer_ = make_sink(where);
  // The default writes on a thread, or in submit() itself when checkpoint.async is off.
  if (!writer_) writer_ = std::make_unique<checkpoint::CheckpointWriter>(where, config.checkpoint.async);
  auto& snapshot = writer_->buffer();
  snapshot.seed = config.train.seed;
  snapshot.config_toml = config::to_toml(config);
  snapshot.tensors = whole_layout.tensors();
  const size_t n = whole_layout.total();
  snapshot.params.resize(n);
  snapshot.adam_m.resize(n);
  snapshot.adam_v.resize(n);
}

CheckpointCadence::~CheckpointCadence() = default;

void CheckpointCadence::submit(int64_t done) {
  if (!writer_) {  // another rank: its part of the collective snapshot, not written
    participation_.snapshot(nullptr, nullptr, nullptr);
    return;
  }
  bool fail = false;
  for (const auto& fault : config_.faults) {
    fail |= fault.kind == config::FaultKind::fail_checkpoint_write && fault.step == done &&
            (fault.node < 0 || fault.node == config_.cluster.node_id);
  }
  const auto start = std::chrono::steady_clock::now();
  auto& snapshot = writer_->buffer();
  snapshot.optimizer_steps =
      participation_.snapshot(snapshot.params.data(), snapshot.adam_m.data(), snapshot.adam_v.data());
  snapshot.step = done;
  snapshot_ms_[done] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  writer_->submit(fail);
  // checkpoint.async = false: the step waits for the write, whoever writes.
  if (!config_.checkpoint.async) writer_->wait();
}

void CheckpointCadence::after_step(int64_t done) {
  report_finished();
  const int64_t every = config_.checkpoint.every_steps;
  if (every <= 0 || done % every != 0) return;
  if (participation_.writer_decides(writer_ && writer_->busy())) {
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

bool CheckpointCadence::write_now(int64_t done) {
  if (writer_) writer_->wait();
  report_finished();
  if (participation_.writer_decides(writer_ && done > 0 && last_committed_ != done)) {
    submit(done);
    if (writer_) writer_->wait();
    report_finished();
  }
  return writer_ && last_committed_ == done;
}

void CheckpointCadence::report_finished() {
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
