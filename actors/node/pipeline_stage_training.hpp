// The training of one node of a pipeline-parallel job (parallel.pipeline > 1, with
// parallel.data replicas of the pipeline), as the worker's thread runs it instead of the
// elastic data-parallel loop: wait for the whole world, connect the data plane for that
// epoch (world rank = replica x P + stage), and run the stage (actors::run_pipeline,
// which cuts the pipeline and data groups), its trainer in the worker group's
// pipeline_stage actor (pipeline_stage.hpp). A pipeline cannot lose a stage and go on
// yet: when the data plane fails (a node died or hung and the epoch moved on), the job
// fails at once with "recovery of pipeline-parallel jobs is not written yet" instead of
// waiting. The waiting, connecting and failing are fixed_world_training.hpp's, shared
// with tensor_parallel_training. A restarted worker group (its pipeline_stage or worker
// crashed) announces the restart, which fails the other stages the same way, and fails
// itself naming its stage.
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
