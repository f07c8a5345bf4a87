// dseek_fake_node: stands in for dseek-node in the tests of `dseek launch`
// (test_launch.cpp points DSEEK_NODE_BINARY at it). It takes dseek-node's command line,
// reads only --node-id, and does what its environment says, so that a test can make one
// node crash, fail, hang or wait for SIGTERM while the others behave:
//
//   DSEEK_FAKE_NODE_MODE_<id>  ok (default): print lines on stdout and stderr, exit 0
//                              crash_once: SIGKILL itself on its first run
//                                          (DSEEK_LAUNCH_RESTART=0), then as ok
//                              fail: exit 1 after 300 ms, every run (a restart may cure it)
//                              permanent: exit 3 after 300 ms (a config, data or device
//                                         error: never restarted)
//                              hang: SIGSTOP itself (a hung node), never exit
//                              serve: run until SIGTERM, then exit 0 ("stopping orderly")
//   DSEEK_FAKE_NODE_LINES      how many numbered stdout lines ok prints (default 3)
//   DSEEK_FAKE_NODE_PID_DIR    where each run writes node-<id>-run-<restart>.pid holding
//                              "<pid> <parent pid>", so the test can check that no process
//                              is left and find the launcher
//
// Every run first prints its arguments and what it sees of the cluster secret: its
// length, a hash (equal across nodes when they share it), and whether the secret is on
// its own command line (/proc/self/cmdline), without printing the secret itself.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

namespace {

volatile sig_atomic_t g_terminated = 0;

void on_sigterm(int) { g_terminated = 1; }

std::string env_or(const std::string& name, const std::string& fallback) {
  const char* value = std::getenv(name.c_str());
  return value != nullptr ? value : fallback;
}

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

void report_secret() {
  const std::string secret = env_or("DSEEK_CLUSTER_SECRET", "");
  std::ifstream cmdline_file("/proc/self/cmdline", std::ios::binary);
  const std::string cmdline((std::istreambuf_iterator<char>(cmdline_file)),
                            std::istreambuf_iterator<char>());
  const bool on_cmdline = !secret.empty() && cmdline.find(secret) != std::string::npos;
  std::printf("secret-length=%zu secret-hash=%016llx secret-on-cmdline=%s\n", secret.size(),
              static_cast<unsigned long long>(fnv1a(secret)), on_cmdline ? "yes" : "no");
}

void record_pid(int node_id, int restart) {
  const std::string dir = env_or("DSEEK_FAKE_NODE_PID_DIR", "");
  if (dir.empty()) return;
  const std::string name = "node-" + std::to_string(node_id) + "-run-" + std::to_string(restart);
  const auto tmp = std::filesystem::path(dir) / (name + ".tmp");
  {
    std::ofstream out(tmp);
    out << ::getpid() << " " << ::getppid() << "\n";
  }
  // Renamed into place so the test never reads a half-written file.
  std::filesystem::rename(tmp, std::filesystem::path(dir) / (name + ".pid"));
}

int behave_ok(int node_id) {
  const int lines = std::atoi(env_or("DSEEK_FAKE_NODE_LINES", "3").c_str());
  const std::string payload(100, 'x');
  for (int i = 0; i < lines; ++i) std::printf("node %d line %d %s\n", node_id, i, payload.c_str());
  std::fprintf(stderr, "node %d says on stderr\n", node_id);
  std::printf("progress 1\rprogress 2\rprogress 3\r\n");  // a progress bar redrawing itself
  std::printf("no newline at the end");
  return 0;
}

// The SIGTERM handler is already in place (main).
int serve() {
  std::printf("serving\n");
  std::fflush(stdout);
  // Bounded, so that a launcher that never stops it cannot leave it running for long.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (g_terminated == 0 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (g_terminated == 0) return 5;
  std::printf("stopping orderly\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int node_id = -1;
  std::string args;
  for (int i = 1; i < argc; ++i) {
    if (i > 1) args += ' ';
    args += argv[i];
    if (std::strcmp(argv[i], "--node-id") == 0 && i + 1 < argc) node_id = std::atoi(argv[i + 1]);
  }
  if (node_id < 0) {
    std::fprintf(stderr, "dseek_fake_node: --node-id is missing\n");
    return 2;
  }
  const int restart = std::atoi(env_or("DSEEK_LAUNCH_RESTART", "0").c_str());
  const std::string mode = env_or("DSEEK_FAKE_NODE_MODE_" + std::to_string(node_id), "ok");

  // serve's handler goes in before the pid file appears: a test that sees the file may
  // signal the launcher at once.
  if (mode == "serve") {
    struct sigaction action{};
    action.sa_handler = on_sigterm;
    ::sigaction(SIGTERM, &action, nullptr);
  }
  record_pid(node_id, restart);
  std::printf("fake node %d run %d mode %s\n", node_id, restart, mode.c_str());
  std::printf("args: %s\n", args.c_str());
  report_secret();
  std::fflush(stdout);

  if (mode == "crash_once" && restart == 0) {
    std::printf("about to crash\n");
    std::fflush(stdout);
    ::raise(SIGKILL);
  }
  if (mode == "fail" || mode == "permanent") {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::printf("failing\n");
    return mode == "fail" ? 1 : 3;
  }
  if (mode == "hang") {
    std::printf("hanging\n");
    std::fflush(stdout);
    ::raise(SIGSTOP);
    for (;;) ::pause();
  }
  if (mode == "serve") return serve();
  return behave_ok(node_id);
}
