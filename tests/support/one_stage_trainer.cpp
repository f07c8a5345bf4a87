// Implementation of one_stage_trainer.hpp.
#include "support/one_stage_trainer.hpp"

#include <algorithm>
#include <vector>

#include "runtime/train/pipeline/plan.hpp"
#include "runtime/train/layout/layout_sizes.hpp"
#include "runtime/util/sha256.hpp"

namespace dseek::testing {

namespace {
// The config of this replica's slice: parallel.data is the reducer's world.
config::JobConfig sliced(config::JobConfig config, const train::GradientReducer* reducer) {
  config.parallel.data = reducer != nullptr ? reducer->world_size() : 1;
  return config;
}
}  // namespace

OneStageTrainer::OneStageTrainer(const config::JobConfig& config, train::BatchSource& batches,
                                 train::GradientReducer* reducer,
                                 const train::OptimizerShardsFactory& make_optimizer,
                                 const train::BackendFactory& make_backend)
    : replicas_(reducer != nullptr ? std::make_unique<ReducerReplicaGroup>(*reducer) : nullptr) {
  const config::JobConfig slice = sliced(config, reducer);
  stage_ = std::make_unique<train::PipelineStageTrainer>(slice, batches, links_,
                                                         train::one_stage_plan(slice),
                                                         replicas_.get(), nullptr, make_backend,
                                                         make_optimizer);
}

bool OneStageTrainer::restore_precision_state(const checkpoint::PrecisionState& state) {
  train::LayoutSizes written_by;
  written_by.data = static_cast<uint32_t>(std::max<int64_t>(state.fp8.replicas, 1));
  return stage_->restore_precision_state(state, written_by);
}

std::string OneStageTrainer::params_sha256() {
  stage_->finish_update();
  std::vector<float> host(model().num_params());
  backend().copy_to_host(host.data(), model().params(), host.size() * sizeof(float));
  return util::sha256_hex(host.data(), host.size() * sizeof(float));
}

}  // namespace dseek::testing
