// Implementation of reducer_settings.hpp.
#include "dist/reducer_settings.hpp"

#include <stdexcept>

#include "runtime/config/load.hpp"
#include "runtime/optim/adamw_settings.hpp"

namespace dseek::dist {

namespace {
// "" when the settings can run, else why not.
std::string refusal(const ReducerSettings& settings) {
  if (settings.zero_stage < 0 || settings.zero_stage > 2)
    return "parallel.zero = " + std::to_string(settings.zero_stage) + ": the ZeRO stage is 0, 1 or 2";
  const std::string codec = config::name_string(settings.compression);
  if (settings.compression != config::Compression::none && settings.backend_memory)
    return "comm.compression = \"" + codec +
           "\" on the backend's memory: the codecs encode gradients in host memory";
  if (settings.variance_refresh_steps < 0)
    return "comm.variance_refresh_steps = " + std::to_string(settings.variance_refresh_steps) +
           ": it is a number of steps, >= 0";
  if (settings.bucket_bytes < sizeof(float))
    return "gradient bucket of " + std::to_string(settings.bucket_bytes) + " bytes is smaller than one float";
  return "";
}
}  // namespace

ReducerSettings reducer_settings(const config::JobConfig& config) {
  ReducerSettings settings;
  settings.zero_stage = static_cast<int>(config.parallel.zero);
  settings.compression = config.comm.compression;
  settings.topk_fraction = config.comm.topk_fraction;
  settings.compression_warmup_steps = config.comm.compression_warmup_steps;
  // The same condition as the optimizer's (adamw_settings): they must agree.
  settings.variance_refresh_steps =
      optim::second_moment_from_local_gradients(config) ? config.comm.variance_refresh_steps : 0;
  settings.beta2 = config.train.beta2;
  // NCCL reduces the GPU's memory in place; the codecs encode in host memory, so a
  // compressed reduction stays on the host plane (UCX) in an NCCL job too.
  settings.backend_memory = config.comm.backend == config::CommBackend::nccl &&
                            config.comm.compression == config::Compression::none;
  if (const std::string why = refusal(settings); !why.empty())
    throw config::ConfigError(config.source + ": " + why);
  return settings;
}

void check_reducer_settings(const ReducerSettings& settings) {
  if (const std::string why = refusal(settings); !why.empty()) throw std::invalid_argument(why);
}

}  // namespace dseek::dist
