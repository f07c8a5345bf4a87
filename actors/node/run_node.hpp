// One dseek node from start to exit, as `dseek-node` runs it: builds the CAF actor system
// (register_node_types: the message types, the middleman, libcaf_openssl for TLS), spawns
// the node actor (embedded_node.hpp: the coordinator on the coordinator node, the node's
// actor tree), waits for its result and returns its exit code. A program that has an
// actor system of its own spawns the node actor itself (docs/embedding.md).
#pragma once

#include "actors/node/embedded_node.hpp"
#include "runtime/config/job_config.hpp"

namespace dseek::actors {

// Returns the process exit code (runtime/util/exit_codes.hpp): 0 when the job finished or
// was stopped orderly, exit_code::permanent when it failed in a way no restart cures (a
// config, data, device or checkpoint error: runtime/util/failure_kind.hpp), 1 for any
// other failure (the reason is printed on stderr and written as a node_failed event).
// Throws what spawn_node throws. `stopped_early` (optional) is set to true when the stop
// flag (options.stop, set by a signal handler) ended the training before the job finished
// (the program then exits 130 / 143, not 0); a stop after the end (a lingering /metrics
// endpoint) leaves it false.
int run_node(const config::JobConfig& config, const node_options& options,
             bool* stopped_early = nullptr);

}  // namespace dseek::actors
