// `dseek launch`: runs a job's N nodes as local processes on 127.0.0.1, like torchrun
// does for PyTorch (development and tests on one host).
//
//   dseek launch --nodes N [--run-dir DIR] [--timeout SECONDS] [--stop-grace SECONDS]
//                [--resume latest|PATH] [--faults-seed N] CONFIG [--set section.key=value ...]
//   dseek launch --nodes N [--timeout SECONDS] [--stop-grace SECONDS] data prepare ARGS...
//
// This file reads the command line, loads the config and checks what the job needs
// from this host (cli/preflight.hpp: a bad config, a missing data set or device fails
// here, once, before any process starts), picks the coordinator's port, sees to the
// join secret and finds the dseek-node binary; launch/local_launcher.cpp then runs the
// nodes. At the end it says where the checkpoints are and how to resume. With `data
// prepare` it checks ARGS as that action does (a mistake fails here, once) and runs
// `dseek data prepare ARGS... --nodes N --node-id K` for K = 0..N-1, each to its end.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

#include "cli/preflight.hpp"
#include "cli/resume_hint.hpp"
#include "dseek/cmd_data.hpp"
#include "dseek/commands.hpp"
#include "actors/faults/random_faults.hpp"
#include "dseek/launch/local_launcher.hpp"
#include "runtime/config/load.hpp"
#include "runtime/config/schema.hpp"
#include "runtime/data/source_files.hpp"
#include "runtime/train/check_job.hpp"
#include "runtime/util/exit_codes.hpp"

namespace dseek::tool {

namespace {

constexpr const char* kUsage =
    "usage: dseek launch --nodes N [--run-dir DIR] [--timeout SECONDS] [--stop-grace SECONDS]\n"
    "                    [--resume latest|PATH] [--faults-seed N] CONFIG\n"
    "                    [--set section.key=value ...]\n"
    "       dseek launch --nodes N [--timeout SECONDS] [--stop-grace SECONDS]\n"
    "                    data prepare ARGS...\n"
    "  starts N local dseek-node processes (node ids 0..N-1) on 127.0.0.1, prefixes their\n"
    "  output with [node K] (on a terminal: one progress bar for the job), restarts a node\n"
    "  that dies up to cluster.max_restarts times (then the job goes on without it while\n"
    "  elastic.min_nodes remain, unless it runs the coordinator), and exits with the job's\n"
    "  status. A node that fails with a config, data, device or checkpoint error (exit 3)\n"
    "  is never restarted: the job stops. SIGINT/SIGTERM stop the nodes orderly, then exit\n"
    "  130/143; a second one kills them.\n"
    "  --resume      go on from the newest committed checkpoint (latest; none: start\n"
    "                fresh) or from the checkpoint directory PATH\n"
    "  --timeout     stop the job after SECONDS (exit 124)\n"
    "  --stop-grace  seconds between SIGTERM and SIGKILL when stopping, and how long nodes\n"
    "                may lag once the job finished on another (default 10)\n"
    "  --faults-seed a soak: adds a random fault schedule drawn from seed N (a kill, a hang,\n"
    "                a crash of every actor kind, slow, dropped heartbeats; the same seed\n"
    "                gives the same schedule) to the config's faults; printed at start and\n"
    "                when the job fails, to replay it\n"
    "  The node binary is dseek-node next to dseek, or $DSEEK_NODE_BINARY.\n"
    "  data prepare ARGS...: checks ARGS once, then runs `dseek data prepare ARGS...\n"
    "                --nodes N --node-id K` for K = 0..N-1 (docs/data.md, \"On several\n"
    "                nodes\"); every node runs to its end (node 0 waits up to its\n"
    "                --node-wait for the others), none is restarted, each failure is\n"
    "                named, and the launch exits 1 when any node failed.\n";

constexpr const char* kSecretVariable = "DSEEK_CLUSTER_SECRET";

struct LaunchArgs {
  int nodes = 0;
  std::string config;
  std::optional<std::string> run_dir;
  double timeout_s = 0;
  double stop_grace_s = 10;
  std::optional<std::string> resume;
  std::optional<uint64_t> faults_seed;
  std::vector<std::string> sets;
  std::vector<std::string> command;  // "data", "prepare", ARGS... (not a training job)
};

const std::vector<std::string> kOptions = {"--nodes", "--run-dir", "--timeout", "--stop-grace",
                                           "--resume", "--faults-seed", "--set",
                                           "--help"};


double parse_seconds(const std::string& option, const std::string& text) {
  char* end = nullptr;
  double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(seconds >= 0 && seconds <= 1e9))
    throw cli::UsageError(option + " needs a number of seconds >= 0, not '" + text + "'");
  return seconds;
}

// Throws cli::UsageError with what is wrong.
LaunchArgs parse_args(const Args& args) {
  LaunchArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string value;
    if (cli::take_value(args, i, "--nodes", value)) {
      char* end = nullptr;
      long nodes = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || nodes < 1 || nodes > 1024)
        throw cli::UsageError("--nodes needs a number from 1 to 1024, not '" + value + "'");
      parsed.nodes = static_cast<int>(nodes);
    } else if (cli::take_value(args, i, "--run-dir", value)) {
      parsed.run_dir = value;
    } else if (cli::take_value(args, i, "--timeout", value)) {
      parsed.timeout_s = parse_seconds("--timeout", value);
    } else if (cli::take_value(args, i, "--stop-grace", value)) {
      parsed.stop_grace_s = parse_seconds("--stop-grace", value);
    } else if (cli::take_value(args, i, "--resume", value)) {
      if (value.empty()) throw cli::UsageError("--resume needs latest or a checkpoint directory");
      parsed.resume = value;
    } else if (cli::take_value(args, i, "--faults-seed", value)) {
      char* end = nullptr;
      errno = 0;
      const unsigned long long seed = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || value[0] == '-' || *end != '\0' || errno != 0)
        throw cli::UsageError("--faults-seed needs a number from 0 to 2^64 - 1, not '" + value +
                              "'");
      parsed.faults_seed = seed;
    } else if (cli::take_value(args, i, "--set", value)) {
      parsed.sets.push_back(value);
    } else if (arg.rfind("-", 0) == 0 && arg != "-") {
      cli::unknown("option", arg.substr(0, arg.find('=')), kOptions);
    } else if (parsed.config.empty() && arg == "data") {  // the rest is data's
      parsed.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    } else if (parsed.config.empty()) {
      parsed.config = arg;
    } else {
      throw cli::UsageError("unexpected argument '" + arg + "' (one CONFIG only)");
    }
  }
  if (parsed.nodes == 0) throw cli::UsageError("--nodes N is required");
  if (!parsed.command.empty()) {
    if (parsed.command.size() < 2 || parsed.command[1] != "prepare")
      throw cli::UsageError("dseek launch runs `data prepare` on N nodes, not `" +
                            (parsed.command.size() < 2 ? std::string("data")
                                                       : "data " + parsed.command[1]) +
                            "`");
    if (parsed.run_dir || parsed.resume || parsed.faults_seed || !parsed.sets.empty())
      throw cli::UsageError("--run-dir, --resume, --faults-seed and --set are a training job's: give data "
                            "prepare's own options after `data prepare`");
    return parsed;
  }
  if (parsed.config.empty()) throw cli::UsageError("CONFIG is required");
  // The launcher gives every node these; a --set would silently contradict it.
  for (const auto& assignment : parsed.sets) {
    const std::string key = cli::assignment_key(assignment);
    if (key == "cluster.nodes" || key == "cluster.node_id" || key == "cluster.coordinator")
      throw cli::UsageError("--set " + key + " is decided by dseek launch (use --nodes)");
    if (key == "checkpoint.resume" && parsed.resume)
      throw cli::UsageError("--resume and --set checkpoint.resume say the same thing: use one");
  }
  // --resume is checkpoint.resume for every node (as dseek-node's --resume).
  if (parsed.resume)
    parsed.sets.push_back("checkpoint.resume=" + config::schema::quote(*parsed.resume));
  return parsed;
}

// Every line of `text` with `prefix` in front.
std::string prefix_lines(const std::string& prefix, const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const size_t stop = end == std::string::npos ? text.size() : end + 1;
    out += prefix + text.substr(start, stop - start);
    start = stop;
  }
  return out;
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

// The path of this dseek binary.
std::filesystem::path this_binary() {
  std::error_code error;
  auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw std::runtime_error("cannot read /proc/self/exe to find the dseek binary");
  return self;
}

// DSEEK_NODE_BINARY, else dseek-node next to this dseek binary.
std::string find_node_binary() {
  if (const char* configured = std::getenv("DSEEK_NODE_BINARY");
      configured != nullptr && *configured != '\0')
    return configured;
  return (this_binary().parent_path() / "dseek-node").string();
}

// Where the nodes' join secret comes from; never their command line (ps shows it). A
// secret given with --set moves to the environment, and the nodes get
// cluster.secret="" so that the one in the file does not win over it.
void arrange_secret(const config::JobConfig& job, launch::LaunchPlan& plan) {
  bool secret_was_set = false;
  std::vector<std::string> sets;
  for (const auto& assignment : plan.node_sets) {
    if (cli::assignment_key(assignment) == "cluster.secret") {
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

// dseek launch --nodes N data prepare ARGS...: ARGS checked here (the options, their
// settings and the input listing), so that a mistake is said once, not by every node.
int run_prepare(const LaunchArgs& parsed) {
  const Args args(parsed.command.begin() + 1, parsed.command.end());  // "prepare", ...
  for (const auto& arg : args)
    if (arg == "--nodes" || arg == "--node-id")
      throw cli::UsageError(arg + " of data prepare is decided by dseek launch (use dseek "
                            "launch --nodes N data prepare ...)");
  Args with_place = args;
  with_place.insert(with_place.end(), {"--nodes", std::to_string(parsed.nodes), "--node-id", "0"});
  const data::PrepareOptions options = prepare_options_from_args(with_place);
  data::check_prepare_options(options);
  const size_t files =
      data::list_source_files(data::prepare_inputs(options), options.filter).files.size();
  if (files < static_cast<size_t>(parsed.nodes))
    std::fprintf(stderr, "[launch] %zu input file(s) for %d nodes: a file is a node's unit of "
                 "work, so %zu node(s) have nothing to do\n", files, parsed.nodes,
                 static_cast<size_t>(parsed.nodes) - files);

  launch::LaunchPlan plan;
  plan.node_binary = this_binary().string();
  plan.nodes = parsed.nodes;
  plan.node_args = parsed.command;
  plan.timeout = to_milliseconds(parsed.timeout_s);
  plan.stop_grace = to_milliseconds(parsed.stop_grace_s);
  return launch::run_local_job(plan);
}

// --faults-seed: the config's faults and the seed's schedule as one faults=[...] setting
// for every node (appended to parsed.sets, where a later --set faults would replace
// it); returns the line that says the seed and the schedule.
std::string add_random_faults(LaunchArgs& parsed, const config::JobConfig& job) {
  actors::RandomFaultsShape shape;
  shape.nodes = parsed.nodes;
  shape.steps = job.train.steps;
  shape.staged = job.parallel.pipeline > 1 || job.parallel.tensor > 1;
  shape.gradient_shards = config::optimizer_offloaded(job);
  shape.coordinator_node = job.cluster.coordinator_node;
  std::vector<config::FaultSpec> faults;
  try {
    faults = actors::random_faults(*parsed.faults_seed, shape);
  } catch (const std::invalid_argument& e) {
    throw cli::UsageError(std::string("--faults-seed: ") + e.what());
  }
  const size_t drawn = faults.size();
  faults.insert(faults.begin(), job.faults.begin(), job.faults.end());
  const std::string setting = "faults=" + config::faults_inline_toml(faults);
  parsed.sets.push_back(setting);
  return "[launch] --faults-seed " + std::to_string(*parsed.faults_seed) + ": " +
         std::to_string(drawn) + " random faults (after the config's " +
         std::to_string(job.faults.size()) + "): --set '" + setting + "'\n";
}

int run_launch(const Args& args) {
  LaunchArgs parsed = parse_args(args);
  if (!parsed.command.empty()) return run_prepare(parsed);
  const std::string nodes = "cluster.nodes=" + std::to_string(parsed.nodes);
  std::vector<std::string> overrides = parsed.sets;
  overrides.push_back(nodes);
  // A config, data, device or checkpoint error fails here, once (exit 3: main.cpp).
  config::JobConfig job = config::load_config(parsed.config, overrides);
  std::string schedule;
  if (parsed.faults_seed) {
    schedule = add_random_faults(parsed, job);
    std::fputs(schedule.c_str(), stderr);
    overrides = parsed.sets;
    overrides.push_back(nodes);
    job = config::load_config(parsed.config, overrides);  // the schedule checked as any faults
  }
  train::check_job(job);  // what no node could run
  cli::check_host_can_run(job);

  launch::LaunchPlan plan;
  plan.node_binary = find_node_binary();
  if (::access(plan.node_binary.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "dseek launch: cannot run the node binary %s (set DSEEK_NODE_BINARY)\n",
                 plan.node_binary.c_str());
    return exit_code::failed;
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
  // On a terminal, one bar for the job (launch/job_console.hpp) unless the config asks
  // for plain lines (or none).
  plan.progress_bar = ::isatty(1) == 1 && (job.metrics.progress == config::Progress::automatic ||
                                           job.metrics.progress == config::Progress::bar);
  arrange_secret(job, plan);
  share_cores(job, plan);
  // The launcher decides every node's id, count and coordinator: a dseek launch inside a
  // Slurm job or a pod must not have its nodes take them from that environment instead.
  plan.extra_env.push_back("DSEEK_CLUSTER_ENV=none");
  // The nodes leave the resume hint to the launcher, which knows the whole command.
  plan.extra_env.push_back("DSEEK_RESUME_HINT=0");
  const int code = launch::run_local_job(plan);
  if (code != exit_code::ok && !schedule.empty())
    std::fprintf(stderr, "[launch] the job failed (exit %d) under this schedule; replay it with the "
                 "same config and --faults-seed\n%s", code, schedule.c_str());
  std::vector<std::string> command = {cli::invoked_as("dseek"), "launch"};
  for (const auto& arg : cli::without_resume(args)) command.push_back(arg);
  const std::string hint = cli::resume_hint(job, plan.run_dir, command);
  if (!hint.empty() && code != exit_code::usage && code != exit_code::permanent)
    std::fprintf(stderr, "%s", prefix_lines("[launch] ", hint).c_str());
  return code;
}

}  // namespace

const Command& launch_command() {
  static const Command command{
      "launch",
      "  launch --nodes N CONFIG [--set k=v ...] [--resume latest|PATH]\n"
      "                                 run a job's N nodes on this host\n"
      "  launch --nodes N data prepare ARGS...\n"
      "                                 prepare a data set with N nodes on this host\n",
      kUsage, run_launch};
  return command;
}

}  // namespace dseek::tool
