// What a job needs from this host, checked before any node starts (`dseek launch`) or
// joins (dseek-node), so that a mistake fails once, at once, with one message, instead
// of in every node and every restart: the prepared data set of data.dir, the devices of
// train.device, the checkpoint that checkpoint.resume names. Each failure is a
// permanent error (runtime/util/failure_kind.hpp: DataError, DeviceError,
// CheckpointError) whose message names the absolute path it tried.
#pragma once

#include "runtime/config/job_config.hpp"

namespace dseek::cli {

void check_host_can_run(const config::JobConfig& config);

}  // namespace dseek::cli
