// One rank of a job on the layout its config names (parallel.data x parallel.pipeline x
// parallel.tensor; a data-parallel job's replicas are the world's ranks), over the
// world's communicator: what the node's control loop (actors/control/epoch_loop.hpp) and
// the tests' rank program (tests/support/rank_main.cpp) run for every layout. Cuts the
// pipeline, data and tensor groups (parallel_communicators.hpp; world rank = (replica x
// P + stage) x T + tensor rank, layout/parallel_groups.hpp), wraps them in
// CommPipelineLinks (SingleStageLinks without a pipeline), CommReplicaGroup and
// CommTensorGroup, and runs the one training loop, train::run_pipeline_stage, with the
// ranks' memory between epochs kept and agreed on by CommStageMemorySync. Every rank
// calls it with the same config (but cluster.node_id) and the same run_dir.
//
// With a `device` communicator (the epoch's NCCL one, comm.backend = "nccl") its tensor
// and data groups are cut too: the tensor group's all-reduces and, with
// settings.backend_memory, the data group's gradient reduction run on the GPU's memory,
// and AdamW runs there too (the trainer's own optimizer, not the CPU-offloaded
// gradient_shard actors, which would copy the gradients down and the parameters up every
// step). The activations between stages stay on the host plane (UCX, staged per
// micro-batch): NCCL orders one communicator's operations on one stream and a send waits
// for its receiver, so the schedule's pre-posted receives would have to be grouped with
// their sends to be deadlock-free there.
#pragma once

#include "comm/communicator.hpp"
#include "dist/reducer_settings.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/train/pipeline/run_stage.hpp"
#include "runtime/train/run_training.hpp"

namespace dseek::dist {

// `settings`: the data group's reduction (reducer_settings(config), or a test's; its
// after_first_bucket is options.during_reduction). final_params is the whole model's on
// every rank. Throws config::ConfigError for settings the layout cannot run,
// comm::CommError when the data plane fails (the communicator is spent then).
train::PipelineRunSummary run_layout(const config::JobConfig& config,
                                     const train::RunOptions& options, comm::Communicator& comm,
                                     ReducerSettings settings, comm::Communicator* device = nullptr);

}  // namespace dseek::dist
