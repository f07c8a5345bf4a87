// Running a tiny data-parallel training job for the dp tests: N dseek_test_rank processes
// on loopback (file bootstrap in a fresh directory, every process killed after a bounded
// wait), on a small prepared data set, and reading back what each replica reported
// (step losses, grad norms, bytes on the wire, the final params_sha256).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dseek::testing::dp {

// What one replica left in its events.jsonl.
struct ReplicaRun {
  std::vector<double> losses;      // step events, in order
  std::vector<double> grad_norms;
  std::vector<double> val_losses;  // eval events
  uint64_t comm_bytes_sent = 0;    // summed over step events
  uint64_t grad_bytes = 0;         // summed over step events
  uint64_t grad_encoded_bytes = 0;
  double comm_ms = 0.0;            // summed over step events
  std::string params_sha256;       // train_done
  std::vector<std::string> lines;  // every event line
};

struct JobRun {
  bool ok = false;
  std::string report;  // every process's exit status and output
  std::vector<ReplicaRun> replicas;
  std::chrono::milliseconds elapsed{0};
};

// The tiny job's settings: dim 64, 2 layers, context 32, batch 12 in micro-batches of 2,
// 12 steps, 1 thread; `extra` ("key=value") come last and win.
std::vector<std::string> tiny_settings(const std::vector<std::string>& extra = {});

// Runs `ranks` replicas (1: the single-node run_training, no communicator) with
// `settings` (--set values) in `run_dir`. bucket_bytes 0: the default 4 MiB buckets.
// `rank_args`: more dseek_test_rank arguments (e.g. {"--staged-backend-memory", "1"}).
JobRun run_job(int ranks, const std::filesystem::path& run_dir,
               const std::vector<std::string>& settings, size_t bucket_bytes = 0,
               std::chrono::milliseconds timeout = std::chrono::seconds(60),
               const std::vector<std::string>& rank_args = {});

// The largest relative difference between two loss curves of the same length.
double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace dseek::testing::dp
