// dseek_tp_rank: one rank of a tensor-parallel group training a small GPT for the
// multi-process parity test (test_tensor_parallel.cpp). It joins a UCX communicator
// through a file bootstrap and trains model::TensorParallelGpt over CommTensorGroup;
// with --size 1 it trains the whole model::GptModel (the reference). Both start from
// init_weights(seed) and see the same batches (a function of the step), so the runs
// differ only in how the model is split.
//
//   dseek_tp_rank --rank R --size T --bootstrap file:<dir> --out DIR [--steps N]
//                 [--threads K] [--dim C --layers L --heads H --context T --vocab V --batch B]
//                 [--recompute none|every:N]
//
// The shape flags (defaults: tp_job_shape.hpp) and --threads (default 1) are for
// bench/tensor_parallel.sh; each run prints "tokens_per_s X" timed over steps 2..N.
// --recompute is model.recompute's value (default none), for both models.
//
// Writes DIR/losses-R.txt (one mean loss per step) and DIR/params-R.f32: the whole
// model's flat buffer (raw fp32, ParamLayout order) with this rank's shard in place and
// NaN where the rank holds nothing. Exit status 0 on success, 1 on any error.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "dist/comm_tensor_group.hpp"
#include "comm/bootstrap/file_bootstrap.hpp"
#include "comm/ucx/ucx_communicator.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/model/recompute_policy.hpp"
#include "runtime/model/tensor_parallel_gpt.hpp"
#include "runtime/train/layout/parallel_groups.hpp"
#include "support/small_gpt.hpp"
#include "tensor/tp_job_shape.hpp"

namespace {

struct Args {
  int rank = 0, size = 1, steps = 4, threads = 1;
  dseek::model::GptShape shape = dseek::testing::tp::kShape;
  int64_t batch = dseek::testing::tp::kBatch;
  dseek::model::RecomputePolicy recompute;
  std::string bootstrap, out;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--rank") args.rank = std::stoi(value);
    else if (key == "--size") args.size = std::stoi(value);
    else if (key == "--bootstrap") args.bootstrap = value;
    else if (key == "--out") args.out = value;
    else if (key == "--steps") args.steps = std::stoi(value);
    else if (key == "--threads") args.threads = std::stoi(value);
    else if (key == "--dim") args.shape.dim = std::stol(value);
    else if (key == "--layers") args.shape.layers = std::stol(value);
    else if (key == "--heads") args.shape.heads = std::stol(value);
    else if (key == "--context") args.shape.context = std::stol(value);
    else if (key == "--vocab") args.shape.vocab = std::stol(value);
    else if (key == "--batch") args.batch = std::stol(value);
    else if (key == "--recompute") {
      const auto policy = dseek::model::parse_recompute_policy(value);
      if (!policy)
        throw std::invalid_argument("--recompute: expected none or every:N, got " + value);
      args.recompute = *policy;
    }
    else throw std::invalid_argument("unknown argument " + key);
  }
  if (args.out.empty()) throw std::invalid_argument("--out is required");
  if (args.size > 1 && args.bootstrap.rfind("file:", 0) != 0)
    throw std::invalid_argument("--bootstrap file:<dir> is required with --size > 1");
  return args;
}

// The training loop both runs share: mean loss per step, AdamW on the flat buffer (an
// elementwise update, so a shard updates exactly as its part of the whole would).
// The first step (page faults, UCX connections) is left out of the timing.
template <class Model>
std::vector<double> train(Model& model, dseek::backend::Backend& backend, const Args& args) {
  using namespace dseek::testing::tp;
  const auto& shape = args.shape;
  std::vector<float> m(model.num_params(), 0.0f), v(model.num_params(), 0.0f);
  std::vector<double> losses;
  auto timed_from = std::chrono::steady_clock::now();
  for (int step = 1; step <= args.steps; ++step) {
    if (step == 2) timed_from = std::chrono::steady_clock::now();
    const auto batch = dseek::testing::random_batch(args.batch, shape.context, shape.vocab,
                                                    static_cast<uint32_t>(100 + step));
    model.zero_grads();
    losses.push_back(model.forward(batch.tokens.data(), batch.targets.data(), args.batch, shape.context));
    model.backward(1.0f / static_cast<float>(args.batch * shape.context));
    backend.adamw_update(model.params(), model.grads(), m.data(), v.data(), model.num_params(),
                         kLearningRate, 0.9f, 0.95f, 1e-8f, 0.0f, step, 1.0f);
  }
  if (args.steps > 1) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - timed_from).count();
    std::printf("rank %d: tokens_per_s %.1f\n", args.rank,
                static_cast<double>((args.steps - 1) * args.batch * shape.context) / seconds);
  }
  return losses;
}

void write_outputs(const Args& args, const std::vector<double>& losses,
                   const std::vector<float>& whole) {
  const std::string suffix = std::to_string(args.rank);
  std::ofstream loss_file(args.out + "/losses-" + suffix + ".txt");
  loss_file.precision(17);
  for (double loss : losses) loss_file << loss << '\n';
  std::ofstream params(args.out + "/params-" + suffix + ".f32", std::ios::binary);
  params.write(reinterpret_cast<const char*>(whole.data()),
               static_cast<std::streamsize>(whole.size() * sizeof(float)));
  if (!loss_file || !params) throw std::runtime_error("cannot write to " + args.out);
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  try {
    using namespace dseek::testing::tp;
    const Args args = parse(argc, argv);
    rank = args.rank;
    auto backend = dseek::backend::make_cpu_backend(args.threads);
    if (args.size == 1) {
      dseek::model::GptModel model(args.shape, {0, args.shape.layers}, *backend, args.batch, 1,
                                   args.recompute);
      model.init_weights(kSeed, kInitStd);
      const auto losses = train(model, *backend, args);
      write_outputs(args, losses, std::vector<float>(model.params(), model.params() + model.num_params()));
    } else {
      if (args.rank == 0)
        std::printf("%s", dseek::train::ParallelGroups(1, 1, args.size).describe().c_str());
      dseek::comm::CommOptions options;
      options.op_timeout = std::chrono::seconds(30);
      dseek::comm::FileBootstrap bootstrap(args.bootstrap.substr(5), args.rank, args.size);
      auto comm = dseek::comm::connect_ucx(bootstrap, "localhost", options);
      dseek::dist::CommTensorGroup group(*comm);
      dseek::model::TensorParallelGpt model(args.shape, group, *backend, args.batch,
                                            args.recompute);
      model.init_weights(kSeed, kInitStd);
      const auto losses = train(model, *backend, args);
      std::vector<float> whole(model.layout().whole().total(), std::numeric_limits<float>::quiet_NaN());
      model.layout().gather(model.params(), whole.data());
      write_outputs(args, losses, whole);
    }
    std::printf("rank %d: done\n", args.rank);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, e.what());
    return 1;
  }
}
