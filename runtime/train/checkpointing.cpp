// Implementation of checkpointing.hpp.
#include "runtime/train/checkpointing.hpp"

#include <algorithm>
#include <array>
#include <chrono>

#include "runtime/checkpoint/load.hpp"
#include "runtime/checkpoint/store.hpp"
#include "runtime/checkpoint/writer_thread.hpp"
#include "runtime/config/load.hpp"

namespace dseek::train {

Checkpointing::Checkpointing(const config::JobConfig& config, const std::filesystem::path& run_dir,
                             Trainer& trainer, metrics::EventLog& events,
                             metrics::Progress& progress,
                             const checkpoint::CheckpointSinkFactory& make_sink)
    : config_(config), trainer_(trainer), events_(events), progress_(progress),
      root_(checkpoint::checkpoint_root(config, run_dir)),
      enabled_(config.checkpoint.every_steps > 0 || config.train.stop_after_steps > 0 ||
               config.train.stop_after_minutes > 0 || !config.checkpoint.resume.empty()),
      collective_(trainer.snapshot_is_collective()) {
  if (!enabled_) return;
  const size_t n = trainer.model().num_params();
  if (trainer.reducer() != nullptr && trainer.reducer()->rank() != 0) {
    if (collective_) {
      gather_params_.resize(n);
      gather_m_.resize(n);
      gather_v_.resize(n);
    }
    return;
  }
  const checkpoint::WriteOptions where{root_, config.checkpoint.keep_last, false};
  if (make_sink) writer_ = make_sink(where);
  // The default writes on a thread, or in submit() itself when checkpoint.async is off.
  if (!writer_) writer_ = std::make_unique<checkpoint::CheckpointWriter>(where, config.checkpoint.async);
  auto& snapshot = writer_->buffer();
  snapshot.seed = config.train.seed;
  if (trainer.reducer() != nullptr) {
    snapshot.world_size = static_cast<uint32_t>(trainer.reducer()->world_size());
    snapshot.zero_stage = static_cast<uint32_t>(config.parallel.zero);
  }
  snapshot.config_toml = config::to_toml(config);
  snapshot.tensors = trainer.model().layout().tensors();
  snapshot.params.resize(n);
  snapshot.adam_m.resize(n);
  snapshot.adam_v.resize(n);
}

Checkpointing::~Checkpointing() = default;

int64_t Checkpointing::resume() {
  const std::string& resume = config_.checkpoint.resume;
  if (resume.empty()) return 0;
  auto loaded = checkpoint::load_for_resume(
      resume, root_, trainer_.model().layout(),
      [&](const std::string& error, const std::filesystem::path& next) {
        events_.emit("checkpoint_fallback",
                     util::JsonLine().add("error", error).add("fallback", next.string()));
        progress_.line("checkpoint: " + error + "; falling back to " + next.string());
      });
  if (!loaded) {
    events_.emit("resume_none", util::JsonLine().add("dir", root_.string()));
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
  trainer_.restore(loaded->params.data(), loaded->adam_m.data(), loaded->adam_v.data(),
                   m.optimizer_steps);
  // The checkpoint holds the whole state, so the layouts may differ: say both.
  const int64_t world = trainer_.reducer() != nullptr ? trainer_.reducer()->world_size() : 1;
  const int64_t zero = trainer_.reducer() != nullptr ? config_.parallel.zero : 0;
  events_.emit("resumed", util::JsonLine().add("step", m.step).add("path", loaded->dir.string())
                              .add("written_world_size", static_cast<int64_t>(m.world_size))
                              .add("written_zero", static_cast<int64_t>(m.zero_stage))
                              .add("written_data", static_cast<int64_t>(m.data_parallel))
                              .add("written_pipeline", static_cast<int64_t>(m.pipeline_parallel))
                              .add("written_tensor", static_cast<int64_t>(m.tensor_parallel))
                              .add("world_size", world).add("zero", zero).add("data", world)
                              .add("pipeline", int64_t{1}).add("tensor", int64_t{1}));
  progress_.line("checkpoint: resumed from " + loaded->dir.string() + " at step " +
                 std::to_string(m.step) + " (written by a world of " +
                 std::to_string(m.world_size) + " = data " + std::to_string(m.data_parallel) +
                 " x pipeline " + std::to_string(m.pipeline_parallel) + " x tensor " +
                 std::to_string(m.tensor_parallel) + ", ZeRO " + std::to_string(m.zero_stage) +
                 "; this one: " + std::to_string(world) + ", ZeRO " + std::to_string(zero) + ")");
  last_committed_ = m.step;  // no need to write it again
  return m.next_step;
}

bool Checkpointing::replica0_decides(bool value) {
  if (!collective_) return value;
  std::array<double, 1> decision{writer_ != nullptr && value ? 1.0 : 0.0};
  trainer_.reducer()->sum_over_ranks(decision);
  return decision[0] > 0.0;
}

void Checkpointing::submit(int64_t done) {
  if (!writer_) {  // another replica: its part of the collective snapshot, not written
    trainer_.snapshot(gather_params_.data(), gather_m_.data(), gather_v_.data());
    return;
  }
  bool fail = false;
  for (const auto& fault : config_.faults) {
    fail |= fault.kind == "fail_checkpoint_write" && fault.step == done &&
            (fault.node < 0 || fault.node == config_.cluster.node_id);
  }
  const auto start = std::chrono::steady_clock::now();
  auto& snapshot = writer_->buffer();
  trainer_.snapshot(snapshot.params.data(), snapshot.adam_m.data(), snapshot.adam_v.data());
  snapshot.step = done;
  snapshot.optimizer_steps = trainer_.optimizer_steps();
  snapshot_ms_[done] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  writer_->submit(fail);
  // checkpoint.async = false: the step waits for the write, whoever writes.
  if (!config_.checkpoint.async) writer_->wait();
}

void Checkpointing::after_step(int64_t done) {
  if (!enabled_ || (!writer_ && !collective_)) return;
  report_finished();
  const int64_t every = config_.checkpoint.every_steps;
  if (every <= 0 || done % every != 0) return;
  if (replica0_decides(writer_ && writer_->busy())) {
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
  if (!enabled_ || (!writer_ && !collective_)) return;
  if (writer_) writer_->wait();
  report_finished();
  if (replica0_decides(writer_ && done > 0 && last_committed_ != done)) {
    submit(done);
    if (writer_) writer_->wait();
    report_finished();
  }
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
    } else {
      events_.emit("checkpoint_failed",
                   util::JsonLine().add("step", outcome.step).add("error", outcome.error));
      progress_.line("checkpoint of step " + std::to_string(outcome.step) +
                     " failed, training goes on: " + outcome.error);
    }
  }
}

}  // namespace dseek::train
