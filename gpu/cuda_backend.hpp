// The CUDA implementation of the compute backend (runtime/backend/backend.hpp): the
// same ops as the CPU backend, on one device, with device memory from one pool per
// device. The model and the trainers take a Backend&, so they run on either.
//
// In a build without CUDA (or before the kernels exist) make_cuda_backend throws a
// std::runtime_error that says why, so callers need no #ifdefs.
#pragma once

#include <memory>

#include "runtime/backend/backend.hpp"

namespace dseek::gpu {

// A backend on CUDA device `device_index` (0-based, as nvidia-smi lists them).
std::unique_ptr<backend::Backend> make_cuda_backend(int device_index);

}  // namespace dseek::gpu
