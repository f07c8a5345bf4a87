// Implementation of plan.hpp.
#include "runtime/train/pipeline/plan.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "runtime/config/load.hpp"
#include "runtime/train/model_of_config.hpp"

namespace dseek::train {

namespace {
[[noreturn]] void refuse(const config::JobConfig& config, const std::string& why) {
  throw config::ConfigError(config.source + ": " + why);
}
}  // namespace

int64_t pipeline_micro_batch_size(const config::JobConfig& config) {
  const auto& t = config.train;
  const int64_t m = config.parallel.micro_batches;
  // With parallel.data = D replicas, each pipeline runs its slice of the global batch
  // (layout/replica_group.hpp) in m micro-batches.
  const int64_t replicas = config.parallel.data;
  // data.balance = "throughput": whole micro-batches of train.micro_batch_size, as many
  // to each replica as its speed earns (layout/batch_shares.hpp); validate.cpp checks them.
  if (config.data.balance == config::Balance::throughput) return t.micro_batch_size;
  if (t.batch_size % replicas != 0)
    refuse(config, "train.batch_size (" + std::to_string(t.batch_size) +
                       ") must be divisible by parallel.data (" + std::to_string(replicas) +
                       "): every pipeline replica runs an equal slice of the global batch");
  const int64_t slice = t.batch_size / replicas;
  const std::string sliced =
      replicas == 1 ? "train.batch_size (" + std::to_string(t.batch_size) + ")"
                    : "each pipeline's slice of train.batch_size (" + std::to_string(t.batch_size) +
                          " / parallel.data = " + std::to_string(slice) + ")";
  if (m == 0) {
    // One stage (a tensor-parallel job): the whole slice at once unless set.
    if (t.micro_batch_size == 0 && config.parallel.pipeline == 1) return slice;
    if (t.micro_batch_size == 0)
      refuse(config, "a pipeline needs micro-batches: set parallel.micro_batches or "
                     "train.micro_batch_size");
    if (slice % t.micro_batch_size != 0)
      refuse(config, "train.micro_batch_size (" + std::to_string(t.micro_batch_size) +
                         ") must divide " + sliced);
    return t.micro_batch_size;
  }
  if (slice % m != 0)
    refuse(config, "parallel.micro_batches (" + std::to_string(m) + ") must divide " + sliced);
  if (t.micro_batch_size > 0 && t.micro_batch_size * m != slice)
    refuse(config, "parallel.micro_batches (" + std::to_string(m) + ") x train.micro_batch_size (" +
                       std::to_string(t.micro_batch_size) + ") must equal " + sliced +
                       "; set only one of them");
  return slice / m;
}

ScheduleShape schedule_shape_of(const config::JobConfig& config) {
  ScheduleShape shape;
  shape.stages = config.parallel.pipeline;
  // Under data.balance = "throughput" a replica's count is its share (the stage trainer
  // sets it); here the even share, at least one unit (interleaved: P micro-batches).
  shape.micro_batches =
      config.train.batch_size / pipeline_micro_batch_size(config) / config.parallel.data;
  if (config.data.balance == config::Balance::throughput) {
    const int64_t unit = config.parallel.schedule == config::Schedule::interleaved
                             ? config.parallel.pipeline
                             : 1;
    shape.micro_batches = std::max(unit, shape.micro_batches / unit * unit);
  }
  shape.virtual_stages = config.parallel.virtual_stages;
  try {
    shape.kind = config.parallel.schedule;
    check_schedule_shape(shape);
  } catch (const std::invalid_argument& error) {
    refuse(config, error.what());
  }
  if (config.model.layers < shape.total_virtual_stages())
    refuse(config, "model.layers (" + std::to_string(config.model.layers) +
                       ") must be at least parallel.pipeline x parallel.virtual_stages (" +
                       std::to_string(shape.total_virtual_stages()) +
                       "): every virtual stage runs at least one block");
  return shape;
}

PipelinePlan one_stage_plan(const config::JobConfig& config) {
  if (config.parallel.pipeline != 1) refuse(config, "one_stage_plan: a pipeline has several stages");
  PipelinePlan plan;
  plan.shape = schedule_shape_of(config);
  plan.micro_batch_size = pipeline_micro_batch_size(config);
  plan.ranges = uniform_partition(config.model.layers, 1);
  return plan;
}

PipelinePlan plan_pipeline(const config::JobConfig& config, PipelineLinks& links,
                           backend::Backend& backend, ReplicaGroup* replicas,
                           model::TensorGroup* tensor) {
  PipelinePlan plan;
  plan.shape = schedule_shape_of(config);
  plan.micro_batch_size = pipeline_micro_batch_size(config);
  const int64_t parts = plan.shape.total_virtual_stages();
  // One part (a data-parallel or tensor-parallel rank): every layer, nothing to balance.
  if (parts == 1 || config.parallel.partition == config::Partition::uniform) {
    plan.ranges = uniform_partition(config.model.layers, parts);
    return plan;
  }
  const model::GptShape shape = shape_of(config.model);
  const size_t L = static_cast<size_t>(config.model.layers);
  const model::RecomputePolicy recompute = recompute_of(config.model);
  // embedding, L blocks, head, and under recompute what recomputing each block adds
  std::vector<double> values(L + 2 + (recompute.any() ? L : 0), 0.0);
  const bool measures = links.stage() == 0 && (replicas == nullptr || replicas->replica() == 0) &&
                        (tensor == nullptr || tensor->rank() == 0);
  if (measures) {
    const LayerCosts measured = profile_layer_costs(shape, backend, plan.micro_batch_size, 3, recompute);
    values[0] = measured.embedding;
    for (size_t l = 0; l < L; ++l) values[1 + l] = measured.blocks[l];
    values[L + 1] = measured.head;
    for (size_t l = 0; l < measured.recompute.size(); ++l) values[L + 2 + l] = measured.recompute[l];
  }
  links.broadcast_from_first(values);
  // Every replica (and tensor rank) cuts where replica 0's tensor rank 0 measured (the
  // others add zeros: exact; the tensor group's sum is f32, the same bits on every rank).
  if (tensor != nullptr && tensor->size() > 1) {
    std::vector<float> narrowed(values.begin(), values.end());
    tensor->all_reduce_sum(narrowed.data(), narrowed.size());
    values.assign(narrowed.begin(), narrowed.end());
  }
  if (replicas != nullptr) {
    replicas->sum(values);
  }
  plan.costs.embedding = values[0];
  plan.costs.blocks.assign(values.begin() + 1, values.begin() + 1 + static_cast<std::ptrdiff_t>(L));
  plan.costs.head = values[L + 1];
  if (recompute.any()) {
    plan.costs.recompute_policy = recompute;
    plan.costs.recompute.assign(values.begin() + static_cast<std::ptrdiff_t>(L + 2), values.end());
  }
  plan.ranges = balanced_partition(plan.costs, parts);
  plan.stage_costs.assign(static_cast<size_t>(plan.shape.stages), 0.0);
  for (int64_t g = 0; g < parts; ++g)
    plan.stage_costs[static_cast<size_t>(g % plan.shape.stages)] +=
        range_cost(plan.costs, plan.ranges[static_cast<size_t>(g)]);
  return plan;
}

}  // namespace dseek::train
