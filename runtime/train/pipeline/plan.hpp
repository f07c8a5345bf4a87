// The plan of a pipeline-parallel job, the same on every stage: the schedule's shape
// (parallel.schedule, parallel.pipeline, parallel.micro_batches, parallel.virtual_stages)
// and the layer range of each virtual stage (parallel.partition). A balanced partition
// profiles the layers on stage 0 and broadcasts the costs, so that every stage cuts the
// model at the same places whatever its own timings (and with parallel.data replicas,
// replica 0's stage 0 measures for all of them).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/model/tensor_group.hpp"
#include "runtime/train/pipeline/links.hpp"
#include "runtime/train/pipeline/partition.hpp"
#include "runtime/train/pipeline/schedule.hpp"
#include "runtime/train/layout/replica_group.hpp"

namespace dseek::train {

struct PipelinePlan {
  ScheduleShape shape;
  int64_t micro_batch_size = 0;             // sequences per micro-batch
  std::vector<model::LayerRange> ranges;    // per virtual stage (chunk * P + stage)
  LayerCosts costs;                         // balanced only: what the split was chosen on
  std::vector<double> stage_costs;          // balanced only: predicted cost per stage
};

// The schedule shape and micro-batch size of `config` (the micro-batches of one
// pipeline replica's slice of the batch); throws config::ConfigError naming the keys
// when they do not fit (micro-batches that do not split the slice,
// interleaved without m % P == 0, fewer blocks than virtual stages).
ScheduleShape schedule_shape_of(const config::JobConfig& config);
int64_t pipeline_micro_batch_size(const config::JobConfig& config);

// Collective over the stages (and `replicas`, the stage's data group, null with one
// replica, and `tensor`, the stage's tensor-parallel group, null with one rank) when
// parallel.partition = "balanced" (the profile runs on stage 0 of replica 0, tensor
// rank 0, with `backend`: the whole model's layer costs, which tensor parallelism
// divides about evenly).
PipelinePlan plan_pipeline(const config::JobConfig& config, PipelineLinks& links,
                           backend::Backend& backend, ReplicaGroup* replicas = nullptr,
                           model::TensorGroup* tensor = nullptr);
// The plan of a rank without a pipeline (parallel.pipeline = 1): every layer in its one
// chunk, its slice of the batch (parallel.data replicas) in micro-batches, checked as
// plan_pipeline checks it; no communication.
PipelinePlan one_stage_plan(const config::JobConfig& config);

}  // namespace dseek::train
