// Training of one model replica: micro-batch accumulation, global-norm clipping, AdamW
// with the warm-up + cosine schedule, evaluation, and the timings each step reports.
// The single-node job drives it directly (run_training.hpp).
//
// Data parallel: given a GradientReducer (gradient_reducer.hpp), replica r of R computes
// sequences [r*B/R, (r+1)*B/R) of the global batch of B = train.batch_size sequences
// (the sample order is a function of (seed, step), so the global batch is the same for
// any R), in micro-batches of train.micro_batch_size (0 = the whole slice). Its loss
// gradient is scaled as the single node scales it (1 / (tokens per micro-batch x
// micro-batches of the GLOBAL batch)), so the sum over replicas is the single-node
// gradient of the mean over the global batch. Clipping uses the norm of that sum; every
// replica applies the same update (ZeRO >= 1: each its shard, then the parameters are
// gathered). Without a reducer the numbers are exactly the single-node ones. With fp8's
// loss scaling and a reducer that keeps state between steps (compression), the step is
// decided and the gradients unscaled before the reduction, after backward
// (trainer_unscaled_reduction.cpp).
//
// The backend (train.device) may keep its memory off the host (CUDA): the trainer then
// touches parameters and gradients on the host only through host staging copies
// (host_staging.hpp, allocated once), moved by the backend's copy calls -- gradient
// buckets as backward finishes them (the reduction still overlaps backward), the
// reduced gradient back, replica checksums, the gradient hook, ZeRO's gather, and the
// update of an optimizer that runs on the host (the gradient_shard actors: AdamW
// offloaded to the CPU, its moments in host memory). On the CPU backend the staging is
// the buffer itself and nothing is copied. The host copies are in the backend's host
// memory (Backend::host_memory(): pinned for CUDA), and so are the gradient_shard
// actors' moments (OptimizerSpec::host_memory). A reducer whose data plane reads the
// backend's memory itself (NCCL: GradientReducer::reduces_backend_memory()) gets the
// backend's own gradient and parameter buffers instead: no bucket, reduced gradient or
// gathered parameter goes through the host.
//
// Overlap of the offloaded update (train.offload_overlap, on by default): with an
// optimizer that updates in chunks (the gradient_shard actors) and ZeRO 0, the update
// goes through chunks in layout order -- wte+wpe, block 0, ..., block L-1, lnf -- and
// train_step returns once it has started. Each chunk goes back to the device as soon as
// it is updated (asynchronously on CUDA: a copy stream whose event the compute stream
// waits for), and the next step's forward waits, before it reads a chunk, only for that
// chunk (GptModel::set_before_params_read): the embedding first, then block i for chunk
// i, the head for lnf (and wte, the first). So the CPU updates later blocks while the
// device computes the early ones; the wait is the step event's offload_wait_ms. The
// parameters' host staging is then the FP32 master copy: it does not come down from
// the device every step, only after restore(). The update writes each element once
// from the same inputs, so the bits are those of the update finished in its own step. Everything else that reads the parameters or the
// gradients (the first backward, which zeroes the gradients the update reads; evaluate,
// snapshots, restore, params_sha256, replica checks) first finishes the update.
// Not overlapped: ZeRO 1 and 2, whose all-gather of the updated shards needs the whole
// update before the next forward can read anything (the gather could go chunk by chunk
// too: not done); and a step whose replica check compares the parameters right after
// the update (train.replica_check_every) waits for it in that step.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.hpp"
#include "runtime/checkpoint/precision_state.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/optim/adamw.hpp"
#include "runtime/optim/loss_scaler.hpp"
#include "runtime/optim/lr_schedule.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/device_backend.hpp"
#include "runtime/train/gradient_reducer.hpp"
#include "runtime/train/host_staging.hpp"
#include "runtime/train/optimizer_shards.hpp"

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
};

class Trainer {
 public:
  // `reducer` null: one node. Otherwise this trainer is replica reducer->rank() of
  // reducer->world_size(); throws std::invalid_argument when train.batch_size does not
  // split evenly into replicas and micro-batches. `make_optimizer` holds the optimizer
  // state and runs the update (optimizer_shards.hpp); empty or null: a LocalOptimizer.
  // `make_backend` gives the backend of train.device (device_backend.hpp); empty:
  // make_runtime_backend.
  Trainer(const config::JobConfig& config, BatchSource& train_batches,
          GradientReducer* reducer = nullptr, const OptimizerShardsFactory& make_optimizer = {},
          const BackendFactory& make_backend = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs optimizer step `step` (0-based) on its global batch (collective with a reducer).
  // Throws ReplicaMismatch (replica_check.hpp) when this replica disagrees with the
  // others' checksums (every train.replica_check_every steps).
  StepReport train_step(int64_t step);

  // Run on the step's final (with replicas: reduced) gradients before the update (fault
  // injection: slow, corrupt_gradient); and, with replicas, told when a replica check
  // names disagreeing ranks (on every replica, before the one in the minority throws).
  using GradientHook = std::function<void(int64_t step, float* grads, size_t count)>;
  using DisagreementHook =
      std::function<void(int64_t step, const std::string& checked, const std::vector<int>& ranks)>;
  void set_after_reduction(GradientHook hook) { after_reduction_ = std::move(hook); }
  void set_on_disagreement(DisagreementHook hook) { on_disagreement_ = std::move(hook); }
  // This replica's data-parallel rank (0 on one node).
  int dp_rank() const;
  // Mean loss over eval_batches fixed batches of `batches` (no gradient). With a
  // reducer each replica evaluates its slice and the mean is over all (collective).
  // `stop`, when given, is asked before each batch and ends the evaluation early when it
  // says true (a stop request: the run's summary drops the partial mean); with a reducer
  // it must answer the same on every replica (a collective vote, run_steps.cpp).
  double evaluate(BatchSource& batches, int64_t eval_batches,
                  const std::function<bool()>& stop = {});

  // Copies parameters and AdamW moments (layout order, model().num_params() floats each)
  // to host memory: the checkpoint snapshot. With a sharded optimizer (ZeRO >= 1) the
  // moments are gathered from every replica: collective, every replica calls it.
  void snapshot(float* params, float* adam_m, float* adam_v);
  // The same without communication: the parameters and only the moments this replica
  // owns (the other ranges of adam_m / adam_v are left as they are). Under ZeRO >= 1
  // the parameters are whole on every replica after a step; the moments are its shard.
  void snapshot_owned(float* params, float* adam_m, float* adam_v);
  // Puts back a checkpoint's state: parameters, moments (this replica's shard of them
  // when sharded) and AdamW's step count.
  void restore(const float* params, const float* adam_m, const float* adam_v,
               int64_t optimizer_steps);
  // The mixed-precision state between steps (loss scale, fp8 amax histories) for a
  // checkpoint, and putting a checkpoint's back (state/trainer_precision_state.cpp; whether to
  // is train/state/precision_resume.hpp's decision). The replicas share the loss scale but
  // not the amax histories (each quantizes its own slice of the batch): under fp8 with
  // replicas precision_state() gathers every replica's (collective:
  // precision_state_is_collective()), and a restore takes this replica's own when the
  // checkpoint has as many replicas (returns true), else their merge (false).
  checkpoint::PrecisionState precision_state();
  bool precision_state_is_collective() const;
  bool restore_precision_state(const checkpoint::PrecisionState& state);
  // Counts an update still running (overlap) as taken: its step is decided.
  int64_t optimizer_steps() const {
    return optimizer_->steps_taken() + (update_pending_ ? 1 : 0);
  }
  // Whether snapshot() is a collective (ZeRO >= 1 over a reducer).
  bool snapshot_is_collective() const;

  // Whether the offloaded update of a step is left running into the next step's forward
  // (train.offload_overlap, and an optimizer and ZeRO stage it applies to).
  bool overlaps_update() const { return !chunks_.empty(); }

  // SHA-256 of the fp32 parameters (the train_done event's params_sha256).
  std::string params_sha256();
  model::GptModel& model() { return *model_; }
  backend::Backend& backend() { return *backend_; }
  int64_t micro_batch() const { return micro_batch_; }
  GradientReducer* reducer() const { return reducer_; }

 private:
  // Compares `count` floats at `data` across the replicas; throws if this one is off.
  void check_replicas(int64_t step, const char* checked, const float* data, size_t count);
  // Forward and backward of sequences [first, first + count) of `step`'s global batch
  // in micro-batches, accumulating gradients; the last micro-batch's backward reports
  // finished gradients to `on_ready`. Returns the sum of micro-batch losses / micro_steps.
  double accumulate(int64_t step, int64_t first, int64_t count, int64_t micro_steps,
                    const model::GradientsReady& on_ready, StepReport& report);
  StepReport data_parallel_step(int64_t step);
  // The end of a data-parallel step, applied or skipped: the parameters' replica check,
  // the traffic and the timings.
  StepReport end_data_parallel_step(int64_t step, std::chrono::steady_clock::time_point start,
                                    StepReport& report);
  bool replica_check_at(int64_t step) const;
  // Loss scaling: whether the step's gradients (global sum of squares `sum_squares`)
  // are applied; if so, unscales this replica's owned gradients and returns their norm
  // in `norm`. Without a loss scaler: true, norm = sqrt(sum_squares). The backend's
  // gradients are unscaled through the backend (Backend::scale); `host_grads`, when not
  // null, is a separate host copy the optimizer reads, unscaled too.
  // `decided_and_unscaled`: reduce_unscaled_if_finite() took the step already; only the
  // norm is left.
  bool apply_loss_scale(double sum_squares, double& norm, StepReport& report,
                        float* host_grads, bool decided_and_unscaled = false);
  // Loss scaling with a reducer that carries state between steps (compression), in
  // trainer_unscaled_reduction.cpp: whether the local gradients go into the reduction
  // unscaled, after backward, instead of scaled as backward finishes them.
  bool reduces_unscaled() const;
  // After backward, before any gradient reached the reducer: decides the step on a flag
  // summed over the replicas (a non-finite local gradient anywhere skips it everywhere,
  // reducer_->skip_step(): false, report.loss the global mean); else unscales the local
  // gradients, hands every range to `stage_and_reduce` in backward order and waits for
  // the reduction (reducer_->finish()): true.
  bool reduce_unscaled_if_finite(double local_loss, const model::GradientsReady& stage_and_reduce,
                                 StepReport& report);
  // The optimizer's update of the owned parameters, on the host when the optimizer runs
  // there (`grads_on_host`: the host staging already holds the owned gradients).
  optim::StepStats update_parameters(double lr, double grad_norm, bool grads_on_host);
  // The overlapped offload (see the top of this file): before the forward reads `range`,
  // sends every chunk updated by now to the backend and waits for those in `range`.
  void await_params(model::ParamRange range);
  // Waits for the rest of a started update and sends its chunks to the backend; no-op
  // when none is pending.
  void finish_update();

  config::JobConfig config_;
  BatchSource& batches_;
  GradientReducer* reducer_;
  int64_t slice_first_ = 0;  // this replica's sequences of the global batch
  int64_t slice_size_ = 0;
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::GptModel> model_;
  std::unique_ptr<OptimizerShards> optimizer_;
  std::unique_ptr<optim::LossScaler> loss_scaler_;  // fp8 only
  std::vector<model::ParamRange> owned_;  // the parameters this replica's optimizer updates
  std::unique_ptr<HostStaging> params_host_, grads_host_;
  optim::LrSchedule schedule_;
  int64_t micro_batch_;
  std::vector<int32_t> inputs_, targets_;  // one micro-batch, reused every step
  GradientHook after_reduction_;
  DisagreementHook on_disagreement_;
  // The overlapped offload: the chunks (empty when off), which of them the backend holds
  // updated, whether an update is running, and this step's wait for it.
  std::vector<model::ParamRange> chunks_;
  std::vector<char> chunk_on_backend_;
  bool update_pending_ = false;
  double offload_wait_ms_ = 0.0;
  // params_host_ holds the parameters the backend holds (the overlap keeps the master
  // copy on the host; restore() invalidates it).
  bool host_params_current_ = false;
};

// The model shape of a config.
model::GptShape shape_of(const config::ModelConfig& model);
// Its model.recompute setting; std::invalid_argument naming the key when malformed (a
// config built in code that never went through validate()).
model::RecomputePolicy recompute_of(const config::ModelConfig& model);

}  // namespace dseek::train
