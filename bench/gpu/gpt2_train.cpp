// gpt2_train: trains a GPT model (default GPT-2 124M) for a few steps on one device with
// runtime/model's GptModel and AdamW, and prints per-step times, tokens/s and MFU. It is
// the training row of bench/gpu/check.sh (issue 7) and runs on the CPU backend too, so
// its flow is tested without a GPU (tests/integration/test_gpu_check.cpp).
//
//   gpt2_train [--device cpu|cuda] [--device-index I] [--threads N] [--precision fp32|bf16|fp8]
//              [--layers L] [--dim C] [--heads H] [--context T] [--vocab V]
//              [--vocab-multiple M] [--batch B] [--steps S] [--warmup W] [--lr LR]
//              [--seed S] [--peak-tflops P]
//
// The model's vocabulary is V rounded up to a multiple of M (default 128: GPT-2's 50257
// in 50304, as llm.c pads it), so the head's GEMMs get rows aligned for the tensor cores'
// kernels; the padded ids are never tokens and take no part in the loss
// (GptModel::set_real_vocab). --vocab-multiple 1: no padding.
//
// The batch is one batch of random tokens (train::RandomBatches), repeated every step:
// the speed does not depend on the data, and the loss must then fall as the model
// memorises it -- a check that the backend trains, not only that it runs. A non-finite
// loss stops the run (exit 1).
//
// MFU = tokens/s * (6 N + 6 L C T) / peak, as llm.c computes it (after PaLM, appendix B):
// N counts every parameter, the token and position embeddings included (the tied output
// head once); L C T is the attention's score and value products. The peak comes from
// --peak-tflops (bench/gpu/check.sh passes matmul_rate's measured BF16 rate; llm.c
// divides by the data-sheet peak instead, a lower MFU for the same speed); without it
// MFU is null. Times are medians over the steps after the first W (warm-up: allocation,
// cuBLAS heuristics).
//
// --precision bf16|fp8 runs the matmuls through model::PrecisionPolicy (as
// train.precision does: the block matmuls in bf16 or fp8, the head in bf16) on any backend that implements them (CPU:
// the reference numerics; CUDA: cuBLASLt, FP8 on sm_90 only). fp8 uses dynamic loss
// scaling as the trainer does (optim::LossScaler, default settings): the gradient is
// scaled before backward, a step whose gradients are not finite is skipped (counted in
// "skipped_steps"), and AdamW divides the scale out on the backend.
//
// Output: one line per step, then one JSON object (the last line).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu/cuda_backend.hpp"
#include "gpu/device_info.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/model/precision_policy.hpp"
#include "runtime/optim/adamw.hpp"
#include "runtime/optim/loss_scaler.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/util/json_line.hpp"

namespace {

using namespace dseek;

struct Options {
  std::string device = "cpu";
  int device_index = 0;
  int threads = 0;
  config::Precision precision = config::Precision::fp32;
  model::GptShape shape{768, 12, 12, 1024, 50257};
  int64_t vocab_multiple = 128;
  int64_t batch = 8;
  int64_t steps = 10;
  int64_t warmup = 2;
  double lr = 3e-4;
  uint64_t seed = 1;
  double peak_tflops = 0.0;  // 0: not given, MFU is null
};

constexpr const char* kUsage =
    "usage: gpt2_train [--device cpu|cuda] [--device-index I] [--threads N] "
    "[--precision fp32|bf16|fp8] [--layers L] [--dim C] [--heads H] [--context T] [--vocab V] "
    "[--vocab-multiple M] [--batch B] [--steps S] [--warmup W] [--lr LR] [--seed S] [--peak-tflops P]";

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value\n" + kUsage);
    const std::string value = argv[++i];
    if (arg == "--device") o.device = value;
    else if (arg == "--device-index") o.device_index = std::stoi(value);
    else if (arg == "--threads") o.threads = std::stoi(value);
    else if (arg == "--precision") {
      const auto parsed = config::enum_from_name<config::Precision>(value);
      if (!parsed) throw std::invalid_argument("--precision must be fp32, bf16 or fp8, not '" + value + "'");
      o.precision = *parsed;
    }
    else if (arg == "--layers") o.shape.layers = std::stoll(value);
    else if (arg == "--dim") o.shape.dim = std::stoll(value);
    else if (arg == "--heads") o.shape.heads = std::stoll(value);
    else if (arg == "--context") o.shape.context = std::stoll(value);
    else if (arg == "--vocab") o.shape.vocab = std::stoll(value);
    else if (arg == "--vocab-multiple") o.vocab_multiple = std::stoll(value);
    else if (arg == "--batch") o.batch = std::stoll(value);
    else if (arg == "--steps") o.steps = std::stoll(value);
    else if (arg == "--warmup") o.warmup = std::stoll(value);
    else if (arg == "--lr") o.lr = std::stod(value);
    else if (arg == "--seed") o.seed = std::stoull(value);
    else if (arg == "--peak-tflops") o.peak_tflops = std::stod(value);
    else throw std::invalid_argument("unknown argument '" + arg + "'\n" + kUsage);
  }
  const auto& s = o.shape;
  if (s.layers < 1 || s.dim < 1 || s.heads < 1 || s.context < 1 || s.vocab < 2 || o.batch < 1)
    throw std::invalid_argument("--layers, --dim, --heads, --context, --batch must be >= 1 and "
                                "--vocab >= 2");
  if (s.dim % s.heads != 0)
    throw std::invalid_argument("--dim " + std::to_string(s.dim) +
                                " is not a multiple of --heads " + std::to_string(s.heads));
  if (o.steps < 1 || o.warmup < 0 || o.warmup >= o.steps)
    throw std::invalid_argument("--steps must be >= 1 and 0 <= --warmup < --steps (the timed "
                                "steps are those after the warm-up)");
  if (o.device != "cpu" && o.device != "cuda")
    throw std::invalid_argument("--device must be cpu or cuda, not '" + o.device + "'");
  if (o.peak_tflops < 0.0) throw std::invalid_argument("--peak-tflops must be >= 0");
  if (o.vocab_multiple < 1) throw std::invalid_argument("--vocab-multiple must be >= 1");
  return o;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string device_description(const Options& o, backend::Backend& backend) {
  if (o.device == "cpu") {
    const int threads =
        o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
    return backend.name() + ", " + std::to_string(threads) + " threads";
  }
  const gpu::DeviceQuery query = gpu::query_devices();
  for (const auto& d : query.devices)
    if (d.index == o.device_index)
      return d.name + " (sm_" + std::to_string(d.compute_major) +
             std::to_string(d.compute_minor) + ")";
  return backend.name();
}

int run_training(const Options& o) {
  std::unique_ptr<backend::Backend> backend = o.device == "cuda"
                                                  ? gpu::make_cuda_backend(o.device_index)
                                                  : backend::make_cpu_backend(o.threads);
  const int64_t real_vocab = o.shape.vocab;
  model::GptShape s = o.shape;
  s.vocab = (real_vocab + o.vocab_multiple - 1) / o.vocab_multiple * o.vocab_multiple;
  model::GptModel gpt(s, {0, s.layers}, *backend, o.batch);
  gpt.init_weights(o.seed, 0.02);
  if (real_vocab != s.vocab) gpt.set_real_vocab(real_vocab);
  const backend::MatmulFormat format = model::matmul_format_of(o.precision);
  gpt.set_precision(model::PrecisionPolicy(*backend, format, s.layers));
  std::unique_ptr<optim::LossScaler> loss_scaler;
  if (format == backend::MatmulFormat::fp8)
    loss_scaler = std::make_unique<optim::LossScaler>(optim::LossScalerSettings{});
  optim::AdamW adamw(*backend, gpt.layout(), optim::AdamWSettings{});
  int64_t skipped_steps = 0;

  const int64_t T = s.context, B = o.batch;
  std::vector<int32_t> tokens(static_cast<size_t>(B * T)), targets(tokens.size());
  train::RandomBatches batches(o.seed, real_vocab);
  batches.fill(0, B, 0, B, T, tokens.data(), targets.data());

  const auto params = static_cast<double>(gpt.num_params());
  const double flops_per_token =
      6.0 * params + 6.0 * double(s.layers) * double(s.dim) * double(T);
  const std::string device = device_description(o, *backend);
  std::printf("gpt2_train: %s, %s; L=%lld C=%lld H=%lld T=%lld V=%lld (padded to %lld), batch "
              "%lld, %.4gM parameters, %.4g GFLOP/token\n",
              device.c_str(), config::name_string(o.precision).c_str(), static_cast<long long>(s.layers),
              static_cast<long long>(s.dim), static_cast<long long>(s.heads),
              static_cast<long long>(T), static_cast<long long>(real_vocab),
              static_cast<long long>(s.vocab),
              static_cast<long long>(B), params / 1e6, flops_per_token / 1e9);

  std::vector<double> losses, timed_ms;
  for (int64_t step = 0; step < o.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    gpt.zero_grads();
    const double loss = gpt.forward(tokens.data(), targets.data(), B, T);
    const float loss_scale = loss_scaler ? loss_scaler->scale() : 1.0f;
    gpt.backward(static_cast<float>(1.0 / double(B * T)) * loss_scale);
    if (loss_scaler) {
      const double squares = backend->sum_squares(gpt.grads(), gpt.num_params());
      if (loss_scaler->update(squares))
        adamw.step_with_norm(gpt.params(), gpt.grads(), o.lr, std::sqrt(squares) / loss_scale,
                             loss_scale);
      else
        ++skipped_steps;
    } else {
      adamw.step(gpt.params(), gpt.grads(), o.lr);
    }
    gpt.precision().end_step();
    // The Backend has no synchronize call: reading one parameter back waits for the
    // update (the host copy is valid only once the work before it has finished).
    float probe = 0.0f;
    backend->copy_to_host(&probe, gpt.params(), sizeof(float));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    std::printf("step %lld/%lld loss %.6f ms %.2f tokens/s %.1f\n",
                static_cast<long long>(step + 1), static_cast<long long>(o.steps), loss, ms,
                double(B * T) / (ms / 1000.0));
    std::fflush(stdout);
    if (!std::isfinite(loss) || !std::isfinite(probe)) {
      std::fprintf(stderr, "gpt2_train: the loss or the parameters are not finite at step %lld\n",
                   static_cast<long long>(step + 1));
      return 1;
    }
    losses.push_back(loss);
    if (step >= o.warmup) timed_ms.push_back(ms);
  }

  const double step_ms = median(timed_ms);
  const double tokens_per_s = double(B * T) / (step_ms / 1000.0);
  util::JsonLine line;
  line.add("bench", "gpt2_train").add("status", "ok").add("device", o.device)
      .add("device_name", device).add("backend", backend->name()).add("precision", config::name_of(o.precision))
      .add("layers", s.layers).add("dim", s.dim).add("heads", s.heads).add("context", T)
      .add("vocab", real_vocab).add("padded_vocab", s.vocab).add("batch", B).add("params", static_cast<uint64_t>(params))
      .add("flops_per_token", flops_per_token).add("steps", o.steps).add("warmup", o.warmup)
      .add("step_ms_median", step_ms)
      .add("step_ms_min", *std::min_element(timed_ms.begin(), timed_ms.end()))
      .add("tokens_per_s", tokens_per_s).add("first_loss", losses.front())
      .add("last_loss", losses.back()).add("loss_decreased", losses.back() < losses.front())
      .add("skipped_steps", skipped_steps)
      .add("peak_memory_bytes", static_cast<uint64_t>(backend->memory_usage().peak_bytes));
  // JsonLine writes numbers and strings; null is spelled out for the fields not measured.
  std::string json = line.str();
  json.pop_back();
  if (o.peak_tflops > 0.0) {
    const double mfu = tokens_per_s * flops_per_token / (o.peak_tflops * 1e12);
    util::JsonLine peak;
    peak.add("peak_tflops", o.peak_tflops).add("mfu", mfu);
    const std::string fields = peak.str();
    json += ',';
    json += fields.substr(1, fields.size() - 2);
  } else {
    json += ",\"peak_tflops\":null,\"mfu\":null";
  }
  json += '}';
  std::printf("%s\n", json.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_training(parse(argc, argv));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpt2_train: %s\n", error.what());
    return 1;
  }
}
