// The backend factory of train.device for the programs (dseek-node's workers through
// RunOptions::backend, `dseek bench train`): "cuda" gives make_cuda_backend on the
// node's device `device_index` (a node runs one worker group per local device,
// cluster.gpus_per_node; the group's local rank is its device index); the other devices
// come from runtime/ (train/device_backend.hpp), which have no device index: the CPU is
// shared by a node's local ranks. A build without CUDA, or a host
// without a usable device, fails the run at its start with an error that names
// train.device. It lives in gpu/ because runtime/ does not link the CUDA backend.
#pragma once

#include "runtime/train/device_backend.hpp"

namespace dseek::gpu {

train::BackendFactory backend_for_device(int device_index = 0);

}  // namespace dseek::gpu
