// `dseek launch`: runs a job's N nodes as local processes on 127.0.0.1, like torchrun
// does for PyTorch (development and tests on one host).
//
//   dseek launch --nodes N [--run-dir DIR] [--timeout SECONDS] [--stop-grace SECONDS]
//                CONFIG [--set section.key=value ...]
//
// This file reads the command line, loads the config (a bad one fails here, before any
// process starts), picks the coordinator's port, sees to the join secret and finds the
// dseek-node binary; launch/local_launcher.cpp then runs the nodes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dseek/commands.hpp"
#include "dseek/launch/local_launcher.hpp"
#include "runtime/config/load.hpp"
#include "runtime/train/check_job.hpp"

namespace dseek::tool {

namespace {

constexpr const char* kUsage =
    "usage: dseek launch --nodes N [--run-dir DIR] [--timeout SECONDS] [--stop-grace SECONDS]\n"
    "                    CONFIG [--set section.key=value ...]\n"
    "  starts N local dseek-node processes (node ids 0..N-1) on 127.0.0.1, prefixes their\n"
    "  output with [node K], restarts a node that dies up to cluster.max_restarts times\n"
    "  (then the job goes on without it while elastic.min_nodes remain, unless it runs the\n"
    "  coordinator), and exits with the job's status (124 after --timeout; SIGINT/SIGTERM\n"
    "  stop the nodes, a second one kills them). --stop-grace: seconds between SIGTERM and\n"
    "  SIGKILL when stopping, and how long nodes may lag once the job finished on another\n"
    "  (default 10). The node binary is dseek-node next to dseek, or $DSEEK_NODE_BINARY.\n";

constexpr const char* kSecretVariable = "DSEEK_CLUSTER_SECRET";

struct LaunchArgs {
  int nodes = 0;
  std::string config;
  std::optional<std::string> run_dir;
  double timeout_s = 0;
  double stop_grace_s = 10;
  std::vector<std::string> sets;
};

int usage(const std::string& problem) {
  std::fprintf(stderr, "dseek launch: %s\n%s", problem.c_str(), kUsage);
  return 2;
}

// The key of "section.key=value", without surrounding blanks.
std::string key_of(const std::string& assignment) {
  std::string key = assignment.substr(0, assignment.find('='));
  const auto first = key.find_first_not_of(" \t");
  const auto last = key.find_last_not_of(" \t");
  return first == std::string::npos ? "" : key.substr(first, last - first + 1);
}

double parse_seconds(const std::string& option, const std::string& text) {
  char* end = nullptr;
  double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(seconds >= 0 && seconds <= 1e9))
    throw std::invalid_argument(option + " needs a number of seconds >= 0, not '" + text + "'");
  return seconds;
}

// Throws std::invalid_argument with what is wrong.
LaunchArgs parse_args(const Args& args) {
  LaunchArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto is = [&](const char* name) {
      return arg == name || arg.rfind(std::string(name) + "=", 0) == 0;
    };
    auto value = [&](const char* name) -> std::string {
      const std::string prefix = std::string(name) + "=";
      if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
      if (i + 1 == args.size()) throw std::invalid_argument(std::string(name) + " needs a value");
      return args[++i];
    };
    if (is("--nodes")) {
      const std::string text = value("--nodes");
      char* end = nullptr;
      long nodes = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || nodes < 1 || nodes > 1024)
        throw std::invalid_argument("--nodes needs a number from 1 to 1024, not '" + text + "'");
      parsed.nodes = static_cast<int>(nodes);
    } else if (is("--run-dir")) {
      parsed.run_dir = value("--run-dir");
    } else if (is("--timeout")) {
      parsed.timeout_s = parse_seconds("--timeout", value("--timeout"));
    } else if (is("--stop-grace")) {
      parsed.stop_grace_s = parse_seconds("--stop-grace", value("--stop-grace"));
    } else if (is("--set")) {
      parsed.sets.push_back(value("--set"));
    } else if (arg.rfind("-", 0) == 0 && arg != "-") {
      throw std::invalid_argument("unknown option '" + arg + "'");
    } else if (parsed.config.empty()) {
      parsed.config = arg;
    } else {
      throw std::invalid_argument("unexpected argument '" + arg + "' (one CONFIG only)");
    }
  }
  if (parsed.nodes == 0) throw std::invalid_argument("--nodes N is required");
  if (parsed.config.empty()) throw std::invalid_argument("CONFIG is required");
  // The launcher gives every node these; a --set would silently contradict it.
  for (const auto& assignment : parsed.sets) {
    const std::string key = key_of(assignment);
    if (key == "cluster.nodes" || key == "cluster.node_id" || key == "cluster.coordinator")
      throw std::invalid_argument("--set " + key + " is decided by dseek launch (use --nodes)");
  }
  return parsed;
}

std::chrono::milliseconds to_milliseconds(double seconds) {
  return std::chrono::milliseconds(std::llround(seconds * 1000.0));
}

// A TCP port on 127.0.0.1 that was free a moment ago: the coordinator node binds it.
int pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("cannot create a socket to pick a port");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("cannot pick a free port on 127.0.0.1");
  return ntohs(address.sin_port);
}

// 32 random bytes as hex.
std::string random_secret() {
  unsigned char bytes[32];
  std::ifstream random("/dev/urandom", std::ios::binary);
  if (!random.read(reinterpret_cast<char*>(bytes), sizeof bytes))
    throw std::runtime_error("cannot read /dev/urandom for the cluster secret");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char byte : bytes) {
    hex += kHex[byte >> 4];
    hex += kHex[byte & 15];
  }
  return hex;
}

// DSEEK_NODE_BINARY, else dseek-node next to this dseek binary.
std::string find_node_binary() {
  if (const char* configured = std::getenv("DSEEK_NODE_BINARY");
      configured != nullptr && *configured != '\0')
    return configured;
  std::error_code error;
  auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw std::runtime_error("cannot read /proc/self/exe to find dseek-node");
  return (self.parent_path() / "dseek-node").string();
}

// Where the nodes' join secret comes from; never their command line (ps shows it). A
// secret given with --set moves to the environment, and the nodes get
// cluster.secret="" so that the one in the file does not win over it.
void arrange_secret(const config::JobConfig& job, launch::LaunchPlan& plan) {
  bool secret_was_set = false;
  std::vector<std::string> sets;
  for (const auto& assignment : plan.node_sets) {
    if (key_of(assignment) == "cluster.secret") {
      secret_was_set = true;
    } else {
      sets.push_back(assignment);
    }
  }
  if (secret_was_set) {
    sets.push_back("cluster.secret=\"\"");
    plan.node_sets = sets;
    plan.extra_env.push_back(std::string(kSecretVariable) + "=" + job.cluster.secret);
    return;
  }
  if (!job.cluster.secret.empty()) return;  // in the file: the nodes read it there
  const char* inherited = std::getenv(kSecretVariable);
  if (inherited != nullptr && *inherited != '\0') return;  // the nodes inherit it
  plan.extra_env.push_back(std::string(kSecretVariable) + "=" + random_secret());
}

// N nodes on one machine each using every core would fight over them: a config that
// says train.threads = 0 (all cores) gets the cores shared out (as torchrun sets
// OMP_NUM_THREADS), unless --set chose the count. Every rank counts: a node runs
// cluster.gpus_per_node of them.
void share_cores(const config::JobConfig& job, launch::LaunchPlan& plan) {
  if (job.train.threads != 0) return;
  const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  const long per_node = std::max<long>(1, static_cast<long>(job.cluster.gpus_per_node));
  const long each = std::max(1L, cores / (plan.nodes * per_node));
  plan.node_sets.push_back("train.threads=" + std::to_string(each));
  std::fprintf(stderr, "[launch] train.threads = 0 (all cores): %ld thread(s) per rank for %d "
               "node(s) x %ld rank(s) on %ld cores\n", each, plan.nodes, per_node, cores);
}

}  // namespace

int cmd_launch(const Args& args) {
  LaunchArgs parsed;
  try {
    if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    parsed = parse_args(args);
  } catch (const std::invalid_argument& error) {
    return usage(error.what());
  }

  std::vector<std::string> overrides = parsed.sets;
  overrides.push_back("cluster.nodes=" + std::to_string(parsed.nodes));
  config::JobConfig job;
  try {
    job = config::load_config(parsed.config, overrides);
    train::check_job(job);  // what no node could run fails here, once
  } catch (const config::ConfigError& error) {
    std::fprintf(stderr, "dseek launch: config error: %s\n", error.what());
    return 1;
  }

  launch::LaunchPlan plan;
  plan.node_binary = find_node_binary();
  if (::access(plan.node_binary.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "dseek launch: cannot run the node binary %s (set DSEEK_NODE_BINARY)\n",
                 plan.node_binary.c_str());
    return 1;
  }
  plan.config_path = parsed.config;
  plan.run_dir = parsed.run_dir.value_or(job.train.run_dir);
  plan.nodes = parsed.nodes;
  plan.coordinator = "127.0.0.1:" + std::to_string(pick_free_port());
  plan.node_sets = parsed.sets;
  plan.max_restarts = static_cast<int>(std::min<int64_t>(job.cluster.max_restarts, 1'000'000));
  plan.min_nodes = static_cast<int>(job.elastic.min_nodes);
  plan.coordinator_node = static_cast<int>(job.cluster.coordinator_node);
  plan.timeout = to_milliseconds(parsed.timeout_s);
  plan.stop_grace = to_milliseconds(parsed.stop_grace_s);
  arrange_secret(job, plan);
  share_cores(job, plan);
  // The launcher decides every node's id, count and coordinator: a dseek launch inside a
  // Slurm job or a pod must not have its nodes take them from that environment instead.
  plan.extra_env.push_back("DSEEK_CLUSTER_ENV=none");
  return launch::run_local_job(plan);
}

}  // namespace dseek::tool
