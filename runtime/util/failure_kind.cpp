// Implementation of failure_kind.hpp: the error types of the runtime's parts.
#include "runtime/util/failure_kind.hpp"

#include "runtime/backend/device_error.hpp"
#include "runtime/checkpoint/error.hpp"
#include "runtime/cluster_env/cluster_env.hpp"
#include "runtime/config/load.hpp"
#include "runtime/data/token_dataset.hpp"

namespace dseek::util {

FailureKind classify_failure(const std::exception& error) {
  if (dynamic_cast<const config::ConfigError*>(&error)) return {"config error", true};
  if (dynamic_cast<const data::DataError*>(&error)) return {"data error", true};
  if (dynamic_cast<const backend::DeviceError*>(&error)) return {"device error", true};
  if (dynamic_cast<const checkpoint::CheckpointError*>(&error)) return {"checkpoint error", true};
  if (dynamic_cast<const cluster_env::ClusterEnvError*>(&error))
    return {"cluster environment error", true};
  return {};
}

std::string describe_failure(const std::exception& error) {
  const FailureKind kind = classify_failure(error);
  return kind.name.empty() ? error.what() : kind.name + ": " + error.what();
}

}  // namespace dseek::util
