// Implementation of absolute_paths.hpp.
#include "runtime/config/absolute_paths.hpp"

#include <filesystem>
#include <string>
#include <variant>

#include "runtime/config/load.hpp"
#include "runtime/config/schema.hpp"

namespace dseek::config {

void make_paths_absolute(JobConfig& config) {
  std::error_code error;
  const auto cwd = std::filesystem::current_path(error);
  if (error) return;
  for (const auto name : path_keys()) {
    const auto* key = schema::find(schema::job_keys(), name);
    const std::string value = std::get<std::string>(key->get(config));
    if (value.empty() || (name == "checkpoint.resume" && value == "latest")) continue;
    if (std::filesystem::path(value).is_absolute()) continue;
    key->set(config, (cwd / value).lexically_normal().string());
  }
}

}  // namespace dseek::config
