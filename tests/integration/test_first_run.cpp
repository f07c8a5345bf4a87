// A new user's first runs (issue 22): a mistake that no restart can cure stops the job
// at once with one message and exit 3, never retried (runtime/util/failure_kind.hpp,
// apps/cli/preflight.hpp); a run that writes checkpoints says where and how to resume,
// and `dseek launch --resume latest` goes on from there; relative paths in a config are
// read against its folder; on a terminal `dseek launch` draws one bar for the job.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace fs = std::filesystem;
using namespace dseek::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

size_t count_of(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

std::vector<std::string> with(std::vector<std::string> argv, const std::vector<std::string>& more) {
  argv.insert(argv.end(), more.begin(), more.end());
  return argv;
}

// One word for sh.
std::string quoted(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool host_has_a_gpu() {
  const auto devices = run_process({bin("dseek"), "devices"}, 30s);
  return devices.output.rfind("cuda:", 0) == 0;
}

}  // namespace

TEST_CASE("a missing data.dir stops dseek launch at once with exit 3, starting no node",
          "[first_run][errors]") {
  ScratchDir run("first-run-no-data");
  const auto missing = run / "no-such-data";
  const auto result = run_process(
      with(tiny_launch(run.path(), 2, 5), {"--set", "data.dir=\"" + missing.string() + "\""}), 60s);
  INFO(result.output);
  CHECK(result.exit_code == 3);
  CHECK_THAT(result.output, Contains("data error: data.dir = " + missing.string() + ": no such directory"));
  CHECK(count_of(result.output, "data error") == 1);
  CHECK_THAT(result.output, !Contains("[launch] starting"));

  // dseek-node alone says the same, with the absolute path of a relative --set.
  const auto node = run_process(
      {"/bin/sh", "-c", "cd " + quoted(run.path().string()) + " && " +
                            [&] {
                              std::string line;
                              for (const auto& word : with(tiny_job(run / "node", 5),
                                                           {"--set", "data.dir=rel/data"}))
                                line += quoted(word) + " ";
                              return line;
                            }()},
      60s);
  INFO(node.output);
  CHECK(node.exit_code == 3);
  CHECK_THAT(node.output, Contains("data.dir = " + (run / "rel/data").string() + ": no such directory"));
}

TEST_CASE("train.device = cuda without a GPU is a device error, never retried", "[first_run][errors]") {
  if (host_has_a_gpu()) {
    WARN("this host has a CUDA device: nothing to refuse");
    return;
  }
  ScratchDir run("first-run-no-gpu");
  const auto result = run_process(
      with(tiny_launch(run.path(), 2, 5), {"--set", "train.device=\"cuda\""}), 60s);
  INFO(result.output);
  CHECK(result.exit_code == 3);
  CHECK_THAT(result.output, Contains("device error: train.device = \"cuda\""));
  CHECK_THAT(result.output, !Contains("[launch] starting"));
  const auto node = run_process(with(tiny_job(run / "node", 5), {"--set", "train.device=\"cuda\""}), 60s);
  INFO(node.output);
  CHECK(node.exit_code == 3);
  CHECK_THAT(node.output, Contains("device error: train.device = \"cuda\""));
}

TEST_CASE("a malformed config is a config error naming file and line, exit 3", "[first_run][errors]") {
  ScratchDir dir("first-run-bad-toml");
  std::ofstream(dir / "job.toml") << "[model]\ndim = 64\n[train\nsteps = 3\n";
  for (const auto& argv : {std::vector<std::string>{bin("dseek"), "launch", "--nodes", "2",
                                                    (dir / "job.toml").string()},
                           std::vector<std::string>{bin("dseek-node"), "--config",
                                                    (dir / "job.toml").string()}}) {
    const auto result = run_process(argv, 30s);
    INFO(result.output);
    CHECK(result.exit_code == 3);
    CHECK_THAT(result.output, Contains("config error: " + (dir / "job.toml").string() + ":3"));
  }
}

TEST_CASE("a data error inside the nodes' training stops the job without restarts",
          "[first_run][errors]") {
  ScratchDir dir("first-run-corrupt");
  fs::copy(prepared_text(), dir / "text");
  {
    std::fstream shard(dir / "text" / "train-00000.tok", std::ios::in | std::ios::out | std::ios::binary);
    shard.seekp(1000);
    shard.put('\x7f');
  }
  const auto result = run_process(
      with(tiny_launch(dir / "run", 2, 5, {"--set", "cluster.max_restarts=3"}),
           {"--set", "data.dir=\"" + (dir / "text").string() + "\""}),
      120s);
  INFO(result.output);
  CHECK(result.exit_code == 3);
  CHECK_THAT(result.output, Contains("data error: "));
  CHECK_THAT(result.output, Contains("no restart can cure it; stopping the job"));
  CHECK_THAT(result.output, !Contains("restarting ("));
  CHECK_THAT(result.output, Contains("[launch] job done: 2 nodes, 0 restarts, exit 3"));
}

TEST_CASE("a run with checkpoints says how to resume, and --resume latest goes on",
          "[first_run][checkpoint]") {
  ScratchDir run("first-run-resume");
  const std::vector<std::string> every = {"--set", "checkpoint.every_steps=5"};
  const auto first = run_process(with(tiny_launch(run.path(), 2, 10), every), 120s);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.output, Contains("[launch] checkpoints: " + (run / "checkpoints").string() +
                                    " (newest: step 10)"));
  CHECK_THAT(first.output, Contains("[launch] resume with: "));
  CHECK_THAT(first.output, Contains(" launch --nodes 2 "));
  CHECK_THAT(first.output, Contains("--resume latest\n"));
  CHECK(count_of(first.output, "resume with:") == 1);  // the launcher's, not every node's
  // The orderly end: the nodes left, none was lost.
  CHECK_THAT(first.output, Contains("node 1 left"));
  CHECK_THAT(first.output, !Contains("lost (left"));

  const auto second = run_process(
      with(tiny_launch(run.path(), 2, 15), with(every, {"--resume", "latest"})), 120s);
  INFO(second.output);
  REQUIRE(second.exit_code == 0);
  const auto resumed = node_events(run.path(), 0, "resumed");
  REQUIRE(resumed.size() == 1);
  CHECK(number_field(resumed[0], "step") == 10);
  CHECK_THAT(second.output, Contains("(newest: step 15)"));

  const auto nowhere = run_process(
      with(tiny_launch(run.path(), 2, 15), {"--resume", (run / "nope").string()}), 60s);
  INFO(nowhere.output);
  CHECK(nowhere.exit_code == 3);
  CHECK_THAT(nowhere.output, Contains("checkpoint.resume = " + (run / "nope").string() +
                                      ": no such checkpoint directory"));

  // dseek-node alone gives its own command to resume with.
  const auto node = run_process(with(tiny_job(run / "one", 5), every), 120s);
  INFO(node.output);
  REQUIRE(node.exit_code == 0);
  CHECK_THAT(node.output, Contains("resume with: " + bin("dseek-node") + " --config "));
}

TEST_CASE("relative paths in a config file are read against the file's folder",
          "[first_run][config]") {
  ScratchDir dir("first-run-paths");
  fs::create_directories(dir / "jobs");
  std::ofstream(dir / "jobs/job.toml") << "[train]\nrun_dir = \"runs/a\"\n[data]\ndir = \"../data\"\n";
  // Started from another directory (/): the paths still mean the file's.
  const auto check = run_process({"/bin/sh", "-c", "cd / && " + quoted(bin("dseek")) +
                                                       " config --check " +
                                                       quoted((dir / "jobs/job.toml").string()) +
                                                       " --set checkpoint.dir=ck"},
                                 30s);
  INFO(check.output);
  REQUIRE(check.exit_code == 0);
  CHECK_THAT(check.output, Contains("run_dir = \"" + (dir / "jobs/runs/a").string() + "\""));
  CHECK_THAT(check.output, Contains("dir = \"" + (dir / "data").string() + "\""));
  CHECK_THAT(check.output, Contains("dir = \"ck\""));  // a --set path is the command line's
}

TEST_CASE("on a terminal dseek launch draws one bar for the job", "[first_run][console]") {
  ScratchDir run("first-run-bar");
  auto argv = tiny_launch(run.path(), 2, 8);
  // tiny_launch asks for plain lines; the bar is for auto (the default).
  argv.insert(argv.end(), {"--set", "metrics.progress=\"auto\""});
  std::string line;
  for (const auto& word : argv) line += quoted(word) + " ";
  // script(1) runs it on a pseudo-terminal; -e: its exit status.
  const auto tty = run_process({"script", "-qefc", line, "/dev/null"}, 120s);
  INFO(tty.output);
  REQUIRE(tty.exit_code == 0);
  CHECK_THAT(tty.output, Contains("\r\033[Kjob: step 8/8 ["));
  CHECK_THAT(tty.output, Contains("| ETA "));
  CHECK_THAT(tty.output, !Contains("[node 0] step "));  // folded into the bar
  CHECK_THAT(tty.output, !Contains("[node 1] step "));  // another node's view: left out
  CHECK_THAT(tty.output, Contains("[launch] job done: 2 nodes, 0 restarts, exit 0"));

  // Not a terminal: plain lines, prefixed by node.
  const auto piped = run_process(argv, 120s);
  INFO(piped.output);
  REQUIRE(piped.exit_code == 0);
  CHECK_THAT(piped.output, Contains("[node 0] step 8/8 loss "));
  CHECK_THAT(piped.output, !Contains("job: step"));
}

TEST_CASE("the Slurm task loop restarts a failed node but not a permanent error", "[first_run][errors]") {
  ScratchDir dir("first-run-restart-loop");
  for (int status : {1, 3, 143}) {
    const auto node = dir / ("node-" + std::to_string(status) + ".sh");
    const auto runs = dir / ("runs-" + std::to_string(status));
    std::ofstream(node) << "#!/bin/sh\necho run >> " << quoted(runs.string()) << "\nexit " << status << "\n";
    fs::permissions(node, fs::perms::owner_all);
    const auto result = run_process({(source_dir() / "deploy/slurm/restart-node.sh").string()}, 30s,
                                    {"DSEEK_NODE_BINARY=" + node.string(), "DSEEK_MAX_RESTARTS=1",
                                     "DSEEK_RESTART_COUNT=0"});
    INFO("status " << status << ": " << result.output);
    CHECK(result.exit_code == status);
    std::ifstream in(runs);
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    CHECK(lines == (status == 1 ? 2 : 1));  // 1 is retried once; 3 (permanent) and 143 never
  }
}

TEST_CASE("failed join attempts stay off the console for the first seconds", "[first_run][console]") {
  ScratchDir run("first-run-quiet-join");
  const std::string nobody = "127.0.0.1:" + std::to_string(free_port());  // nothing listens
  auto joining = [&](int retries) {
    return with(tiny_job(run / ("node-" + std::to_string(retries)), 5),
                {"--set", "cluster.nodes=2", "--node-id", "1", "--coordinator", nobody, "--set",
                 "cluster.join_retries=" + std::to_string(retries), "--set",
                 "cluster.join_retry_delay_ms=100"});
  };
  // Three attempts in a fraction of a second: the coordinator may still be starting.
  const auto brief = run_process(joining(2), 60s, {"DSEEK_CLUSTER_SECRET=s"});
  INFO(brief.output);
  CHECK(brief.exit_code == 1);  // retried by a launcher: the coordinator may come
  CHECK_THAT(brief.output, Contains("cannot join the coordinator at " + nobody + " after 3 attempts"));
  CHECK_THAT(brief.output, !Contains("join attempt"));
  // Failing for longer than that is worth saying while it goes on.
  const auto longer = run_process(joining(60), 60s, {"DSEEK_CLUSTER_SECRET=s"});
  INFO(longer.output);
  CHECK(longer.exit_code == 1);
  CHECK_THAT(longer.output, Contains("join attempt "));
  CHECK_THAT(longer.output, Contains("failed (connect to " + nobody));
}
