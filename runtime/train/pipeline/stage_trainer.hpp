// Training of one pipeline stage: its model chunks (one GptModel per virtual stage it
// holds), the schedule's ops executed with activations and their gradients moving over
// PipelineLinks, the data group's reduction, the global norm, loss scaling, the replica
// checks and the update. It is the one trainer of every layout: without a pipeline the
// rank is the only stage and its one chunk holds the whole model. How a step runs, and
// what data, tensor parallelism, ZeRO, compression, fp8 and the optimizer shards change
// in it: docs/design.md, "Inside the stage trainer".
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/backend/host_memory.hpp"
#include "runtime/checkpoint/precision_state.hpp"
#include "runtime/config/job_config.hpp"
#include "runtime/metrics/chrome_trace.hpp"
#include "runtime/metrics/trace_spans.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/model/tensor_group.hpp"
#include "runtime/optim/adamw.hpp"
#include "runtime/optim/loss_scaler.hpp"
#include "runtime/optim/lr_schedule.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/device_backend.hpp"
#include "runtime/train/layout/layout_sizes.hpp"
#include "runtime/train/pipeline/links.hpp"
#include "runtime/train/pipeline/message_buffer.hpp"
#include "runtime/train/pipeline/plan.hpp"
#include "runtime/train/layout/batch_shares.hpp"
#include "runtime/train/layout/replica_group.hpp"
#include "runtime/train/pipeline/timed_tensor_group.hpp"
#include "runtime/train/model_of_config.hpp"
#include "runtime/train/optimizer_shards.hpp"
#include "runtime/train/step_report.hpp"

namespace dseek::train {

struct PipelineStepReport {
  StepReport step;            // loss (the global batch's mean, on every stage), lr, grad_norm, timings
  double bubble = 0.0;        // this stage's idle fraction of the pipeline phase
  double busy_ms = 0.0;       // forward + backward compute
  double pipeline_ms = 0.0;   // first op to pipeline drained
  double recv_wait_ms = 0.0;  // blocked on activations / gradients
};

class PipelineStageTrainer {
 public:
  // Every stage of `links` constructs one with the same config and plan; `replica_group` is
  // the stage's data group (null: one replica), `tensor_group` the stage's tensor-parallel
  // group (null: one rank). `make_backend` builds the backend of train.device (empty:
  // make_runtime_backend).
  PipelineStageTrainer(const config::JobConfig& config, BatchSource& batches,
                       PipelineLinks& links, PipelinePlan plan, ReplicaGroup* replica_group = nullptr,
                       model::TensorGroup* tensor_group = nullptr,
                       const BackendFactory& make_backend = {},
                       const OptimizerShardsFactory& optimizer_shards = {});
  ~PipelineStageTrainer();
  PipelineStageTrainer(const PipelineStageTrainer&) = delete;
  PipelineStageTrainer& operator=(const PipelineStageTrainer&) = delete;

  // Optimizer step `step` (0-based), collective over the stages. With replicas, every
  // train.replica_check_every steps the data group compares checksums of the reduced
  // gradients (ZeRO 0) and of the updated parameters (replica_check.hpp): a replica off
  // the majority (with two: off replica 0) throws ReplicaMismatch after the hook below.
  // At an SDC audit step a rank two auditors find wrong makes every rank throw
  // SdcDetected before the update (sdc_audit.hpp).
  PipelineStepReport train_step(int64_t step);
  // Run on the step's reduced gradients before the update, with this rank's first owned
  // run of its first chunk (under ZeRO its first piece): fault injection
  // (corrupt_gradient); and told when a replica check names disagreeing replicas (on
  // every replica, before the one in the minority throws).
  void set_after_reduction(GradientHook hook) { after_reduction_ = std::move(hook); }
  // Run once a step on this rank's own gradients before any reduction (the first range
  // it hands to the data group's reduction): fault injection (corrupt_gradient with
  // where = "local", a faulty device). Nothing calls it in an audit's recomputation.
  void set_before_reduction(GradientHook hook) { before_reduction_ = std::move(hook); }
  // Run once per SDC audit recomputation on the first range it would hand over: fault
  // injection (corrupt_gradient with where = "audit", an auditor that recomputes wrong).
  void set_in_recomputation(GradientHook hook) { in_recomputation_ = std::move(hook); }
  // Whether this trainer runs the SDC audit (sdc_audit.hpp) every train.sdc_audit_every
  // steps: three or more replicas, and not under fp8 (its delayed scaling learns from
  // every forward, so a recomputation would change the next steps' scales).
  bool audits() const { return audits_; }
  void set_on_disagreement(DisagreementHook hook) { on_disagreement_ = std::move(hook); }
  // The node's trace (metrics/trace_spans.hpp): its clock times the stage's spans, and
  // each forward and backward goes to it as a span of the compute lane. Null: the
  // system clock, and no node trace.
  void set_trace(std::shared_ptr<const metrics::TraceRecorder> trace) { trace_ = std::move(trace); }
  // Mean loss over `eval_batches` batches of `batches` (forward only), on every stage
  // (each replica evaluates its slice; collective over the stages and the replicas).
  // With `stop_request`, the ranks vote on it before each batch (sum_over_world) and
  // end the evaluation early when any rank has it set (a stop request; the caller drops
  // the partial mean); `batches_done`, when given, is set to the batches evaluated.
  double evaluate(BatchSource& batches, int64_t eval_batches,
                  const std::atomic<bool>* stop_request = nullptr, int64_t* batches_done = nullptr);
  // The whole model's parameters (layout order) on every stage: collective.
  std::vector<float> gather_params();
  // Parameters this stage owns (its blocks; the embedding, the head and wte at the ends;
  // with tensor parallelism this rank's shard of them).
  size_t owned_params() const;
  // Parameters whose AdamW moments this rank holds: owned_params() plus the head's copy
  // of wte, or under ZeRO this replica's pieces of them only.
  size_t optimizer_params() const;
  // Who runs the chunks' updates (OptimizerShards::describe of the first chunk's).
  std::string optimizer_description() const;
  // ZeRO inside the data group (see the top of this file).
  bool shards_optimizer_state() const { return zero_; }
  // The activation buffers of this stage's chunks together.
  model::ActivationMemory activation_memory() const;

  const PipelinePlan& plan() const { return plan_; }
  int64_t stage() const { return stage_; }
  int replica() const { return replicas_ != nullptr ? replicas_->replica() : 0; }
  int replicas() const { return replicas_ != nullptr ? replicas_->replicas() : 1; }
  int tensor_rank() const { return tensor_ != nullptr ? tensor_->rank() : 0; }
  int tensor_ranks() const { return tensor_ != nullptr ? tensor_->size() : 1; }
  // The sum of one flag or count (stop votes) over the stages, the replicas and the
  // tensor group: collective.
  double sum_over_world(double value);
  // The element-wise sum of small counts over the stages, the replicas and the tensor
  // group (collective).
  void sum_over_world(std::span<double> values);
  // Checkpoints (state/checkpointing.hpp). With tensor parallelism, see
  // gather_sharded_state_to_first below; without, the whole model state (layout order)
  // gathered on stage 0 with point-to-point sends, each stage sending the ranges its
  // chunks own (wte once): collective over the stages; stage 0 passes whole-layout
  // buffers, the others null.
  void gather_state_to_first(float* params, float* adam_m, float* adam_v);
  // Every chunk takes the ranges it owns (params and AdamW moments, the last stage's
  // copy of wte too) out of the whole state.
  void restore_state(const float* params, const float* adam_m, const float* adam_v,
                     int64_t optimizer_steps);
  int64_t optimizer_steps() const;
  // This rank's own state without communication (state/stage_owned_state.cpp): its
  // owned parameters and AdamW moments, packed (owned_state_floats() floats), and back.
  // Under ZeRO the moments are valid on owned_state_moments() only (this replica's
  // pieces); the restore reads only those.
  size_t owned_state_floats() const;
  // The ranges of the packed state holding moments this rank's optimizer has (all of
  // them without ZeRO), sorted.
  std::vector<model::ParamRange> owned_state_moments() const;
  void copy_owned_state(float* packed);
  void restore_owned_state(const float* packed, int64_t optimizer_steps);
  const model::ParamLayout& whole_layout() const;
  // Stage 0's `value` on every stage (collective; with tensor parallelism the value of
  // stage 0's tensor rank 0, on every rank).
  bool first_stage_decides(bool value);
  // The writer of a gathered checkpoint: stage 0, tensor rank 0 (of its replica).
  bool gathers_state() const { return stage_ == 0 && tensor_rank() == 0; }
  // Under fp8 with several replicas every replica takes part in a checkpoint: each keeps
  // its own amax histories (its slice of the batch).
  bool fp8_state_per_replica() const;
  // The loss scaler's state and every rank's fp8 state, assembled by layer index
  // (state/stage_precision_state.cpp, train/state/sharded_precision_state.hpp): collective
  // over the stages, the tensor group and, under fp8_state_per_replica, the replicas; the
  // writer's result is the whole. Then the restore on every rank: true when it took its
  // own copy, false when merged.
  checkpoint::PrecisionState gather_precision_state();
  bool restore_precision_state(const checkpoint::PrecisionState& state,
                               const LayoutSizes& written_by);
  // The trace spans of every stage's steps so far (collective; each stage keeps at most
  // kMaxTraceSpans, later ones are dropped), for write_chrome_trace.
  std::vector<metrics::TraceSpan> gather_trace_spans();
  static constexpr size_t kMaxTraceSpans = 100000;

  // One stage holding the whole model (no pipeline, no tensor group: the data-parallel
  // and single-node layouts; `dseek bench train`, the numerics tests); std::logic_error
  // otherwise. Its GptModel; the
  // whole state in layout order, the moments all-gathered from the replicas under ZeRO
  // when `gather_moments` (collective), else this replica's pieces only.
  model::GptModel& whole_model();
  void copy_whole_state(float* params, float* adam_m, float* adam_v, bool gather_moments);
  backend::Backend& backend() { return *backend_; }
  int64_t micro_batch_size() const { return plan_.micro_batch_size; }
  // Whether a step's update is left running into the next forward (host_update.hpp).
  bool overlaps_update() const;
  // Waits for an update still running: before anything reads the parameters.
  void finish_update();

 private:
  struct Chunk;
  using MessageKey = std::tuple<int, int64_t, int64_t>;  // (type, micro-batch, from virtual)
  static MessageKey key_of(const PipelineMessage& message);

  void run_forward(int64_t step, const PipelineOp& op);
  void run_backward(const PipelineOp& op);
  // The step's schedule: every receive posted, the ops run, the sends waited for.
  void run_schedule(int64_t step);
  // The first and the last stage sum the tied wte's gradient (P > 1).
  void sum_tied_wte();
  // Runs `replica`'s share of the batch from now on (its own, or an audited one's):
  // where it starts, and (without a pipeline) the schedule of its micro-batches.
  void take_share(int replica);
  // data.balance = "throughput": new shares from the window's measured speeds (collective).
  void rebalance();
  BatchShares in_units(BatchShares shares) const;  // shares of units, in micro-batches
  // One buffer per message of a step of the current schedule, both directions.
  void make_message_buffers();
  // A range of `chunk`'s gradients goes to its reducer (staged to the host where the
  // plane reads host memory): the before-reduction hook runs on the step's first, the
  // audit hashes each, and in an audit's recomputation it goes no further.
  void hand_over(Chunk& chunk, model::ParamRange range);
  // The SDC audit (pipeline/stage_audit.cpp). The hash of what this rank would hand to
  // the reduction had it trained replica `target`'s slice of `step` (every stage and
  // tensor rank of this replica recomputes together); the loss and the timings of the
  // step in progress are kept, its gradients too with `keep_gradients` (a second
  // auditor's, after the reduction).
  uint64_t recompute_hash(int64_t step, int target, bool keep_gradients);
  // After the reduction, before the update: the data group compares, the world agrees
  // on accusations, second auditors confirm; throws SdcDetected for confirmed ranks.
  void audit_verdict(int64_t step, uint64_t own_hash, uint64_t audit_hash, StepReport& report);
  // Waits for the message an op of `chunk` needs and copies it to `dst`.
  void receive_into(const PipelineMessage& message, int64_t chunk, float* dst);
  void send_from(const PipelineMessage& message, const float* src);
  // A span in a form that travels as doubles: what it was, then when.
  enum class SpanKind { forward, backward, send_activation, send_gradient, recv_activation,
                        recv_gradient, idle };
  struct Span {
    SpanKind kind;
    int64_t micro_batch, chunk;
    double start_us, end_us;
  };
  static constexpr size_t kSpanDoubles = 5;
  void record(SpanKind kind, int64_t micro_batch, int64_t chunk, double start_us, double end_us);
  // The node's trace clock: comparable between the stages' processes on one host, and on
  // the coordinator's clock once the node's measured offset is added (gather_trace_spans).
  double now_us() const { return metrics::trace_now_us(trace_.get()); }
  // A forward or backward from `start_us` to `end_us` on the node trace's compute lane
  // (nothing is built when nobody listens).
  void node_span(const char* name, double start_us, double end_us) const {
    if (trace_ && trace_->spans_wanted()) trace_->record(name, name, metrics::TraceLane::compute, start_us, end_us - start_us);
  }
  // Every chunk's owned gradients through its reducer (ZeRO: this replica's pieces hold
  // the sum), back on the backend, and a refreshed second moment to the optimizer.
  void reduce_over_replicas();
  // The after-reduction hook on the first chunk's first owned run (or piece).
  void run_after_reduction(int64_t step);
  // The replica check of `checked` ("gradients": the owned runs' reduced gradients;
  // "parameters"): hashes every chunk's owned runs and compares over the data group.
  void check_replicas(int64_t step, const char* checked);
  // A chunk's moments into whole-buffer host arrays; under ZeRO the replicas' pieces
  // are all-gathered first (collective over the data group).
  void moments_to_host(Chunk& chunk, float* adam_m, float* adam_v);
  // A checkpoint on a replica other than 0 (ZeRO): its part of those all-gathers only.
  void lend_moment_pieces();
  void add_idle_spans(size_t first_span, double start_us, double end_us);
  // Checkpoints with tensor parallelism (state/stage_sharded_state.cpp): every rank
  // writes its chunks' floats (whole_model_segments: each whole-model float on one rank)
  // into whole-layout buffers filled with -0.0, the exact identity of float addition,
  // and sums over the tensor group, then over the stages, assemble the state bit for bit
  // (collective; stage 0's tensor rank 0 passes the buffers, the others null). Restore
  // takes every owned float (owned_segments) out of the whole state.
  void gather_sharded_state_to_first(float* params, float* adam_m, float* adam_v);
  void restore_sharded_state(const float* params, const float* adam_m, const float* adam_v,
                             int64_t optimizer_steps);

  config::JobConfig config_;
  BatchSource& batches_;
  PipelineLinks& links_;
  ReplicaGroup* replicas_;
  model::TensorGroup* tensor_;  // null: one tensor rank
  std::unique_ptr<TimedTensorGroup> timed_tensor_;  // tensor_ as the chunks see it
  bool zero_;                   // ZeRO inside the data group
  PipelinePlan plan_;
  model::ParamLayout whole_layout_;
  PipelineSchedule schedule_;
  int64_t stage_;
  std::unique_ptr<backend::Backend> backend_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::unique_ptr<optim::LossScaler> loss_scaler_;  // fp8 only
  optim::LrSchedule lr_schedule_;
  size_t activation_floats_;  // one micro-batch's (B, T, C)
  int64_t slice_first_ = 0;   // the replica's first sequence of the global batch
  int64_t global_micro_batches_ = 0;  // the global batch's, over every replica
  // The micro-batches of each replica (layout/batch_shares.hpp): even, or under
  // data.balance = "throughput" re-shared every rebalance_every steps by the forward
  // speed each replica measured since the last (forward_ms_: this step's forwards).
  BatchShares shares_;
  int64_t share_unit_ = 1;  // micro-batches a share is made of (interleaved: P)
  bool by_throughput_ = false;
  int64_t window_steps_ = 0, window_micro_batches_ = 0;
  double window_forward_ms_ = 0.0, forward_ms_ = 0.0;
  std::vector<int32_t> inputs_, targets_;
  // Per message of a step: its buffer, and the handle of its pending transfer.
  std::map<MessageKey, MessageBuffer> recv_buffers_, send_buffers_;
  std::map<MessageKey, PipelineLinks::Handle> pending_recvs_;
  std::vector<PipelineLinks::Handle> pending_sends_;
  // The step in progress.
  double loss_ = 0.0;
  double busy_ms_ = 0.0, recv_wait_ms_ = 0.0;
  std::vector<Span> spans_;
  std::shared_ptr<const metrics::TraceRecorder> trace_;
  GradientHook after_reduction_;
  GradientHook before_reduction_;
  GradientHook in_recomputation_;
  DisagreementHook on_disagreement_;
  // The step in progress and where its batch starts (slice_first_, or an audited
  // replica's slice in a recomputation).
  int64_t current_step_ = 0;
  int64_t batch_first_ = 0;
  bool before_reduction_pending_ = false;  // the hook has not run in this step yet
  bool in_recomputation_pending_ = false;  // ... in this recomputation yet
  // The SDC audit: whether it runs, whether this is a recomputation (nothing reaches the
  // reducers), and the hash of what was handed over so far.
  bool audits_ = false;
  bool recomputing_ = false;
  bool hashing_ = false;
  uint64_t handed_over_hash_ = 0;
  // Without a pipeline: each chunk's ranges reach its reducer as its last backward of
  // the step finishes them (not under reduces_unscaled_, which decides first).
  bool overlaps_reduction_ = false;
  double data_wait_ms_ = 0.0;
  // An update overlapped into this step: the gradients it reads are zeroed only after
  // the step's first forward has waited for it.
  bool zero_grads_after_forward_ = false;
  bool checks_replicas_ = false;  // replicas and train.replica_check_every > 0
  bool reduces_unscaled_ = false;  // loss scaling into reducers with state (compression)
  std::vector<float> moments_scratch_;  // copy_owned_state's (m, v of the largest chunk)
};

}  // namespace dseek::train
