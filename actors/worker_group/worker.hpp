// The worker actor of a node: runs the node's training on a thread it owns (compute
// never blocks the actor scheduler), reporting each step to the health monitor and
// firing the step faults of the node's FaultPlan at step boundaries. A single-node job
// trains at once; a multi-node job trains data-parallel once the whole world joined,
// and recovers from lost nodes (control/epoch_loop.hpp): the worker passes every epoch to
// its thread and aborts the thread's communicator when a node is lost or joins. When
// training ends it sends job_finished to the node's main loop and exits normally.
//
// An orderly stop (user_shutdown from its supervisor) stops the training at the next
// step boundary (with its final checkpoint) before the actor exits. A crash (a
// crash_actor fault, an exception) stops the thread the same way; the restarted worker
// resumes from the newest checkpoint when the job writes checkpoints.
//
// The worker's runs get the node's actors through RunOptions (node_run_options): the
// optimizer state in the worker group's gradient_shard actors, the batches from the
// data_prefetcher, checkpoints to the checkpoint_writer, replica-check disagreements to
// the health_monitor; a pipeline job's stage runs in the group's pipeline_stage actor.
// A node with several worker groups (cluster.gpus_per_node > 1) runs one worker per
// group, each one rank of the world on its own device (setup.local_rank): a
// data-parallel rank even on a single node (its local ranks are a world of their own),
// or a rank of a pipeline or tensor-parallel job's data x pipeline x tensor world.
// The worker watches its gradient_shards and pipeline_stage: one that goes down takes
// the worker down with it at once (the group restarts as a whole).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/faults/crash_request.hpp"
#include "runtime/config/job_config.hpp"

namespace dseek::metrics {
class EventLog;
class TraceRecorder;
}
namespace dseek::train {
class StageMemory;
struct StepControl;
struct RunOptions;
}

namespace dseek::actors {

class FaultActions;
class FaultPlan;

struct worker_setup {
  config::JobConfig config;
  std::filesystem::path run_dir;
  std::shared_ptr<metrics::EventLog> events;
  // The node's trace: its clock, and where the trainer's and the data plane's spans go.
  std::shared_ptr<const metrics::TraceRecorder> trace;
  std::shared_ptr<FaultPlan> faults;
  std::shared_ptr<FaultActions> fault_actions;
  caf::actor router;     // asked for the latest epoch at start
  // Which of the node's worker groups this worker leads (cluster.gpus_per_node of them):
  // its local rank, which is also the index of the device it drives. Group 0's actors
  // keep the names of a one-group node (node_registry.hpp).
  int local_rank = 0;
  caf::actor node_main;  // gets job_finished
  // How many times a worker of this node was started (the first start is 1): later
  // starts resume from the newest checkpoint.
  std::shared_ptr<std::atomic<int>> starts = std::make_shared<std::atomic<int>>(0);
  // How many times `dseek launch` restarted this node (0: the first process).
  int64_t incarnation = 0;
  // Set by the first of the node's worker groups whose training reached the job's end:
  // a group of the same node that stands by (a re-planned layout smaller than the world)
  // then ends too, where it would otherwise wait for a member to leave (shared by the
  // node's groups, cluster.gpus_per_node of them).
  std::shared_ptr<std::atomic<bool>> local_job_done = std::make_shared<std::atomic<bool>>(false);
  // The rank's copies of its own state of the last completed steps, kept for the node's
  // lifetime (they survive a restart of the worker actor): what the node recovers from,
  // and gives to peers (runtime/train/state/stage_memory.hpp).
  std::shared_ptr<train::StageMemory> stage_memory;
  // The node's pause and checkpoint-now requests (the node actor's; shared by the node's
  // groups; null: none).
  std::shared_ptr<train::StepControl> control;
};

caf::actor spawn_worker(caf::actor_system& sys, const worker_setup& setup);

// The run options every training path starts from: the run dir, the stop flag, the
// node's event log, the step hooks, and the node's checkpoint_writer, gradient_shards
// and data_prefetcher (of the worker's group), pipeline_stage and health_monitor, and the
// backend on the group's device.
train::RunOptions node_run_options(const worker_setup& setup, caf::actor_system& sys,
                                   const std::atomic<bool>& stop);

}  // namespace dseek::actors
