// Implementation of backend_for_device.hpp (built with or without CUDA: without it,
// make_cuda_backend throws and this says which key asked for it).
#include "gpu/backend_for_device.hpp"

#include <stdexcept>
#include <string>

#include "gpu/cuda_backend.hpp"
#include "runtime/backend/device_error.hpp"

namespace dseek::gpu {

train::BackendFactory backend_for_device(int device_index) {
  return [device_index](const config::JobConfig& config) -> std::unique_ptr<backend::Backend> {
    if (config.train.device != config::Device::cuda) return train::make_runtime_backend(config);
    try {
      return make_cuda_backend(device_index);
    } catch (const std::exception& error) {
      throw backend::DeviceError(std::string("train.device = \"cuda\": no CUDA backend on device ") +
                               std::to_string(device_index) + " for this run: " + error.what());
    }
  };
}

}  // namespace dseek::gpu
