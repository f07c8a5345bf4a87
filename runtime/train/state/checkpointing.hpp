// The checkpoints of a run: resuming from one at the start, a snapshot every
// checkpoint.every_steps steps handed to a CheckpointSink (the run's own writer thread,
// or the node's checkpoint_writer actor when the caller passes one), one at the end
// (or at an early stop), and the events that say what happened to each:
//   checkpoint_committed  step, bytes, snapshot_ms (the copy training waited for),
//                         write_ms, write_cpu_ms, path, writer ("thread" | "actor")
//   checkpoint_skipped    step, reason, in_progress_step
//   checkpoint_failed     step, error (names the file; says when the disk is full)
//   checkpoint_fallback   error, fallback
//   resumed               step, path, written_world_size, written_zero, written_data,
//                         written_pipeline, written_tensor (the layout that wrote it),
//                         world_size, zero, data, pipeline, tensor (this one's),
//                         precision_state (restored | merged | fresh | ignored | none:
//                         the loss scale and fp8 amax histories, state/precision_resume.hpp)
// A failed checkpoint never stops training; the next one is tried.
//
// Data parallel (the trainer has a GradientReducer): every replica resumes from the same
// checkpoint (the directory must be readable by all); replica 0 alone writes. With ZeRO
// >= 1 a snapshot gathers the optimizer moments from every replica, so all replicas
// take part in every snapshot: whether one is taken (replica 0's writer may still be
// busy, the last one may be committed already) is replica 0's decision, shared with a
// small collective. The checkpoint always holds the whole, unsharded state: it resumes
// on any world size and ZeRO stage; its manifest records the world size and ZeRO stage
// that wrote it, and the resumed event says both layouts. Under fp8 every replica also
// takes part in every snapshot: the checkpoint keeps each replica's amax histories.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "runtime/checkpoint/sink.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/train/state/checkpoint_cadence.hpp"
#include "runtime/train/trainer.hpp"

namespace dseek::train {

class Checkpointing {
 public:
  // `make_sink`: replica 0's sink; null: a CheckpointWriter thread.
  Checkpointing(const config::JobConfig& config, const std::filesystem::path& run_dir,
                Trainer& trainer, metrics::EventLog& events, metrics::Progress& progress,
                const checkpoint::CheckpointSinkFactory& make_sink = {});
  ~Checkpointing();

  // Applies checkpoint.resume; returns the step to continue from (0 = fresh start).
  // Throws CheckpointError when the asked-for checkpoint (and every fallback) fails.
  int64_t resume();
  // After `done` steps: a periodic checkpoint when one is due (skipped while the last
  // write is still in flight). Also reports writes that finished.
  void after_step(int64_t done);
  // The checkpoint of the run's end or early stop (unless `done` is committed already),
  // waited for.
  void final(int64_t done);
  // Checkpoints are written at all (checkpoints_enabled()).
  bool enabled() const { return enabled_; }

 private:
  // Replica 0's `value`, on every replica (collective) when snapshots are collective.
  bool replica0_decides(bool value);

  const config::JobConfig& config_;
  Trainer& trainer_;
  metrics::EventLog& events_;
  metrics::Progress& progress_;
  std::filesystem::path root_;
  bool enabled_;
  bool collective_;  // snapshots gather sharded state: every replica takes part
  std::unique_ptr<CheckpointCadence> cadence_;  // when enabled_; replica 0 writes
  std::vector<float> gather_params_, gather_m_, gather_v_;  // other replicas' snapshot space
};

}  // namespace dseek::train
