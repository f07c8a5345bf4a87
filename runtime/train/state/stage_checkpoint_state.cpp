// Implementation of stage_checkpoint_state.hpp.
#include "runtime/train/state/stage_checkpoint_state.hpp"

namespace dseek::train {

LayoutSizes PipelineCheckpointState::sizes() const {
  LayoutSizes sizes;
  sizes.data = static_cast<uint32_t>(trainer_.info().replicas);
  sizes.pipeline = static_cast<uint32_t>(trainer_.info().plan.shape.stages);
  sizes.tensor = static_cast<uint32_t>(trainer_.info().tensor_ranks);
  sizes.zero = static_cast<uint32_t>(trainer_.info().zero);
  return sizes;
}

}  // namespace dseek::train
