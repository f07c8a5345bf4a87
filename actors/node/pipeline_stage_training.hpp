// The training of one rank of a pipeline-parallel job (parallel.pipeline > 1, with
// parallel.data replicas of the pipeline; a node runs cluster.gpus_per_node such ranks,
// one per worker group, each with its own pipeline_stage actor), as the worker's thread
// runs it instead of the elastic data-parallel loop: wait for the whole world, connect the data plane for that
// epoch (world rank = replica x P + stage), and run the stage (actors::run_pipeline,
// which cuts the pipeline and data groups), its trainer in the worker group's
// pipeline_stage actor (pipeline_stage.hpp). When a node is lost (or this node's worker
// group restarted after a crash in its pipeline_stage or worker), the survivors re-plan
// the layout (fewer replicas, then fewer stages) and resume from the newest checkpoint.
// The waiting, connecting, re-planning and resuming are fixed_world_training.hpp's,
// shared with tensor_parallel_training.
#pragma once

#include <atomic>

#include <caf/fwd.hpp>

#include "actors/node/epoch_board.hpp"
#include "actors/node/node_messages.hpp"
#include "actors/node/worker.hpp"

namespace dseek::actors {

job_finished run_pipeline_stage_training(const worker_setup& setup, caf::actor_system& sys,
                                         EpochBoard& board, const std::atomic<bool>& stop);

}  // namespace dseek::actors
