// Implementation of pp_job.hpp.
#include "pipeline/pp_job.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <thread>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "runtime/model/param_layout.hpp"
#include "support/test_paths.hpp"

namespace dseek::testing::pp {

namespace {
StageRun read_stage(const std::filesystem::path& events) {
  StageRun run;
  run.lines = read_lines(events);
  for (const auto& line : events_named(run.lines, "step")) {
    run.losses.push_back(number_field(line, "loss"));
    // A step skipped for non-finite gradients (fp8 loss scaling) has no norm: null.
    const bool no_norm = line.find("\"grad_norm\":null") != std::string::npos;
    run.grad_norms.push_back(no_norm ? std::nan("") : number_field(line, "grad_norm"));
    // A pipeline stage's step (every step event has a bubble, 0 without a pipeline).
    if (line.find("\"bubble_theory\":") != std::string::npos) {
      run.bubbles.push_back(number_field(line, "bubble"));
      run.bubble_theory.push_back(number_field(line, "bubble_theory"));
    }
  }
  for (const auto& line : events_named(run.lines, "eval")) run.val_losses.push_back(number_field(line, "val_loss"));
  const auto done = events_named(run.lines, "train_done");
  if (!done.empty()) run.params_sha256 = string_field(done.back(), "params_sha256");
  return run;
}

std::vector<float> read_params(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<float> params;
  if (!in) return params;
  in.seekg(0, std::ios::end);
  params.resize(static_cast<size_t>(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(params.data()), static_cast<std::streamsize>(params.size() * sizeof(float)));
  return params;
}
}  // namespace

std::vector<std::string> small_settings(const std::vector<std::string>& extra) {
  std::vector<std::string> settings = {
      "data.dir=\"" + prepared_text().string() + "\"",
      "model.dim=64", "model.layers=4", "model.heads=4", "model.context=32",
      "train.batch_size=12", "train.micro_batch_size=2", "train.steps=8",
      "train.warmup_steps=2", "train.eval_every=4", "train.eval_batches=1", "train.threads=1",
      "data.prefetch=0", "metrics.progress=\"off\""};
  settings.insert(settings.end(), extra.begin(), extra.end());
  return settings;
}

JobRun run_job(int stages, const std::filesystem::path& run_dir,
               const std::vector<std::string>& settings, std::chrono::milliseconds timeout,
               int tensor, int data, const std::vector<std::string>& rank_args) {
  const std::filesystem::path rendezvous = run_dir / "rendezvous";
  std::filesystem::create_directories(rendezvous);
  const std::filesystem::path params = run_dir / "params.f32";
  std::vector<ProcessResult> results(static_cast<size_t>(stages));
  std::vector<std::thread> threads;
  for (int r = 0; r < stages; ++r) {
    std::vector<std::string> argv{bin("dseek_test_rank"), "--rank", std::to_string(r), "--size",
                                  std::to_string(stages), "--bootstrap", "file:" + rendezvous.string(),
                                  "--config", (source_dir() / "config/single.toml").string(),
                                  "--run-dir", run_dir.string(), "--params-out", params.string(),
                                  "--tensor", std::to_string(tensor), "--data", std::to_string(data),
                                  // no default checkpoints; a test's own setting comes after
                                  "--set", "checkpoint.every_steps=0"};
    argv.insert(argv.end(), rank_args.begin(), rank_args.end());
    for (const auto& setting : settings) {
      argv.push_back("--set");
      argv.push_back(setting);
    }
    threads.emplace_back([&results, r, argv, timeout] {
      results[static_cast<size_t>(r)] = run_process(argv, timeout);
    });
  }
  for (auto& thread : threads) thread.join();
  JobRun job;
  job.ok = true;
  job.run_dir = run_dir;
  for (int r = 0; r < stages; ++r) {
    const auto& result = results[static_cast<size_t>(r)];
    job.ok = job.ok && result.exit_code == 0 && !result.timed_out;
    job.report += "--- rank " + std::to_string(r) + ": exit " + std::to_string(result.exit_code) +
                  (result.timed_out ? " (timed out)" : "") + "\n" + result.output;
    job.stages.push_back(read_stage(run_dir / ("node-" + std::to_string(r)) / "events.jsonl"));
    const std::string device_bytes = "device_bytes_sent ";
    if (const auto at = result.output.rfind(device_bytes); at != std::string::npos)
      job.stages.back().device_bytes_sent = std::stoull(result.output.substr(at + device_bytes.size()));
  }
  job.final_params = read_params(params);
  return job;
}

double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-12));
  return worst;
}

std::vector<std::string> resume_from(const std::filesystem::path& checkpoint) {
  return {"checkpoint.resume=\"" + checkpoint.string() + "\""};
}

std::string resumed_event(const JobRun& run, int rank) {
  const auto events = events_named(run.stages[static_cast<size_t>(rank)].lines, "resumed");
  REQUIRE(events.size() == 1);
  return events.front();
}

std::vector<std::string> launch_crashing_in_worker_group(const std::filesystem::path& run_dir,
                                                         int nodes, int steps,
                                                         const std::vector<std::string>& job,
                                                         const std::string& fault, int node,
                                                         std::chrono::seconds timeout) {
  const auto result =
      run_process(tiny_launch(run_dir, nodes, steps, job + faults(fault)), timeout, launch_env());
  INFO(result.output);
  CHECK_FALSE(result.timed_out);
  REQUIRE(result.exit_code == 0);
  CHECK_FALSE(fault_of(run_dir, node, "crash_actor").empty());
  std::vector<std::string> restarted;
  for (const auto& line : node_events(run_dir, node, "actor_restarted")) {
    CHECK(string_field(line, "supervisor") == "worker_group");
    restarted.push_back(string_field(line, "actor"));
  }
  return restarted;
}

void check_tensor_parity(const std::string& name, const JobRun& run, const JobRun& single,
                         LayoutShape shape) {
  constexpr double kRelativeTolerance = 1e-5;
  constexpr double kParamTolerance = 2e-5;    // absolute
  constexpr double kKeyBiasTolerance = 8e-3;  // 4 x lr (config/single.toml: lr = 2e-3)
  // The model of small_settings (vocabulary: the prepared text's bytes).
  const model::GptShape kShape{.dim = 64, .layers = 4, .heads = 4, .context = 32,
                               .vocab = shape.vocab};
  using Catch::Matchers::Contains;
  const int ranks = shape.data * shape.pipeline * shape.tensor;
  INFO(name << "\n" << run.report);
  REQUIRE(run.ok);
  REQUIRE(static_cast<int>(run.stages.size()) == ranks);
  for (const auto& rank : run.stages) {
    // Every rank reports the global loss and norm and ends with the same whole model.
    CHECK(rank.losses == run.stages[0].losses);
    CHECK(rank.grad_norms == run.stages[0].grad_norms);
    CHECK(rank.params_sha256 == run.stages[0].params_sha256);
  }
  // The layout printed at start, the last rank's coordinates in it.
  const auto layouts = events_named(run.stages.back().lines, "parallel_layout");
  REQUIRE(layouts.size() == 1);
  CHECK_THAT(layouts[0], Contains("\"data\":" + std::to_string(shape.data)) &&
                             Contains("\"pipeline\":" + std::to_string(shape.pipeline)) &&
                             Contains("\"tensor\":" + std::to_string(shape.tensor)) &&
                             Contains("\"stage\":" + std::to_string(shape.pipeline - 1)) &&
                             Contains("\"tensor_rank\":" + std::to_string(shape.tensor - 1)));

  const StageRun& reference = single.stages[0];
  const StageRun& first = run.stages[0];
  const double loss_error = max_relative_difference(first.losses, reference.losses);
  const double norm_error = max_relative_difference(first.grad_norms, reference.grad_norms);
  const double val_error = max_relative_difference(first.val_losses, reference.val_losses);
  REQUIRE(run.final_params.size() == single.final_params.size());
  const model::ParamLayout layout(kShape);
  REQUIRE(run.final_params.size() == layout.total());
  // Key biases: [C, 2C) of every block's attn.qkv.bias.
  std::vector<bool> key_bias(run.final_params.size(), false);
  const size_t C = static_cast<size_t>(kShape.dim);
  for (int64_t l = 0; l < kShape.layers; ++l)
    for (size_t i = C; i < 2 * C; ++i) key_bias[layout.block(l).qkv_b + i] = true;
  double param_error = 0.0, key_bias_error = 0.0;
  for (size_t i = 0; i < run.final_params.size(); ++i) {
    const double diff = std::abs(static_cast<double>(run.final_params[i]) - single.final_params[i]);
    double& worst = key_bias[i] ? key_bias_error : param_error;
    worst = std::max(worst, diff);
  }
  WARN(name << ": max relative loss difference " << loss_error << ", grad norm " << norm_error
            << ", val_loss " << val_error << ", max parameter difference " << param_error
            << " (key biases " << key_bias_error << ")");
  CHECK(loss_error <= kRelativeTolerance);
  CHECK(norm_error <= kRelativeTolerance);
  CHECK(val_error <= kRelativeTolerance);
  CHECK(param_error <= kParamTolerance);
  CHECK(key_bias_error <= kKeyBiasTolerance);
  CHECK(first.losses.back() < first.losses.front());
}

}  // namespace dseek::testing::pp
