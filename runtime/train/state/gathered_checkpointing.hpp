// The checkpoints of a pipeline or tensor-parallel job (with or without data-parallel
// replicas), the counterpart of state/checkpointing.hpp for a model held in pieces: every
// checkpoint.every_steps steps (and at the end, when checkpoints are enabled) the ranks
// of replica 0 gather their pieces to world rank 0 (GatheredState::gather_whole, on the
// data plane), which hands ONE whole checkpoint in the ordinary format to its sink (the
// run's writer thread, or the node's checkpoint_writer actor) and goes on. The manifest
// records the layout that wrote it (data, pipeline and tensor sizes), and in its
// `precision` field the mixed-precision state (checkpoint/precision_state.hpp): the loss
// scaler's scale and good-step count, and under fp8 the amax histories and scales of every
// matmul operand of the whole model, assembled by layer index from the stages that run
// each layer, one copy per (data replica, tensor rank): each quantizes its own slice of
// the batch and its own shard (train/state/sharded_precision_state.hpp). Under fp8 with
// replicas every replica takes part in the snapshot for its histories.
//
// Resume: every rank reads the whole checkpoint and takes its own pieces, whatever layout
// wrote it (a single node's, another pipeline split or size, another tensor size): that
// is the resharding. All ranks must resolve checkpoint.resume to the same step (checked;
// a disagreement is an error). Events, as in state/checkpointing.hpp, from rank 0:
//   checkpoint_committed / checkpoint_skipped / checkpoint_failed  (the same fields)
//   resumed  step, path, written_world_size, written_data, written_pipeline,
//            written_tensor, world_size, data, pipeline, tensor,
//            precision_state (restored: each rank its own copy, on the same data and
//            tensor sizes, whatever the pipeline split; merged: the cautious merge of
//            every copy on another data or tensor size; ignored / fresh / none as in
//            state/precision_resume.hpp)                                          (every rank)
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>

#include "runtime/checkpoint/sink.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/train/state/checkpoint_cadence.hpp"
#include "runtime/train/state/gathered_state.hpp"

namespace dseek::train {

class GatheredCheckpointing {
 public:
  // `make_sink`: rank 0's sink; null: a CheckpointWriter thread.
  GatheredCheckpointing(const config::JobConfig& config, const std::filesystem::path& run_dir,
                        GatheredState& state, metrics::EventLog& events,
                        metrics::Progress& progress,
                        const checkpoint::CheckpointSinkFactory& make_sink = {});
  ~GatheredCheckpointing();

  // Applies checkpoint.resume on every rank; returns the step to continue from (0 = fresh
  // start). Throws CheckpointError when the checkpoint (and every fallback) fails.
  int64_t resume();
  // After `done` steps, on every rank: a checkpoint when one is due.
  void after_step(int64_t done);
  // The checkpoint of the run's end (unless `done` is committed already), waited for.
  void final(int64_t done);
  bool enabled() const { return enabled_; }

 private:
  const config::JobConfig& config_;
  GatheredState& state_;
  metrics::EventLog& events_;
  metrics::Progress& progress_;
  std::filesystem::path root_;
  bool enabled_;
  std::unique_ptr<CheckpointCadence> cadence_;  // ranks that take part; rank 0 writes
};

}  // namespace dseek::train
