// A finished `dseek launch` job of the tiny test model (node_runs.hpp tiny_launch): its
// run directory (removed with it) and what the launcher said, and what the tests of
// node-level training read of it. Shared by the elastic and the SDC audit tests.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace dseek::testing {

struct LaunchedJob {
  explicit LaunchedJob(const std::string& tag) : dir(tag) {}
  const std::filesystem::path& path() const { return dir.path(); }
  ScratchDir dir;
  ProcessResult launcher;
};

// Runs `dseek launch` of `nodes` nodes for `steps` steps with `extra` arguments to its end
// (bounded by `timeout`).
std::unique_ptr<LaunchedJob> launch_tiny_job(const std::string& tag, int nodes, int steps,
                                             const std::vector<std::string>& extra,
                                             std::chrono::seconds timeout = std::chrono::seconds(120));
// Node `node`'s train_done event (REQUIREs exactly one), and its params_sha256.
std::string train_done(const LaunchedJob& job, int node);
std::string params_of(const LaunchedJob& job, int node);
// The launcher exited 0, each of `nodes` finished all `steps` with the same parameters,
// and no node process of the `total_nodes` is left. Returns their params_sha256.
std::string require_finished(const LaunchedJob& job, const std::vector<int>& nodes, int total_nodes,
                             int steps);

}  // namespace dseek::testing
