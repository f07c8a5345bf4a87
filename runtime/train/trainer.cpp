// Implementation of trainer.hpp: the single-stage plan and the calls handed to the stage
// trainer.
#include "runtime/train/trainer.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "runtime/train/state/checkpoint_state.hpp"
#include "runtime/util/sha256.hpp"

namespace dseek::train {

namespace {

// The micro-batch of a replica's slice of the global batch, checked as the data-parallel
// job states it (train.batch_size over the world size, train.micro_batch_size).
int64_t micro_batch_of(const config::TrainConfig& t, const GradientReducer* reducer) {
  if (reducer == nullptr) return t.micro_batch_size > 0 ? t.micro_batch_size : t.batch_size;
  const int64_t world = reducer->world_size();
  const int64_t rank = reducer->rank();
  if (world < 1 || rank < 0 || rank >= world)
    throw std::invalid_argument("Trainer: replica " + std::to_string(rank) + " of " +
                                std::to_string(world) + " is not a valid data-parallel rank");
  if (t.batch_size % world != 0)
    throw std::invalid_argument(
        "train.batch_size = " + std::to_string(t.batch_size) +
        " does not split evenly over the data-parallel world size " + std::to_string(world) +
        ": every replica computes the same number of sequences of the global batch");
  const int64_t size = t.batch_size / world;
  if (t.micro_batch_size > 0 && size % t.micro_batch_size != 0)
    throw std::invalid_argument(
        "train.micro_batch_size = " + std::to_string(t.micro_batch_size) +
        " does not divide a replica's slice of train.batch_size (" +
        std::to_string(t.batch_size) + " / world size " + std::to_string(world) + " = " +
        std::to_string(size) + " sequences)");
  return t.micro_batch_size > 0 ? t.micro_batch_size : size;
}

// One stage, one chunk with every layer, its micro-batches one forward and backward at a
// time (1F1B on one stage).
PipelinePlan single_stage_plan(const config::JobConfig& config, const GradientReducer* reducer) {
  const int64_t micro_batch = micro_batch_of(config.train, reducer);
  if (config.train.batch_size % micro_batch != 0)
    throw std::invalid_argument("train.micro_batch_size = " + std::to_string(micro_batch) +
                                " does not divide train.batch_size = " +
                                std::to_string(config.train.batch_size));
  const int64_t world = reducer != nullptr ? reducer->world_size() : 1;
  PipelinePlan plan;
  plan.shape.kind = ScheduleKind::one_f_one_b;
  plan.shape.stages = 1;
  plan.shape.micro_batches = config.train.batch_size / world / micro_batch;
  plan.micro_batch_size = micro_batch;
  plan.ranges = {model::LayerRange{0, config.model.layers}};
  return plan;
}

}  // namespace

Trainer::Trainer(const config::JobConfig& config, BatchSource& train_batches,
                 GradientReducer* reducer, const OptimizerShardsFactory& make_optimizer,
                 const BackendFactory& make_backend)
    : config_(config),
      replicas_(reducer != nullptr ? std::make_unique<ReducerReplicaGroup>(*reducer) : nullptr) {
  // The job's ZeRO stage is the reducer's (dist/reducer_settings.hpp gives it parallel.zero).
  config_.parallel.zero = reducer != nullptr && reducer->shards_optimizer_state()
                              ? std::max<int64_t>(config.parallel.zero, 1) : 0;
  stage_ = std::make_unique<PipelineStageTrainer>(config_, train_batches, links_,
                                                  single_stage_plan(config_, reducer),
                                                  replicas_.get(), nullptr, make_backend,
                                                  make_optimizer);
}

Trainer::~Trainer() = default;

StepReport Trainer::train_step(int64_t step) { return stage_->train_step(step).step; }

void Trainer::snapshot(float* params, float* adam_m, float* adam_v) {
  stage_->copy_whole_state(params, adam_m, adam_v, /*gather_moments=*/true);
}

void Trainer::restore(const float* params, const float* adam_m, const float* adam_v,
                      int64_t optimizer_steps) {
  stage_->restore_state(params, adam_m, adam_v, optimizer_steps);
}

bool Trainer::restore_precision_state(const checkpoint::PrecisionState& state) {
  LayoutSizes written_by;  // a whole model on each of the replicas that wrote it
  written_by.data = static_cast<uint32_t>(std::max<int64_t>(state.fp8.replicas, 1));
  return stage_->restore_precision_state(state, written_by);
}

std::string Trainer::params_sha256() {
  stage_->finish_update();
  model::GptModel& model = stage_->whole_model();
  std::vector<float> host(model.num_params());
  stage_->backend().copy_to_host(host.data(), model.params(), host.size() * sizeof(float));
  return util::sha256_hex(host.data(), host.size() * sizeof(float));
}

}  // namespace dseek::train
