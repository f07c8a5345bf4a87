// One dseek node from start to exit, as `dseek-node` runs it (and as another program can
// embed it): builds the CAF actor system, the coordinator on the coordinator node, the
// node's actor tree (node_tree.hpp), waits for the job to finish or for a stop request,
// then shuts the tree down in order (the worker writes its final checkpoint, the node
// leaves the job; the coordinator node waits for the others to leave first).
#pragma once

#include <atomic>
#include <filesystem>

#include "runtime/config/job_config.hpp"

namespace dseek::actors {

struct node_options {
  std::filesystem::path run_dir;
  // Set by a signal handler: stop orderly.
  const std::atomic<bool>* stop = nullptr;
  // How many times `dseek launch` restarted this node id (its injected faults fired in
  // incarnation 0 and do not fire again).
  int64_t incarnation = 0;
  // Set to true when the stop request ended the training before the job finished (the
  // program then exits 130 / 143, not 0); a stop after the end (a lingering /metrics
  // endpoint) leaves it false.
  bool* stopped_early = nullptr;
};

// Returns the process exit code (runtime/util/exit_codes.hpp): 0 when the job finished or
// was stopped orderly, exit_code::permanent when it failed in a way no restart cures (a
// config, data, device or checkpoint error: runtime/util/failure_kind.hpp), 1 for any
// other failure (the reason is printed on stderr and written as a node_failed event).
int run_node(const config::JobConfig& config, const node_options& options);

}  // namespace dseek::actors
