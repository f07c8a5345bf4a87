// The training of one rank of a multi-rank job (a node's worker group; a node runs
// cluster.gpus_per_node of them), as the worker's thread runs it, in every layout, and
// how it goes on after a membership change:
//
//   - wait for a world epoch the policy accepts (world_policy.hpp: the whole world
//     first; after a failure the whole world again, or the survivors once
//     elastic.rejoin_seconds passed and they are at least elastic.min_nodes);
//   - every node computes the same layout for that world's ranks
//     (train::plan_survivor_layout: a data-parallel job as many replicas as the batch
//     splits over; a pipeline or tensor-parallel job fewer replicas first, then fewer
//     stages, down to plain data parallelism): the first layout.ranks() ranks connect
//     the data plane and train (dist/run_layout.hpp), the others stand by: they take part
//     in the epoch's rendezvous only, and wait for a later epoch (the layout grows again
//     when a lost node rejoins) or for the job's end;
//   - state: the layout's ranks first agree on a step held in memory (a rank's copy of
//     its own part, or under ZeRO its pieces and its ring neighbour's:
//     runtime/train/state/stage_memory.hpp; a pipeline or tensor layout places its ranks
//     by what they hold); when none is held,
//     the newest checkpoint (checkpoint.resume = "latest", resharded to the new layout);
//     without checkpoint.every_steps the job starts again from its first step, with a
//     recovery_without_checkpoint event. The sample order is a function of (seed, step):
//     steps run again see the same data;
//   - a node that joins while the layout trains: the ranks finish the step they are in,
//     write its checkpoint and plan again with it; a node lost: the board aborts the
//     data plane and the ranks plan again without it;
//   - a data plane that cannot connect (a peer unreachable, or not all ranks arrived):
//     the epoch failed; the rank asks the coordinator for a new epoch (connect_retry.hpp:
//     the same members after a backoff, or without a node unreachable 3 times in a row),
//     which aborts the peers still waiting in that connect (the board holds it).
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
