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

Checkpointing::Checkpointing(const config::JobConfig& config,
                             const std::filesystem::path& run_dir, CheckpointState& state,
                             metrics::EventLog& events, metrics::Progress& progress,
                             const checkpoint::CheckpointSinkFactory& make_sink)
    : config_(config), state_(state), events_(events), progress_(progress),
      root_(checkpoint::checkpoint_root(config, run_dir)),
      enabled_(checkpoints_enabled(config)) {
  if (!enabled_ || !state.takes_part()) return;
  CheckpointCadence::Participation participation;
  participation.writer_decides = [this](bool value) { return state_.writer_decides(value); };
  // The loss scale and fp8 state follow the weights, from the ranks that took part (under
  // fp8 with replicas every replica: each has amax histories of its own).
  participation.snapshot = [this](float* params, float* adam_m, float* adam_v) {
    state_.gather_whole(params, adam_m, adam_v);
    checkpoint::PrecisionState precision = state_.gather_precision_state();
    if (auto* snapshot = cadence_->snapshot_buffer()) snapshot->precision = std::move(precision);
    return state_.optimizer_steps();
  };
  cadence_ = std::make_unique<CheckpointCadence>(config, root_, state.is_writer(),
                                                 state.whole_layout(), make_sink, events,
                                                 progress, std::move(participation));
  if (auto* snapshot = cadence_->snapshot_buffer()) {
    const LayoutSizes sizes = state.sizes();
    snapshot->world_size = sizes.world();
    snapshot->data_parallel = sizes.data;
    snapshot->pipeline_parallel = sizes.pipeline;
    snapshot->tensor_parallel = sizes.tensor;
    snapshot->zero_stage = sizes.zero;
  }
}

Checkpointing::~Checkpointing() = default;

int64_t Checkpointing::resume() {
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
  // Every rank decides alike from the manifest: restored (its own copy of the amax
  // histories), merged (another data or tensor size), ignored, fresh or none.
  PrecisionResume precision = precision_resume(m.precision, config_.train.precision);
  const LayoutSizes now = state_.sizes();
  if (precision.restore) {
    LayoutSizes written_by;
    written_by.data = m.data_parallel;
    written_by.pipeline = m.pipeline_parallel;
    written_by.tensor = m.tensor_parallel;
    if (!state_.restore_precision_state(m.precision, written_by)) {
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
  if (cadence_) cadence_->committed(m.step);  // no need to write it again
  return m.next_step;
}

void Checkpointing::after_step(int64_t done) {
  if (cadence_) cadence_->after_step(done);
}

void Checkpointing::final(int64_t done) {
  if (cadence_) cadence_->final(done);
}

bool Checkpointing::now(int64_t done) {
  const bool committed = cadence_ && cadence_->write_now(done);  // the writer's outcome
  return state_.sum_over_world(committed ? 1.0 : 0.0) > 0;
}

}  // namespace dseek::train
