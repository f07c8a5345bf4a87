// Implementation of device_backend.hpp.
#include "runtime/train/device_backend.hpp"

#include <stdexcept>
#include <string>

#include "runtime/backend/scrambled_backend.hpp"

namespace dseek::train {

std::unique_ptr<backend::Backend> make_runtime_backend(const config::JobConfig& config) {
  const auto& t = config.train;
  const int threads = static_cast<int>(t.threads);
  if (t.device == config::Device::cpu) return backend::make_cpu_backend(threads);
  if (t.device == config::Device::scrambled_cpu_for_tests)
    return backend::make_scrambled_backend(threads);
  throw std::runtime_error("train.device = \"" + config::name_string(t.device) +
                           "\": this program computes on \"cpu\" only (the CUDA backend is "
                           "chosen by dseek-node's workers)");
}

}  // namespace dseek::train
