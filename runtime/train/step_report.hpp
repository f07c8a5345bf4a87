// What one optimizer step reports (the step events' fields, run_events.hpp), and the
// hooks a trainer runs inside a step (fault injection, replica disagreements): shared by
// every layout's trainer (pipeline/stage_trainer.hpp) and its single-stage view (trainer.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dseek::train {

struct StepReport {
  int64_t step = 0;
  double loss = 0.0;         // mean over the step's (global) batch
  double lr = 0.0;
  double grad_norm = 0.0;    // of the global gradient, before clipping
  double step_ms = 0.0;      // wall time of the whole step
  double compute_ms = 0.0;   // forward, backward and optimizer
  double comm_ms = 0.0;      // exposed communication (0 on one node)
  double data_wait_ms = 0.0; // waiting for batches
  double tokens_per_s = 0.0; // of the global batch
  // Data parallel only (0 on one node): this replica's traffic in the step.
  uint64_t comm_bytes_sent = 0;
  uint64_t comm_bytes_received = 0;
  uint64_t gradient_bytes = 0;          // fp32 gradient bytes reduced
  uint64_t encoded_gradient_bytes = 0;  // after compression
  // Mixed precision: train.precision of the step ("" where the trainer does not say);
  // with loss scaling (fp8) the scale the step ran with (0 without), and whether its
  // gradients were non-finite and the update skipped (optim/loss_scaler.hpp).
  std::string precision;
  double loss_scale = 0.0;
  bool skipped = false;
  // The most backend memory (Backend::memory_usage().peak_bytes) held at once since the
  // trainer was built: parameters, gradients, moments, activations, scratch.
  uint64_t peak_memory_bytes = 0;
  // The overlapped offload (train.offload_overlap): whether this trainer runs it, and the
  // time this step's forward waited for chunks of the previous step's update.
  bool offload_overlap = false;
  double offload_wait_ms = 0.0;
  // data.prefetch: the steps of batches the prefetcher had ready when the step asked for
  // its first batch (prefetch_queue.hpp); -1 where no prefetching source was asked.
  int64_t prefetch_queue_depth = -1;
  // data.balance = "throughput": the sequences of the global batch this replica trained
  // (its share by measured speed); -1 under equal shares.
  int64_t batch_share = -1;
  // The SDC audit (sdc_audit.hpp) at this step: the time its recomputation and verdict
  // took (0: not audited), and the first auditors whose accusation a second auditor did
  // not confirm ("" for none: a wrong auditor clears itself).
  double sdc_audit_ms = 0.0;
  std::string sdc_cleared_auditors;
};

// Run on the step's final (with replicas: reduced) gradients before the update (fault
// injection: slow, corrupt_gradient).
using GradientHook = std::function<void(int64_t step, float* grads, size_t count)>;
// Told when a replica check names disagreeing replicas (on every replica, before the one
// in the minority throws ReplicaMismatch).
using DisagreementHook =
    std::function<void(int64_t step, const std::string& checked, const std::vector<int>& ranks)>;

}  // namespace dseek::train
