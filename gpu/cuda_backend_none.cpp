// make_cuda_backend() for a build without CUDA kernels: it refuses loudly.
#include <stdexcept>
#include <string>

#include "gpu/cuda_backend.hpp"

namespace dseek::gpu {

std::unique_ptr<backend::Backend> make_cuda_backend(int device_index) {
  throw std::runtime_error("make_cuda_backend(" + std::to_string(device_index) +
                           "): this build of dseek has no CUDA backend (configured with "
                           "DSEEK_WITH_CUDA=OFF, or nvcc was not found)");
}

}  // namespace dseek::gpu
