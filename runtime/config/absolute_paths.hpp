// Every relative path of a loaded config (config::path_keys(): run dir, data dir,
// checkpoint dir and resume, TLS files) made absolute against the current directory.
// The loader already made a config file's own relative paths absolute against the
// file's folder; what is left relative came from --set or the environment. dseek-node
// does this once the config is loaded, so that every message, event and checkpoint line
// names the absolute path it means.
#pragma once

#include "runtime/config/job_config.hpp"

namespace dseek::config {

void make_paths_absolute(JobConfig& config);

}  // namespace dseek::config
