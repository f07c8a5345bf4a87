// What the training of a pipeline or tensor-parallel job (parallel.pipeline or
// parallel.tensor > 1, with parallel.data replicas; a node runs cluster.gpus_per_node
// such ranks, one per worker group, each with its pipeline_stage actor that owns the
// stage trainer) does around its run, as the worker's thread runs it instead of the
// elastic data-parallel loop, and how it goes on after a node loss:
//
//   - wait for a world epoch the policy accepts (control/world_policy.hpp: the whole world first;
//     after a failure the whole world again, or the survivors once elastic.rejoin_seconds
//     passed and they are at least elastic.min_nodes);
//   - every node computes the same layout for that world's ranks (every member's worker
//     groups, cluster.gpus_per_node a node; train::plan_survivor_layout: fewer
//     data-parallel replicas first, then fewer pipeline stages, down to plain data
//     parallelism): the first layout.ranks() ranks connect the data plane and train
//     (control/layout_training.hpp), the others stand by: they take part in the epoch's
//     rendezvous only, and wait for a later epoch (the layout grows again when a lost
//     node rejoins) or for the job's end (a member that left after its training ended,
//     or a worker group of the same node that trained to the end);
//   - state: after a failure every rank resumes from the newest checkpoint
//     (checkpoint.resume = "latest": the whole-model checkpoint of checkpointing,
//     resharded to the new layout); without checkpoint.every_steps the job starts again
//     from its first step, with a recovery_without_checkpoint event (nothing is lost but
//     time). The sample order is a function of (seed, step): the steps run again see the
//     same data.
//
// Events: epoch_layout (every epoch: the layout, this node's rank, train or standby),
// worker_started, training_interrupted (epoch, error), recovered (from_step, source
// "disk" or "start", recovery_ms from the failure this node saw to the start of its first
// step on the new layout), recovery_without_checkpoint, standby_ended; and the
// training's own events (parallel_layout, resumed, ...).
#pragma once

#include <atomic>

#include <caf/fwd.hpp>

#include "actors/control/epoch_board.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/worker_group/worker.hpp"

namespace dseek::actors {

job_finished run_on_fixed_world(const worker_setup& setup, caf::actor_system& sys,
                                EpochBoard& board, const std::atomic<bool>& stop);

}  // namespace dseek::actors
