// Implementation of training_metrics.hpp. Names and units follow Prometheus's
// conventions for exporters: base units (seconds, bytes) in the name, _total on
// counters; the events' milliseconds are converted to seconds here.
#include "runtime/metrics/training_metrics.hpp"

#include <chrono>

#include "runtime/util/json_fields.hpp"

namespace dseek::metrics {

namespace {

// `target` takes the event's number at `key` (divided by `divisor`) when it has one.
void take(std::optional<double>& target, std::string_view fields, std::string_view key,
          double divisor = 1.0) {
  if (const auto value = util::json_number_field(fields, key)) target = *value / divisor;
}

void add(double& target, std::string_view fields, std::string_view key) {
  if (const auto value = util::json_number_field(fields, key)) target += *value;
}

}  // namespace

TrainingMetrics::TrainingMetrics(int64_t tokens_per_step)
    : tokens_per_step_(static_cast<double>(tokens_per_step)) {}

void TrainingMetrics::observe(std::string_view event, std::string_view fields) {
  std::lock_guard lock(mutex_);
  if (event == "step") {
    observe_step(fields);
  } else if (event == "eval") {
    take(gauges_.val_loss, fields, "val_loss");
  } else if (event == "checkpoint_committed") {
    ++counters_.checkpoints_written;
  } else if (event == "checkpoint_failed") {
    ++counters_.checkpoint_failures;
  } else if (event == "node_lost") {
    ++counters_.nodes_lost;
  } else if (event == "recovered") {
    ++counters_.recoveries;
  } else if (event == "actor_restarted") {
    ++counters_.actor_restarts;
  } else if (event == "train_done" || event == "train_stopped") {
    gauges_.training_finished = 1;
  } else if (event == "step_skipped") {
    ++counters_.skipped_steps;
  } else if (event == "sdc_detected") {
    ++counters_.sdc_detections;
  } else if (event == "measures") {
    take(gauges_.peak_flops, fields, "peak_flops");
    take(gauges_.device_memory_bytes, fields, "device_memory_bytes");
    take(gauges_.baseline_tokens_per_second, fields, "baseline_tokens_per_s");
  } else if (event == "epoch_started") {
    take(gauges_.epoch, fields, "epoch");
    take(gauges_.world_size, fields, "world_size");
  }
}

void TrainingMetrics::observe_step(std::string_view fields) {
  ++counters_.steps;
  gauges_.last_step_timestamp =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  gauges_.training_finished = 0;
  counters_.tokens += tokens_per_step_;
  // Only the steps of a multi-node data-parallel job have them.
  add(counters_.gradient_sent_bytes, fields, "comm_bytes_sent");
  add(counters_.gradient_received_bytes, fields, "comm_bytes_received");
  take(gauges_.step, fields, "step");
  take(gauges_.loss, fields, "loss");
  take(gauges_.learning_rate, fields, "lr");
  take(gauges_.grad_norm, fields, "grad_norm");
  take(gauges_.tokens_per_second, fields, "tokens_per_s");
  take(gauges_.step_seconds, fields, "step_ms", 1000.0);
  take(gauges_.compute_seconds, fields, "compute_ms", 1000.0);
  take(gauges_.exposed_comm_seconds, fields, "comm_ms", 1000.0);
  take(gauges_.data_wait_seconds, fields, "data_wait_ms", 1000.0);
  take(gauges_.prefetch_queue_depth, fields, "prefetch_queue_depth");
  take(gauges_.batch_share, fields, "batch_share");
  take(gauges_.peak_memory_bytes, fields, "peak_memory_bytes");
  take(gauges_.offload_wait_seconds, fields, "offload_wait_ms", 1000.0);
  take(gauges_.loss_scale, fields, "loss_scale");
  take(gauges_.model_flops_per_second, fields, "model_flops_per_s");
  take(gauges_.mfu, fields, "mfu");
  take(gauges_.comm_share, fields, "comm_share");
  take(gauges_.data_wait_share, fields, "data_wait_share");
  take(gauges_.bubble, fields, "bubble");
  take(gauges_.host_peak_memory_bytes, fields, "host_peak_memory_bytes");
  take(gauges_.memory_fraction, fields, "memory_fraction");
  take(gauges_.tokens_per_second_per_node, fields, "tokens_per_s_per_node");
  take(gauges_.scaling_efficiency, fields, "scaling_efficiency");
}

std::vector<MetricSample> TrainingMetrics::snapshot() const {
  std::lock_guard lock(mutex_);
  const auto& c = counters_;
  std::vector<MetricSample> samples = {
      {"dseek_steps_total", MetricType::counter, "Training steps this node completed.",
       static_cast<double>(c.steps)},
      {"dseek_tokens_total", MetricType::counter,
       "Tokens of the global batches of the steps this node took part in.", c.tokens},
      {"dseek_checkpoints_written_total", MetricType::counter,
       "Checkpoints this node wrote and committed.",
       static_cast<double>(c.checkpoints_written)},
      {"dseek_checkpoint_failures_total", MetricType::counter,
       "Checkpoint writes of this node that failed.",
       static_cast<double>(c.checkpoint_failures)},
      {"dseek_nodes_lost_total", MetricType::counter, "Nodes this node saw leave the job.",
       static_cast<double>(c.nodes_lost)},
      {"dseek_recoveries_total", MetricType::counter,
       "Recoveries of the training state after a change of the world.",
       static_cast<double>(c.recoveries)},
      {"dseek_actor_restarts_total", MetricType::counter,
       "Actors of this node restarted by their supervisor.",
       static_cast<double>(c.actor_restarts)},
      {"dseek_gradient_sent_bytes_total", MetricType::counter,
       "Bytes this node sent in the gradient reductions.", c.gradient_sent_bytes},
      {"dseek_gradient_received_bytes_total", MetricType::counter,
       "Bytes this node received in the gradient reductions.", c.gradient_received_bytes},
      {"dseek_skipped_steps_total", MetricType::counter,
       "Steps whose update the loss scaler skipped (non-finite gradients).",
       static_cast<double>(c.skipped_steps)},
      {"dseek_sdc_detections_total", MetricType::counter,
       "Silent data corruptions this node's replica checks or SDC audits detected.",
       static_cast<double>(c.sdc_detections)},
  };
  auto gauge = [&samples](std::string_view name, std::string_view help,
                          const std::optional<double>& value) {
    if (value) samples.push_back({name, MetricType::gauge, help, *value});
  };
  const auto& g = gauges_;
  gauge("dseek_step", "Number of the newest completed step.", g.step);
  gauge("dseek_loss", "Training loss of the newest step.", g.loss);
  gauge("dseek_learning_rate", "Learning rate of the newest step.", g.learning_rate);
  gauge("dseek_grad_norm", "Global gradient norm of the newest step, before clipping.",
        g.grad_norm);
  gauge("dseek_tokens_per_second", "Tokens per second of the newest step (global batch).",
        g.tokens_per_second);
  gauge("dseek_step_seconds", "Wall time of the newest step.", g.step_seconds);
  gauge("dseek_step_compute_seconds", "Compute time of the newest step.", g.compute_seconds);
  gauge("dseek_step_exposed_comm_seconds",
        "Communication time of the newest step not hidden behind compute.",
        g.exposed_comm_seconds);
  gauge("dseek_data_wait_seconds", "Time the newest step waited for its batch.",
        g.data_wait_seconds);
  gauge("dseek_data_prefetch_queue_depth",
        "Steps of batches the data prefetcher had ready when the newest step asked for its "
        "first (0: the step waited for its batch).",
        g.prefetch_queue_depth);
  gauge("dseek_batch_share_sequences",
        "Sequences of the newest step's global batch this node trained (data.balance = "
        "\"throughput\": its share by measured speed).",
        g.batch_share);
  gauge("dseek_peak_memory_bytes", "Most memory of the compute backend held at once so far.",
        g.peak_memory_bytes);
  gauge("dseek_validation_loss", "Validation loss of the newest evaluation.", g.val_loss);
  gauge("dseek_world_size", "Nodes in the current world epoch.", g.world_size);
  gauge("dseek_epoch", "Current world epoch (a new one at every change of membership).",
        g.epoch);
  gauge("dseek_offload_wait_seconds",
        "Time the newest step's forward waited for the overlapped offload's update.",
        g.offload_wait_seconds);
  gauge("dseek_loss_scale", "Loss scale of the newest step (loss scaling only).", g.loss_scale);
  gauge("dseek_model_flops_per_second",
        "Model FLOPs per second of the job in the newest step (6N + 6LCT per token).",
        g.model_flops_per_second);
  gauge("dseek_mfu",
        "Model FLOPs utilization of the newest step: model FLOP/s over the peak of every "
        "worker group of the world (ratio).",
        g.mfu);
  gauge("dseek_comm_share", "Exposed communication time over step time of the newest step.",
        g.comm_share);
  gauge("dseek_data_wait_share", "Data wait over step time of the newest step.",
        g.data_wait_share);
  gauge("dseek_bubble_fraction",
        "Idle fraction of this node's pipeline stage in the newest step (0 without a pipeline).",
        g.bubble);
  gauge("dseek_host_peak_memory_bytes", "Most resident memory of the node's process so far.",
        g.host_peak_memory_bytes);
  gauge("dseek_memory_fraction",
        "Peak backend memory over the memory of its device (ratio).",
        g.memory_fraction);
  gauge("dseek_tokens_per_second_per_node", "Tokens per second of the newest step per node.",
        g.tokens_per_second_per_node);
  gauge("dseek_scaling_efficiency",
        "Tokens per second per node over the one-node baseline (ratio).",
        g.scaling_efficiency);
  gauge("dseek_peak_flops", "Peak FLOP/s of one worker group's device (configured or measured).",
        g.peak_flops);
  gauge("dseek_device_memory_bytes", "Memory of one worker group's device.",
        g.device_memory_bytes);
  gauge("dseek_baseline_tokens_per_second", "One-node baseline of tokens per second.",
        g.baseline_tokens_per_second);
  gauge("dseek_last_step_timestamp_seconds", "Unix time at which the newest step was logged.",
        g.last_step_timestamp);
  gauge("dseek_training_finished", "1 once the node's training ended (done or stopped), else 0.",
        g.training_finished);
  return samples;
}

}  // namespace dseek::metrics
