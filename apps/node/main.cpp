// dseek-node: the daemon that runs on each host of a job. It loads and validates the
// config, then runs the node's actor tree (actors/node/run_node.hpp): the coordinator if
// this is the coordinator node, the node agent that joins it, the health monitor, the
// fault injector and the worker that trains once every node joined. Events go to
// RUN_DIR/node-<id>/events.jsonl.
//
//   dseek-node --config job.toml [--set section.key=value ...] [--run-dir DIR]
//              [--node-id K] [--coordinator HOST:PORT] [--resume latest|PATH]
//
// Started by Slurm (srun) or Kubernetes (an Indexed Job), it takes the node id, node
// count, coordinator address, advertised host and run directory from their environment
// (runtime/cluster_env/cluster_env.hpp) unless the config or the command line sets them,
// and prints what it took.
//
// SIGINT or SIGTERM stops the run at the next step boundary with a train_stopped
// event and exit code 0 (and, when checkpoints are on, a checkpoint to resume from);
// a second signal exits at once.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <unistd.h>

#include "actors/node/run_node.hpp"
#include "runtime/checkpoint/error.hpp"
#include "runtime/cluster_env/cluster_env.hpp"
#include "runtime/config/load.hpp"
#include "runtime/config/schema.hpp"
#include "runtime/data/token_dataset.hpp"
#include "runtime/train/check_job.hpp"

namespace {

constexpr const char* kUsage =
    "usage: dseek-node --config FILE [--set section.key=value ...] [--run-dir DIR]\n"
    "                  [--node-id K] [--coordinator HOST:PORT] [--resume latest|PATH]\n";

// --help adds where a node's identity can come from, and the variables read for it.
constexpr const char* kEnvironmentHelp =
    "Under srun or in a Kubernetes Indexed Job the node id, node count, coordinator,\n"
    "advertised host and run directory come from the environment unless the config or\n"
    "the command line sets them (DSEEK_CLUSTER_ENV=auto|slurm|kubernetes|none).\n"
    "Environment variables read:";

std::atomic<bool> g_stop{false};

void on_signal(int) {
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

// Parses the command line; --node-id and --coordinator become overrides of the
// cluster section so they get the config's validation.
bool parse_args(int argc, char** argv, NodeArgs& args, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* name) -> std::string {
      std::string prefix = std::string(name) + "=";
      if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
      if (i + 1 >= argc) {
        error = std::string(name) + " needs a value";
        return {};
      }
      return argv[++i];
    };
    auto is = [&](const char* name) {
      return arg == name || arg.rfind(std::string(name) + "=", 0) == 0;
    };
    if (is("--config")) args.config = value("--config");
    else if (is("--set")) args.overrides.push_back(value("--set"));
    else if (is("--run-dir")) args.run_dir = value("--run-dir");
    else if (is("--node-id")) args.overrides.push_back("cluster.node_id=" + value("--node-id"));
    else if (is("--resume"))
      args.overrides.push_back("checkpoint.resume=" +
                               dseek::config::schema::quote(value("--resume")));
    else if (is("--coordinator"))
      args.overrides.push_back("cluster.coordinator=\"" + value("--coordinator") + "\"");
    else error = "unknown argument '" + arg + "'";
    if (!error.empty()) return false;
  }
  if (args.config.empty()) error = "--config FILE is required";
  return error.empty();
}

}  // namespace

int main(int argc, char** argv) {
  NodeArgs args;
  std::string error;
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    std::fputs(kEnvironmentHelp, stdout);
    for (const auto& name : dseek::cluster_env::variables()) std::printf(" %s", name.c_str());
    std::fputs("\n", stdout);
    return 0;
  }
  if (!parse_args(argc, argv, args, error)) {
    std::fprintf(stderr, "dseek-node: %s\n%s", error.c_str(), kUsage);
    return 2;
  }
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
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    dseek::actors::node_options options;
    options.run_dir = args.run_dir.empty() ? config.train.run_dir : args.run_dir;
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
    return dseek::actors::run_node(config, options);
  } catch (const dseek::cluster_env::ClusterEnvError& e) {
    std::fprintf(stderr, "dseek-node: cluster environment error: %s\n", e.what());
  } catch (const dseek::config::ConfigError& e) {
    std::fprintf(stderr, "dseek-node: config error: %s\n", e.what());
  } catch (const dseek::data::DataError& e) {
    std::fprintf(stderr, "dseek-node: data error: %s\n", e.what());
  } catch (const dseek::checkpoint::CheckpointError& e) {
    std::fprintf(stderr, "dseek-node: checkpoint error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dseek-node: %s\n", e.what());
  }
  return 1;
}
