// Implementation of pipeline_checkpoint_state.hpp.
#include "runtime/train/pipeline_checkpoint_state.hpp"

namespace dseek::train {

LayoutSizes PipelineCheckpointState::sizes() const {
  LayoutSizes sizes;
  sizes.data = static_cast<uint32_t>(trainer_.replicas());
  sizes.pipeline = static_cast<uint32_t>(trainer_.plan().shape.stages);
  sizes.tensor = static_cast<uint32_t>(trainer_.tensor_ranks());
  return sizes;
}

}  // namespace dseek::train
