// The one error type of the checkpoint module. Its messages name the checkpoint file
// and, where one is involved, the tensor, so an operator knows what to delete or copy.
#pragma once

#include <stdexcept>

namespace dseek::checkpoint {

struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace dseek::checkpoint
