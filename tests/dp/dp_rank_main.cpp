// dseek_dp_rank: one replica of a data-parallel training job, for the multi-process
// tests (test_data_parallel.cpp). It joins a communicator through a file or TCP
// bootstrap, then runs the whole job through dist::run_data_parallel, exactly as the
// node's worker does; with --size 1 it runs the single-node train::run_training instead
// (the reference the replicas are compared against).
//
//   dseek_dp_rank --rank R --size N --bootstrap file:<dir>|tcp:<port> --config FILE
//                 --run-dir DIR [--bucket-bytes B] [--timeout-ms T] [--set key=value ...]
//                 [--staged-backend-memory 1]
//
// --staged-backend-memory 1: the gradients stay in the backend's memory, as with
// comm.backend = "nccl" (ReducerSettings::backend_memory), reduced through a
// BackendStagedCommunicator over the UCX one -- how the tests run that path without a
// GPU (on train.device = "scrambled-cpu-for-tests").
//
// Events go to DIR/node-R/events.jsonl (cluster.nodes = parallel.data = N,
// cluster.node_id = R); the last line on stdout is
// "rank R: done params_sha256 <hex> bytes_sent <n>". Exit status 0 on success, 1 on
// any error (the reason on stderr).
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dist/backend_staged_communicator.hpp"
#include "dist/run_data_parallel.hpp"
#include "comm/bootstrap/file_bootstrap.hpp"
#include "comm/bootstrap/tcp_bootstrap.hpp"
#include "comm/ucx/ucx_communicator.hpp"
#include "runtime/config/load.hpp"
#include "runtime/train/device_backend.hpp"
#include "runtime/train/run_training.hpp"

namespace {

struct Args {
  int rank = 0, size = 1;
  std::string bootstrap, config, run_dir;
  size_t bucket_bytes = 0;  // 0: the config's default
  long timeout_ms = 30000;
  bool staged_backend_memory = false;
  std::vector<std::string> overrides;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--rank") args.rank = std::stoi(value);
    else if (key == "--size") args.size = std::stoi(value);
    else if (key == "--bootstrap") args.bootstrap = value;
    else if (key == "--config") args.config = value;
    else if (key == "--run-dir") args.run_dir = value;
    else if (key == "--bucket-bytes") args.bucket_bytes = std::stoul(value);
    else if (key == "--timeout-ms") args.timeout_ms = std::stol(value);
    else if (key == "--set") args.overrides.push_back(value);
    else if (key == "--staged-backend-memory") args.staged_backend_memory = value == "1";
    else throw std::invalid_argument("unknown argument " + key);
  }
  if (args.config.empty() || args.run_dir.empty())
    throw std::invalid_argument("--config and --run-dir are required");
  return args;
}

std::unique_ptr<dseek::comm::Bootstrap> make_bootstrap(const Args& args) {
  using namespace dseek::comm;
  if (args.bootstrap.rfind("file:", 0) == 0)
    return std::make_unique<FileBootstrap>(args.bootstrap.substr(5), args.rank, args.size);
  if (args.bootstrap.rfind("tcp:", 0) == 0)
    return std::make_unique<TcpBootstrap>("127.0.0.1", std::stoi(args.bootstrap.substr(4)), args.rank,
                                          args.size);
  throw std::invalid_argument("--bootstrap must be file:<dir> or tcp:<port>");
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  try {
    const Args args = parse(argc, argv);
    rank = args.rank;
    auto overrides = args.overrides;
    // One replica per node, as the cluster runs it.
    overrides.push_back("cluster.nodes=" + std::to_string(args.size));
    overrides.push_back("parallel.data=" + std::to_string(args.size));
    overrides.push_back("cluster.node_id=" + std::to_string(args.rank));
    const auto config = dseek::config::load_config(args.config, overrides);
    dseek::train::RunOptions options;
    options.run_dir = args.run_dir;
    options.console = stdout;
    dseek::train::RunSummary summary;
    uint64_t bytes_sent = 0;
    if (args.size == 1) {
      summary = dseek::train::run_training(config, options);
    } else {
      dseek::comm::CommOptions comm_options;
      comm_options.op_timeout = std::chrono::milliseconds(args.timeout_ms);
      auto bootstrap = make_bootstrap(args);
      auto comm = dseek::comm::connect_ucx(*bootstrap, "localhost", comm_options);
      auto settings = dseek::dist::reducer_settings(config);
      if (args.bucket_bytes > 0) settings.bucket_bytes = args.bucket_bytes;
      if (args.staged_backend_memory) {
        dseek::dist::BackendStagedCommunicator staged(*comm);
        settings.backend_memory = true;
        // The trainer makes its backend: the staged communicator copies through it.
        options.backend = [&staged](const dseek::config::JobConfig& job) {
          auto backend = dseek::train::make_runtime_backend(job);
          staged.bind_backend(*backend);
          return backend;
        };
        summary = dseek::dist::run_data_parallel(config, options, staged, settings);
      } else {
        summary = dseek::dist::run_data_parallel(config, options, *comm, settings);
      }
      bytes_sent = comm->counters().bytes_sent;
    }
    std::printf("rank %d: done params_sha256 %s bytes_sent %llu\n", args.rank,
                summary.params_sha256.c_str(), static_cast<unsigned long long>(bytes_sent));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, e.what());
    return 1;
  }
}
