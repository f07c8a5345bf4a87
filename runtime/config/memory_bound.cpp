// Implementation of memory_bound.hpp.
#include "runtime/config/memory_bound.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace dseek::config {

double parameter_count(const ModelConfig& m) {
  const double C = static_cast<double>(m.dim), L = static_cast<double>(m.layers);
  // Embeddings (tokens, positions), per block: 2 layer norms, qkv, attention projection,
  // the MLP's two matrices (with biases); the final layer norm. (model/param_layout.cpp)
  const double block = 12 * C * C + 13 * C;
  return static_cast<double>(m.vocab) * C + static_cast<double>(m.context) * C + L * block + 2 * C;
}

double minimum_node_bytes(const JobConfig& config) {
  const double share = static_cast<double>(std::max<int64_t>(config.parallel.tensor, 1) *
                                           std::max<int64_t>(config.parallel.pipeline, 1));
  return 16.0 * parameter_count(config.model) / share;
}

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

std::optional<std::string> memory_shortfall(const JobConfig& config, double available_bytes) {
  const double needed = minimum_node_bytes(config);
  if (available_bytes <= 0 || needed <= available_bytes) return std::nullopt;
  char text[512];
  std::snprintf(text, sizeof text,
                "the model (model.dim %lld, model.layers %lld, model.vocab %lld, model.context "
                "%lld: %.3g parameters) needs at least %.3g GB per node for its parameters, "
                "gradients and AdamW state (16 bytes a parameter, split over parallel.tensor x "
                "parallel.pipeline = %lld), and this machine has %.3g GB",
                static_cast<long long>(config.model.dim), static_cast<long long>(config.model.layers),
                static_cast<long long>(config.model.vocab), static_cast<long long>(config.model.context),
                parameter_count(config.model), needed / 1e9,
                static_cast<long long>(std::max<int64_t>(config.parallel.tensor, 1) *
                                       std::max<int64_t>(config.parallel.pipeline, 1)),
                available_bytes / 1e9);
  return std::string(text);
}

}  // namespace dseek::config
