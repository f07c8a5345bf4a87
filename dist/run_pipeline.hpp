// The entry point for a process that is one rank of a pipeline and/or tensor-parallel
// job and already has the world's communicator (parallel.data x parallel.pipeline x
// parallel.tensor ranks, world rank = (replica x P + stage) x T + tensor rank,
// layout/parallel_groups.hpp), through run_layout.hpp. Cuts
// the pipeline, data and tensor groups (parallel_communicators.hpp), wraps them in
// CommPipelineLinks (SingleStageLinks without a pipeline), CommReplicaGroup and
// CommTensorGroup and runs train::run_pipeline_stage. Every rank calls it with the same
// config (but cluster.node_id) and the same run_dir.
//
// With a `device` communicator (the epoch's NCCL one, comm.backend = "nccl") its tensor
// and data groups are cut too: the tensor group's all-reduces and, with
// settings.backend_memory, the data group's gradient reduction run on the GPU's memory.
// The activations between stages stay on the host plane (UCX, staged per micro-batch):
// NCCL orders one communicator's operations on one stream and a send waits for its
// receiver, so the schedule's pre-posted receives would have to be grouped with their
// sends to be deadlock-free there.
#pragma once

#include "comm/communicator.hpp"
#include "dist/reducer_settings.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/train/pipeline/run_stage.hpp"

namespace dseek::dist {

// `settings`: the data group's reduction (its after_first_bucket is
// options.during_reduction); `device`: see above, or null. Throws config::ConfigError for settings the pipeline cannot
// run, comm::CommError when the data plane fails (the communicator is spent then).
train::PipelineRunSummary run_pipeline(const config::JobConfig& config,
                                       const train::RunOptions& options, comm::Communicator& comm,
                                       ReducerSettings settings,
                                       comm::Communicator* device = nullptr);

}  // namespace dseek::dist
