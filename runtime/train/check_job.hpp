// The one check of a job's settings before anything starts, that `dseek-node`, `dseek
// launch`, `dseek config --check` and `dseek bench train` all call: the settings this
// build cannot run (config::check_supported, which names the key and why), and a
// pipeline's schedule and micro-batches (pipeline/plan.hpp). The loader already checked
// every key's type, range and the keys against each other (config::validate). Throws
// config::ConfigError naming the file and the key; a mistake found here never reaches a
// node, so it fails once instead of being retried by restarts.
#pragma once

#include "runtime/config/job_config.hpp"

namespace dseek::train {

void check_job(const config::JobConfig& config);

}  // namespace dseek::train
