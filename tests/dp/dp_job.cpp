// Implementation of dp_job.hpp.
#include "dp/dp_job.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "support/node_runs.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

namespace dseek::testing::dp {

namespace {
using namespace std::chrono_literals;

// 500 kB of the Python standard library, prepared once per test process.
const std::filesystem::path& small_text() {
  static ScratchDir dir("dp-data");
  static std::once_flag once;
  std::call_once(once, [] {
    auto result = run_process({bin("dseek"), "data", "prepare", "--input", "/usr/lib/python3.11",
                               "--output", (dir / "text").string(), "--max-bytes", "500000",
                               "--raw"},  // the files' bytes: the jobs' figures are tuned on them
                              60s);
    if (result.exit_code != 0) throw std::runtime_error("data prepare failed: " + result.output);
  });
  static const std::filesystem::path path = dir / "text";
  return path;
}

uint64_t optional_count(const std::string& line, const std::string& key) {
  return line.find("\"" + key + "\":") == std::string::npos
             ? 0
             : static_cast<uint64_t>(number_field(line, key));
}

ReplicaRun read_replica(const std::filesystem::path& events) {
  ReplicaRun run;
  run.lines = read_lines(events);
  for (const auto& line : events_named(run.lines, "step")) {
    run.losses.push_back(number_field(line, "loss"));
    // A step skipped for non-finite gradients (loss scaling) has no norm: null.
    const bool no_norm = line.find("\"grad_norm\":null") != std::string::npos;
    run.grad_norms.push_back(no_norm ? std::nan("") : number_field(line, "grad_norm"));
    run.comm_ms += number_field(line, "comm_ms");
    run.comm_bytes_sent += optional_count(line, "comm_bytes_sent");
    run.grad_bytes += optional_count(line, "grad_bytes");
    run.grad_encoded_bytes += optional_count(line, "grad_encoded_bytes");
  }
  for (const auto& line : events_named(run.lines, "eval")) run.val_losses.push_back(number_field(line, "val_loss"));
  const auto done = events_named(run.lines, "train_done");
  if (!done.empty()) run.params_sha256 = string_field(done.back(), "params_sha256");
  return run;
}
}  // namespace

std::vector<std::string> tiny_settings(const std::vector<std::string>& extra) {
  std::vector<std::string> settings = {
      "data.dir=\"" + small_text().string() + "\"",
      "model.dim=64", "model.layers=2", "model.heads=4", "model.context=32",
      "train.batch_size=12", "train.micro_batch_size=2", "train.steps=12",
      "train.warmup_steps=3", "train.eval_every=6", "train.eval_batches=1", "train.threads=1",
      "metrics.progress=\"off\""};
  settings.insert(settings.end(), extra.begin(), extra.end());
  return settings;
}

JobRun run_job(int ranks, const std::filesystem::path& run_dir,
               const std::vector<std::string>& settings, size_t bucket_bytes,
               std::chrono::milliseconds timeout, const std::vector<std::string>& rank_args) {
  const std::filesystem::path rendezvous = run_dir / "rendezvous";
  std::filesystem::create_directories(rendezvous);
  std::vector<ProcessResult> results(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> argv{bin("dseek_test_rank"), "--rank", std::to_string(r), "--size",
                                  std::to_string(ranks), "--bootstrap", "file:" + rendezvous.string(),
                                  "--config", (source_dir() / "config/single.toml").string(),
                                  "--run-dir", run_dir.string(),
                                  // no default checkpoints; a test's own setting comes after
                                  "--set", "checkpoint.every_steps=0"};
    if (bucket_bytes > 0) {
      argv.push_back("--bucket-bytes");
      argv.push_back(std::to_string(bucket_bytes));
    }
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
  job.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  job.ok = true;
  for (int r = 0; r < ranks; ++r) {
    const auto& result = results[static_cast<size_t>(r)];
    job.ok = job.ok && result.exit_code == 0 && !result.timed_out;
    job.report += "--- rank " + std::to_string(r) + ": exit " + std::to_string(result.exit_code) +
                  (result.timed_out ? " (timed out)" : "") + "\n" + result.output;
    job.replicas.push_back(read_replica(run_dir / ("node-" + std::to_string(r)) / "events.jsonl"));
  }
  return job;
}

double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-12));
  return worst;
}

}  // namespace dseek::testing::dp
