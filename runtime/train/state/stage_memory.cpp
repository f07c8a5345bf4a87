// Implementation of stage_memory.hpp.
#include "runtime/train/state/stage_memory.hpp"

namespace dseek::train {

StagePosition position_of(const PipelineStageInfo& info) {
  StagePosition at;
  at.pipeline = info.plan.shape.stages;
  at.tensor = info.tensor_ranks;
  at.stage = info.stage;
  at.tensor_rank = info.tensor_rank;
  at.ranges = info.plan.ranges;
  return at;
}

void StageMemory::keep(int64_t steps_done, const StagePosition& at, PipelineStage& stage) {
  StageStateCopy& copy = copies_[0].steps_done <= copies_[1].steps_done ? copies_[0] : copies_[1];
  copy.state.resize(stage.info().owned_state_floats);
  stage.copy_owned_state(copy.state.data());
  copy.steps_done = steps_done;
  copy.optimizer_steps = stage.optimizer_steps();
  copy.position = at;
}

const StageStateCopy* StageMemory::find(int64_t steps_done, const StagePosition& at) const {
  for (const StageStateCopy& copy : copies_)
    if (copy.steps_done == steps_done && steps_done >= 0 && copy.position == at) return &copy;
  return nullptr;
}

std::vector<StageHolding> StageMemory::holdings() const {
  std::vector<StageHolding> held;
  for (const StageStateCopy* copy : {&copies_[0], &copies_[1], &sharded_.own})
    if (copy->steps_done >= 0)
      held.push_back({copy->position.pipeline, copy->position.tensor, copy->position.stage,
                      copy->position.tensor_rank, copy->steps_done});
  return held;
}

std::string why_no_memory_recovery(const config::JobConfig& config) {
  if (config.parallel.zero > 0 && !config.elastic.shard_replica)
    return "elastic.shard_replica = false: under parallel.zero = " +
           std::to_string(config.parallel.zero) +
           " a replica holds pieces of its stage's moments only, and no rank keeps a lost "
           "rank's pieces";
  if (config.train.precision == config::Precision::fp8)
    return "train.precision = \"fp8\": the amax histories are not kept in memory";
  return "";
}

}  // namespace dseek::train
