// Implementation of preflight.hpp.
#include "cli/preflight.hpp"

#include <filesystem>
#include <string>

#include "gpu/device_info.hpp"
#include "runtime/backend/device_error.hpp"
#include "runtime/checkpoint/error.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/data/dataset_index.hpp"
#include "runtime/data/token_dataset.hpp"  // DataError

namespace dseek::cli {

namespace {

namespace fs = std::filesystem;

fs::path absolute(const std::string& path) {
  std::error_code error;
  const fs::path full = fs::absolute(path, error);
  return error ? fs::path(path) : full.lexically_normal();
}

constexpr const char* kRelativeNote =
    " (a relative path in a config file is read against the file's folder, one given with "
    "--set against the current directory)";

void check_data(const config::JobConfig& config) {
  const fs::path dir = absolute(config.data.dir);
  std::error_code error;
  if (!fs::is_directory(dir, error))
    throw data::DataError("data.dir = " + dir.string() + ": no such directory" + kRelativeNote +
                          "; make the data set with `dseek data prepare --input TEXT_DIR "
                          "--output " + dir.string() + "`");
  // Its index must read; the shards' checksums and the vocabulary against model.vocab
  // are checked where the training opens them (a DataError there is permanent too).
  (void)data::read_dataset_index(dir);
}

void check_devices(const config::JobConfig& config) {
  if (config.train.device != config::Device::cuda) return;
  const gpu::DeviceQuery query = gpu::query_devices();
  const std::string key = "train.device = \"cuda\"";
  if (!query.error.empty())
    throw backend::DeviceError(key + ": no usable CUDA device on this host: " + query.error);
  if (query.devices.size() < static_cast<size_t>(config.cluster.gpus_per_node))
    throw backend::DeviceError(key + ": cluster.gpus_per_node = " +
                               std::to_string(config.cluster.gpus_per_node) + " but this host has " +
                               std::to_string(query.devices.size()) + " CUDA device(s)");
}

void check_resume(const config::JobConfig& config) {
  const std::string& resume = config.checkpoint.resume;
  if (resume.empty() || resume == "latest") return;
  const fs::path dir = absolute(resume);
  std::error_code error;
  if (!fs::is_directory(dir, error))
    throw checkpoint::CheckpointError("checkpoint.resume = " + dir.string() +
                                      ": no such checkpoint directory" + kRelativeNote);
  (void)checkpoint::read_manifest(dir);  // a directory without a committed manifest throws
}

}  // namespace

void check_host_can_run(const config::JobConfig& config) {
  check_data(config);
  check_devices(config);
  check_resume(config);
}

}  // namespace dseek::cli
