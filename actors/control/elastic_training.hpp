// The training of one node of a multi-node job, as the worker's thread runs it: wait for
// the whole world, connect the data plane for that epoch, agree with the other replicas
// on the freshest state, train data-parallel; when the data plane fails (a node died or
// hung, so the coordinator started a new epoch and the worker aborted the communicator),
// keep the state of the last completed step, wait for the next world the policy
// accepts, and go on from there:
//
//   - the whole world again (the lost node restarted and rejoined) within
//     elastic.rejoin_seconds, else the survivors if they are at least elastic.min_nodes;
//   - state: the freshest in-memory copy among the replicas (ZeRO 0: each keeps its
//     own, identical to its peers'), broadcast to the ranks without it; under ZeRO >= 1
//     each node keeps its own optimizer shard and its ring neighbour's
//     (peer_shard_replica.hpp), and the world puts the whole state back together from
//     them (sharded_state_sync.hpp); when no step can be rebuilt (two neighbours lost,
//     or elastic.shard_replica = false), the newest checkpoint on disk.
//
// A node with several worker groups (cluster.gpus_per_node) runs this once per group,
// each for its rank of the plan (setup.local_rank), with its own state, communicator and
// event log; so does a single node with several groups (its ranks are a world too).
//
// A worker that starts again in the same process (its worker group was restarted after a
// crash in it) first has the coordinator start a new epoch with the same members: its
// peers' collectives with the old worker are broken, and all of them meet in that epoch.
//
// Events: worker_started, training_interrupted (epoch, error), recovered (from_step,
// source = memory | peer | disk, recovery_ms from the failure this node saw to the first
// step completed after it, reason when disk), peer_replica (ZeRO >= 1: what the
// neighbour's shard costs), and the training's own events.
#pragma once

#include <atomic>

#include <caf/fwd.hpp>

#include "actors/control/epoch_board.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/worker_group/worker.hpp"

namespace dseek::actors {

// `starts`: how many times a worker of this node started (1 = first); `stop` ends the
// training at the next step boundary (and any wait at once, with board.close()).
job_finished run_elastic_training(const worker_setup& setup, int starts, caf::actor_system& sys,
                                  EpochBoard& board, const std::atomic<bool>& stop);

}  // namespace dseek::actors
