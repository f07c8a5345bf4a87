// One full GptModel training step (forward, backward, AdamW) on the CUDA backend against
// the CPU backend, from the same weights and batch: the loss, every parameter tensor's
// gradient and the updated parameters agree to 1e-5 relative L2 error. Also: the step is
// deterministic on the GPU, and the model's activations fit the GPU's smaller attention
// state.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "runtime/model/gpt_model.hpp"
#include "tests/gpu/parity_support.hpp"
#include "tests/support/small_gpt.hpp"

using dseek::model::GptModel;
using dseek::model::GptShape;
using dseek::model::LayerRange;
using namespace dseek::gpu_testing;

namespace {
// C = 48, head size 12, T = 37, V = 101: none a multiple of 32.
const GptShape kShape{.dim = 48, .layers = 2, .heads = 4, .context = 37, .vocab = 101};
constexpr int64_t kBatch = 3;

std::vector<float> download(dseek::backend::Backend& backend, const float* data, size_t n) {
  std::vector<float> host(n);
  backend.copy_to_host(host.data(), data, n * sizeof(float));
  return host;
}

struct StepResult {
  double loss = 0.0;
  std::vector<float> grads, params;
};

// Forward, backward and one AdamW step of `model` from `initial` weights.
StepResult train_step(dseek::backend::Backend& backend, GptModel& model,
                      const std::vector<float>& initial, const dseek::testing::SmallBatch& batch) {
  const size_t n = model.num_params();
  backend.copy_from_host(model.params(), initial.data(), n * sizeof(float));
  model.zero_grads();
  StepResult result;
  result.loss = model.forward(batch.tokens.data(), batch.targets.data(), batch.B, batch.T);
  model.backward(1.0f / static_cast<float>(batch.B * batch.T));
  result.grads = download(backend, model.grads(), n);
  dseek::backend::DeviceBuffer<float> m(backend, n), v(backend, n);
  // eps 1e-6 rather than 1e-8: at step 1 AdamW's update is lr * g / (|g| + eps), about
  // lr * sign(g), so a gradient within rounding of zero could flip a whole lr between
  // the backends; eps bounds that sensitivity (lr / eps) to 1e3 x the gradient's rounding.
  backend.adamw_update(model.params(), model.grads(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f,
                       1e-6f, 0.1f, 1, 1.0f);
  result.params = download(backend, model.params(), n);
  return result;
}
}  // namespace

TEST_CASE("a GptModel training step on the GPU matches the CPU", "[gpu][model]") {
  BackendPair pair;
  GptModel cpu_model(kShape, LayerRange{0, kShape.layers}, *pair.cpu, kBatch);
  GptModel gpu_model(kShape, LayerRange{0, kShape.layers}, *pair.gpu, kBatch);
  // The whole of model.vocab, or its last 13 ids padding beyond the data's vocabulary
  // (left out of the softmax: probability and gradient 0, as GPT-2's 50257 in 50304).
  const int64_t real_vocab = GENERATE(kShape.vocab, kShape.vocab - 13);
  INFO("data vocabulary " << real_vocab << " of model.vocab " << kShape.vocab);
  if (real_vocab != kShape.vocab) {
    cpu_model.set_real_vocab(real_vocab);
    gpu_model.set_real_vocab(real_vocab);
  }
  // Weights with every kind of parameter non-trivial, built on the CPU (host memory).
  dseek::testing::init_nontrivial(cpu_model, 3, 0.1);
  const std::vector<float> initial(cpu_model.params(), cpu_model.params() + cpu_model.num_params());
  const auto batch = dseek::testing::random_batch(kBatch, kShape.context, real_vocab, 4);

  const StepResult cpu = train_step(*pair.cpu, cpu_model, initial, batch);
  const StepResult gpu = train_step(*pair.gpu, gpu_model, initial, batch);
  INFO("loss: cpu " << cpu.loss << " gpu " << gpu.loss);
  CHECK(std::isfinite(gpu.loss));
  CHECK(std::abs(gpu.loss - cpu.loss) <= kFp32Tolerance * std::abs(cpu.loss));
  for (const auto& tensor : cpu_model.layout().tensors()) {
    const auto begin = static_cast<std::ptrdiff_t>(tensor.offset);
    const auto end = begin + static_cast<std::ptrdiff_t>(tensor.size());
    const std::vector<float> g_gpu(gpu.grads.begin() + begin, gpu.grads.begin() + end);
    const std::vector<float> g_cpu(cpu.grads.begin() + begin, cpu.grads.begin() + end);
    const std::vector<float> p_gpu(gpu.params.begin() + begin, gpu.params.begin() + end);
    const std::vector<float> p_cpu(cpu.params.begin() + begin, cpu.params.begin() + end);
    INFO(tensor.name << ": gradient error " << relative_l2(g_gpu, g_cpu) << ", parameter error "
                     << relative_l2(p_gpu, p_cpu));
    CHECK(count_nan(g_gpu) == 0);
    CHECK(relative_l2(g_gpu, g_cpu) < kFp32Tolerance);
    CHECK(relative_l2(p_gpu, p_cpu) < kFp32Tolerance);
  }
}

TEST_CASE("a GptModel step on the GPU is deterministic", "[gpu][model]") {
  BackendPair pair;
  GptModel model(kShape, LayerRange{0, kShape.layers}, *pair.gpu, kBatch);
  model.init_weights(5, 0.1);
  const std::vector<float> initial = download(*pair.gpu, model.params(), model.num_params());
  const auto batch = dseek::testing::random_batch(kBatch, kShape.context, kShape.vocab, 6);
  const StepResult first = train_step(*pair.gpu, model, initial, batch);
  const StepResult second = train_step(*pair.gpu, model, initial, batch);
  CHECK(first.loss == second.loss);
  CHECK(first.grads == second.grads);
  CHECK(first.params == second.params);
}

TEST_CASE("a shorter batch than the model's maximum trains on the GPU as on the CPU",
          "[gpu][model]") {
  // B and T below the allocated maximum: the attention state is laid out for the
  // forward's own (B, T), inside the larger buffer.
  BackendPair pair;
  GptModel cpu_model(kShape, LayerRange{0, kShape.layers}, *pair.cpu, kBatch);
  GptModel gpu_model(kShape, LayerRange{0, kShape.layers}, *pair.gpu, kBatch);
  dseek::testing::init_nontrivial(cpu_model, 8, 0.1);
  const std::vector<float> initial(cpu_model.params(), cpu_model.params() + cpu_model.num_params());
  const auto batch = dseek::testing::random_batch(2, 19, kShape.vocab, 9);
  const StepResult cpu = train_step(*pair.cpu, cpu_model, initial, batch);
  const StepResult gpu = train_step(*pair.gpu, gpu_model, initial, batch);
  CHECK(std::abs(gpu.loss - cpu.loss) <= kFp32Tolerance * std::abs(cpu.loss));
  CHECK(relative_l2(gpu.grads, cpu.grads) < kFp32Tolerance);
  CHECK(relative_l2(gpu.params, cpu.params) < kFp32Tolerance);
}
