// The training job of one node from start to finish: open the data, build the trainer,
// resume from a checkpoint if asked, run the steps with evaluation, progress, events and
// checkpoints (state/checkpointing.hpp), stop early on a signal or train.stop_after_*, and end
// with a summary. This is what `dseek-node` runs for a single-node job.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "runtime/checkpoint/sink.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/model/param_layout.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/device_backend.hpp"
#include "runtime/train/optimizer_shards.hpp"
#include "runtime/train/replica_check.hpp"

namespace dseek::metrics {
class EventLog;
}

namespace dseek::train {

class GradientReducer;

class Trainer;
class PipelineStage;      // pipeline_stage.hpp
struct PipelineStageSpec;
class StageMemory;        // state/stage_memory.hpp
struct MemoryRecovery;    // state/memory_recovery.hpp

// The whole training state after `steps_done` steps, in host memory: what a data-parallel
// node keeps of its last completed step to recover from a lost peer without the disk
// (ZeRO 0: every replica holds all of it). The data position is the step: the sample
// order is a function of (seed, step).
struct TrainingState {
  int64_t steps_done = -1;  // -1: no state
  int64_t optimizer_steps = 0;
  std::vector<float> params, adam_m, adam_v;
  // ZeRO >= 1 (dist/peer_shard_replica.hpp): adam_m / adam_v are valid only on
  // two shards of a world of `sharded_world` ranks: this node's own (rank own_shard, at
  // steps_done) and its ring neighbour's replica (rank replica_shard, at
  // replica_steps_done; -1: none). sharded_world 0: the moments are whole.
  int sharded_world = 0;
  int own_shard = -1;
  int replica_shard = -1;
  int64_t replica_steps_done = -1;
  std::vector<model::ParamRange> own_ranges, replica_ranges;
};

struct RunOptions {
  std::filesystem::path run_dir;            // events go to run_dir/node-<id>/
  const std::atomic<bool>* stop = nullptr;  // set (by a signal) to stop at a step boundary
  // Set by a stop request (a signal) only, where `stop` also means "re-plan at the next
  // step" (a node joined): it ends an evaluation between batches, a re-plan does not.
  // Null: `stop` does.
  const std::atomic<bool>* stop_request = nullptr;
  std::FILE* console = stderr;              // progress and summary
  // The node's event log when the caller shares it (the node's actors write cluster
  // events to the same file); null: run_training opens its own.
  metrics::EventLog* events = nullptr;
  // Called at every step boundary with the 0-based step about to run (fault injection:
  // kill, hang and slow at a step; a slowed node sleeps there).
  std::function<void(int64_t step)> before_step;
  // Data parallel: this replica's gradient reducer (its rank and world size); null for a
  // single-node run. Not owned.
  GradientReducer* reducer = nullptr;
  // Start from this state instead of the weights' init or checkpoint.resume (recovery
  // from memory or a peer). Not owned.
  const TrainingState* start_from = nullptr;
  // What a rank keeps of its last completed steps between epochs, for recovery from
  // memory (dseek-node: the worker group's, for the node's lifetime; null: none kept;
  // not owned): a data-parallel rank's whole state (dist/replica_memory.hpp), a pipeline
  // or tensor-parallel rank's own part of it (state/stage_memory.hpp).
  TrainingState* replica = nullptr;
  StageMemory* stage_memory = nullptr;
  // Set before the first step to what the ranks agreed on in memory (null: not asked).
  MemoryRecovery* memory_recovery = nullptr;
  // Run inside every step on its final (reduced) gradients before the update (fault
  // injection: corrupt_gradient).
  std::function<void(int64_t step, float* grads, size_t count)> after_reduction;
  // With a data group: called once a step's first gradient bucket is on the wire (fault
  // injection during the reduction: a kill or hang while the peers are mid-collective).
  // Every layout's reducer calls it (dist/reducer_settings.hpp, after_first_bucket).
  std::function<void(int64_t step)> during_reduction;
  // Called after every completed step (and its checkpoint) with the steps done.
  std::function<void(int64_t steps_done, Trainer& trainer)> after_step;
  // Makes the sink that persists this run's checkpoints (dseek-node: the node's
  // checkpoint_writer actor); null: a writer thread of the run's own.
  checkpoint::CheckpointSinkFactory checkpoint_sink;
  // Holds the optimizer state and runs the update (dseek-node: the node's gradient_shard
  // actors); empty: the trainer's own LocalOptimizer.
  OptimizerShardsFactory optimizer_shards;
  // Makes the backend of train.device (dseek-node: one that knows "cuda",
  // gpu/backend_for_device.hpp); empty: make_runtime_backend (device_backend.hpp).
  BackendFactory backend;
  // Data parallel: reports a replica check that found disagreeing replicas (on every
  // replica, before the one in the minority throws ReplicaMismatch and leaves the job).
  // dseek-node: to the node's health_monitor, which writes sdc_detected. Empty:
  // run_training writes sdc_detected itself.
  std::function<void(const ReplicaDisagreement&)> report_disagreement;
  // With data.prefetch > 0: makes the BatchSource that keeps the training batches ready
  // ahead, given the data set's own (dseek-node: the node's data_prefetcher actor);
  // empty, or a factory that returns null: a PrefetchingBatches thread of the run's own.
  std::function<std::unique_ptr<BatchSource>(std::shared_ptr<BatchSource> source)>
      batch_prefetcher;
  // Pipeline jobs: where the stage's trainer runs (pipeline_stage.hpp's
  // PipelineStageFactory; dseek-node: the worker group's pipeline_stage actor); empty, or
  // a factory that returns null: a LocalPipelineStage on the run's own thread.
  std::function<std::unique_ptr<PipelineStage>(const PipelineStageSpec& spec)> pipeline_stage;
};

struct RunSummary {
  int64_t steps_done = 0;
  double final_loss = 0.0;
  double val_loss = -1.0;  // -1 when the data set has no validation split
  std::string params_sha256;
  bool stopped_early = false;
  double elapsed_s = 0.0;
  double tokens_per_s = 0.0;  // over the whole run (global batch tokens)
};

RunSummary run_training(const config::JobConfig& config, const RunOptions& options);

}  // namespace dseek::train
