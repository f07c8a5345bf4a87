// A device this run asked for (train.device = "cuda") is not there or cannot be used:
// no CUDA in this build, no driver, fewer devices than cluster.gpus_per_node. It fails
// the same way on every start: a permanent error (runtime/util/failure_kind.hpp). The
// CUDA side (gpu/backend_for_device.cpp) throws it.
#pragma once

#include <stdexcept>

namespace dseek::backend {

struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace dseek::backend
