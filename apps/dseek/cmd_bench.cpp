// `dseek bench train`: times training steps of the config's model on random tokens
// (the model and optimizer, not the data) and prints one JSON line. The peer script
// bench/train_vs_pytorch.sh runs it beside PyTorch on the same shapes and threads.
//
//   dseek bench train [--config FILE] [--threads N] [--steps S] [--warmup W] [--set k=v ...]
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "dseek/commands.hpp"
#include "gpu/backend_for_device.hpp"
#include "runtime/config/load.hpp"
#include "runtime/train/check_job.hpp"
#include "runtime/train/pipeline/plan.hpp"
#include "runtime/train/pipeline/single_stage_links.hpp"
#include "runtime/train/pipeline/stage_trainer.hpp"
#include "runtime/util/json_line.hpp"

namespace dseek::tool {

namespace {

const std::string& usage_text() {
  static const std::string text =
      std::string("usage: dseek bench train [--config FILE] [--threads N] [--steps S] "
                  "[--warmup W] [--set section.key=value ...]\n"
                  "  times training steps of the config's model on random tokens, prints one "
                  "JSON line\n") +
      kBenchAllreduceUsage +
      "usage: dseek bench gemm [--threads N] [--size S] [--reps R]\n"
      "  the CPU backend's fp32 and bf16 GEMM rates on square matrices (the peak the "
      "train bench's matmul_gflops is a share of)\n";
  return text;
}

const std::vector<std::string> kOptions = {"--config", "--threads", "--steps", "--warmup", "--set",
                                           "--help"};

int64_t count(const std::string& option, const std::string& value) {
  try {
    size_t used = 0;
    const int64_t number = std::stoll(value, &used);
    if (used == value.size()) return number;
  } catch (const std::logic_error&) {
  }
  throw cli::UsageError(option + " needs a number, not '" + value + "'");
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

int bench_train(const Args& args) {
  std::string config_file;
  std::vector<std::string> overrides;
  int64_t steps = 5, warmup = 2;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value;
    if (cli::take_value(args, i, "--config", value)) config_file = value;
    else if (cli::take_value(args, i, "--set", value)) overrides.push_back(value);
    else if (cli::take_value(args, i, "--threads", value)) overrides.push_back("train.threads=" + value);
    else if (cli::take_value(args, i, "--steps", value)) steps = count("--steps", value);
    else if (cli::take_value(args, i, "--warmup", value)) warmup = count("--warmup", value);
    else cli::unknown("option", args[i], kOptions);
  }
  if (steps < 1 || warmup < 0) throw cli::UsageError("--steps must be >= 1 and --warmup >= 0");
  config::JobConfig config = config::default_config();
  if (!config_file.empty()) {
    config = config::load_config(config_file, overrides);
  } else {
    for (const auto& assignment : overrides) config::apply_override(config, assignment);
    config::validate(config);
  }
  // Benchmarks time a constant learning rate past warm-up; the schedule does not
  // change the work.
  config.train.steps = warmup + steps;
  config.train.warmup_steps = 0;
  train::check_job(config);

  train::RandomBatches batches(static_cast<uint64_t>(config.train.seed), config.model.vocab);
  train::SingleStageLinks alone;
  train::PipelineStageTrainer trainer(config, batches, alone, train::one_stage_plan(config), nullptr,
                                      nullptr, gpu::backend_for_device());
  std::vector<double> step_ms;
  double last_loss = 0.0;
  backend::MatmulCounters before;  // the linear layers' GEMMs over the timed steps
  for (int64_t step = 0; step < warmup + steps; ++step) {
    if (step == warmup) before = trainer.backend().matmul_counters();
    const auto report = trainer.train_step(step).step;
    last_loss = report.loss;
    if (step >= warmup) step_ms.push_back(report.step_ms);
  }
  const auto after = trainer.backend().matmul_counters();
  const double matmul_s = after.seconds - before.seconds;
  double timed_s = 0.0;
  for (double ms : step_ms) timed_s += ms / 1000.0;
  const double median_ms = median(step_ms);
  const auto tokens = static_cast<double>(config.train.batch_size * config.model.context);
  util::JsonLine line;
  line.add("bench", "train")
      .add("tokens_per_s", tokens / (median_ms / 1000.0))
      .add("step_ms_median", median_ms)
      .add("step_ms_min", *std::min_element(step_ms.begin(), step_ms.end()))
      .add("steps", steps).add("warmup", warmup)
      .add("threads", config.train.threads > 0
                          ? config.train.threads
                          : static_cast<int64_t>(std::thread::hardware_concurrency()))
      .add("backend", trainer.backend().name())
      .add("matmul_kernels", trainer.backend().matmul_kernels())
      // The linear layers' GEMM rate and their share of the step (0 where not counted).
      .add("matmul_gflops", matmul_s > 0 ? (after.flops - before.flops) / matmul_s / 1e9 : 0.0)
      .add("matmul_time_share", timed_s > 0 ? matmul_s / timed_s : 0.0)
      .add("precision", config::name_of(config.train.precision))
      .add("dim", config.model.dim).add("layers", config.model.layers)
      .add("heads", config.model.heads).add("context", config.model.context)
      .add("vocab", config.model.vocab).add("batch_size", config.train.batch_size)
      .add("micro_batch_size", trainer.micro_batch_size())
      .add("params", static_cast<uint64_t>(trainer.whole_model().num_params()))
      .add("recompute", config.model.recompute)
      .add("activation_bytes", static_cast<uint64_t>(trainer.whole_model().activation_bytes()))
      .add("last_loss", last_loss);
  std::printf("%s\n", line.str().c_str());
  return 0;
}

int run_bench(const Args& args) {
  if (args.empty()) throw cli::UsageError("a benchmark is required (train, allreduce, gemm)");
  if (args[0] == "allreduce") return cmd_bench_allreduce(Args(args.begin() + 1, args.end()));
  if (args[0] == "gemm") return cmd_bench_gemm(Args(args.begin() + 1, args.end()));
  if (args[0] != "train") cli::unknown("benchmark", args[0], {"train", "allreduce", "gemm"});
  return bench_train(Args(args.begin() + 1, args.end()));
}

}  // namespace

const Command& bench_command() {
  static const Command command{
      "bench",
      "  bench train [--config FILE] [--threads N] [--set k=v ...]\n"
      "                                 time training steps, print one JSON line\n"
      "  bench allreduce --ranks N --bytes B[,B2,...] [--iters K] [--dtype f32|bf16]\n"
      "                                 all-reduce bandwidth between N local processes\n"
      "  bench gemm [--threads N] [--size S] [--reps R]\n"
      "                                 the CPU backend's fp32 and bf16 GEMM peak\n",
      usage_text().c_str(), run_bench};
  return command;
}

}  // namespace dseek::tool
