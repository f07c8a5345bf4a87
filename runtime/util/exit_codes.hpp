// The exit statuses of dseek-node and dseek, one list for the programs, the local
// launcher and the restart loops around a node (deploy/slurm/restart-node.sh,
// deploy/k8s/job.yaml's podFailurePolicy). docs/running.md ("Exit codes") describes
// them for users. Only `failed` is worth a restart: `usage` and `permanent` fail the
// same way on every start, and an `evicted` node's hardware computes wrong gradients.
#pragma once

namespace dseek::exit_code {

inline constexpr int ok = 0;           // done (the job finished)
inline constexpr int failed = 1;       // a failure a restart may cure (retried)
inline constexpr int usage = 2;        // the command line is wrong
inline constexpr int permanent = 3;    // a config, data, device or checkpoint error
inline constexpr int evicted = 4;      // the SDC audit found this node wrong: the job goes on without it
inline constexpr int timed_out = 124;  // dseek launch --timeout
inline constexpr int interrupted = 130;  // SIGINT (128 + 2), after the orderly stop
inline constexpr int terminated = 143;   // SIGTERM (128 + 15), after the orderly stop

// Whether a restart loop should start a node again after it exited with `status`.
constexpr bool worth_a_restart(int status) {
  return status != usage && status != permanent && status != evicted;
}

}  // namespace dseek::exit_code
