// A lower bound on the host memory a job's model needs, checked by validate() before
// anything is allocated: absurd sizes (model.dim = 1e6) ended in a bare std::bad_alloc
// (issue 28, finding 7). The bound is conservative (only what cannot be avoided:
// parameters, gradients and AdamW's two moments in fp32 for this node's share of the
// model), so a job that fits is never refused.
#pragma once

#include <optional>
#include <string>

#include "runtime/config/job_config.hpp"

namespace dseek::config {

// Parameters of the GPT the config describes (double: an absurd config overflows int64).
double parameter_count(const ModelConfig& model);
// Bytes one node needs at least: 16 per parameter of its share (parallel.tensor x
// parallel.pipeline split the model).
double minimum_node_bytes(const JobConfig& config);
// Physical memory of this machine in bytes (0 if unknown).
double physical_memory_bytes();
// The message when `minimum_node_bytes` exceeds `available_bytes`; nullopt if it fits
// (or `available_bytes` is 0: unknown).
std::optional<std::string> memory_shortfall(const JobConfig& config, double available_bytes);

}  // namespace dseek::config
