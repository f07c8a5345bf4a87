// Implementation of checkpointing.hpp.
#include "runtime/train/state/checkpointing.hpp"

#include <algorithm>
#include <array>
#include <chrono>

#include "runtime/checkpoint/load.hpp"
#include "runtime/checkpoint/store.hpp"
#include "runtime/checkpoint/writer_thread.hpp"
#include "runtime/config/load.hpp"
#include "runtime/train/state/precision_resume.hpp"

namespace dseek::train {

Checkpointing::Checkpointing(const config::JobConfig& config, const std::filesystem::path& run_dir,
                             Trainer& trainer, metrics::EventLog& events,
                             metrics::Progress& progress,
                             const checkpoint::CheckpointSinkFactory& make_sink)
    : config_(config), trainer_(trainer), events_(events), progress_(progress),
      root_(checkpoint::checkpoint_root(config, run_dir)),
      enabled_(checkpoints_enabled(config)),
      collective_(trainer.snapshot_is_collective() || trainer.precision_state_is_collective()) {
  if (!enabled_) return;
  const size_t n = trainer.model().num_params();
  const bool is_writer = trainer.reducer() == nullptr || trainer.reducer()->rank() == 0;
  if (!is_writer && trainer.snapshot_is_collective()) {
    gather_params_.resize(n);
    gather_m_.resize(n);
    gather_v_.resize(n);
  }
  CheckpointCadence::Participation participation;
  participation.writer_decides = [this](bool value) { return replica0_decides(value); };
  // The other replicas take part in a collective (ZeRO) snapshot with their own space,
  // and in the gathering of the fp8 amax histories (each replica has its own).
  participation.snapshot = [this](float* params, float* adam_m, float* adam_v) {
    const bool writer = params != nullptr;
    if (!writer && trainer_.snapshot_is_collective()) {
      params = gather_params_.data();
      adam_m = gather_m_.data();
      adam_v = gather_v_.data();
    }
    if (params != nullptr) trainer_.snapshot(params, adam_m, adam_v);
    auto precision = trainer_.precision_state();
    if (writer) cadence_->snapshot_buffer()->precision = std::move(precision);
    return trainer_.optimizer_steps();
  };
  cadence_ = std::make_unique<CheckpointCadence>(config, root_, is_writer,
                                                 trainer.model().layout(), make_sink, events,
                                                 progress, std::move(participation));
  if (auto* snapshot = cadence_->snapshot_buffer(); snapshot && trainer.reducer() != nullptr) {
    snapshot->world_size = static_cast<uint32_t>(trainer.reducer()->world_size());
    snapshot->zero_stage = static_cast<uint32_t>(config.parallel.zero);
  }
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
  PrecisionResume precision = precision_resume(m.precision, config_.train.precision);
  // A tensor-parallel job keeps a copy per tensor rank (state/sharded_precision_state.hpp), no
  // replica's own: a data-parallel world takes their cautious merge.
  checkpoint::PrecisionState written = m.precision;
  const bool per_tensor_rank = m.tensor_parallel > 1 && !written.fp8.empty();
  if (per_tensor_rank) written.fp8 = numerics::merged_state(written.fp8);
  if (precision.restore && (!trainer_.restore_precision_state(written) || per_tensor_rank)) {
    precision.outcome = "merged";
    precision.note = "checkpoint: the fp8 amax histories of " +
                     std::to_string(m.precision.fp8.replicas);
    precision.note += per_tensor_rank ? " tensor ranks" : " replicas";
    precision.note += " merged for this world (the most cautious scales)";
  }
  if (!precision.note.empty()) progress_.line(precision.note);
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
                              .add("pipeline", int64_t{1}).add("tensor", int64_t{1})
                              .add("precision_state", precision.outcome));
  progress_.line("checkpoint: resumed from " + loaded->dir.string() + " at step " +
                 std::to_string(m.step) + " (written by a world of " +
                 std::to_string(m.world_size) + " = data " + std::to_string(m.data_parallel) +
                 " x pipeline " + std::to_string(m.pipeline_parallel) + " x tensor " +
                 std::to_string(m.tensor_parallel) + ", ZeRO " + std::to_string(m.zero_stage) +
                 "; this one: " + std::to_string(world) + ", ZeRO " + std::to_string(zero) + ")");
  cadence_->committed(m.step);  // no need to write it again
  return m.next_step;
}

bool Checkpointing::replica0_decides(bool value) {
  if (!collective_) return value;
  std::array<double, 1> decision{cadence_->is_writer() && value ? 1.0 : 0.0};
  trainer_.reducer()->sum_over_ranks(decision);
  return decision[0] > 0.0;
}

void Checkpointing::after_step(int64_t done) {
  if (enabled_ && (cadence_->is_writer() || collective_)) cadence_->after_step(done);
}

void Checkpointing::final(int64_t done) {
  if (enabled_ && (cadence_->is_writer() || collective_)) cadence_->final(done);
}

}  // namespace dseek::train
