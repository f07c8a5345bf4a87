// Training of one pipeline stage: its model chunks (one GptModel per virtual stage it
// holds, pipeline_plan.hpp), the schedule's ops (pipeline_schedule.hpp) executed with
// activations and their gradients moving over PipelineLinks, then the step's update.
//
// A step: every receive of the step is posted first (in the order each peer sends), then
// the ops run in schedule order, each micro-batch's activations in a slot of its chunk
// until its backward. The loss gradient is scaled as the single-node trainer scales it
// (1 / (tokens per micro-batch x micro-batches)), so the accumulated gradients are the
// single node's up to summation order. Then: the first and the last stage sum the tied
// wte's gradient (embedding + head contributions) so both hold the whole; the global
// norm adds every stage's squares (wte counted once, by the first stage); each chunk's
// AdamW updates the ranges it owns with that norm and the shared LR schedule, the first
// and last stage updating their wte copies identically.
//
// Each step also measures the stage's bubble: 1 - (forward + backward compute) / (time
// from the first op to the moment every stage drained the pipeline), and keeps trace
// spans (forward, backward, send, recv, idle) for RUN_DIR/trace.json.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/config/job_config.hpp"
#include "runtime/metrics/chrome_trace.hpp"
#include "runtime/model/gpt_model.hpp"
#include "runtime/optim/adamw.hpp"
#include "runtime/optim/lr_schedule.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/pipeline_links.hpp"
#include "runtime/train/pipeline_plan.hpp"
#include "runtime/train/trainer.hpp"

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
  // Every stage of `links` constructs one with the same config and plan. Builds the
  // backend (train.threads) itself.
  PipelineStageTrainer(const config::JobConfig& config, BatchSource& batches,
                       PipelineLinks& links, PipelinePlan plan);
  ~PipelineStageTrainer();
  PipelineStageTrainer(const PipelineStageTrainer&) = delete;
  PipelineStageTrainer& operator=(const PipelineStageTrainer&) = delete;

  // Optimizer step `step` (0-based), collective over the stages.
  PipelineStepReport train_step(int64_t step);
  // Mean loss over `eval_batches` batches of `batches` (forward only), on every stage.
  double evaluate(BatchSource& batches, int64_t eval_batches);
  // The whole model's parameters (layout order) on every stage: collective.
  std::vector<float> gather_params();
  // Parameters this stage owns (its blocks; the embedding, the head and wte at the ends).
  size_t owned_params() const;
  // The activation buffers of this stage's chunks together.
  model::ActivationMemory activation_memory() const;

  const PipelinePlan& plan() const { return plan_; }
  int64_t stage() const { return stage_; }
  // The trace spans of every stage's steps so far (collective; each stage keeps at most
  // kMaxTraceSpans, later ones are dropped), for write_chrome_trace.
  std::vector<metrics::TraceSpan> gather_trace_spans();
  static constexpr size_t kMaxTraceSpans = 100000;

 private:
  struct Chunk;
  using MessageKey = std::tuple<int, int64_t, int64_t>;  // (type, micro-batch, from virtual)
  static MessageKey key_of(const PipelineMessage& message);

  void run_forward(int64_t step, const PipelineOp& op);
  void run_backward(const PipelineOp& op);
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
  void add_idle_spans(size_t first_span, double start_us, double end_us);

  config::JobConfig config_;
  BatchSource& batches_;
  PipelineLinks& links_;
  PipelinePlan plan_;
  PipelineSchedule schedule_;
  int64_t stage_;
  std::unique_ptr<backend::Backend> backend_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  optim::LrSchedule lr_schedule_;
  size_t activation_floats_;  // one micro-batch's (B, T, C)
  std::vector<int32_t> inputs_, targets_;
  // Per message of a step: its buffer, and the handle of its pending transfer.
  std::map<MessageKey, std::vector<float>> recv_buffers_, send_buffers_;
  std::map<MessageKey, PipelineLinks::Handle> pending_recvs_;
  std::vector<PipelineLinks::Handle> pending_sends_;
  // The step in progress.
  double loss_ = 0.0;
  double busy_ms_ = 0.0, recv_wait_ms_ = 0.0;
  std::vector<Span> spans_;
};

}  // namespace dseek::train
