// The entry point for a process that is one rank of a pipeline and/or tensor-parallel
// job and already has the world's communicator (parallel.data x parallel.pipeline x
// parallel.tensor ranks, world rank = (replica x P + stage) x T + tensor rank,
// layout/parallel_groups.hpp), through run_layout.hpp. Cuts
// the pipeline, data and tensor groups (parallel_communicators.hpp), wraps them in
// CommPipelineLinks (SingleStageLinks without a pipeline), CommReplicaGroup and
// CommTensorGroup and runs train::run_pipeline_stage. Every rank calls it with the same
// config (but cluster.node_id) and the same run_dir.
#pragma once

#include "comm/communicator.hpp"
#include "dist/reducer_settings.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/train/pipeline/run_stage.hpp"

namespace dseek::dist {

// `settings`: the data group's reduction (its after_first_bucket is
// options.during_reduction). Throws config::ConfigError for settings the pipeline cannot
// run, comm::CommError when the data plane fails (the communicator is spent then).
train::PipelineRunSummary run_pipeline(const config::JobConfig& config,
                                       const train::RunOptions& options, comm::Communicator& comm,
                                       ReducerSettings settings);

}  // namespace dseek::dist
