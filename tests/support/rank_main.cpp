// dseek_test_rank: one rank of a training job for the multi-process tests (tests/dp/,
// tests/pipeline/): it joins a UCX communicator through a file or TCP bootstrap and runs
// the job through dist::run_layout, exactly as the node's control loop does; with
// --size 1 it runs the same loop alone, without a data plane (the reference the ranks
// are compared against).
//
//   dseek_test_rank --rank R --size N --bootstrap file:<dir>|tcp:<port> --config FILE
//                   --run-dir DIR [--pipeline P] [--tensor T] [--data D]
//                   [--bucket-bytes B] [--timeout-ms T] [--staged-backend-memory 1]
//                   [--params-out FILE] [--set key=value ...]
//
// Layout: a data-parallel job of N replicas (cluster.nodes = parallel.data = N) unless
// --pipeline, --tensor or --data is given: then parallel.tensor = T, parallel.data = D
// (default 1 each) and parallel.pipeline = P (default N / (T D)). cluster.node_id = R.
// --staged-backend-memory 1: the gradients (and a tensor group's all-reduces) stay in
// the backend's memory, as with comm.backend = "nccl" (ReducerSettings::backend_memory),
// reduced through a BackendStagedCommunicator over the UCX one given to run_layout as
// its device plane -- how the tests run that path without a GPU (on train.device =
// "scrambled-cpu-for-tests"). --params-out: the first rank
// writes the final parameters of the whole model there (raw fp32, layout order; a
// pipeline or tensor layout, or --size 1).
//
// Events go to DIR/node-R/events.jsonl; a pipeline's stage 0 writes DIR/trace.json. The
// last line on stdout is "rank R: done params_sha256 <hex> bytes_sent <n> device_bytes_sent
// <n>" (the second: the device plane's, with --staged-backend-memory). Exit status 0 on
// success, 1 on any error (the reason on stderr).
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "comm/bootstrap/file_bootstrap.hpp"
#include "comm/bootstrap/tcp_bootstrap.hpp"
#include "comm/ucx/ucx_communicator.hpp"
#include "dist/backend_staged_communicator.hpp"
#include "dist/run_layout.hpp"
#include "runtime/config/load.hpp"
#include "runtime/train/device_backend.hpp"
#include "runtime/train/pipeline/run_stage.hpp"
#include "runtime/train/pipeline/single_stage_links.hpp"

namespace {

struct Args {
  int rank = 0, size = 1, pipeline = 0, tensor = 1, data = 1;
  bool fixed_layout = false;  // --pipeline, --tensor or --data given
  std::string bootstrap, config, run_dir, params_out;
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
    else if (key == "--pipeline") args.pipeline = std::stoi(value), args.fixed_layout = true;
    else if (key == "--tensor") args.tensor = std::stoi(value), args.fixed_layout = true;
    else if (key == "--data") args.data = std::stoi(value), args.fixed_layout = true;
    else if (key == "--bootstrap") args.bootstrap = value;
    else if (key == "--config") args.config = value;
    else if (key == "--run-dir") args.run_dir = value;
    else if (key == "--params-out") args.params_out = value;
    else if (key == "--bucket-bytes") args.bucket_bytes = std::stoul(value);
    else if (key == "--timeout-ms") args.timeout_ms = std::stol(value);
    else if (key == "--staged-backend-memory") args.staged_backend_memory = value == "1";
    else if (key == "--set") args.overrides.push_back(value);
    else throw std::invalid_argument("unknown argument " + key);
  }
  if (args.config.empty() || args.run_dir.empty())
    throw std::invalid_argument("--config and --run-dir are required");
  if (args.tensor < 1 || args.data < 1 || args.size % (args.tensor * args.data) != 0)
    throw std::invalid_argument("--tensor x --data must divide --size");
  if (args.pipeline == 0) args.pipeline = args.size / (args.tensor * args.data);
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

void write_params(const std::string& path, const std::vector<float>& params) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(params.data()),
            static_cast<std::streamsize>(params.size() * sizeof(float)));
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::vector<std::string> layout_settings(const Args& args) {
  std::vector<std::string> settings{"cluster.nodes=" + std::to_string(args.size),
                                    "cluster.node_id=" + std::to_string(args.rank)};
  if (!args.fixed_layout) {
    settings.push_back("parallel.data=" + std::to_string(args.size));  // one replica a node
    return settings;
  }
  settings.push_back("parallel.pipeline=" + std::to_string(args.pipeline));
  settings.push_back("parallel.tensor=" + std::to_string(args.tensor));
  settings.push_back("parallel.data=" + std::to_string(args.data));
  return settings;
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  try {
    const Args args = parse(argc, argv);
    rank = args.rank;
    auto overrides = args.overrides;
    for (const auto& setting : layout_settings(args)) overrides.push_back(setting);
    const auto config = dseek::config::load_config(args.config, overrides);
    dseek::train::RunOptions options;
    options.run_dir = args.run_dir;
    options.console = stdout;
    std::string sha;
    std::vector<float> params;
    uint64_t bytes_sent = 0;
    uint64_t device_bytes_sent = 0;  // --staged-backend-memory: the device plane's
    if (args.size == 1) {
      dseek::train::SingleStageLinks alone;
      auto summary = dseek::train::run_pipeline_stage(config, options, alone);
      sha = summary.run.params_sha256;
      params = std::move(summary.final_params);
    } else {
      dseek::comm::CommOptions comm_options;
      comm_options.op_timeout = std::chrono::milliseconds(args.timeout_ms);
      auto bootstrap = make_bootstrap(args);
      auto comm = dseek::comm::connect_ucx(*bootstrap, "localhost", comm_options);
      auto settings = dseek::dist::reducer_settings(config);
      if (args.bucket_bytes > 0) settings.bucket_bytes = args.bucket_bytes;
      dseek::train::PipelineRunSummary summary;
      if (args.staged_backend_memory) {
        // The epoch's device plane, as the NCCL one is beside UCX in a node: the host
        // exchanges stay on `comm`. A codec encodes host memory (reducer_settings.cpp).
        dseek::dist::BackendStagedCommunicator staged(*comm);
        settings.backend_memory = settings.compression == dseek::config::Compression::none;
        // The trainer makes its backend: the staged communicator copies through it.
        options.backend = [&staged](const dseek::config::JobConfig& job) {
          auto backend = dseek::train::make_runtime_backend(job);
          staged.bind_backend(*backend);
          return backend;
        };
        summary = dseek::dist::run_layout(config, options, *comm, settings, &staged);
        device_bytes_sent = staged.plane_counters().bytes_sent;
      } else {
        summary = dseek::dist::run_layout(config, options, *comm, settings);
      }
      sha = summary.run.params_sha256;
      params = std::move(summary.final_params);
      bytes_sent = comm->counters().bytes_sent;
    }
    if (args.rank == 0 && !args.params_out.empty() && !params.empty())
      write_params(args.params_out, params);
    std::printf("rank %d: done params_sha256 %s bytes_sent %llu device_bytes_sent %llu\n",
                args.rank, sha.c_str(), static_cast<unsigned long long>(bytes_sent),
                static_cast<unsigned long long>(device_bytes_sent));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, e.what());
    return 1;
  }
}
