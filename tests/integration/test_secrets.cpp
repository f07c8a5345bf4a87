// The cluster secret never leaves the processes that use it: a 2-node `dseek launch` job
// (with checkpoints, so that the end says how to resume) given the secret on its command
// line (--set cluster.secret=...) or in its environment (DSEEK_CLUSTER_SECRET), then
// every byte the run produced is searched for it: the launcher's stdout and stderr (its
// nodes' lines included) and every file under the run directory (events, traces,
// checkpoints, manifests, logs). Before issue 28 the "resume with:" hint echoed the
// command line, secret and all.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

// The files under `dir` (recursively) whose bytes contain `secret`.
std::vector<std::string> files_holding(const std::filesystem::path& dir, const std::string& secret,
                                       int& files_read) {
  std::vector<std::string> holding;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ++files_read;
    if (bytes.find(secret) != std::string::npos) holding.push_back(entry.path().string());
  }
  return holding;
}

}  // namespace

TEST_CASE("the cluster secret is never printed, logged or written by a run", "[launch][security]") {
  const std::string secret = "Zq7-secret-never-shown-4c1e9";
  const std::vector<std::string> checkpoints = {"--set", "checkpoint.every_steps=3",
                                                "--set", "checkpoint.async=false"};
  ScratchDir run("secret-hygiene");
  ProcessResult result;
  bool on_command_line = false;
  SECTION("given on the command line") {
    on_command_line = true;
    result = run_process(tiny_launch(run.path(), 2, 6,
                                     checkpoints + std::vector<std::string>{
                                                       "--set", "cluster.secret=\"" + secret + "\""}),
                         120s, launch_env());
  }
  SECTION("given in the environment") {
    auto env = launch_env();
    env.push_back("DSEEK_CLUSTER_SECRET=" + secret);
    result = run_process(tiny_launch(run.path(), 2, 6, checkpoints), 120s, env);
  }
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  // The run is what it should be: both nodes trained, a checkpoint to resume from.
  CHECK(node_events(run.path(), 0, "train_done").size() == 1);
  CHECK(node_events(run.path(), 1, "train_done").size() == 1);
  CHECK(result.output.find("resume with: ") != std::string::npos);
  if (on_command_line)
    CHECK(result.output.find("the cluster secret given with --set is left out") != std::string::npos);
  CHECK(result.output.find(secret) == std::string::npos);
  int files_read = 0;
  const auto holding = files_holding(run.path(), secret, files_read);
  CHECK(files_read >= 6);  // events of both nodes, a checkpoint's files, ...
  for (const auto& file : holding) FAIL_CHECK("the secret is in " << file);
  CHECK(holding.empty());
  require_no_node_left(run.path(), 2);
}
