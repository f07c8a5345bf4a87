// The comm rank program: the multi-process comm tests start it N times. Each instance
// joins a communicator through a file or TCP bootstrap and runs one named scenario:
//   dseek_comm_rank --rank R --size N --bootstrap file:<dir>|tcp:<port> --scenario NAME
//                   [--hosts h0,h1,...] [--timeout-ms T] [--chunk-bytes B]
//                   [--detect-peer-failure 0|1] [--shared-memory 0|1] [--shm-chunk-bytes B]
//                   [--shm-max-bytes B] [--all-reduce-algorithm auto|shm|direct|rsag|halving|ring]
//                   [...]
// Exit status 0: the scenario passed; 1: it failed (the reason on stderr).
#include <chrono>
#include <cstdio>
#include <exception>
#include <sstream>

#include "comm/bootstrap/file_bootstrap.hpp"
#include "comm/bootstrap/tcp_bootstrap.hpp"
#include "comm/ucx/ucx_communicator.hpp"
#include "rank/rank_env.hpp"

namespace dseek::comm::test {
std::map<std::string, Scenario>& scenarios() {
  static std::map<std::string, Scenario> all;
  return all;
}
}  // namespace dseek::comm::test

using namespace dseek::comm;
using namespace dseek::comm::test;

int main(int argc, char** argv) {
  RankEnv env;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    if (key.rfind("--", 0) == 0) key = key.substr(2);
    env.args[key] = argv[i + 1];
  }
  try {
    env.rank = std::stoi(env.arg("rank", "0"));
    env.size = std::stoi(env.arg("size", "1"));
    const std::string name = env.arg("scenario");
    auto it = scenarios().find(name);
    if (it == scenarios().end()) fail("unknown scenario '" + name + "'");
    env.options.op_timeout = std::chrono::milliseconds(std::stol(env.arg("timeout-ms", "30000")));
    env.options.chunk_bytes = std::stoul(env.arg("chunk-bytes", "16384"));
    env.options.small_message_bytes = std::stoul(env.arg("small-bytes", "32768"));
    env.options.pipeline_depth = std::stoi(env.arg("depth", "4"));
    env.options.peer_failure_detection = env.arg("detect-peer-failure", "0") == "1";
    env.options.shared_memory = env.arg("shared-memory", "1") == "1";
    env.options.shm_chunk_bytes = std::stoul(env.arg("shm-chunk-bytes", "1048576"));
    // Up to this size all-reduces take the shared-memory path (0: the default, every size).
    if (const size_t shm_max = std::stoul(env.arg("shm-max-bytes", "0")); shm_max > 0)
      env.options.shm_max_bytes = shm_max;
    env.options.all_reduce_algorithm =
        parse_all_reduce_algorithm(env.arg("all-reduce-algorithm", "auto"), "--all-reduce-algorithm");
    // Fake host names (comma-separated, one per rank) exercise the host-aware paths.
    std::string host = "localhost";
    if (const std::string hosts = env.arg("hosts"); !hosts.empty()) {
      std::stringstream s(hosts);
      std::string h;
      for (int r = 0; std::getline(s, h, ','); ++r)
        if (r == env.rank) host = h;
    }
    const std::string boot = env.arg("bootstrap");
    std::unique_ptr<Bootstrap> bootstrap;
    if (boot.rfind("file:", 0) == 0) bootstrap = std::make_unique<FileBootstrap>(boot.substr(5), env.rank, env.size);
    else if (boot.rfind("tcp:", 0) == 0)
      bootstrap = std::make_unique<TcpBootstrap>("127.0.0.1", std::stoi(boot.substr(4)), env.rank, env.size);
    else fail("--bootstrap must be file:<dir> or tcp:<port>");
    env.comm = connect_ucx(*bootstrap, host, env.options);
    it->second(env);
    env.comm.reset();
    std::printf("rank %d: %s ok\n", env.rank, name.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", env.rank, e.what());
    return 1;
  }
}
