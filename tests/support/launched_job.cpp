// Implementation of launched_job.hpp.
#include "support/launched_job.hpp"

#include <catch2/catch.hpp>

#include "support/node_runs.hpp"

namespace dseek::testing {

std::unique_ptr<LaunchedJob> launch_tiny_job(const std::string& tag, int nodes, int steps,
                                             const std::vector<std::string>& extra,
                                             std::chrono::seconds timeout) {
  auto job = std::make_unique<LaunchedJob>(tag);
  job->launcher = run_process(tiny_launch(job->path(), nodes, steps, extra), timeout, launch_env());
  return job;
}

std::string train_done(const LaunchedJob& job, int node) {
  const auto done = node_events(job.path(), node, "train_done");
  INFO("node " << node);
  REQUIRE(done.size() == 1);
  return done[0];
}

std::string params_of(const LaunchedJob& job, int node) {
  return string_field(train_done(job, node), "params_sha256");
}

std::string require_finished(const LaunchedJob& job, const std::vector<int>& nodes, int total_nodes,
                             int steps) {
  INFO(job.launcher.output);
  CHECK_FALSE(job.launcher.timed_out);
  REQUIRE(job.launcher.exit_code == 0);
  std::string sha;
  for (int node : nodes) {
    INFO("node " << node);
    const auto done = train_done(job, node);
    CHECK(number_field(done, "step") == steps);
    if (sha.empty()) sha = string_field(done, "params_sha256");
    CHECK(string_field(done, "params_sha256") == sha);
  }
  require_no_node_left(job.path(), total_nodes);
  return sha;
}

}  // namespace dseek::testing
