// Running a small pipeline-parallel job for the pp tests: P dseek_test_rank processes on
// loopback (file bootstrap in a fresh directory, every process killed after a bounded
// wait), or the single-node reference with P = 1, on the integration tests' prepared
// text; and reading back what each stage reported and the final parameters.
#pragma once

#include <chrono>
#include <cstdint>
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
  // What the rank's device plane sent (dseek_test_rank --staged-backend-memory 1).
  uint64_t device_bytes_sent = 0;
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
// each stage a tensor-parallel group of `tensor`. `rank_args`: more dseek_test_rank
// arguments (e.g. {"--staged-backend-memory", "1"}).
JobRun run_job(int ranks, const std::filesystem::path& run_dir,
               const std::vector<std::string>& settings,
               std::chrono::milliseconds timeout = std::chrono::seconds(120), int tensor = 1,
               int data = 1, const std::vector<std::string>& rank_args = {});

// A run's layout, as its parallel_layout event names it.
struct LayoutShape {
  int data = 1, pipeline = 1, tensor = 1;
  int64_t vocab = 256;  // model.vocab of both runs (the data's is 256)
};

// A tensor-parallel run (`run`, laid out as `shape`, on the small job of small_settings)
// against the single-node run of the same job (`single`). Tensor parallelism changes the
// arithmetic of every block: the ranks add partial matmuls (over heads, MLP columns,
// vocabulary rows) in the all-reduce where one sgemm adds them inside; float32 rounding,
// ~1e-7 relative per sum, which AdamW (lr 2e-3) turns into ~1e-7 relative per update.
// Bounds: losses, gradient norms and validation losses 1e-5 relative; final parameters
// 2e-5 absolute (1% of one update), except the attention key biases, whose gradient is
// zero in exact arithmetic (the softmax ignores a constant added to every score): both
// runs hold rounding noise there, which AdamW's m / sqrt(v) scales to steps of ~lr, so
// they are held to 4 lr. Every rank must report the same losses, norms and whole model,
// and the last rank's parallel_layout event its coordinates.
void check_tensor_parity(const std::string& name, const JobRun& run, const JobRun& single,
                         LayoutShape shape);

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
