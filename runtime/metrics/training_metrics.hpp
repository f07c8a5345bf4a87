// The numbers a node's Prometheus endpoint shows (metrics.prometheus_port), folded from
// the node's events as they are written to events.jsonl (EventLog's listener): counters
// of steps, tokens, checkpoints, lost nodes, recoveries, actor restarts and gradient
// bytes, and the latest loss, learning rate, step timings, memory, world size and
// epoch. It sees every event of the node whoever emits it (the worker's thread, the
// exporter, the health monitor), and it lives as long as the node's event log, so a
// restart of the metrics_exporter does not reset the counters. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace dseek::metrics {

enum class MetricType { counter, gauge };

// One metric family with its one sample (every dseek metric has a single series per
// node; the labels are the endpoint's).
struct MetricSample {
  std::string_view name;  // static strings
  MetricType type;
  std::string_view help;
  double value;
};

class TrainingMetrics {
 public:
  // `tokens_per_step`: the tokens of one global batch (train.batch_size x
  // model.context); a step event counts that many towards dseek_tokens_total.
  explicit TrainingMetrics(int64_t tokens_per_step);

  // One event as EventLog writes it: its name and its fields as a JSON object.
  void observe(std::string_view event, std::string_view fields_json);

  // The counters (always) and the gauges that have had a value, in a fixed order.
  std::vector<MetricSample> snapshot() const;

 private:
  struct Counters {
    uint64_t steps = 0;
    double tokens = 0;
    uint64_t checkpoints_written = 0;
    uint64_t checkpoint_failures = 0;
    uint64_t nodes_lost = 0;
    uint64_t recoveries = 0;
    uint64_t actor_restarts = 0;
    double gradient_sent_bytes = 0;
    double gradient_received_bytes = 0;
    uint64_t skipped_steps = 0;
    uint64_t sdc_detections = 0;
  };
  struct Gauges {
    std::optional<double> step, loss, learning_rate, grad_norm, tokens_per_second;
    std::optional<double> step_seconds, compute_seconds, exposed_comm_seconds;
    std::optional<double> data_wait_seconds, peak_memory_bytes, val_loss;
    std::optional<double> world_size, epoch;
    // The measures (step_measures.hpp) and their basis ("measures" event).
    std::optional<double> model_flops_per_second, mfu, comm_share, data_wait_share, bubble;
    std::optional<double> host_peak_memory_bytes, memory_fraction, tokens_per_second_per_node;
    std::optional<double> scaling_efficiency, loss_scale, offload_wait_seconds;
    std::optional<double> peak_flops, device_memory_bytes, baseline_tokens_per_second;
    std::optional<double> prefetch_queue_depth;  // the data prefetcher's, at the step's batch
    std::optional<double> batch_share;  // data.balance = "throughput": this node's sequences
    // When the newest step was logged (Unix seconds), and whether training ended (1 after
    // train_done or train_stopped): the stalled-training alert needs both.
    std::optional<double> last_step_timestamp, training_finished;
  };
  void observe_step(std::string_view fields);

  const double tokens_per_step_;
  mutable std::mutex mutex_;
  Counters counters_;
  Gauges gauges_;
};

}  // namespace dseek::metrics
