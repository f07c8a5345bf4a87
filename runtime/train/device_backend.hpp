// Which backend a trainer computes on (train.device). runtime/ does not link the CUDA
// backend (gpu/ sits beside it, DESIGN.md), so the choice is a factory the caller may
// pass down (the trainer, RunOptions::backend): the programs pass one that knows "cuda"
// (gpu/backend_for_device.hpp); without one, make_runtime_backend serves
// the devices runtime/ has and refuses "cuda" naming the key.
#pragma once

#include <functional>
#include <memory>

#include "runtime/backend/backend.hpp"
#include "runtime/config/job_config.hpp"

namespace dseek::train {

using BackendFactory =
    std::function<std::unique_ptr<backend::Backend>(const config::JobConfig& config)>;

// train.device "cpu" (train.threads threads) or "scrambled-cpu-for-tests"; any other
// device throws std::runtime_error naming train.device.
std::unique_ptr<backend::Backend> make_runtime_backend(const config::JobConfig& config);

}  // namespace dseek::train
