// The five measures of a training job (compute utilization, communication share, memory
// use, convergence, scaling efficiency), step by step: derived from a step event's own
// fields (tokens_per_s, step_ms, comm_ms, data_wait_ms, peak_memory_bytes) and the basis
// the job's config gives (model FLOPs per token, the device's peak, its memory, a
// one-node baseline). The node's event log runs every event through StepMeasures before
// it writes it (EventLog::set_enricher), so events.jsonl, /metrics (training_metrics.hpp)
// and `dseek report` all see the same numbers. docs/metrics.md has the table.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "runtime/config/job_config.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/util/json_line.hpp"

namespace dseek::metrics {

// Model FLOPs of one token in training (forward + backward), as bench/gpu counts them:
// 6N + 6LCT (N parameters, L layers, C width, T context; the second term is attention).
double model_flops_per_token(const config::ModelConfig& model);

// FLOP/s of a fp32 GEMM (1024^3, best of 3) on this process's BLAS threads: the peak of
// a CPU worker when metrics.peak_flops is not configured.
double measure_cpu_gemm_flops();

// What the measures are taken against.
struct MeasureBasis {
  double flops_per_token = 0;
  double peak_flops = 0;            // of one worker group (device); 0 = unknown: no MFU
  std::string peak_source;          // "configured", "measured (fp32 GEMM)" or "none"
  double device_memory_bytes = 0;   // of one worker group's device; 0 = unknown
  std::string memory_source;        // "configured", "host memory" or "none"
  double baseline_tokens_per_s = 0; // one node's tokens/s; 0 = none: no scaling efficiency
  std::string baseline_source;      // "configured", the baseline run's events, or "none"
  int64_t groups_per_node = 1;      // cluster.gpus_per_node
  int64_t world_size = 1;           // cluster.nodes until an epoch says otherwise
};

// The basis of `config`'s job: measures the peak (CPU devices) when metrics.peak_flops is
// 0, reads metrics.baseline_run's events when metrics.baseline_tokens_per_s is 0 and a
// baseline run is named. Throws std::runtime_error naming metrics.baseline_run and the
// file when that run has no step with tokens_per_s.
MeasureBasis measure_basis(const config::JobConfig& config);

// The median tokens_per_s of the step events in RUN_DIR/node-*/events.jsonl of a run.
// Throws std::runtime_error naming the directory when it has none.
double baseline_tokens_per_s(const std::filesystem::path& run_dir);

class StepMeasures {
 public:
  explicit StepMeasures(MeasureBasis basis) : basis_(std::move(basis)) {}

  // EventLog's enricher: appends the derived fields to a "step" event's fields and
  // follows "epoch_started" for the world size.
  void enrich(std::string_view event, std::string& fields_json);
  // The "measures" event: the basis (written once when a node starts).
  util::JsonLine basis_fields() const;

 private:
  std::mutex mutex_;
  MeasureBasis basis_;
};

// Measures the basis of `config`, writes the "measures" event (the basis and the resolved
// config as TOML) and has `events` enrich
// every later step event with the measures.
void attach_step_measures(EventLog& events, const config::JobConfig& config);

}  // namespace dseek::metrics
