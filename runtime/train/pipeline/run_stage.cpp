// Implementation of run_stage.hpp.
#include "runtime/train/pipeline/run_stage.hpp"

#include <unistd.h>

#include <chrono>
#include <memory>
#include <sstream>

#include "runtime/data/token_dataset.hpp"
#include "runtime/metrics/chrome_trace.hpp"
#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/train/batch_source.hpp"
#include "runtime/train/run_steps.hpp"
#include "runtime/train/state/checkpointing.hpp"
#include "runtime/train/layout/parallel_groups.hpp"
#include "runtime/train/pipeline/stage.hpp"
#include "runtime/train/replica_check.hpp"
#include "runtime/train/run_events.hpp"
#include "runtime/util/sha256.hpp"

namespace dseek::train {

namespace {
// The rank layout as every rank prints and logs it at start: one progress line per rank
// of the world, and a parallel_layout event with this rank's coordinates and the layout.
void report_parallel_layout(const ParallelGroups& groups, int world_rank,
                            metrics::EventLog& events, metrics::Progress& progress) {
  const std::string text = groups.describe();
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) progress.line(line);
  const RankCoordinates me = groups.coordinates(world_rank);
  events.emit("parallel_layout",
              util::JsonLine().add("data", groups.data_size()).add("pipeline", groups.pipeline_size())
                  .add("tensor", groups.tensor_size()).add("world", groups.world())
                  .add("rank", world_rank).add("replica", me.data).add("stage", me.stage)
                  .add("tensor_rank", me.tensor).add("layout", text));
}

bool plans_fault(const config::JobConfig& config, config::FaultKind kind) {
  for (const auto& fault : config.faults)
    if (fault.kind == kind) return true;
  return false;
}

std::string format_costs(const std::vector<double>& costs) {
  std::string text;
  for (double cost : costs) {
    if (!text.empty()) text += ' ';
    char value[32];
    std::snprintf(value, sizeof value, "%.3f", cost);
    text += value;
  }
  return text;
}

// The plan as printed and logged: schedule, split, and for a balanced split the costs
// it was chosen on.
util::JsonLine plan_event(const PipelinePlan& plan, const config::JobConfig& config) {
  util::JsonLine event;
  event.add("schedule", config::name_string(plan.shape.kind))
      .add("stages", plan.shape.stages).add("micro_batches", plan.shape.micro_batches)
      .add("micro_batch_size", plan.micro_batch_size)
      .add("virtual_stages", plan.shape.chunks())
      .add("partition", config::name_of(config.parallel.partition))
      .add("ranges", describe_partition(plan.ranges))
      .add("bubble_theory", theoretical_bubble(plan.shape));
  if (!plan.stage_costs.empty()) {
    event.add("embedding_ms", plan.costs.embedding).add("head_ms", plan.costs.head)
        .add("block_ms", format_costs(plan.costs.blocks)).add("stage_cost_ms", format_costs(plan.stage_costs));
    if (!plan.costs.recompute.empty())
      event.add("recompute", plan.costs.recompute_policy.text()).add("block_recompute_ms", format_costs(plan.costs.recompute));
  }
  return event;
}
}  // namespace

PipelineRunSummary run_pipeline_stage(const config::JobConfig& config, const RunOptions& options,
                                      PipelineLinks& links, ReplicaGroup* replicas,
                                      model::TensorGroup* tensor, StageMemorySync* memory_sync) {
  const auto& t = config.train;
  std::unique_ptr<metrics::EventLog> own_events;
  metrics::EventLog& events = open_run_events(config, options, own_events);
  metrics::Progress progress = open_run_progress(config, options);
  // The first and the last stage read the training batches (tokens, targets).
  const bool reads_batches = links.stage() == 0 || links.stage() == links.stages() - 1;
  TrainingBatches train_batches = open_training_batches(config, options, reads_batches);
  auto val_batches = open_validation(config, progress);

  // The profile of a balanced split runs on stage 0 on the backend (device, threads) it
  // will train with.
  auto profile_backend = options.backend ? options.backend(config) : make_runtime_backend(config);
  PipelinePlan plan = plan_pipeline(config, links, *profile_backend, replicas, tensor);
  profile_backend.reset();
  const bool pipelined = plan.shape.stages > 1;
  if (pipelined) {
    events.emit("pipeline_plan", plan_event(plan, config));
    progress.line("dseek pipeline: " + config::name_string(plan.shape.kind) + ", " +
                std::to_string(plan.shape.stages) + " stages x " +
                std::to_string(plan.shape.chunks()) + " chunks, " +
                std::to_string(plan.shape.micro_batches) + " micro-batches of " +
                std::to_string(plan.micro_batch_size) + "; " + config::name_string(config.parallel.partition) +
                " split " + describe_partition(plan.ranges) +
                (plan.stage_costs.empty() ? "" : " (stage cost ms " + format_costs(plan.stage_costs) + ")"));
  }

  // Local, or the node's pipeline_stage actor (options.pipeline_stage): one loop drives either.
  PipelineStageSpec spec{config, train_batches.source(), links, plan, replicas, tensor,
                         options.backend, options.optimizer_shards};
  spec.trace = options.trace;
  // Only a job that corrupts a gradient hands the hook the reduced gradients (on a device
  // it costs a copy each step); its `slow` sleep runs as each step starts (fixed_world_steps).
  if (plans_fault(config, config::FaultKind::corrupt_gradient)) {
    spec.after_reduction = options.after_reduction;
    spec.before_reduction = options.before_reduction;
    spec.in_recomputation = options.in_recomputation;
  }
  // Every replica reports a disagreement; the one in the minority then throws
  // ReplicaMismatch out of the step and leaves the job.
  const int64_t stage_index = links.stage();
  spec.on_disagreement = [&options, &events, replicas, stage_index](
                             int64_t step, const std::string& checked, const std::vector<int>& off) {
    ReplicaDisagreement disagreement{step, checked, off, false};
    for (int r : off) disagreement.this_replica = disagreement.this_replica || r == replicas->replica();
    if (options.report_disagreement) options.report_disagreement(disagreement);
    else events.emit("sdc_detected", sdc_detected_fields(disagreement).add("stage", stage_index));
  };
  const auto stage = make_pipeline_stage(options.pipeline_stage, spec);
  PipelineStage& trainer = *stage;
  const PipelineStageInfo& info = trainer.info();
  const ParallelGroups layout(info.replicas, static_cast<int>(plan.shape.stages), info.tensor_ranks);
  if (layout.world() > 1)
    report_parallel_layout(layout,
                           layout.rank_of({info.replica, static_cast<int>(info.stage), info.tensor_rank}),
                           events, progress);
  const double theory = theoretical_bubble(plan.shape);
  // How this rank's lines start: its stage in a pipeline, else its tensor rank, if any.
  const std::string label = pipelined ? "stage " + std::to_string(info.stage) + " "
                            : info.tensor_ranks > 1 ? "tensor rank " + std::to_string(info.tensor_rank) + " "
                                                    : "";
  util::JsonLine started;
  started.add("config", config.source).add("pid", static_cast<int64_t>(::getpid()))
      .add("stage", info.stage).add("stages", plan.shape.stages)
      .add("replica", info.replica).add("replicas", info.replicas)
      .add("tensor_rank", info.tensor_rank).add("tensor", info.tensor_ranks)
      .add("shard_params", static_cast<uint64_t>(info.owned_params))
      .add("zero", info.zero)
      .add("optimizer_params", static_cast<uint64_t>(info.optimizer_params))
      .add("optimizer", info.optimizer)
      .add("params", static_cast<uint64_t>(trainer.whole_layout().total()))
      .add("dim", config.model.dim).add("layers", config.model.layers)
      .add("heads", config.model.heads).add("context", config.model.context)
      .add("vocab", config.model.vocab).add("batch_size", t.batch_size)
      .add("micro_batch_size", plan.micro_batch_size).add("steps", t.steps)
      .add("threads", t.threads).add("data", config.data.dir)
      .add("train_tokens", train_batches.dataset->dataset().num_tokens())
      .add("host_memory", info.host_memory).add("offload_overlap", info.overlaps_update)
      .add("sdc_audit_every", info.sdc_audit ? t.sdc_audit_every : int64_t{0});
  if (replicas != nullptr)
    started.add("dp_rank", info.replica).add("dp_size", info.replicas)
        .add("compression", config::name_of(config.comm.compression));
  events.emit("run_started", started);
  progress.line("dseek: " + std::to_string(trainer.whole_layout().total()) + " parameters, " +
                  std::to_string(train_batches.dataset->dataset().num_tokens()) +
                  " training tokens, " + std::to_string(t.steps) + " steps of " +
                  std::to_string(t.batch_size) + " x " + std::to_string(config.model.context) +
                  " tokens; events in " + events.path().string());
  if (info.shards_optimizer_state)
    progress.line((label.empty() ? "replica " + std::to_string(info.replica) + " "
                                 : label + (pipelined ? "tensor rank " + std::to_string(info.tensor_rank) : "")) +
                  ": optimizer state sharded over the data group (ZeRO " +
                  std::to_string(config.parallel.zero) + ", " + std::to_string(info.replicas) +
                  " replicas): AdamW moments of " + std::to_string(info.optimizer_params) +
                  " parameters here (the rank owns " + std::to_string(info.owned_params) +
                  "), updated by " + info.optimizer);
  report_model_memory(events, progress, label, config.model, info.activation_memory);

  Checkpointing checkpoints(config, options.run_dir, trainer, events, progress,
                            options.checkpoint_sink);
  // From memory when the ranks hold a step of this layout (every rank takes the same
  // branch: the agreement is collective), else the checkpoint (checkpoint.resume).
  const StagePosition position = position_of(info);
  StageMemory* memory = memory_sync != nullptr ? options.stage_memory : nullptr;
  int64_t first_step = -1;
  if (memory != nullptr) {
    const MemoryRecovery recovery = memory_sync->recover(*memory, position, trainer);
    if (options.memory_recovery != nullptr) *options.memory_recovery = recovery;
    if (recovery.steps_done >= 0) {
      first_step = recovery.steps_done;
      events.emit("resumed", util::JsonLine().add("step", first_step)
                                 .add("source", std::string(recovery.from_peer ? "peer" : "memory")));
      progress.line(label + "resumed from " + (recovery.from_peer ? "a replica's" : "its own") +
                    " memory at step " + std::to_string(first_step));
    }
  }
  if (first_step < 0) first_step = checkpoints.resume();
  const bool keeps_memory = memory != nullptr && why_no_memory_recovery(config).empty();

  PipelineRunSummary result;
  StepFunctions steps;
  steps.train_step = [&](int64_t step) {
    const PipelineStepReport r = trainer.train_step(step);
    if (keeps_memory) memory_sync->keep(*memory, step + 1, position, trainer, events);
    util::JsonLine step_event = step_event_fields(step + 1, r.step);
    step_event.add("stage", info.stage).add("tensor_rank", info.tensor_rank)
        .add("replica", info.replica);
    if (pipelined)
      step_event.add("bubble", r.bubble).add("bubble_theory", theory)
          .add("busy_ms", r.busy_ms).add("pipeline_ms", r.pipeline_ms);
    if (replicas != nullptr) add_traffic_fields(step_event, r.step);
    events.emit("step", step_event);
    report_if_skipped(events, progress, r.step);
    return r.step;
  };
  if (val_batches)
    steps.evaluate = [&](const std::atomic<bool>* stop_request, int64_t& batches_done) {
      return trainer.evaluate(*val_batches, t.eval_batches, stop_request, &batches_done);
    };
  steps.sum_votes = [&trainer](std::span<double> votes) {
    const std::vector<double> sums = trainer.sum_over_world(std::vector<double>(votes.begin(), votes.end()));
    std::copy(sums.begin(), sums.end(), votes.begin());
  };
  std::string stop_reason;
  result.run = run_steps(config, options, events, progress, checkpoints, first_step, steps,
                         stop_reason);
  RunSummary& summary = result.run;
  result.final_params = trainer.gather_params();
  summary.params_sha256 =
      util::sha256_hex(result.final_params.data(), result.final_params.size() * sizeof(float));
  // Replica 0's spans only, of tensor rank 0 (the other ranks run the same schedule).
  const auto spans = pipelined ? trainer.gather_trace_spans() : std::vector<metrics::TraceSpan>{};
  if (pipelined && info.stage == 0 && info.replica == 0 && info.tensor_rank == 0) {
    std::vector<std::string> names;
    for (int64_t s = 0; s < plan.shape.stages; ++s) names.push_back("stage " + std::to_string(s));
    const auto trace_path = options.run_dir / "trace.json";
    metrics::write_chrome_trace(trace_path, spans, names);
    events.emit("trace_written", util::JsonLine().add("path", trace_path.string())
                                     .add("spans", static_cast<uint64_t>(spans.size())));
  }
  emit_run_end(events, summary, stop_reason);
  progress.line(run_end_line(label, summary, true));
  return result;
}

}  // namespace dseek::train
