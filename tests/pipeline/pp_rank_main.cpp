// dseek_pp_rank: one stage of a pipeline-parallel training job (or one tensor-parallel
// rank of a stage), for the multi-process tests (test_pipeline.cpp,
// test_pipeline_tensor.cpp) and bench/pipeline_schedules.sh. It joins a communicator
// through a file bootstrap and runs dist::run_pipeline, as the node's worker does;
// with --size 1 it runs the single-node train::run_training instead (the reference).
//
//   dseek_pp_rank --rank R --size N --bootstrap file:<dir> --config FILE --run-dir DIR
//                 [--tensor T] [--data D] [--params-out FILE] [--timeout-ms T]
//                 [--set key=value ...]
//
// Events go to DIR/node-R/events.jsonl (cluster.nodes = N, parallel.tensor = T and
// parallel.data = D (default 1), parallel.pipeline = N / (T D), cluster.node_id = R);
// stage 0 writes DIR/trace.json. --params-out: rank 0 writes the
// final parameters of the whole model there (raw fp32, layout order). Exit status 0 on
// success, 1 on any error (the reason on stderr).
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "dist/run_pipeline.hpp"
#include "comm/bootstrap/file_bootstrap.hpp"
#include "comm/ucx/ucx_communicator.hpp"
#include "runtime/config/load.hpp"
#include "runtime/train/run_training.hpp"
#include "runtime/train/trainer.hpp"

namespace {

struct Args {
  int rank = 0, size = 1, tensor = 1, data = 1;
  std::string bootstrap, config, run_dir, params_out;
  long timeout_ms = 30000;
  std::vector<std::string> overrides;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--rank") args.rank = std::stoi(value);
    else if (key == "--size") args.size = std::stoi(value);
    else if (key == "--tensor") args.tensor = std::stoi(value);
    else if (key == "--data") args.data = std::stoi(value);
    else if (key == "--bootstrap") args.bootstrap = value;
    else if (key == "--config") args.config = value;
    else if (key == "--run-dir") args.run_dir = value;
    else if (key == "--params-out") args.params_out = value;
    else if (key == "--timeout-ms") args.timeout_ms = std::stol(value);
    else if (key == "--set") args.overrides.push_back(value);
    else throw std::invalid_argument("unknown argument " + key);
  }
  if (args.config.empty() || args.run_dir.empty())
    throw std::invalid_argument("--config and --run-dir are required");
  if (args.tensor < 1 || args.data < 1 || args.size % (args.tensor * args.data) != 0)
    throw std::invalid_argument("--tensor x --data must divide --size");
  if (args.size > 1 && args.bootstrap.rfind("file:", 0) != 0)
    throw std::invalid_argument("--bootstrap file:<dir> is required with --size > 1");
  return args;
}

void write_params(const std::string& path, const std::vector<float>& params) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(params.data()),
            static_cast<std::streamsize>(params.size() * sizeof(float)));
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  try {
    const Args args = parse(argc, argv);
    rank = args.rank;
    auto overrides = args.overrides;
    overrides.push_back("cluster.nodes=" + std::to_string(args.size));
    overrides.push_back("parallel.pipeline=" + std::to_string(args.size / (args.tensor * args.data)));
    overrides.push_back("parallel.tensor=" + std::to_string(args.tensor));
    overrides.push_back("parallel.data=" + std::to_string(args.data));
    overrides.push_back("cluster.node_id=" + std::to_string(args.rank));
    const auto config = dseek::config::load_config(args.config, overrides);
    dseek::train::RunOptions options;
    options.run_dir = args.run_dir;
    options.console = stdout;
    std::string sha;
    if (args.size == 1) {
      std::vector<float> params;
      options.after_step = [&](int64_t steps_done, dseek::train::Trainer& trainer) {
        if (steps_done != config.train.steps) return;
        params.resize(trainer.model().num_params());
        trainer.backend().copy_to_host(params.data(), trainer.model().params(),
                                       params.size() * sizeof(float));
      };
      sha = dseek::train::run_training(config, options).params_sha256;
      if (!args.params_out.empty()) write_params(args.params_out, params);
    } else {
      dseek::comm::CommOptions comm_options;
      comm_options.op_timeout = std::chrono::milliseconds(args.timeout_ms);
      dseek::comm::FileBootstrap bootstrap(args.bootstrap.substr(5), args.rank, args.size);
      auto comm = dseek::comm::connect_ucx(bootstrap, "localhost", comm_options);
      const auto summary = dseek::dist::run_pipeline(config, options, *comm);
      sha = summary.run.params_sha256;
      if (args.rank == 0 && !args.params_out.empty()) write_params(args.params_out, summary.final_params);
    }
    std::printf("rank %d: done params_sha256 %s\n", args.rank, sha.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, e.what());
    return 1;
  }
}
