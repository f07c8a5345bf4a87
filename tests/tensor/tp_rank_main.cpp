// dseek_tp_rank: one rank of a tensor-parallel group training a small GPT for the
// multi-process parity test (test_tensor_parallel.cpp). It joins a UCX communicator
// through a file bootstrap and trains model::TensorParallelGpt over CommTensorGroup;
// with --size 1 it trains the whole model::GptModel (the reference). Both start from
// init_weights(seed) and see the same batches (a function of the step), so the runs
// differ only in how the model is split.
//
//   dseek_tp_rank --rank R --size T --bootstrap file:<dir> --out DIR [--steps N]
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

#include "actors/training/comm_tensor_group.hpp"
#include "comm/bootstrap/file_bootstrap.hpp"
#include "comm/ucx/ucx_communicator.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/model/tensor_parallel_gpt.hpp"
#include "runtime/train/parallel_groups.hpp"
#include "support/small_gpt.hpp"
#include "tensor/tp_job_shape.hpp"

namespace {

struct Args {
  int rank = 0, size = 1, steps = 4;
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
    else throw std::invalid_argument("unknown argument " + key);
  }
  if (args.out.empty()) throw std::invalid_argument("--out is required");
  if (args.size > 1 && args.bootstrap.rfind("file:", 0) != 0)
    throw std::invalid_argument("--bootstrap file:<dir> is required with --size > 1");
  return args;
}

// The training loop both runs share: mean loss per step, AdamW on the flat buffer (an
// elementwise update, so a shard updates exactly as its part of the whole would).
template <class Model>
std::vector<double> train(Model& model, dseek::backend::Backend& backend, int steps) {
  using namespace dseek::testing::tp;
  std::vector<float> m(model.num_params(), 0.0f), v(model.num_params(), 0.0f);
  std::vector<double> losses;
  for (int step = 1; step <= steps; ++step) {
    const auto batch = dseek::testing::random_batch(kBatch, kShape.context, kShape.vocab,
                                                    static_cast<uint32_t>(100 + step));
    model.zero_grads();
    losses.push_back(model.forward(batch.tokens.data(), batch.targets.data(), kBatch, kShape.context));
    model.backward(1.0f / static_cast<float>(kBatch * kShape.context));
    backend.adamw_update(model.params(), model.grads(), m.data(), v.data(), model.num_params(),
                         kLearningRate, 0.9f, 0.95f, 1e-8f, 0.0f, step, 1.0f);
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
    auto backend = dseek::backend::make_cpu_backend(1);
    if (args.size == 1) {
      dseek::model::GptModel model(kShape, {0, kShape.layers}, *backend, kBatch);
      model.init_weights(kSeed, kInitStd);
      const auto losses = train(model, *backend, args.steps);
      write_outputs(args, losses, std::vector<float>(model.params(), model.params() + model.num_params()));
    } else {
      if (args.rank == 0)
        std::printf("%s", dseek::train::ParallelGroups(1, 1, args.size).describe().c_str());
      dseek::comm::CommOptions options;
      options.op_timeout = std::chrono::seconds(30);
      dseek::comm::FileBootstrap bootstrap(args.bootstrap.substr(5), args.rank, args.size);
      auto comm = dseek::comm::connect_ucx(bootstrap, "localhost", options);
      dseek::actors::CommTensorGroup group(*comm);
      dseek::model::TensorParallelGpt model(kShape, group, *backend, kBatch);
      model.init_weights(kSeed, kInitStd);
      const auto losses = train(model, *backend, args.steps);
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
