// The training of one rank of a tensor-parallel job (parallel.tensor > 1, no pipeline,
// parallel.data replicas of the group; a node runs cluster.gpus_per_node such ranks, one
// per worker group), as the worker's thread runs it instead of the
// elastic data-parallel loop: wait for the whole world, connect the data plane for that
// epoch, cut its tensor and data groups (parallel_communicators.hpp, the layout of
// parallel_groups.hpp with one stage: world rank = replica x T + tensor rank), and run
// train::run_tensor_parallel over CommTensorGroup and CommReplicaGroup
// (layout_training.hpp). A tensor-parallel group cannot lose a rank and go on (every
// rank holds a slice of every layer): when a node is lost, the survivors re-plan the
// layout (fewer replicas, else no tensor group) and resume from the newest checkpoint.
// The waiting, connecting, re-planning and resuming are fixed_world_training.hpp's,
// shared with pipeline_stage_training.
#pragma once

#include <atomic>

#include <caf/fwd.hpp>

#include "actors/node/epoch_board.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/node/worker.hpp"

namespace dseek::actors {

job_finished run_tensor_parallel_training(const worker_setup& setup, caf::actor_system& sys,
                                          EpochBoard& board, const std::atomic<bool>& stop);

}  // namespace dseek::actors
