// Implementation of tensor_checkpoint_state.hpp.
#include "runtime/train/tensor_checkpoint_state.hpp"

namespace dseek::train {

LayoutSizes TensorCheckpointState::sizes() const {
  LayoutSizes sizes;
  sizes.data = static_cast<uint32_t>(trainer_.replicas());
  sizes.tensor = static_cast<uint32_t>(trainer_.ranks());
  return sizes;
}

}  // namespace dseek::train
