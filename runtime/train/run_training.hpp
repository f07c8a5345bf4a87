// The training job of one node from start to finish: open the data, build the trainer,
// resume from a checkpoint if asked, run the steps with evaluation, progress, events and
// checkpoints (checkpointing.hpp), stop early on a signal or train.stop_after_*, and end
// with a summary. This is what `dseek-node` runs for a single-node job.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "runtime/config/job_config.hpp"

namespace dseek::metrics {
class EventLog;
}

namespace dseek::train {

struct RunOptions {
  std::filesystem::path run_dir;            // events go to run_dir/node-<id>/
  const std::atomic<bool>* stop = nullptr;  // set (by a signal) to stop at a step boundary
  std::FILE* console = stderr;              // progress and summary
  // The node's event log when the caller shares it (the node's actors write cluster
  // events to the same file); null: run_training opens its own.
  metrics::EventLog* events = nullptr;
  // Called at every step boundary with the 0-based step about to run (fault injection:
  // kill, hang and slow at a step).
  std::function<void(int64_t step)> before_step;
};

struct RunSummary {
  int64_t steps_done = 0;
  double final_loss = 0.0;
  double val_loss = -1.0;  // -1 when the data set has no validation split
  std::string params_sha256;
  bool stopped_early = false;
  double elapsed_s = 0.0;
  double tokens_per_s = 0.0;  // over the whole run
};

RunSummary run_training(const config::JobConfig& config, const RunOptions& options);

}  // namespace dseek::train
