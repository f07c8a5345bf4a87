// One rank of a job on the layout its config names (parallel.data x parallel.pipeline x
// parallel.tensor), over the world's communicator: a pipeline stage and/or tensor-parallel
// rank (run_pipeline.hpp) when the layout has a pipeline or a tensor group, and otherwise
// a data-parallel replica (run_data_parallel.hpp), down to a single rank. What the
// node's control loop (actors/control/epoch_loop.hpp) and the tests' rank program
// (tests/support/rank_main.cpp) run; the one place that picks the path.
#pragma once

#include "comm/communicator.hpp"
#include "dist/reducer_settings.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/train/pipeline/run_stage.hpp"
#include "runtime/train/run_training.hpp"

namespace dseek::dist {

// `settings`: the data group's reduction (reducer_settings(config), or a test's);
// `device`: the epoch's NCCL communicator (comm.backend = "nccl"), else null: the
// gradients go over it in every layout, and a tensor group's all-reduces too. final_params is the whole model's on a pipeline's
// first rank, empty otherwise. Throws as run_pipeline and run_data_parallel do.
train::PipelineRunSummary run_layout(const config::JobConfig& config,
                                     const train::RunOptions& options, comm::Communicator& comm,
                                     ReducerSettings settings, comm::Communicator* device = nullptr);

}  // namespace dseek::dist
