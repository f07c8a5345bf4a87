// Issue 28's security defaults, with real processes.
//
// TLS off loopback: a node of a 2-node job whose coordinator is not on loopback refuses
// to start without cluster.tls_* (exit 3, naming the address), and with the opt-out
// cluster.plaintext = true it starts with a warning (and then fails to join: no
// coordinator is there).
//
// /metrics on loopback: a node with metrics.prometheus_port and no prometheus_host
// answers on 127.0.0.1 and not on the host's external address (before: 0.0.0.0).
//
// A node of a multi-node job without a secret refuses to start (exit 3, saying where one
// comes from); a one-node job makes its own.
//
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
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "actors/spawned_process.hpp"
#include "support/external_address.hpp"
#include "support/http_get.hpp"
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

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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

TEST_CASE("a node off loopback without TLS refuses to start unless cluster.plaintext opts out",
          "[node][security]") {
  ScratchDir run("tls-off-loopback");
  // 192.0.2.1 (TEST-NET-1): not loopback, and nothing answers there.
  const std::vector<std::string> remote = {"--node-id", "1", "--set", "cluster.nodes=2",
                                           "--set", "cluster.coordinator=\"192.0.2.1:7420\"",
                                           "--set", "cluster.join_retries=0",
                                           "--set", "cluster.connect_timeout_ms=300"};
  const std::vector<std::string> env = {"DSEEK_CLUSTER_SECRET=tls-test-secret", "DSEEK_CLUSTER_ENV=none"};
  const auto refused = run_process(tiny_job(run.path(), 3, remote), 60s, env);
  {
    INFO(refused.output);
    CHECK(refused.exit_code == 3);
    CHECK(refused.output.find("the job spans hosts (cluster.coordinator = \"192.0.2.1:7420\" is "
                              "not loopback) and has no TLS") != std::string::npos);
    CHECK(refused.output.find("cluster.plaintext = true") != std::string::npos);
    CHECK(node_events(run.path(), 1, "node_started").empty());  // refused before it started
  }
  const auto opted_out = run_process(
      tiny_job(run.path(), 3, remote + std::vector<std::string>{"--set", "cluster.plaintext=true"}),
      60s, env);
  INFO(opted_out.output);
  CHECK(opted_out.output.find("dseek-node: warning: cluster.plaintext = true: the control plane "
                              "between hosts") != std::string::npos);
  CHECK(opted_out.exit_code != 0);  // nothing to join at 192.0.2.1
  CHECK(opted_out.output.find("has no TLS") == std::string::npos);
  // A job on loopback needs neither: the same node with a loopback coordinator is not
  // refused for TLS (it fails to join, as nothing listens there).
  const auto local = run_process(
      tiny_job(run.path(), 3, std::vector<std::string>{"--node-id", "1", "--set", "cluster.nodes=2",
                                                        "--set", "cluster.coordinator=\"127.0.0.1:" +
                                                                     std::to_string(free_port()) + "\"",
                                                        "--set", "cluster.join_retries=0"}),
      60s, env);
  INFO(local.output);
  CHECK(local.output.find("has no TLS") == std::string::npos);
  CHECK(local.output.find("cluster.plaintext") == std::string::npos);
}

TEST_CASE("the /metrics endpoint listens on loopback unless metrics.prometheus_host says otherwise",
          "[node][security][prometheus]") {
  const auto external = external_ipv4();
  if (!external) {
    WARN("not checked: no interface but loopback here");
    return;
  }
  ScratchDir run("metrics-loopback");
  const int port = free_port();
  auto job = tiny_job(run.path(), 3, {"--set", "metrics.prometheus_port=" + std::to_string(port),
                                      "--set", "metrics.prometheus_linger_seconds=60"});
  auto node = dseek::test::SpawnedProcess::start(job, (run.path() / "node.log").string());
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while (read_text(run.path() / "node.log").find("serving /metrics on") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline && node.running())
    std::this_thread::sleep_for(50ms);
  const std::string log = read_text(run.path() / "node.log");
  INFO(log);
  REQUIRE(log.find("serving /metrics on 127.0.0.1:" + std::to_string(port)) != std::string::npos);
  CHECK(http_get("127.0.0.1", port, "/metrics", 5s).status == 200);
  INFO("external address " << external->ipv4);
  CHECK(http_get(external->ipv4, port, "/metrics", 2s).status == 0);  // nothing listens there
  node.kill();
}

TEST_CASE("a node of a multi-node job without a cluster secret refuses to start", "[node][security]") {
  // Without a secret the node would make one of its own and no peer could join it: the
  // start is refused (exit 3: no restart cures it), naming both places a secret can come
  // from. A job of one node makes its own.
  ScratchDir run("no-secret");
  const std::vector<std::string> member = {"--node-id", "1", "--set", "cluster.nodes=2",
                                           "--set", "cluster.coordinator=\"127.0.0.1:" +
                                                        std::to_string(free_port()) + "\"",
                                           "--set", "cluster.join_retries=0"};
  const std::vector<std::string> no_secret = {"DSEEK_CLUSTER_SECRET=", "DSEEK_CLUSTER_ENV=none"};
  const auto refused = run_process(tiny_job(run.path(), 3, member), 60s, no_secret);
  INFO(refused.output);
  CHECK(refused.exit_code == 3);
  CHECK(refused.output.find("a multi-node job needs a cluster secret") != std::string::npos);
  CHECK(refused.output.find("DSEEK_CLUSTER_SECRET") != std::string::npos);
  CHECK(node_events(run.path(), 1, "node_started").empty());
  ScratchDir alone("no-secret-alone");
  const auto single = run_process(tiny_job(alone.path(), 3), 120s, no_secret);
  INFO(single.output);
  CHECK(single.exit_code == 0);
}
