// The training of one rank of a multi-rank job (a node's worker group; a node runs
// cluster.gpus_per_node of them), as the worker's thread runs it, in every layout, and
// how it goes on after a membership change (docs/design.md "The node's control loop";
// the recoveries: docs/running.md, docs/parallelism.md):
//
//   - wait for a world epoch the policy accepts (world_policy.hpp);
//   - every node computes the same layout for that world's ranks
//     (train::plan_survivor_layout): the first layout.ranks() ranks connect the data plane
//     and train (dist/run_layout.hpp), the others stand by: they take part in the epoch's
//     rendezvous only, and wait for a later epoch or for the job's end;
//   - state: a step held in memory (a pipeline or tensor layout places its ranks by what
//     they hold), else the newest checkpoint (checkpoint.resume = "latest"); without
//     checkpoint.every_steps the job starts again from its first step, with a
//     recovery_without_checkpoint event;
//   - a node that joins while the layout trains: the ranks finish the step they are in,
//     write its checkpoint and plan again with it; a node lost: the board aborts the
//     data plane and the ranks plan again without it;
//   - a data plane that cannot connect: the epoch failed; the rank asks the coordinator
//     for a new epoch (connect_retry.hpp), which aborts the peers still waiting in that
//     connect (the board holds it).
//
// A worker that starts again in the same process (its worker group was restarted after a
// crash in it) first has the coordinator start a new epoch with the same members: its
// peers' collectives with the old worker are broken, and all of them meet in that epoch.
//
// Events: epoch_layout (every epoch: the layout, this node's rank, train or standby),
// worker_started, training_interrupted (epoch, error; peer_node, peer_host, attempt and
// action = replan | drop_peer when a peer could not be reached), recovered (from_step, source
// memory | peer | disk | start, recovery_ms from the failure this node saw to the start
// of its first step after it, reason when not from memory), recovery_without_checkpoint,
// layout_left, standby_ended; and the training's own events (run_started, peer_replica,
// resumed, ...).
#pragma once

#include <atomic>

#include <caf/fwd.hpp>

#include "actors/control/epoch_board.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/worker_group/worker.hpp"

namespace dseek::actors {

// `stop` ends the training at the next step boundary (and any wait at once, with
// board.close()).
job_finished run_epochs(const worker_setup& setup, caf::actor_system& sys, EpochBoard& board,
                        const std::atomic<bool>& stop);

}  // namespace dseek::actors
