// Running a small pipeline-parallel job for the pp tests: P dseek_test_rank processes on
// loopback (file bootstrap in a fresh directory, every process killed after a bounded
// wait), or the single-node reference with P = 1, on the integration tests' prepared
// text; and reading back what each stage reported and the final parameters.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace dseek::testing::pp {

struct StageRun {
  std::vector<double> losses;          // step events, in order
  std::vector<double> grad_norms;
  std::vector<double> bubbles;         // measured, per step
  std::vector<double> bubble_theory;
  std::vector<double> val_losses;
  std::string params_sha256;
  std::vector<std::string> lines;
};

struct JobRun {
  bool ok = false;
  std::string report;                 // every process's exit status and output
  std::vector<StageRun> stages;       // per process (world rank)
  std::vector<float> final_params;    // the whole model (rank 0's --params-out)
  std::filesystem::path run_dir;
};

// The small job: dim 64, 4 layers, 4 heads, context 32, batch 12 in micro-batches of 2
// (6 micro-batches), 8 steps, 1 thread; `extra` ("key=value") come last and win.
std::vector<std::string> small_settings(const std::vector<std::string>& extra = {});

// `ranks` processes: `data` replicas of a pipeline of ranks / (tensor x data) stages,
// each stage a tensor-parallel group of `tensor`.
JobRun run_job(int ranks, const std::filesystem::path& run_dir,
               const std::vector<std::string>& settings,
               std::chrono::milliseconds timeout = std::chrono::seconds(120), int tensor = 1,
               int data = 1);

// The largest |a[i] - b[i]| / |b[i]|; infinite when the lengths differ or a is empty (a
// comparison of nothing must not pass).
double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b);

// The setting that resumes a job from `checkpoint`.
std::vector<std::string> resume_from(const std::filesystem::path& checkpoint);

// The one `resumed` event of process `rank` (REQUIREs exactly one).
std::string resumed_event(const JobRun& run, int rank);

// Launches `nodes` dseek-nodes of `job` for `steps` steps with `fault` (a crash_actor),
// REQUIREs that the job still finished (exit 0) and that the fault fired on `node`, and
// returns the actors node `node`'s worker_group restarted (CHECKs each restart's
// supervisor is worker_group: the group restarts as a whole).
std::vector<std::string> launch_crashing_in_worker_group(const std::filesystem::path& run_dir,
                                                         int nodes, int steps,
                                                         const std::vector<std::string>& job,
                                                         const std::string& fault, int node,
                                                         std::chrono::seconds timeout);

}  // namespace dseek::testing::pp
