// dseek's GPT against PyTorch (Debian's python3-torch) on the same weights and batch:
// the loss, every parameter's gradient, and the parameters after three AdamW steps
// with gradient clipping. The reference (tests/reference/gpt_reference.py) runs in
// float64, so the differences measured are dseek's fp32 error alone.
//
// Tolerances (fp32 against float64): loss relative error < 1e-5; each tensor's
// gradient relative error ||g - g_ref|| / ||g_ref|| < 1e-4; parameters after three
// steps, relative to the size of the change the steps made, < 1e-3.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/optim/adamw.hpp"
#include "support/process.hpp"
#include "support/small_gpt.hpp"
#include "support/test_paths.hpp"

using dseek::model::GptModel;
using dseek::model::GptShape;

namespace {

template <class T>
void put(std::ofstream& out, const T& value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof value);
}

double relative_error(const double* reference, const float* value, size_t n) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < n; ++i) {
    diff += (value[i] - reference[i]) * (value[i] - reference[i]);
    norm += reference[i] * reference[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

}  // namespace

TEST_CASE("loss, gradients and AdamW steps match PyTorch", "[model][pytorch]") {
  const GptShape shape{.dim = 64, .layers = 2, .heads = 4, .context = 32, .vocab = 256};
  const int64_t B = 4, steps = 3;
  const dseek::optim::AdamWSettings settings{.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                                             .weight_decay = 0.1, .grad_clip = 1.0};
  const std::vector<double> lrs = {1e-3, 2e-3, 1.5e-3};

  auto backend = dseek::backend::make_cpu_backend(2);
  GptModel model(shape, {0, shape.layers}, *backend, B);
  dseek::testing::init_nontrivial(model, 42, 0.02);
  auto batch = dseek::testing::random_batch(B, shape.context, shape.vocab, 8);
  const size_t P = model.num_params();

  dseek::testing::ScratchDir dir("pytorch");
  {
    std::ofstream out(dir / "case.bin", std::ios::binary);
    for (int64_t v : {shape.dim, shape.layers, shape.heads, shape.context, shape.vocab, B, steps})
      put(out, v);
    for (double v : {settings.weight_decay, settings.beta1, settings.beta2, settings.eps,
                     settings.grad_clip})
      put(out, v);
    for (double lr : lrs) put(out, lr);
    out.write(reinterpret_cast<const char*>(model.params()), static_cast<std::streamsize>(P * 4));
    out.write(reinterpret_cast<const char*>(batch.tokens.data()), B * shape.context * 4);
    out.write(reinterpret_cast<const char*>(batch.targets.data()), B * shape.context * 4);
  }
  // Debian's python3-torch is visible to /usr/bin/python3 only (platform notes).
  auto python = dseek::testing::run_process(
      {"/usr/bin/python3", (dseek::testing::source_dir() / "tests/reference/gpt_reference.py").string(),
       (dir / "case.bin").string(), (dir / "result.bin").string()},
      std::chrono::minutes(3));
  INFO(python.output);
  REQUIRE_FALSE(python.timed_out);
  REQUIRE(python.exit_code == 0);  // needs python3-torch: scripts/install-deps.sh test

  std::ifstream in(dir / "result.bin", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() == (1 + 2 * P + steps) * sizeof(double));
  const double* result = reinterpret_cast<const double*>(bytes.data());
  const double reference_loss = result[0];
  const double* reference_grads = result + 1;
  const double* reference_after = result + 1 + P;
  const double* reference_losses = result + 1 + 2 * P;

  std::vector<float> initial(model.params(), model.params() + P);
  dseek::optim::AdamW optimizer(*backend, model.layout(), settings);
  const float dloss = 1.0f / static_cast<float>(B * shape.context);
  for (int64_t step = 0; step < steps; ++step) {
    model.zero_grads();
    const double loss = model.forward(batch.tokens.data(), batch.targets.data(), B, shape.context);
    model.backward(dloss);
    INFO("step " << step);
    CHECK(std::abs(loss - reference_losses[step]) <= 1e-5 * std::abs(reference_losses[step]));
    if (step == 0) {
      CHECK(std::abs(loss - reference_loss) <= 1e-5 * reference_loss);
      for (const auto& tensor : model.layout().tensors()) {
        const double error = relative_error(reference_grads + tensor.offset,
                                            model.grads() + tensor.offset, tensor.size());
        INFO(tensor.name << " gradient relative error " << error);
        CHECK(error < 1e-4);
      }
    }
    optimizer.step(model.params(), model.grads(), lrs[static_cast<size_t>(step)]);
  }
  // After the steps: compare the change each made, so the tolerance is not diluted by
  // the (identical) starting weights.
  double diff = 0.0, change = 0.0;
  for (size_t i = 0; i < P; ++i) {
    diff += std::pow(model.params()[i] - reference_after[i], 2);
    change += std::pow(reference_after[i] - initial[i], 2);
  }
  INFO("parameter error relative to the update " << std::sqrt(diff / change));
  CHECK(std::sqrt(diff / change) < 1e-3);
}
