// Implementation of node_runs.hpp.
#include "support/node_runs.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <thread>

#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace dseek::testing {

using namespace std::chrono_literals;

std::string bin(const char* name) { return (binary_dir() / "bin" / name).string(); }

const std::filesystem::path& prepared_text() {
  static ScratchDir dir("node-data");
  static bool ready = false;
  if (!ready) {
    auto result = run_process({bin("dseek"), "data", "prepare", "--input", "/usr/lib/python3.11",
                               "--output", (dir / "text").string(), "--max-bytes", "3000000",
                               "--raw"},  // the files' bytes: the jobs' figures are tuned on them
                              60s);
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    ready = true;
  }
  static const std::filesystem::path path = dir / "text";
  return path;
}

namespace {

std::string tiny_config() { return (source_dir() / "config/single.toml").string(); }

// The --set arguments that shrink config/single.toml to the tiny job (without the
// default job's checkpoints: a test that wants them sets checkpoint.every_steps after).
std::vector<std::string> tiny_settings(int steps) {
  return {"--set", "data.dir=\"" + prepared_text().string() + "\"",
          "--set", "checkpoint.every_steps=0",
          "--set", "model.dim=64", "--set", "model.layers=2", "--set", "model.heads=4",
          "--set", "model.context=64", "--set", "train.batch_size=12",
          "--set", "train.steps=" + std::to_string(steps), "--set", "train.warmup_steps=5",
          "--set", "train.eval_every=20", "--set", "train.threads=2",
          "--set", "metrics.progress=\"plain\""};
}

// 127.0.0.1:`port` (0: any port).
sockaddr_in loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

}  // namespace

std::vector<std::string> tiny_job(const std::filesystem::path& run_dir, int steps,
                                  const std::vector<std::string>& extra) {
  std::vector<std::string> job = {bin("dseek-node"), "--config", tiny_config(),
                                  "--run-dir", run_dir.string()};
  const auto settings = tiny_settings(steps);
  job.insert(job.end(), settings.begin(), settings.end());
  job.insert(job.end(), extra.begin(), extra.end());
  return job;
}

std::vector<std::string> tiny_launch(const std::filesystem::path& run_dir, int nodes, int steps,
                                     const std::vector<std::string>& extra) {
  std::vector<std::string> job = {bin("dseek"), "launch", "--nodes", std::to_string(nodes),
                                  "--run-dir", run_dir.string(), tiny_config()};
  const auto settings = tiny_settings(steps);
  job.insert(job.end(), settings.begin(), settings.end());
  job.insert(job.end(), extra.begin(), extra.end());
  return job;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address = loopback(0);
  socklen_t length = sizeof address;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  REQUIRE(ok);
  return ntohs(address.sin_port);
}

bool half_tls_handshake(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const sockaddr_in address = loopback(port);
  const unsigned char partial_hello[] = {0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00};
  const bool sent =
      ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 &&
      ::write(fd, partial_hello, sizeof partial_hello) == static_cast<ssize_t>(sizeof partial_hello);
  ::close(fd);
  return sent;
}

// Whether a listening socket could take 127.0.0.1:`port` now.
bool port_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in address = loopback(port);
  const bool free = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return free;
}

// P such that P and P + 1 (nodes 0 and 1) were free a moment ago.
int free_port_pair() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = free_port();
    if (port < 65535 && port_free(port + 1)) return port;
  }
  FAIL("no two consecutive free ports on 127.0.0.1");
  return 0;
}

std::vector<std::string> read_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> events_named(const std::vector<std::string>& lines,
                                      const std::string& event) {
  std::vector<std::string> found;
  for (const auto& line : lines)
    if (line.find("\"event\":\"" + event + "\"") != std::string::npos) found.push_back(line);
  return found;
}

std::vector<std::string> checkpoint_reads(const std::filesystem::path& run_dir, int node_id) {
  std::vector<std::string> reads;
  for (const auto& resumed : node_events(run_dir, node_id, "resumed"))
    if (resumed.find("\"path\":") != std::string::npos) reads.push_back(resumed);
  return reads;
}

std::vector<std::string> node_events(const std::filesystem::path& run_dir,
                                     const std::string& event) {
  return node_events(run_dir, 0, event);
}

std::vector<std::string> node_events(const std::filesystem::path& run_dir, int node_id,
                                     const std::string& event) {
  auto lines = read_lines(run_dir / ("node-" + std::to_string(node_id)) / "events.jsonl");
  // The last line of a file being written may be incomplete.
  if (!lines.empty() && (lines.back().empty() || lines.back().back() != '}')) lines.pop_back();
  return events_named(lines, event);
}

std::string wait_for_event(const std::filesystem::path& run_dir, int node_id,
                           const std::string& event, std::chrono::milliseconds timeout,
                           const std::function<bool(const std::string&)>& match) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (const auto& line : node_events(run_dir, node_id, event))
      if (!match || match(line)) return line;
    if (std::chrono::steady_clock::now() >= deadline) return "";
    std::this_thread::sleep_for(20ms);
  }
}

double number_field(const std::string& line, const std::string& key) {
  std::smatch match;
  REQUIRE(std::regex_search(line, match, std::regex("\"" + key + "\":([-0-9.eE+]+)")));
  return std::stod(match[1]);
}

std::string string_field(const std::string& line, const std::string& key) {
  std::smatch match;
  REQUIRE(std::regex_search(line, match, std::regex("\"" + key + "\":\"([^\"]*)\"")));
  return match[1];
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::string> faults(const std::string& tables) {
  return {"--set", "faults=[" + tables + "]"};
}

std::vector<std::string> launch_env() { return {"DSEEK_NODE_BINARY=" + bin("dseek-node")}; }

std::string event_with(const std::filesystem::path& run_dir, int node_id, const std::string& event,
                       const std::string& key, double value) {
  for (const auto& line : node_events(run_dir, node_id, event))
    if (number_field(line, key) == value) return line;
  return "";
}

std::string fault_of(const std::filesystem::path& run_dir, int node_id, const std::string& kind) {
  for (const auto& line : node_events(run_dir, node_id, "fault_injected"))
    if (string_field(line, "kind") == kind) return line;
  return "";
}

std::string sdc_eviction_seen(const std::filesystem::path& run_dir, int node_id) {
  const auto sdc = node_events(run_dir, node_id, "sdc_detected");
  if (sdc.size() == 1) return sdc[0];
  if (!sdc.empty()) return "";
  for (const auto& line : node_events(run_dir, node_id, "training_interrupted"))
    if (string_field(line, "error").find("SDC audit at step") != std::string::npos) return line;
  return "";
}

bool node_process_alive(pid_t pid) {
  const std::filesystem::path proc = "/proc/" + std::to_string(pid);
  std::string command;
  std::getline(std::ifstream(proc / "cmdline"), command, '\0');
  if (command.find("dseek-node") == std::string::npos) return false;
  std::string stat;
  std::getline(std::ifstream(proc / "stat"), stat);
  const auto name_end = stat.rfind(')');
  return name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] != 'Z';
}

std::vector<pid_t> node_pids(const std::filesystem::path& run_dir, int node_id) {
  std::vector<pid_t> pids;
  for (const auto& line : node_events(run_dir, node_id, "node_started"))
    pids.push_back(static_cast<pid_t>(number_field(line, "pid")));
  return pids;
}

std::string final_params_sha256(const std::filesystem::path& run_dir, int node_id, int steps) {
  const auto done = node_events(run_dir, node_id, "train_done");
  REQUIRE(done.size() == 1);
  CHECK(number_field(done[0], "step") == steps);
  return string_field(done[0], "params_sha256");
}

void require_no_node_left(const std::filesystem::path& run_dir, int nodes) {
  for (int node = 0; node < nodes; ++node) {
    for (pid_t pid : node_pids(run_dir, node)) {
      INFO("node " << node << " pid " << pid);
      const bool alive = node_process_alive(pid);
      if (alive) ::kill(pid, SIGKILL);
      CHECK_FALSE(alive);
    }
  }
}

}  // namespace dseek::testing
