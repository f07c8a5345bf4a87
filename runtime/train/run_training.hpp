// The training job of one node alone from start to finish: the one training loop
// (pipeline/run_stage.hpp) on a single stage that holds the whole model: open the data,
// build the trainer, resume from a checkpoint if asked, run the steps with evaluation,
// progress, events and checkpoints (state/checkpointing.hpp), stop early on a signal or
// train.stop_after_*, and end with a summary. What `dseek-node` runs for a single-node
// job; RunOptions and RunSummary are every layout's (dist/run_layout.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
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
class TraceRecorder;
}

namespace dseek::train {

class PipelineStage;      // pipeline/stage.hpp
struct PipelineStageSpec;
class StageMemory;        // state/stage_memory.hpp
struct StepControl;       // step_control.hpp
struct MemoryRecovery;    // state/memory_recovery.hpp

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
  // The node's trace (metrics/trace_spans.hpp: its clock, and where the forward and
  // backward spans go); null: the system clock, no spans.
  std::shared_ptr<const metrics::TraceRecorder> trace;
  // Called at every step boundary with the 0-based step about to run (fault injection:
  // kill, hang and slow at a step; a slowed node sleeps there).
  std::function<void(int64_t step)> before_step;
  // Pause and checkpoint-now requests (step_control.hpp; null: none), and who is told
  // when the run pauses (true) and resumes or stops while paused (false), with the
  // count of completed steps (dseek-node: the health monitor, which does not count a
  // paused step as a stall).
  StepControl* control = nullptr;
  std::function<void(bool paused, int64_t step)> pause_changed;
  // What a rank keeps of its last completed steps between epochs, for recovery from
  // memory (state/stage_memory.hpp; dseek-node: the worker group's, for the node's
  // lifetime; null: none kept; not owned).
  StageMemory* stage_memory = nullptr;
  // Set before the first step to what the ranks agreed on in memory (null: not asked).
  MemoryRecovery* memory_recovery = nullptr;
  // Run inside every step on its final (reduced) gradients before the update (fault
  // injection: corrupt_gradient).
  std::function<void(int64_t step, float* grads, size_t count)> after_reduction;
  // Run on this rank's own gradients before any reduction (fault injection:
  // corrupt_gradient with where = "local").
  std::function<void(int64_t step, float* grads, size_t count)> before_reduction;
  // Run on the first range of each SDC audit recomputation (fault injection:
  // corrupt_gradient with where = "audit").
  std::function<void(int64_t step, float* grads, size_t count)> in_recomputation;
  // With a data group: called once a step's first gradient bucket is on the wire (fault
  // injection during the reduction: a kill or hang while the peers are mid-collective).
  // Every layout's reducer calls it (dist/reducer_settings.hpp, after_first_bucket).
  std::function<void(int64_t step)> during_reduction;
  // Makes the sink that persists this run's checkpoints (dseek-node: the node's
  // checkpoint_writer actor); null: a writer thread of the run's own.
  checkpoint::CheckpointSinkFactory checkpoint_sink;
  // Holds the optimizer state and runs the update (dseek-node: the node's gradient_shard
  // actors); empty: the trainer's own LocalOptimizer.
  OptimizerShardsFactory optimizer_shards;
  // Makes the backend of train.device (dseek-node: one that knows "cuda",
  // gpu/backend_for_device.hpp); empty: make_runtime_backend (device_backend.hpp).
  BackendFactory backend;
  // With replicas: reports a replica check that found disagreeing replicas (on every
  // replica, before the one in the minority throws ReplicaMismatch and leaves the job).
  // dseek-node: to the node's health_monitor, which writes sdc_detected. Empty: the run
  // writes sdc_detected itself.
  std::function<void(const ReplicaDisagreement&)> report_disagreement;
  // With data.prefetch > 0: makes the BatchSource that keeps the training batches ready
  // ahead, given the data set's own (dseek-node: the node's data_prefetcher actor);
  // empty, or a factory that returns null: a PrefetchingBatches thread of the run's own.
  std::function<std::unique_ptr<BatchSource>(std::shared_ptr<BatchSource> source)>
      batch_prefetcher;
  // Where the stage's trainer runs (pipeline/stage.hpp's PipelineStageFactory;
  // dseek-node: the worker group's pipeline_stage actor); empty, or a factory that
  // returns null: a LocalPipelineStage on the run's own thread.
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
