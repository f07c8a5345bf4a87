// The backend factory of train.device for the programs (dseek-node's workers through
// RunOptions::backend, `dseek bench train`): "cuda" gives make_cuda_backend on device 0
// of the node (one worker per node drives one GPU, cluster.gpus_per_node = 1); the other
// devices come from runtime/ (train/device_backend.hpp). A build without CUDA, or a host
// without a usable device, fails the run at its start with an error that names
// train.device. It lives in gpu/ because runtime/ does not link the CUDA backend.
#pragma once

#include "runtime/train/device_backend.hpp"

namespace dseek::gpu {

train::BackendFactory backend_for_device();

}  // namespace dseek::gpu
