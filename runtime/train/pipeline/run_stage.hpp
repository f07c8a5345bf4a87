// The training job of one rank of a pipeline and/or tensor-parallel layout from start to
// finish, the counterpart of run_training.hpp: plan the stages (pipeline/plan.hpp; with
// parallel.pipeline > 1 the split is printed and logged as a pipeline_plan event), run the
// steps with the stage trainer (pipeline/stage_trainer.hpp: one trainer for every such
// layout; a tensor-parallel job without a pipeline is its one stage over
// SingleStageLinks), evaluate, report a step event per step (in a pipeline with the
// measured bubble and the schedule's theoretical one), and at the end write
// RUN_DIR/trace.json (pipelines: stage 0, every stage's spans) and train_done with the
// whole model's params_sha256 (the same on every rank). Every rank calls it with the
// same config (but cluster.node_id). With parallel.data replicas each stage also has its
// data group (`replicas`): the layout is printed and logged (parallel_layout), each
// replica trains its slice of every batch, and replica 0's stage 0 writes the trace.
//
// Checkpoints (state/checkpointing.hpp): replica 0's ranks gather the whole state to
// world rank 0, which writes it through options.checkpoint_sink (or a writer thread);
// checkpoint.resume restores any layout's checkpoint into this one.
// With parallel.tensor = T each stage is a tensor-parallel group (`tensor`): the stage
// trainer runs this rank's shard of every chunk, the layout printed is D x P x T, and
// tensor rank 0 of replica 0's stage 0 writes the trace. parallel.zero >= 1 with
// replicas shards each rank's optimizer over its data group, and comm.compression
// compresses what the group exchanges (the data-parallel reducer, stage_trainer.hpp).
// What these layouts do not run yet is refused by config::check_supported first.
#pragma once

#include <vector>

#include "runtime/config/job_config.hpp"
#include "runtime/model/tensor_group.hpp"
#include "runtime/train/pipeline/links.hpp"
#include "runtime/train/layout/replica_group.hpp"
#include "runtime/train/run_training.hpp"
#include "runtime/train/state/stage_memory.hpp"

namespace dseek::train {

struct PipelineRunSummary {
  RunSummary run;
  std::vector<float> final_params;  // the whole model's, layout order
};

// Uses options.run_dir, console, events, stop, before_step, checkpoint_sink, backend
// (train.device's) and pipeline_stage (where the stage's trainer runs,
// pipeline_stage.hpp); the rest of
// RunOptions is for data-parallel runs.
// `replicas`: the stage's data-parallel group (null: one replica); `tensor`: its
// tensor-parallel group (null: one rank). With options.stage_memory and `memory_sync`,
// the run first tries to resume from the ranks' memory (state/stage_memory.hpp), and
// keeps this rank's state there after every step; a checkpoint is read only when that
// fails.
PipelineRunSummary run_pipeline_stage(const config::JobConfig& config, const RunOptions& options,
                                      PipelineLinks& links, ReplicaGroup* replicas = nullptr,
                                      model::TensorGroup* tensor = nullptr,
                                      StageMemorySync* memory_sync = nullptr);

}  // namespace dseek::train
