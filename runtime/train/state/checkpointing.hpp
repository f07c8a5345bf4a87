// The checkpoints of a run, for every layout: resuming from one at the start, a snapshot
// every checkpoint.every_steps steps handed to a CheckpointSink (the run's own writer
// thread, or the node's checkpoint_writer actor when the caller passes one), one at the
// end (or at an early stop), each write's outcome reported. The state comes from the
// rank's PipelineStage (pipeline/stage.hpp): the ranks of replica 0 gather their pieces to
// world rank 0 (under ZeRO and fp8 every replica takes part, holding pieces of its own);
// the writer decides for all whether a write is due. World rank 0 writes ONE whole
// checkpoint in the ordinary format; its manifest records the layout that wrote it
// (world size, data, pipeline and tensor sizes, ZeRO stage) and in its `precision` field
// the mixed-precision state (checkpoint/precision_state.hpp): the loss scaler's scale and
// good-step count, and under fp8 the amax histories of every replica and tensor rank.
//
// Resume: every rank reads the whole checkpoint and takes its own pieces, whatever layout
// wrote it: that is the resharding. All ranks must resolve checkpoint.resume to the same
// step (checked; a disagreement is an error). Events:
//   checkpoint_committed  step, bytes, snapshot_ms (the copy training waited for),
//                         write_ms, write_cpu_ms, path, writer ("thread" | "actor")
//   checkpoint_skipped    step, reason, in_progress_step
//   checkpoint_failed     step, error (names the file; says when the disk is full)
//   checkpoint_fallback   error, fallback                          (the writer)
//   resumed               step, path, written_world_size, written_zero, written_data,
//                         written_pipeline, written_tensor (the layout that wrote it),
//                         world_size, zero, data, pipeline, tensor (this one's),
//                         precision_state (restored: each rank its own copy; merged: the
//                         cautious merge of every copy on another data or tensor size;
//                         ignored | fresh | none: state/precision_resume.hpp) (every rank)
// A failed checkpoint never stops training; the next one is tried.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>

#include "runtime/checkpoint/sink.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/train/layout/layout_sizes.hpp"
#include "runtime/train/pipeline/stage.hpp"

namespace dseek::train {

// Checkpoints are written at all: checkpoint.every_steps > 0, an early-stop key set, or
// a resumed run (which was checkpointed before, so its end should be too).
bool checkpoints_enabled(const config::JobConfig& config);

class Checkpointing {
 public:
  // `make_sink`: world rank 0's sink; null: a CheckpointWriter thread.
  Checkpointing(const config::JobConfig& config, const std::filesystem::path& run_dir,
                PipelineStage& stage, metrics::EventLog& events, metrics::Progress& progress,
                const checkpoint::CheckpointSinkFactory& make_sink = {});
  ~Checkpointing();

  // Applies checkpoint.resume on every rank; returns the step to continue from (0 = fresh
  // start). Throws CheckpointError when the checkpoint (and every fallback) fails.
  int64_t resume();
  // After `done` steps, on every rank: a checkpoint when one is due (skipped while the
  // last write is still in flight). Also reports writes that finished.
  void after_step(int64_t done);
  // The checkpoint of the run's end or early stop (unless `done` is committed already),
  // waited for.
  void final(int64_t done);
  // A checkpoint of `done` steps now (checkpoint-now), on every rank; waited for. True
  // on every rank when it is committed (false: the job writes no checkpoints, or the
  // write failed: a checkpoint_failed event on the writer).
  bool now(int64_t done);

 private:
  LayoutSizes sizes() const;
  // A checkpoint of `done` steps now (after the write in flight; none when `done` is 0
  // or committed already), waited for. True on the writer when `done` is committed.
  bool write_now(int64_t done);
  // The snapshot (collective over the ranks that take part), handed to the writer's sink.
  void submit(int64_t done);
  // checkpoint_committed / checkpoint_failed for the writes that finished.
  void report_finished();

  const config::JobConfig& config_;
  PipelineStage& stage_;
  metrics::EventLog& events_;
  metrics::Progress& progress_;
  std::filesystem::path root_;
  bool takes_part_ = false;  // checkpoints enabled and this rank holds a part of the state
  int64_t last_committed_ = -1;
  std::map<int64_t, double> snapshot_ms_;  // of writes not yet reported
  std::unique_ptr<checkpoint::CheckpointSink> writer_;  // world rank 0 only
};

}  // namespace dseek::train
