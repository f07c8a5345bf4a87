// The training job of one rank of a tensor-parallel group (one of parallel.data
// replicas of the group) from start to finish, the
// tensor-parallel counterpart of run_pipeline_stage.hpp: the rank layout printed and
// logged (parallel_layout, from parallel_groups.hpp), then the steps of
// TensorParallelTrainer with the same events as every other path (run_started, step,
// eval, train_done or train_stopped), train_done carrying the params_sha256 of the
// GATHERED whole model (the same on every rank, and comparable with a single-node run
// of the same config up to float rounding). Every rank of `group` calls it with the same
// config (but cluster.node_id) and the same run_dir.
//
// Checkpoints (gathered_checkpointing.hpp): replica 0's group assembles the whole state
// on world rank 0, which writes it through options.checkpoint_sink (or a writer thread);
// checkpoint.resume slices any layout's checkpoint into this rank's shard.
// With parallel.pipeline > 1 as well, the job runs on the pipeline path instead
// (run_pipeline_stage.hpp: each stage a tensor-parallel group). Not in a tensor-parallel
// run (refused by config::check_supported before it gets here): compression, faults
// other than kill and fail_checkpoint_write. parallel.zero >= 1 with replicas shards the
// rank's optimizer over its data group (data_group_shards.hpp).
#pragma once

#include "runtime/config/job_config.hpp"
#include "runtime/model/tensor_group.hpp"
#include "runtime/train/replica_group.hpp"
#include "runtime/train/run_training.hpp"

namespace dseek::train {

// Uses options.run_dir, console, events, stop, before_step, checkpoint_sink and backend
// (train.device's); the rest of RunOptions
// is for data-parallel runs. `replicas`: the rank's data-parallel group (null: one
// replica).
RunSummary run_tensor_parallel(const config::JobConfig& config, const RunOptions& options,
                               model::TensorGroup& group, ReplicaGroup* replicas = nullptr);

}  // namespace dseek::train
