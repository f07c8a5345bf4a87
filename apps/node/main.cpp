// dseek-node: the daemon that runs on each host of a job. It loads and validates the
// config, then runs the node's actor tree (actors/node/run_node.hpp): the coordinator if
// this is the coordinator node, the node agent that joins it, the health monitor, the
// fault injector and the worker that trains once every node joined. Events go to
// RUN_DIR/node-<id>/events.jsonl.
//
//   dseek-node --config job.toml [--set section.key=value ...] [--run-dir DIR]
//              [--node-id K] [--coordinator HOST:PORT] [--resume latest|PATH]
//   dseek-node --help | --version
//
// The command line follows apps/cli/usage.hpp (exit 2 on a mistake). Before it joins,
// the node checks what the job needs from this host (apps/cli/preflight.hpp); a config,
// data, device or checkpoint error exits 3 at once (runtime/util/failure_kind.hpp), which
// no launcher or restart loop retries. At the end it says where the checkpoints are and
// how to resume (not under `dseek launch`, which says it for the whole job).
//
// Started by Slurm (srun) or Kubernetes (an Indexed Job), it takes the node id, node
// count, coordinator address, advertised host and run directory from their environment
// (runtime/cluster_env/cluster_env.hpp) unless the config or the command line sets them,
// and prints what it took.
//
// SIGINT or SIGTERM stops the run at the next step boundary with a train_stopped
// event (and, when checkpoints are on, a checkpoint to resume from), then exits 130
// (SIGINT) or 143 (SIGTERM), the shells' convention for a run a signal ended, distinct
// from 0 (done) and 1 (failed); a second signal exits at once (130).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "actors/node/run_node.hpp"
#include "cli/preflight.hpp"
#include "cli/resume_hint.hpp"
#include "cli/usage.hpp"
#include "cli/version.hpp"
#include "runtime/cluster_env/cluster_env.hpp"
#include "runtime/config/absolute_paths.hpp"
#include "runtime/config/load.hpp"
#include "runtime/config/schema.hpp"
#include "runtime/train/check_job.hpp"
#include "runtime/util/exit_codes.hpp"
#include "runtime/util/failure_kind.hpp"

namespace {

constexpr const char* kCommandLine =
    "usage: dseek-node --config FILE [--set section.key=value ...] [--run-dir DIR]\n"
    "                  [--node-id K] [--coordinator HOST:PORT] [--resume latest|PATH]\n"
    "       dseek-node --version\n";

// The usage --help prints: the command line, where a node's identity can come from
// and the variables read for it, the exit statuses.
std::string usage_text() {
  std::string text = std::string(kCommandLine) +
      "Under srun or in a Kubernetes Indexed Job the node id, node count, coordinator,\n"
      "advertised host and run directory come from the environment unless the config or\n"
      "the command line sets them (DSEEK_CLUSTER_ENV=auto|slurm|kubernetes|none).\n"
      "Environment variables read:";
  for (const auto& name : dseek::cluster_env::variables()) text += " " + name;
  return text + "\n" + dseek::cli::exit_status_help();
}

const std::vector<std::string> kOptions = {"--config", "--set", "--run-dir", "--node-id",
                                           "--coordinator", "--resume", "--help", "--version"};

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};  // the first SIGINT or SIGTERM

void on_signal(int signal_number) {
  int none = 0;
  g_signal.compare_exchange_strong(none, signal_number);
  if (g_stop.exchange(true)) {
    constexpr char kMessage[] = "dseek-node: second signal, exiting now\n";
    (void)!::write(2, kMessage, sizeof kMessage - 1);
    std::_Exit(130);
  }
}

struct NodeArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string run_dir;
};

// Parses the command line (throws cli::UsageError); --node-id and --coordinator become
// overrides of the cluster section so they get the config's validation.
NodeArgs parse_args(const dseek::cli::Args& argv) {
  NodeArgs args;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string value;
    if (dseek::cli::take_value(argv, i, "--config", value)) args.config = value;
    else if (dseek::cli::take_value(argv, i, "--set", value)) args.overrides.push_back(value);
    else if (dseek::cli::take_value(argv, i, "--run-dir", value)) args.run_dir = value;
    else if (dseek::cli::take_value(argv, i, "--node-id", value))
      args.overrides.push_back("cluster.node_id=" + value);
    else if (dseek::cli::take_value(argv, i, "--resume", value))
      args.overrides.push_back("checkpoint.resume=" + dseek::config::schema::quote(value));
    else if (dseek::cli::take_value(argv, i, "--coordinator", value))
      args.overrides.push_back("cluster.coordinator=\"" + value + "\"");
    else if (argv[i].rfind("-", 0) == 0) dseek::cli::unknown("option", argv[i], kOptions);
    else throw dseek::cli::UsageError("unexpected argument '" + argv[i] + "'");
  }
  if (args.config.empty()) throw dseek::cli::UsageError("--config FILE is required");
  return args;
}

// Where the checkpoints are and how to resume, unless `dseek launch` (which says it for
// the whole job) started this node.
void print_resume_hint(const dseek::config::JobConfig& config, const std::string& run_dir,
                       const dseek::cli::Args& argv) {
  const char* launched = std::getenv("DSEEK_RESUME_HINT");
  if (launched != nullptr && std::string(launched) == "0") return;
  std::vector<std::string> command = {dseek::cli::invoked_as("dseek-node")};
  for (const auto& arg : dseek::cli::without_resume(argv)) command.push_back(arg);
  const std::string hint = dseek::cli::resume_hint(config, run_dir, command);
  if (!hint.empty()) std::fprintf(stderr, "%s", hint.c_str());
}

int run(const dseek::cli::Args& argv) {
  if (!argv.empty() && argv[0] == "--version") {
    if (argv.size() > 1) throw dseek::cli::UsageError("--version takes no arguments");
    std::fputs(dseek::cli::version_text("dseek-node").c_str(), stdout);
    return dseek::exit_code::ok;
  }
  const NodeArgs args = parse_args(argv);
  try {
    // What Slurm or Kubernetes say goes first; the config file and --set win over it.
    const auto environment = dseek::cluster_env::process_environment();
    auto cluster = dseek::cluster_env::detect(environment);
    auto user_keys = dseek::config::keys_set_by(args.config, args.overrides);
    if (!args.run_dir.empty()) user_keys.insert("train.run_dir");
    std::vector<std::string> overrides = dseek::cluster_env::overrides_for(cluster, user_keys);
    overrides.insert(overrides.end(), args.overrides.begin(), args.overrides.end());
    std::fputs(dseek::cluster_env::describe(cluster).c_str(), stderr);
    dseek::config::JobConfig config = dseek::config::load_config(args.config, overrides);
    dseek::cluster_env::check_coordinator_node(cluster, config.cluster.coordinator_node);
    dseek::train::check_job(config);  // before this node joins
    dseek::config::make_paths_absolute(config);  // every message names the absolute path
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    dseek::actors::node_options options;
    options.run_dir = args.run_dir.empty() ? std::filesystem::path(config.train.run_dir)
                                           : std::filesystem::absolute(args.run_dir).lexically_normal();
    options.stop = &g_stop;
    // `dseek launch`, a restart loop or the Job controller says which incarnation it is.
    options.incarnation = cluster.incarnation;
    if (config.train.device == dseek::config::Device::cuda) {
      if (auto devices = dseek::cluster_env::visible_devices(cluster, config.cluster.gpus_per_node,
                                                             environment)) {
        ::setenv("CUDA_VISIBLE_DEVICES", devices->c_str(), 1);
        std::fprintf(stderr, "dseek-node: CUDA_VISIBLE_DEVICES=%s (local rank %lld)\n",
                     devices->c_str(), static_cast<long long>(cluster.local_rank));
      }
    }
    dseek::cli::check_host_can_run(config);  // data, devices, the checkpoint to resume
    bool stopped_early = false;
    const int code = dseek::actors::run_node(config, options, &stopped_early);
    if (code == dseek::exit_code::ok && config.cluster.node_id == config.cluster.coordinator_node)
      print_resume_hint(config, options.run_dir.string(), argv);
    // Stopped orderly by a signal: say which (130 / 143), not "done".
    if (code == dseek::exit_code::ok && stopped_early && g_signal.load() != 0)
      return g_signal.load() == SIGINT ? dseek::exit_code::interrupted : dseek::exit_code::terminated;
    return code;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dseek-node: %s\n", dseek::util::describe_failure(error).c_str());
    return dseek::util::classify_failure(error).permanent ? dseek::exit_code::permanent
                                                          : dseek::exit_code::failed;
  }
}

}  // namespace

int main(int argc, char** argv) {
  dseek::cli::set_invoked_as(argv[0]);
  const std::string usage = usage_text();
  return dseek::cli::run_command("dseek-node", usage, dseek::cli::Args(argv + 1, argv + argc), run);
}
