// `dseek launch` with real processes: the nodes are dseek_fake_node (fake_node_main.cpp,
// chosen through DSEEK_NODE_BINARY), told by its environment to print, crash, fail, hang
// or wait for SIGTERM, and recording its pid so that each test can check that the
// launcher left no process behind. One test runs the real dseek-node on a tiny job.
// Every wait is bounded (run_process kills a launcher that outlives its timeout).
#include <catch2/catch.hpp>

#include <errno.h>
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dseek::testing;
using namespace std::chrono_literals;

namespace {

// A job of fake nodes: a valid config, a pid directory, and the environment that makes
// the launcher run dseek_fake_node.
struct FakeJob {
  explicit FakeJob(const std::string& tag) : dir(tag) {
    std::filesystem::create_directories(pid_dir());
  }

  std::filesystem::path pid_dir() const { return dir / "pids"; }

  std::vector<std::string> command(int nodes, const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> argv = {bin("dseek"), "launch", "--nodes", std::to_string(nodes),
                                     "--run-dir", (dir / "run").string(),
                                     (source_dir() / "config/single.toml").string(),
                                     "--set", "train.steps=5", "--set", "train.batch_size=12",
                                     // dseek launch checks the data set before it starts nodes
                                     "--set", "data.dir=\"" + prepared_text().string() + "\""};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  std::vector<std::string> env(const std::map<int, std::string>& modes,
                               const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> assignments = {"DSEEK_NODE_BINARY=" + bin("dseek_fake_node"),
                                            "DSEEK_FAKE_NODE_PID_DIR=" + pid_dir().string()};
    for (const auto& [node, mode] : modes)
      assignments.push_back("DSEEK_FAKE_NODE_MODE_" + std::to_string(node) + "=" + mode);
    assignments.insert(assignments.end(), extra.begin(), extra.end());
    return assignments;
  }

  ProcessResult run(int nodes, const std::map<int, std::string>& modes,
                    const std::vector<std::string>& extra_args = {},
                    const std::vector<std::string>& extra_env = {}) const {
    return run_process(command(nodes, extra_args), 20s, env(modes, extra_env));
  }

  ScratchDir dir;
};

struct NodeRun {
  pid_t pid = 0;
  pid_t parent = 0;
};

// The runs the fake nodes recorded, by file name ("node-1-run-0").
std::map<std::string, NodeRun> recorded_runs(const std::filesystem::path& pid_dir) {
  std::map<std::string, NodeRun> runs;
  for (const auto& entry : std::filesystem::directory_iterator(pid_dir)) {
    if (entry.path().extension() != ".pid") continue;
    std::ifstream in(entry.path());
    NodeRun run;
    in >> run.pid >> run.parent;
    runs[entry.path().stem().string()] = run;
  }
  return runs;
}

bool process_gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

// Checks that every recorded node process is gone, and kills any that is not, so that a
// failing test leaves nothing behind either.
void require_all_gone(const std::filesystem::path& pid_dir) {
  for (const auto& [name, run] : recorded_runs(pid_dir)) {
    INFO(name << " pid " << run.pid);
    const bool gone = process_gone(run.pid);
    if (!gone) ::kill(run.pid, SIGKILL);
    CHECK(gone);
  }
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("dseek launch prefixes every line with its node and never splits one", "[launch]") {
  FakeJob job("launch-prefix");
  auto result = job.run(3, {}, {}, {"DSEEK_FAKE_NODE_LINES=300"});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);

  const std::regex launcher_line(R"(\[launch\] .*)");
  const std::regex node_line(R"(\[node ([0-2])\] .*)");
  const std::regex numbered_line(R"(\[node ([0-2])\] node ([0-2]) line (\d+) x{100})");
  std::map<int, int> numbered_lines;
  for (const auto& line : lines_of(result.output)) {
    INFO(line);
    std::smatch match;
    if (std::regex_match(line, launcher_line)) continue;
    REQUIRE(std::regex_match(line, match, node_line));
    if (contains(line, " line ")) {
      // Whole: its prefix and its own content agree, and the payload is complete.
      REQUIRE(std::regex_match(line, match, numbered_line));
      CHECK(match[1] == match[2]);
      ++numbered_lines[std::stoi(match[1])];
    }
  }
  for (int node = 0; node < 3; ++node) {
    CHECK(numbered_lines[node] == 300);
    const std::string prefix = "[node " + std::to_string(node) + "] ";
    CHECK(contains(result.output, prefix + "node " + std::to_string(node) + " says on stderr\n"));
    // \r ends a line like \n; the last line without a newline is not lost.
    for (const char* progress : {"progress 1\n", "progress 2\n", "progress 3\n"})
      CHECK(contains(result.output, prefix + progress));
    CHECK(contains(result.output, prefix + "no newline at the end\n"));
    // The command line of node k, with the user's --set after the launcher's, and the
    // cores shared out last (the config says train.threads = 0; 3 nodes on any machine
    // with fewer than 6 cores get 1 each).
    CHECK(std::regex_search(
        result.output,
        std::regex(R"(\[node )" + std::to_string(node) + R"(\] args: --config \S+single\.toml --node-id )" +
                   std::to_string(node) + R"( --coordinator 127\.0\.0\.1:\d+ --run-dir \S+ )"
                   R"(--set cluster\.nodes=3 --set train\.steps=5 --set train\.batch_size=12 )"
                   R"(--set data\.dir="\S+" --set train\.threads=\d+\n)")));
    CHECK(contains(result.output, prefix + "fake node " + std::to_string(node) + " run 0 "));
  }
  CHECK(contains(result.output, "[launch] job done: 3 nodes, 0 restarts, exit 0\n"));
  require_all_gone(job.pid_dir());
}

TEST_CASE("dseek launch restarts a node killed on its first run under the same id",
          "[launch]") {
  FakeJob job("launch-restart");
  auto result = job.run(2, {{1, "crash_once"}});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const auto crash = result.output.find("[node 1] about to crash");
  const auto restart =
      result.output.find("[launch] node 1 killed by signal SIGKILL; restarting (1/3)");
  REQUIRE(crash != std::string::npos);
  REQUIRE(restart != std::string::npos);
  CHECK(crash < restart);  // the node's last words come before the launcher's
  CHECK(contains(result.output, "[node 1] fake node 1 run 1 mode crash_once"));
  CHECK(contains(result.output, "[launch] job done: 2 nodes, 1 restart, exit 0"));

  const auto runs = recorded_runs(job.pid_dir());
  CHECK(runs.size() == 3);
  REQUIRE(runs.count("node-1-run-0") == 1);
  REQUIRE(runs.count("node-1-run-1") == 1);
  CHECK(runs.at("node-1-run-0").pid != runs.at("node-1-run-1").pid);
  CHECK(runs.count("node-0-run-0") == 1);
  CHECK(runs.count("node-0-run-1") == 0);  // a node that exits 0 is done
  require_all_gone(job.pid_dir());
}

TEST_CASE("dseek launch stops the job with exit 1 when a node fails past max_restarts",
          "[launch]") {
  FakeJob job("launch-fail");
  auto result =
      job.run(3, {{0, "fail"}, {1, "serve"}, {2, "serve"}}, {"--set", "cluster.max_restarts=2"});
  INFO(result.output);
  CHECK(result.exit_code == 1);
  CHECK(contains(result.output, "[launch] node 0 exited with status 1; restarting (1/2)"));
  CHECK(contains(result.output, "[launch] node 0 exited with status 1; restarting (2/2)"));
  CHECK(contains(result.output, "[launch] node 0 failed 3 times; stopping the job"));
  CHECK(contains(result.output, "[launch] job done: 3 nodes, 2 restarts, exit 1"));

  const auto runs = recorded_runs(job.pid_dir());
  for (const char* run : {"node-0-run-0", "node-0-run-1", "node-0-run-2"})
    CHECK(runs.count(run) == 1);
  CHECK(runs.count("node-0-run-3") == 0);
  // The other nodes were there, and are gone.
  REQUIRE(runs.count("node-1-run-0") == 1);
  REQUIRE(runs.count("node-2-run-0") == 1);
  require_all_gone(job.pid_dir());
}

TEST_CASE("dseek launch never restarts a node that exits 3 (a permanent error)", "[launch]") {
  FakeJob job("launch-permanent");
  auto result = job.run(3, {{0, "serve"}, {1, "permanent"}, {2, "serve"}},
                        {"--set", "cluster.max_restarts=5", "--set", "elastic.min_nodes=1"});
  INFO(result.output);
  CHECK(result.exit_code == 3);
  CHECK(contains(result.output, "[launch] node 1 exited with status 3 (a config, data, device or "
                                "checkpoint error): no restart can cure it; stopping the job"));
  CHECK(!contains(result.output, "restarting"));
  CHECK(contains(result.output, "[launch] job done: 3 nodes, 0 restarts, exit 3"));
  const auto runs = recorded_runs(job.pid_dir());
  CHECK(runs.count("node-1-run-0") == 1);
  CHECK(runs.count("node-1-run-1") == 0);
  require_all_gone(job.pid_dir());
}

TEST_CASE("dseek launch gives up a node past max_restarts and the job goes on without it",
          "[launch]") {
  FakeJob job("launch-give-up");
  auto result = job.run(3, {{0, "ok"}, {1, "fail"}, {2, "ok"}},
                        {"--set", "cluster.max_restarts=1", "--set", "elastic.min_nodes=2"});
  INFO(result.output);
  CHECK(result.exit_code == 0);
  CHECK(contains(result.output, "[launch] node 1 failed 2 times; the job goes on with 2 nodes"));
  CHECK(contains(result.output, "[launch] job done: 3 nodes, 1 restart, exit 0"));
  require_all_gone(job.pid_dir());
}

TEST_CASE("dseek launch forwards SIGTERM and the nodes stop orderly, exit 143", "[launch]") {
  FakeJob job("launch-sigterm");
  (void)prepared_text();  // prepared before the signaller's 10 s start
  // Once both nodes are up, SIGTERM their parent: the launcher.
  std::thread signaller([&] {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < give_up) {
      const auto runs = recorded_runs(job.pid_dir());
      if (runs.size() == 2) {
        const pid_t launcher = runs.begin()->second.parent;
        if (launcher > 1) ::kill(launcher, SIGTERM);
        return;
      }
      std::this_thread::sleep_for(20ms);
    }
  });
  auto result = job.run(2, {{0, "serve"}, {1, "serve"}});
  signaller.join();
  INFO(result.output);
  CHECK(result.exit_code == 143);  // stopped by SIGTERM, orderly (128 + 15)
  CHECK(contains(result.output, "[launch] stopping (SIGTERM); a second signal kills"));
  CHECK(contains(result.output, "[node 0] stopping orderly"));
  CHECK(contains(result.output, "[node 1] stopping orderly"));
  CHECK(!contains(result.output, "restarting"));
  CHECK(contains(result.output, "[launch] job done: 2 nodes, 0 restarts, exit 143"));
  CHECK(recorded_runs(job.pid_dir()).size() == 2);
  require_all_gone(job.pid_dir());
}

TEST_CASE("dseek launch kills a hung (SIGSTOPped) node at the end", "[launch]") {
  FakeJob job("launch-hang");
  auto result = job.run(2, {{0, "serve"}, {1, "hang"}}, {"--timeout", "1", "--stop-grace", "0.5"});
  INFO(result.output);
  CHECK(result.exit_code == 124);
  CHECK(contains(result.output, "[node 1] hanging"));
  CHECK(contains(result.output, "[node 0] stopping orderly"));
  CHECK(contains(result.output, "[launch] node(s) 1 still running 0.5 s after SIGTERM; sending SIGKILL"));
  CHECK(contains(result.output, "[launch] node 1 killed by signal SIGKILL"));
  REQUIRE(recorded_runs(job.pid_dir()).size() == 2);
  require_all_gone(job.pid_dir());
}

TEST_CASE("dseek launch --timeout stops the job with exit 124", "[launch]") {
  FakeJob job("launch-timeout");
  (void)prepared_text();  // prepared before the clock starts
  const auto start = std::chrono::steady_clock::now();
  auto result = job.run(2, {{0, "serve"}, {1, "serve"}}, {"--timeout", "1"});
  const auto took = std::chrono::steady_clock::now() - start;
  INFO(result.output);
  CHECK(result.exit_code == 124);
  CHECK(took < 8s);
  CHECK(contains(result.output, "[launch] job timed out after 1 s; stopping every node"));
  CHECK(contains(result.output, "[node 0] stopping orderly"));
  CHECK(contains(result.output, "[node 1] stopping orderly"));
  CHECK(contains(result.output, "[launch] job done: 2 nodes, 0 restarts, exit 124"));
  require_all_gone(job.pid_dir());
}

TEST_CASE("dseek launch refuses a bad config with its file and line, starting nothing",
          "[launch]") {
  FakeJob job("launch-bad-config");
  const auto config = job.dir / "bad.toml";
  {
    std::ofstream out(config);
    out << "[model]\ndim = 64\nheds = 4\n";
  }
  auto result = run_process({bin("dseek"), "launch", "--nodes", "2", config.string()}, 20s,
                            job.env({}));
  INFO(result.output);
  CHECK(result.exit_code == 3);  // a config error: permanent
  CHECK(contains(result.output, "bad.toml:3"));
  CHECK(contains(result.output, "heds"));
  CHECK(!contains(result.output, "[launch] starting"));
  CHECK(recorded_runs(job.pid_dir()).empty());

  // A bad override fails the same way; the keys the launcher decides are refused.
  result = job.run(2, {}, {"--set", "train.steps=-4"});
  CHECK(result.exit_code == 3);
  CHECK(contains(result.output, "train.steps"));
  result = job.run(2, {}, {"--set", "cluster.nodes=3"});
  CHECK(result.exit_code == 2);
  CHECK(contains(result.output, "use --nodes"));
  CHECK(recorded_runs(job.pid_dir()).empty());

  // So does a setting no node of this build can run (train::check_job, the same check
  // as dseek-node's and dseek config --check's): it fails once, naming the key, instead
  // of failing on every node and being retried by restarts.
  result = job.run(2, {}, {"--set", "parallel.tensor=2", "--set", "comm.backend=\"nccl\""});
  INFO(result.output);
  CHECK(result.exit_code == 3);
  CHECK(contains(result.output, "comm.backend"));
  CHECK(contains(result.output, "this job cannot run"));
  CHECK(!contains(result.output, "[launch] starting"));
  result = job.run(2, {}, {"--set", "parallel.pipeline=2", "--set", "train.batch_size=5",
                           "--set", "train.micro_batch_size=2"});
  CHECK(result.exit_code == 3);
  CHECK(contains(result.output, "train.micro_batch_size"));
  CHECK(recorded_runs(job.pid_dir()).empty());
}

TEST_CASE("dseek launch keeps the cluster secret off the nodes' command lines", "[launch]") {
  FakeJob job("launch-secret");
  SECTION("a generated secret, the same for every node") {
    // An empty DSEEK_CLUSTER_SECRET counts as none: the launcher makes one.
    auto result = job.run(2, {}, {}, {"DSEEK_CLUSTER_SECRET="});
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    std::smatch match;
    const std::regex secret_line(
        R"(\[node (\d)\] secret-length=64 secret-hash=([0-9a-f]{16}) secret-on-cmdline=no)");
    std::vector<std::string> hashes;
    for (const auto& line : lines_of(result.output))
      if (std::regex_match(line, match, secret_line)) hashes.push_back(match[2]);
    REQUIRE(hashes.size() == 2);
    CHECK(hashes[0] == hashes[1]);
  }
  SECTION("a secret given with --set moves to the environment") {
    const std::string secret = "s3cret-token-1234";
    auto result = job.run(2, {}, {"--set", "cluster.secret=\"" + secret + "\""});
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    CHECK(contains(result.output, "[node 0] secret-length=17 "));
    CHECK(contains(result.output, "[node 1] secret-length=17 "));
    CHECK(!contains(result.output, "secret-on-cmdline=yes"));
    CHECK(!contains(result.output, secret));  // nor in an args: line
    CHECK(contains(result.output, "--set cluster.secret=\"\" "));
  }
  require_all_gone(job.pid_dir());
}

TEST_CASE("dseek launch --nodes 1 runs the real dseek-node", "[launch]") {
  ScratchDir run("launch-real-node");
  auto result = run_process(tiny_launch(run.path(), 1, 10), 120s, {"DSEEK_NODE_BINARY="});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(contains(result.output, "[node 0] step 10/10"));
  CHECK(contains(result.output, "[launch] job done: 1 node, 0 restarts, exit 0"));
  CHECK(node_events(run.path(), "train_done").size() == 1);
}
