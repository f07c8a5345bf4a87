// CheckpointCadence: the part of a run's checkpointing that does not depend on how the
// model state is held. Every checkpoint.every_steps steps (and at the end) it lets the
// writer decide for every rank that takes part (skip while the last write is still in
// flight, or write), takes the snapshot the front end gives it, hands it to the sink
// (the run's writer thread or the node's checkpoint_writer actor), and reports each
// write's outcome as checkpoint_committed / checkpoint_skipped / checkpoint_failed.
//
// Its front end, state/checkpointing.hpp, owns the resume, and the trainer's
// CheckpointState the shape of the state (a whole model per replica with ZeRO shards
// gathered, or a model in pipeline and tensor-parallel pieces). Only the writer rank has a sink; the other
// ranks that take part join the collectives of the decision and of the snapshot.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>

#include "runtime/checkpoint/sink.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/model/param_layout.hpp"

namespace dseek::train {

// Checkpoints are written at all: checkpoint.every_steps > 0, an early-stop key set, or
// a resumed run (which was checkpointed before, so its end should be too).
bool checkpoints_enabled(const config::JobConfig& config);

class CheckpointCadence {
 public:
  struct Participation {
    // The writer's `value` on every rank that takes part (a collective where several do).
    std::function<bool(bool value)> writer_decides;
    // Fills the writer's three buffers with the whole state (null on the other ranks,
    // which take part in a collective snapshot only); returns the optimizer's steps.
    std::function<int64_t(float* params, float* adam_m, float* adam_v)> snapshot;
  };

  // `is_writer`: this rank writes (makes the sink: `make_sink`'s, or a CheckpointWriter
  // thread when null) a checkpoint of `whole_layout`, under `root`.
  CheckpointCadence(const config::JobConfig& config, const std::filesystem::path& root,
                    bool is_writer, const model::ParamLayout& whole_layout,
                    const checkpoint::CheckpointSinkFactory& make_sink,
                    metrics::EventLog& events, metrics::Progress& progress,
                    Participation participation);
  ~CheckpointCadence();

  // The writer's snapshot buffer, for the fields of the front end's layout (world size,
  // ZeRO stage, parallel sizes); null on the other ranks.
  checkpoint::Snapshot* snapshot_buffer() { return writer_ ? &writer_->buffer() : nullptr; }
  bool is_writer() const { return writer_ != nullptr; }
  // `step` is on disk already (the resumed checkpoint): the end need not write it again.
  void committed(int64_t step) { last_committed_ = step; }

  // After `done` steps: a checkpoint when one is due (skipped while a write is in flight).
  void after_step(int64_t done);
  // The checkpoint of the run's end (unless `done` is committed already), waited for.
  void final(int64_t done) { write_now(done); }
  // A checkpoint of `done` steps now (after the write in flight; none when `done` is 0
  // or committed already), waited for. True on the writer when `done` is committed.
  bool write_now(int64_t done);

 private:
  void submit(int64_t done);
  void report_finished();

  const config::JobConfig& config_;
  metrics::EventLog& events_;
  metrics::Progress& progress_;
  Participation participation_;
  int64_t last_committed_ = -1;
  std::map<int64_t, double> snapshot_ms_;  // of writes not yet reported
  std::unique_ptr<checkpoint::CheckpointSink> writer_;  // the writer rank only
};

}  // namespace dseek::train
