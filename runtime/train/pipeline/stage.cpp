// Implementation of stage.hpp.
#include "runtime/train/pipeline/stage.hpp"

namespace dseek::train {

std::unique_ptr<PipelineStage> make_pipeline_stage(const PipelineStageFactory& factory,
                                                   const PipelineStageSpec& spec) {
  if (factory) {
    if (auto stage = factory(spec)) return stage;
  }
  return std::make_unique<LocalPipelineStage>(spec);
}

LocalPipelineStage::LocalPipelineStage(const PipelineStageSpec& spec)
    : trainer_(spec.config, spec.batches, spec.links, spec.plan, spec.replicas, spec.tensor,
               spec.make_backend, spec.optimizer_shards) {
  trainer_.set_after_reduction(spec.after_reduction);
  trainer_.set_before_reduction(spec.before_reduction);
  trainer_.set_in_recomputation(spec.in_recomputation);
  trainer_.set_on_disagreement(spec.on_disagreement);
  trainer_.set_trace(spec.trace);
  info_.stage = trainer_.stage();
  info_.replica = trainer_.replica();
  info_.replicas = trainer_.replicas();
  info_.tensor_rank = trainer_.tensor_rank();
  info_.tensor_ranks = trainer_.tensor_ranks();
  info_.gathers_state = trainer_.gathers_state();
  info_.owned_params = trainer_.owned_params();
  info_.shards_optimizer_state = trainer_.shards_optimizer_state();
  info_.zero = info_.shards_optimizer_state ? spec.config.parallel.zero : 0;
  info_.optimizer_params = trainer_.optimizer_params();
  info_.fp8_state_per_replica = trainer_.fp8_state_per_replica();
  info_.optimizer = trainer_.optimizer_description();
  info_.owned_state_floats = trainer_.owned_state_floats();
  info_.owned_state_moments = trainer_.owned_state_moments();
  info_.activation_memory = trainer_.activation_memory();
  info_.plan = trainer_.plan();
  info_.host_memory = trainer_.backend().host_memory()->kind();
  info_.overlaps_update = trainer_.overlaps_update();
  info_.sdc_audit = trainer_.audits();
}

}  // namespace dseek::train
