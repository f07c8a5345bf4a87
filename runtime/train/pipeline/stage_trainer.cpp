// Implementation of stage_trainer.hpp: the step (ops, update), evaluation and
// the gathering of parameters; the trace spans are in pipeline/stage_trace.cpp.
#include "runtime/train/pipeline/stage_trainer.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string_view>

#include "runtime/metrics/trace_spans.hpp"
#include "runtime/optim/adamw_settings.hpp"
#include "runtime/train/gather_host_shards.hpp"
#include "runtime/train/prefetch_queue.hpp"
#include "runtime/optim/loss_scaler_of.hpp"
#include "runtime/train/pipeline/stage_chunk.hpp"
#include "runtime/train/replica_check.hpp"
#include "runtime/train/sdc_audit.hpp"
#include "runtime/train/pipeline/timed_tensor_group.hpp"

namespace dseek::train {

namespace {
using Clock = std::chrono::steady_clock;

}  // namespace

PipelineStageTrainer::MessageKey PipelineStageTrainer::key_of(const PipelineMessage& message) {
  return {static_cast<int>(message.type), message.micro_batch, message.from_virtual};
}

PipelineStageTrainer::PipelineStageTrainer(const config::JobConfig& config, BatchSource& batches,
                                           PipelineLinks& links, PipelinePlan plan,
                                           ReplicaGroup* replica_group,
                                           model::TensorGroup* tensor_group,
                                           const BackendFactory& make_backend,
                                           const OptimizerShardsFactory& optimizer_shards)
    : config_(config), batches_(batches), links_(links), replicas_(replica_group),
      tensor_(tensor_group != nullptr && tensor_group->size() > 1 ? tensor_group : nullptr),
      timed_tensor_(tensor_ != nullptr ? std::make_unique<TimedTensorGroup>(*tensor_) : nullptr),
      zero_(config.parallel.zero > 0 && replica_group != nullptr && replica_group->replicas() > 1),
      plan_(std::move(plan)), whole_layout_(shape_of(config.model)),
      schedule_(plan_.shape), stage_(links.stage()),
      backend_(make_backend ? make_backend(config) : make_runtime_backend(config)) {
  const auto& t = config.train;
  loss_scaler_ = optim::loss_scaler_of(config);  // fp8 only
  const int64_t P = plan_.shape.stages;
  if (P < 1 || links.stages() != P)
    throw std::invalid_argument("PipelineStageTrainer: " + std::to_string(links.stages()) +
                                " linked stages for parallel.pipeline = " + std::to_string(P));
  const model::GptShape shape = shape_of(config.model);
  const int64_t B = plan_.micro_batch_size;
  activation_floats_ = static_cast<size_t>(B * shape.context * shape.dim);
  by_throughput_ = config.data.balance == config::Balance::throughput;
  if (!by_throughput_) {
    const ReplicaSlice slice = replica_slice(t.batch_size, replicas(), replica());
    if (slice.size != B * plan_.shape.micro_batches)
      throw std::invalid_argument("PipelineStageTrainer: " + std::to_string(plan_.shape.micro_batches) +
                                  " micro-batches of " + std::to_string(B) +
                                  " do not make a replica's slice of " +
                                  std::to_string(slice.size) + " sequences");
  }
  global_micro_batches_ = t.batch_size / B;
  share_unit_ = plan_.shape.kind == ScheduleKind::interleaved ? P : 1;
  shares_ = in_units(even_shares(global_micro_batches_ / share_unit_, replicas()));
  take_share(replica());
  slice_first_ = batch_first_;
  // Under throughput shares a replica's count changes: the activation slots are those of
  // the largest share (1F1B and interleaved keep a bounded number in flight).
  const int64_t largest_share = global_micro_batches_ - (replicas() - 1) * share_unit_;
  const PipelineSchedule widest =
      by_throughput_ ? PipelineSchedule(ScheduleShape{plan_.shape.kind, P, largest_share,
                                                      plan_.shape.virtual_stages})
                     : schedule_;
  inputs_.resize(static_cast<size_t>(B * shape.context));
  targets_.resize(inputs_.size());
  // With replicas, compression may give AdamW its second moment (optim/adamw_settings.hpp).
  const optim::AdamWSettings settings = optim::adamw_settings(config, replicas() > 1);
  checks_replicas_ = replicas() > 1 && t.replica_check_every > 0;
  audits_ = replicas() >= kSdcAuditMinReplicas && t.sdc_audit_every > 0 &&
            t.precision != config::Precision::fp8;
  const int64_t chunks = plan_.shape.chunks();
  for (int64_t c = 0; c < chunks; ++c) {
    // Slots: the most micro-batches of this chunk between forward and backward.
    int64_t in_flight = 0, slots = 1;
    for (const PipelineOp& op : widest.ops(stage_)) {
      if (op.chunk != c) continue;
      in_flight += op.type == OpType::forward ? 1 : -1;
      slots = std::max(slots, in_flight);
    }
    auto chunk = std::make_unique<Chunk>();
    chunk->virtual_stage = schedule_.virtual_stage(stage_, c);
    ChunkSpec spec;
    spec.shape = shape;
    spec.range = plan_.ranges[static_cast<size_t>(chunk->virtual_stage)];
    spec.micro_batch_size = B;
    spec.activation_slots = slots;
    spec.recompute = recompute_of(config.model);
    spec.seed = static_cast<uint64_t>(t.seed);
    spec.init_std = config.model.init_std;
    spec.precision = t.precision;
    spec.fp8 = {t.fp8_amax_history, t.fp8_margin};
    // The data set's vocabulary, where model.vocab pads it: padded ids stay out of the loss.
    if (const int64_t data_vocab = batches.vocab(); data_vocab > 0 && data_vocab < shape.vocab)
      spec.real_vocab = data_vocab;
    chunk->model = std::make_unique<PipelineChunk>(spec, *backend_, timed_tensor_.get());
    chunk->owned = chunk->model->owned_ranges();
    chunk->norm_ranges = chunk->model->norm_ranges();
    chunk->whole_segments = chunk->model->whole_model_segments();
    chunk->grads_host = std::make_unique<HostStaging>(*backend_, chunk->model->grads(),
                                                      chunk->model->buffer_floats());
    std::vector<model::ParamRange> sorted = chunk->owned;
    std::sort(sorted.begin(), sorted.end(),
              [](const model::ParamRange& a, const model::ParamRange& b) { return a.offset < b.offset; });
    for (const model::ParamRange& r : sorted) {
      if (!chunk->owned_runs.empty() &&
          chunk->owned_runs.back().offset + chunk->owned_runs.back().count == r.offset)
        chunk->owned_runs.back().count += r.count;
      else
        chunk->owned_runs.push_back(r);
    }
    if (replicas() > 1) {
      // The data group reduces the chunk's owned ranges, in backward order, in the
      // gradients' host staging, or in the backend's buffer where the plane reads it.
      chunk->reducer = replicas_->make_gradient_reducer();
      chunk->reduces_backend_memory = chunk->reducer->reduces_backend_memory();
      if (chunk->reduces_backend_memory) chunk->reducer->bind_backend(*backend_);
      chunk->reducer->attach(chunk->reduces_backend_memory ? chunk->model->grads()
                                                           : chunk->grads_host->host(),
                             chunk->model->buffer_floats(), chunk->owned);
    }
    // A whole model's AdamW runs over its buffer in layout order (one run), as the
    // offload's chunks go; under ZeRO over this replica's pieces.
    model::GptModel* whole = chunk->model->whole_model();
    chunk->updated = zero_ ? chunk->reducer->shard() : chunk->owned;
    if (!zero_ && whole != nullptr) chunk->updated = chunk->owned_runs;
    chunk->optimizer = chunk->model->make_optimizer(
        *backend_, settings, optimizer_shards,
        zero_ || whole != nullptr ? &chunk->updated : nullptr);
    for (const model::ParamRange& r : chunk->updated) chunk->optimizer_floats += r.count;
    chunk->params_host = std::make_unique<HostStaging>(*backend_, chunk->model->params(),
                                                       chunk->model->buffer_floats());
    // The update overlaps the next forward (host_update.hpp) for a whole model on one
    // stage, updated whole (ZeRO's all-gather needs the whole update first) by an
    // optimizer on other threads that reports chunks.
    std::vector<model::ParamRange> overlap_chunks;
    if (t.offload_overlap && P == 1 && chunks == 1 && whole != nullptr && !zero_ &&
        chunk->optimizer->updates_on_host() && chunk->optimizer->updates_in_chunks()) {
      overlap_chunks = whole->gradient_ranges_in_backward_order();
      std::reverse(overlap_chunks.begin(), overlap_chunks.end());  // wte+wpe, blocks, lnf
    }
    chunk->update = std::make_unique<HostUpdate>(*chunk->optimizer, *chunk->params_host,
                                                 *chunk->grads_host, std::move(overlap_chunks));
    if (chunk->update->overlapped())
      whole->set_before_params_read(
          [update = chunk->update.get()](model::ParamRange range) { update->await(range); });
    for (const PipelineOp& op : schedule_.ops(stage_))
      if (op.chunk == c && op.type == OpType::backward) chunk->last_backward = op.micro_batch;
    for (int64_t s = slots - 1; s >= 0; --s) chunk->free_slots.push_back(s);
    // The stage runs one op at a time: its chunks recompute in one scratch set.
    if (!chunks_.empty() && chunk->model->range().end > chunk->model->range().begin &&
        chunks_.front()->model->range().end > chunks_.front()->model->range().begin)
      chunk->model->share_recompute_scratch(*chunks_.front()->model);
    chunks_.push_back(std::move(chunk));
  }
  reduces_unscaled_ = loss_scaler_ != nullptr && chunks_.front()->reducer != nullptr &&
                      chunks_.front()->reducer->carries_state_between_steps();
  overlaps_reduction_ = P == 1 && replicas() > 1 && !reduces_unscaled_;
  lr_schedule_ = optim::LrSchedule{t.lr, t.min_lr, t.warmup_steps, t.steps};
  make_message_buffers();
}

void PipelineStageTrainer::make_message_buffers() {
  // A buffer per message of a step, in both directions, in the memory the links move.
  recv_buffers_.clear();
  send_buffers_.clear();
  for (int64_t peer = 0; peer < plan_.shape.stages; ++peer) {
    if (peer == stage_) continue;
    for (const auto& message : schedule_.message_order(peer, stage_))
      recv_buffers_.try_emplace(key_of(message), *backend_, links_, activation_floats_);
    for (const auto& message : schedule_.message_order(stage_, peer))
      send_buffers_.try_emplace(key_of(message), *backend_, links_, activation_floats_);
  }
}

BatchShares PipelineStageTrainer::in_units(BatchShares shares) const {
  for (int64_t& m : shares.micro_batches) m *= share_unit_;
  return shares;
}

// An update left running writes into the chunks' buffers until it ends (HostUpdate's
// destructor waits); the reducers may still be reading them if a step was cut short.
PipelineStageTrainer::~PipelineStageTrainer() {
  for (auto& chunk : chunks_) {
    chunk->update.reset();
    if (chunk->reducer) chunk->reducer->detach();
  }
}

bool PipelineStageTrainer::overlaps_update() const { return chunks_.front()->update->overlapped(); }

void PipelineStageTrainer::finish_update() {
  for (auto& chunk : chunks_) chunk->update->finish();
}

model::GptModel& PipelineStageTrainer::whole_model() {
  model::GptModel* model = chunks_.size() == 1 && plan_.shape.stages == 1
                               ? chunks_.front()->model->whole_model() : nullptr;
  if (model == nullptr)
    throw std::logic_error("PipelineStageTrainer: the whole model lives on one stage only "
                           "without a pipeline and a tensor group");
  return *model;
}

void PipelineStageTrainer::copy_whole_state(float* params, float* adam_m, float* adam_v,
                                            bool gather_moments) {
  Chunk& chunk = *chunks_.front();
  const model::GptModel& model = whole_model();
  finish_update();
  backend_->copy_to_host(params, chunk.model->params(), model.num_params() * sizeof(float));
  if (gather_moments) {
    moments_to_host(chunk, adam_m, adam_v);
  } else {
    chunk.optimizer->moments_to_host(adam_m, adam_v);
  }
}

size_t PipelineStageTrainer::owned_params() const {
  size_t count = 0;
  for (const auto& chunk : chunks_) {
    for (const auto& range : chunk->norm_ranges.local) count += range.count;
    for (const auto& range : chunk->norm_ranges.group_split) count += range.count;
  }
  return count;
}

std::string PipelineStageTrainer::optimizer_description() const {
  return chunks_.front()->optimizer->describe();
}

size_t PipelineStageTrainer::optimizer_params() const {
  size_t count = 0;
  for (const auto& chunk : chunks_) count += chunk->optimizer_floats;
  return count;
}

model::ActivationMemory PipelineStageTrainer::activation_memory() const {
  model::ActivationMemory total;
  for (const auto& chunk : chunks_) {
    const model::ActivationMemory& m = chunk->model->activation_memory();
    total.kept += m.kept;
    total.recompute += m.recompute;
    total.backward += m.backward;
  }
  return total;
}

void PipelineStageTrainer::receive_into(const PipelineMessage& message, int64_t chunk, float* dst) {
  const MessageKey key = key_of(message);
  const double start = now_us();
  links_.wait(pending_recvs_.at(key));
  pending_recvs_.erase(key);
  const double end = now_us();
  recv_wait_ms_ += (end - start) / 1000.0;
  record(message.type == OpType::forward ? SpanKind::recv_activation : SpanKind::recv_gradient,
         message.micro_batch, chunk, start, end);
  recv_buffers_.at(key).copy_into(dst);
}

void PipelineStageTrainer::send_from(const PipelineMessage& message, const float* src) {
  const double start = now_us();
  pending_sends_.push_back(send_buffers_.at(key_of(message)).send(src, schedule_.destination(message)));
  record(message.type == OpType::forward ? SpanKind::send_activation : SpanKind::send_gradient,
         message.micro_batch, schedule_.chunk_of(message.from_virtual), start, now_us());
}

void PipelineStageTrainer::run_forward(int64_t step, const PipelineOp& op) {
  Chunk& chunk = *chunks_[static_cast<size_t>(op.chunk)];
  PipelineChunk& model = *chunk.model;
  if (chunk.free_slots.empty())
    throw std::logic_error("pipeline stage: no free activation slot (schedule and slots disagree)");
  const int64_t slot = chunk.free_slots.back();
  chunk.free_slots.pop_back();
  chunk.slot_of_micro_batch[op.micro_batch] = slot;
  model.select_activation_slot(slot);
  if (const auto input = schedule_.input_of(stage_, op)) receive_into(*input, op.chunk, model.stage_input());
  const int64_t B = plan_.micro_batch_size;
  const int64_t T = config_.model.context;
  if (model.has_embedding() || model.has_head()) {
    const double data_start = now_us();
    batches_.fill(static_cast<uint64_t>(step), config_.train.batch_size,
                  batch_first_ + op.micro_batch * B, B, T, inputs_.data(), targets_.data());
    data_wait_ms_ += (now_us() - data_start) / 1000.0;
  }
  const double start = now_us();
  const double loss = model.forward(inputs_.data(), targets_.data(), B, T);
  const double end = now_us();
  node_span("forward", start, end);
  if (zero_grads_after_forward_) {
    // The forward has read every chunk of the overlapped update: it is done but for its
    // answers, and the gradients it read may go.
    finish_update();
    for (auto& c : chunks_) c->model->zero_grads();
    zero_grads_after_forward_ = false;
  }
  busy_ms_ += (end - start) / 1000.0;
  if (!recomputing_) forward_ms_ += (end - start) / 1000.0;
  record(SpanKind::forward, op.micro_batch, op.chunk, start, end);
  if (model.has_head()) loss_ += loss / static_cast<double>(global_micro_batches_);
  if (const auto output = schedule_.output_of(stage_, op)) send_from(*output, model.stage_output());
}

void PipelineStageTrainer::run_backward(const PipelineOp& op) {
  Chunk& chunk = *chunks_[static_cast<size_t>(op.chunk)];
  PipelineChunk& model = *chunk.model;
  const auto slot = chunk.slot_of_micro_batch.find(op.micro_batch);
  if (slot == chunk.slot_of_micro_batch.end())
    throw std::logic_error("pipeline stage: backward of a micro-batch without its forward");
  model.select_activation_slot(slot->second);
  if (const auto input = schedule_.input_of(stage_, op)) receive_into(*input, op.chunk, model.stage_output_grad());
  const double tokens = static_cast<double>(plan_.micro_batch_size * config_.model.context);
  const float dloss = 1.0f / static_cast<float>(tokens) /
                      static_cast<float>(global_micro_batches_) *
                      (loss_scaler_ ? loss_scaler_->scale() : 1.0f);
  // Without a pipeline the step's last backward hands each finished range to the
  // reducer at once (staged to the host first where the plane reads host memory).
  model::GradientsReady on_ready;
  if (overlaps_reduction_ && op.micro_batch == chunk.last_backward)
    on_ready = [this, &chunk](model::ParamRange range) { hand_over(chunk, range); };
  const double start = now_us();
  model.backward(dloss, on_ready);
  const double end = now_us();
  node_span("backward", start, end);
  busy_ms_ += (end - start) / 1000.0;
  record(SpanKind::backward, op.micro_batch, op.chunk, start, end);
  chunk.free_slots.push_back(slot->second);
  chunk.slot_of_micro_batch.erase(slot);
  if (const auto output = schedule_.output_of(stage_, op)) send_from(*output, model.stage_input_grad());
}

PipelineStepReport PipelineStageTrainer::train_step(int64_t step) {
  const auto step_start = Clock::now();
  PipelineStepReport report;
  report.step.step = step;
  report.step.lr = lr_schedule_.at(step);
  if (by_throughput_ && window_steps_ == config_.data.rebalance_every) rebalance();
  loss_ = busy_ms_ = recv_wait_ms_ = data_wait_ms_ = forward_ms_ = 0.0;
  note_prefetch_queue_depth(-1);  // what a prefetching source says at this step's first batch
  if (timed_tensor_) timed_tensor_->take_spent_ms();
  current_step_ = step;
  // An SDC audit first recomputes another replica's slice (waiting for an overlapped
  // update: it reads the parameters), then the step is trained as any other.
  const bool audit = audits_ && sdc_audit_due(config_.train.sdc_audit_every, step);
  uint64_t audit_hash = 0;
  double audit_ms = 0.0;
  if (audit) {
    const auto audit_start = Clock::now();
    const int64_t index = step / config_.train.sdc_audit_every;
    audit_hash = recompute_hash(step, audit_target(replica(), replicas(), index), false);
    audit_ms = std::chrono::duration<double, std::milli>(Clock::now() - audit_start).count();
  }
  hashing_ = audit;
  handed_over_hash_ = 0;
  before_reduction_pending_ = static_cast<bool>(before_reduction_);
  zero_grads_after_forward_ = chunks_.front()->update->pending();
  for (auto& chunk : chunks_) {
    if (!zero_grads_after_forward_) chunk->model->zero_grads();
    if (chunk->reducer) chunk->reducer->begin_step(step);
  }
  const size_t first_span = spans_.size();
  const double pipeline_start = now_us();
  run_schedule(step);
  // The pipeline has drained when every stage got here: the loss (the last stage's)
  // goes to every stage with it.
  std::array<double, 1> loss{loss_};
  links_.sum_over_stages(loss);
  const double pipeline_end = now_us();
  add_idle_spans(first_span, pipeline_start, pipeline_end);
  report.busy_ms = busy_ms_;
  report.recv_wait_ms = recv_wait_ms_;
  report.pipeline_ms = (pipeline_end - pipeline_start) / 1000.0;
  report.bubble = report.pipeline_ms > 0 ? 1.0 - report.busy_ms / report.pipeline_ms : 0.0;

  const auto update_start = Clock::now();
  sum_tied_wte();
  double replica_ms = 0.0;
  float loss_scale = 1.0f;
  bool apply = true;
  // A reducer that keeps state between steps (compression's error feedback, the local
  // second moment) is given finite, unscaled gradients only (gradient_reducer.hpp): a
  // codec does not forget what it did not send, so an Inf must never enter it, a skipped
  // step must leave every residual as it was, and the residuals must stay in the units of
  // the unscaled gradient whatever the scale does. Under loss scaling the step is
  // therefore decided first, on an overflow anywhere in the world, and unscaled where it
  // lives (a power of two: no mantissa bit changes) before any bucket is encoded; the
  // reduction then does not overlap backward.
  const bool decided_before_reduction = reduces_unscaled_;
  if (decided_before_reduction) {
    loss_scale = loss_scaler_->scale();
    report.step.loss_scale = loss_scale;
    double local = 0.0;
    for (auto& chunk : chunks_)
      for (const model::ParamRange& r : chunk->owned)
        local += backend_->sum_squares(chunk->model->grads() + r.offset, r.count);
    apply = loss_scaler_->update_finite(sum_over_world(std::isfinite(local) ? 0.0 : 1.0) == 0.0);
    report.step.skipped = !apply;
    for (auto& chunk : chunks_)
      for (const model::ParamRange& r : chunk->owned)
        if (apply) backend_->scale(chunk->model->grads() + r.offset, r.count, 1.0f / loss_scale);
  }
  if (replicas() > 1) {
    const auto reduce_start = Clock::now();
    if (apply) {
      reduce_over_replicas();
    } else {
      for (auto& chunk : chunks_) chunk->reducer->skip_step();
    }
    replica_ms = std::chrono::duration<double, std::milli>(Clock::now() - reduce_start).count();
  }
  // Before anything uses the sum: a rank found wrong makes every rank throw here.
  hashing_ = false;
  if (audit && apply) {
    const auto verdict_start = Clock::now();
    audit_verdict(step, handed_over_hash_, audit_hash, report.step);
    audit_ms += std::chrono::duration<double, std::milli>(Clock::now() - verdict_start).count();
    report.step.sdc_audit_ms = audit_ms;
  }
  // The other replicas' parts of the batch (with the norm's squares when the step is
  // applied), once no bucket is in flight on the plane.
  bool loss_summed = false;
  const bool check = checks_replicas_ && replica_check_due(config_.train.replica_check_every, step);
  double norm = std::numeric_limits<double>::quiet_NaN();  // a skipped step has none
  if (apply) {
    if (after_reduction_) run_after_reduction(step);
    // Under ZeRO 0 every replica holds the same reduced gradients: compared before they
    // are used; sharded replicas hold different pieces, so only the parameters are.
    if (check && !zero_) check_replicas(step, "gradients");
    // [0]: squares counted as they are; [1]: of tensors split over the tensor group.
    // With replicas each squares its reducer's shard only (under ZeRO it holds the
    // summed gradient there alone; under ZeRO 0 everywhere) and the replicas' sums are
    // added, with the loss: every element counts once, added in the same order whatever
    // the ZeRO stage.
    std::array<double, 2> squares{0.0, 0.0};
    for (auto& chunk : chunks_) {
      const ChunkNormRanges& norm_ranges = chunk->norm_ranges;
      const GradientReducer* reducer = chunk->reducer.get();
      for (const auto& range : reducer ? model::ranges_within(norm_ranges.local, reducer->shard())
                                       : norm_ranges.local)
        squares[0] += backend_->sum_squares(chunk->model->grads() + range.offset, range.count);
      for (const auto& range : reducer ? model::ranges_within(norm_ranges.group_split, reducer->shard())
                                       : norm_ranges.group_split)
        squares[1] += backend_->sum_squares(chunk->model->grads() + range.offset, range.count);
    }
    links_.sum_over_stages(squares);
    if (replicas_ != nullptr) {
      std::array<double, 3> sums{squares[0], squares[1], loss[0]};
      replicas_->sum(sums);
      squares = {sums[0], sums[1]};
      loss[0] = sums[2];
      loss_summed = true;
    }
    if (tensor_ != nullptr) {
      // The group's all-reduce is f32: ~1e-7 relative on the norm; every rank gets the
      // same bits.
      float split = static_cast<float>(squares[1]);
      tensor_->all_reduce_sum(&split, 1);
      squares[1] = static_cast<double>(split);
    }
    norm = std::sqrt(squares[0] + squares[1]);
    if (loss_scaler_ && !decided_before_reduction) {
      loss_scale = loss_scaler_->scale();
      report.step.loss_scale = loss_scale;
      apply = loss_scaler_->update(squares[0] + squares[1]);
      report.step.skipped = !apply;
      if (apply) norm /= loss_scale;  // exact: the scale is a power of two
    }
  }
  if (replicas_ != nullptr && !loss_summed) replicas_->sum(loss);
  report.step.loss = loss[0];
  if (apply) {
    for (auto& chunk : chunks_) {
      // fp8: the updated gradients unscaled where they live (exact: a power of two), so
      // any OptimizerShards (the gradient_shard actors too) updates from true gradients.
      const bool unscaled_here = loss_scale != 1.0f && !decided_before_reduction;
      if (unscaled_here)
        for (const model::ParamRange& r : chunk->updated)
          backend_->scale(chunk->model->grads() + r.offset, r.count, 1.0f / loss_scale);
      // The reduced gradients' host staging is current unless they were unscaled on
      // the backend since.
      const bool grads_on_host = chunk->reducer && !chunk->reduces_backend_memory && !unscaled_here;
      chunk->update->update(chunk->model->params(), chunk->model->grads(), chunk->updated,
                            grads_on_host, report.step.lr, norm);
    }
    if (zero_) {  // every replica's updated pieces to every replica
      const auto gather_start = Clock::now();
      for (auto& chunk : chunks_) {
        if (chunk->reduces_backend_memory) {
          chunk->reducer->gather_shards(chunk->model->params());
          continue;
        }
        HostStaging& params = *chunk->params_host;
        params.to_host(chunk->updated);
        chunk->reducer->gather_shards(params.host());
        params.to_backend(chunk->owned_runs);
      }
      replica_ms +=
          std::chrono::duration<double, std::milli>(Clock::now() - gather_start).count();
    }
  }
  // The chunks' reducers share one plane: the first began the step first, so its bytes
  // are all of the step's; the gradients are each chunk's own.
  for (auto& chunk : chunks_) {
    if (!chunk->reducer) continue;
    const ReducerTraffic traffic = chunk->reducer->step_traffic();
    if (chunk == chunks_.front()) {
      report.step.comm_bytes_sent = traffic.bytes_sent;
      report.step.comm_bytes_received = traffic.bytes_received;
    }
    report.step.gradient_bytes += traffic.gradient_bytes;
    report.step.encoded_gradient_bytes += traffic.encoded_bytes;
  }
  if (check) check_replicas(step, "parameters");
  for (auto& chunk : chunks_) chunk->model->end_precision_step();
  report.step.grad_norm = norm;
  report.step.precision = config::name_string(config_.train.precision);
  const double update_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - update_start).count();
  report.step.step_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - step_start).count();
  // The tensor group's all-reduces (inside forward, backward and the norm) block: they
  // are exposed communication, not compute.
  const double tensor_ms = timed_tensor_ ? timed_tensor_->take_spent_ms() : 0.0;
  report.step.compute_ms = report.busy_ms + update_ms - replica_ms - tensor_ms;
  report.step.comm_ms = report.recv_wait_ms + replica_ms + tensor_ms;
  report.step.tokens_per_s = static_cast<double>(config_.train.batch_size * config_.model.context) /
                             (report.step.step_ms / 1000.0);
  report.step.peak_memory_bytes = backend_->memory_usage().peak_bytes;
  report.step.data_wait_ms = data_wait_ms_;
  report.step.prefetch_queue_depth = prefetch_queue_depth();
  report.step.offload_overlap = overlaps_update();
  if (by_throughput_) {
    report.step.batch_share = shares_.micro_batches[static_cast<size_t>(replica())] *
                              plan_.micro_batch_size;
    ++window_steps_;
    window_micro_batches_ += plan_.shape.micro_batches;
    window_forward_ms_ += forward_ms_;
  }
  for (auto& chunk : chunks_) report.step.offload_wait_ms += chunk->update->take_wait_ms();
  return report;
}

void PipelineStageTrainer::reduce_over_replicas() {
  // Every range ready at once: the pipeline has drained (and the tied wte is summed), so
  // nothing of backward is left to overlap. Chunk by chunk, in the same order on every
  // replica: the chunks' reducers share the data group's plane.
  // (Without a pipeline backward has handed them over already: overlaps_reduction_.)
  for (auto& chunk : chunks_) {
    if (overlaps_reduction_) break;
    for (const model::ParamRange& range : chunk->owned) hand_over(*chunk, range);
  }
  for (auto& chunk : chunks_) {
    chunk->reducer->finish();
    if (!chunk->reduces_backend_memory) chunk->grads_host->to_backend(chunk->updated);
    if (const float* v = chunk->reducer->refreshed_second_moment())
      chunk->optimizer->set_second_moment(v);
  }
}

void PipelineStageTrainer::run_after_reduction(int64_t step) {
  Chunk& chunk = *chunks_.front();
  const std::vector<model::ParamRange>& runs = zero_ ? chunk.updated : chunk.owned_runs;
  if (runs.empty()) return;
  const model::ParamRange run = runs.front();
  HostStaging& grads = *chunk.grads_host;
  grads.to_host(run);
  after_reduction_(step, grads.host() + run.offset, run.count);
  grads.to_backend(run);
}

void PipelineStageTrainer::check_replicas(int64_t step, const char* checked) {
  const bool gradients = std::string_view(checked) == "gradients";
  if (!gradients) finish_update();  // the parameters compared are the updated ones
  uint64_t hash = 0;
  for (auto& chunk : chunks_) {
    HostStaging& staging = gradients ? *chunk->grads_host : *chunk->params_host;
    staging.to_host(chunk->owned_runs);
    hash = hash_ranges(staging.host(), chunk->owned_runs, hash);
  }
  const std::vector<int> off = compare_replicas(*replicas_, hash);
  if (off.empty()) return;
  if (on_disagreement_) on_disagreement_(step, checked, off);
  for (int replica_index : off)
    if (replica_index == replica()) throw ReplicaMismatch(step, checked, off);
}

void PipelineStageTrainer::moments_to_host(Chunk& chunk, float* adam_m, float* adam_v) {
  chunk.optimizer->moments_to_host(adam_m, adam_v);
  if (!zero_) return;
  const size_t floats = chunk.model->buffer_floats();
  gather_host_shards(*chunk.reducer, *backend_, adam_m, floats);
  gather_host_shards(*chunk.reducer, *backend_, adam_v, floats);
}

void PipelineStageTrainer::lend_moment_pieces() {
  for (auto& chunk : chunks_) {
    std::vector<float> host_m(chunk->model->buffer_floats()), host_v(host_m.size());
    moments_to_host(*chunk, host_m.data(), host_v.data());
  }
}

double PipelineStageTrainer::sum_over_world(double value) {
  std::array<double, 1> votes{value};
  sum_over_world(votes);
  return votes[0];
}

void PipelineStageTrainer::sum_over_world(std::span<double> values) {
  links_.sum_over_stages(values);
  if (replicas_ != nullptr) replicas_->sum(values);
  if (tensor_ != nullptr) {
    // Small counts: exact in f32.
    std::vector<float> group(values.begin(), values.end());
    tensor_->all_reduce_sum(group.data(), group.size());
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(group[i]);
  }
}

void PipelineStageTrainer::run_schedule(int64_t step) {
  // Every receive of the step, in each peer's sending order (pipeline/schedule.hpp).
  for (int64_t peer = 0; peer < plan_.shape.stages; ++peer) {
    if (peer == stage_) continue;
    for (const auto& message : schedule_.message_order(peer, stage_))
      pending_recvs_[key_of(message)] = recv_buffers_.at(key_of(message)).post_recv(peer);
  }
  for (const PipelineOp& op : schedule_.ops(stage_)) {
    if (op.type == OpType::forward) run_forward(step, op);
    else run_backward(op);
  }
  for (PipelineLinks::Handle handle : pending_sends_) links_.wait(handle);
  pending_sends_.clear();
}

void PipelineStageTrainer::take_share(int replica_index) {
  const auto r = static_cast<size_t>(replica_index);
  batch_first_ = shares_.first(replica_index) * plan_.micro_batch_size;
  if (plan_.shape.micro_batches == shares_.micro_batches[r]) return;
  plan_.shape.micro_batches = shares_.micro_batches[r];
  schedule_ = PipelineSchedule(plan_.shape);
  for (size_t c = 0; c < chunks_.size(); ++c)
    for (const PipelineOp& op : schedule_.ops(stage_))
      if (op.chunk == static_cast<int64_t>(c) && op.type == OpType::backward)
        chunks_[c]->last_backward = op.micro_batch;
  if (!chunks_.empty()) make_message_buffers();  // a step's messages follow its count
}

void PipelineStageTrainer::rebalance() {
  // Each stage's speed in its slot, summed over the world: every rank gets every stage's
  // of every replica, the same bits (a tensor group's ranks add 1/T each: their mean); a
  // replica is as fast as its slowest stage.
  const auto P = static_cast<size_t>(plan_.shape.stages);
  std::vector<double> stage_speeds(static_cast<size_t>(replicas()) * P, 0.0);
  const double seconds = std::max(window_forward_ms_, 1e-3) / 1000.0;
  stage_speeds[static_cast<size_t>(replica()) * P + static_cast<size_t>(stage_)] =
      static_cast<double>(window_micro_batches_) / seconds / static_cast<double>(tensor_ranks());
  sum_over_world(stage_speeds);
  std::vector<double> speeds(static_cast<size_t>(replicas()));
  for (size_t r = 0; r < speeds.size(); ++r)
    speeds[r] = *std::min_element(stage_speeds.begin() + static_cast<std::ptrdiff_t>(r * P),
                                  stage_speeds.begin() + static_cast<std::ptrdiff_t>((r + 1) * P));
  shares_ = in_units(throughput_shares(global_micro_batches_ / share_unit_, speeds));
  take_share(replica());
  slice_first_ = batch_first_;
  window_steps_ = window_micro_batches_ = 0;
  window_forward_ms_ = 0.0;
}

void PipelineStageTrainer::sum_tied_wte() {
  const int64_t P = plan_.shape.stages;
  if (P == 1 || (stage_ != 0 && stage_ != P - 1)) return;
  Chunk& end = stage_ == 0 ? *chunks_.front() : *chunks_.back();
  const model::ParamRange wte = end.model->tied_wte();
  if (links_.moves_backend_memory()) {  // the reductions stage what they read (hand_over)
    backend_->finish_compute();
    links_.sum_first_and_last_backend(end.model->grads() + wte.offset, wte.count);
    return;
  }
  end.grads_host->to_host(wte);
  links_.sum_first_and_last(end.grads_host->host() + wte.offset, wte.count);
  end.grads_host->to_backend(wte);
}

void PipelineStageTrainer::hand_over(Chunk& chunk, model::ParamRange range) {
  bool& pending = recomputing_ ? in_recomputation_pending_ : before_reduction_pending_;
  const bool corrupt = pending;
  if (!chunk.reduces_backend_memory || corrupt || hashing_) chunk.grads_host->to_host(range);
  float* host = chunk.grads_host->host() + range.offset;
  if (corrupt) {
    pending = false;
    (recomputing_ ? in_recomputation_ : before_reduction_)(current_step_, host, range.count);
    if (chunk.reduces_backend_memory) chunk.grads_host->to_backend(range);
  }
  if (hashing_) handed_over_hash_ = hash_ranges(host - range.offset, {range}, handed_over_hash_);
  if (!recomputing_) chunk.reducer->gradients_ready(range);
}

double PipelineStageTrainer::evaluate(BatchSource& batches, int64_t eval_batches,
                                      const std::atomic<bool>* stop_request, int64_t* batches_done) {
  // Forward only, micro-batch by micro-batch through the virtual stages in order: every
  // stage handles (micro-batch, chunk) in the same lexicographic order, so blocking
  // receives in consumption order match the senders' order.
  finish_update();
  const int64_t B = plan_.micro_batch_size;
  const int64_t T = config_.model.context;
  double total = 0.0;
  int64_t count = 0;
  MessageBuffer incoming(*backend_, links_, activation_floats_),
      outgoing(*backend_, links_, activation_floats_);
  int64_t b = 0;
  for (; b < eval_batches; ++b) {
    if (stop_request != nullptr && sum_over_world(stop_request->load() ? 1.0 : 0.0) > 0) break;
    for (int64_t mb = 0; mb < plan_.shape.micro_batches; ++mb) {
      for (auto& chunk_ptr : chunks_) {
        PipelineChunk& model = *chunk_ptr->model;
        model.select_activation_slot(0);
        const int64_t g = chunk_ptr->virtual_stage;
        if (g > 0) {
          links_.wait(incoming.post_recv(schedule_.stage_of(g - 1)));
          incoming.copy_into(model.stage_input());
        }
        if (model.has_embedding() || model.has_head())
          batches.fill(static_cast<uint64_t>(b), config_.train.batch_size, slice_first_ + mb * B,
                       B, T, inputs_.data(), targets_.data());
        const double loss = model.forward(inputs_.data(), targets_.data(), B, T);
        if (model.has_head()) {
          total += loss;
          ++count;
        } else {
          links_.wait(outgoing.send(model.stage_output(), schedule_.stage_of(g + 1)));
        }
      }
    }
  }
  if (batches_done != nullptr) *batches_done = b;
  std::array<double, 2> sums{total, static_cast<double>(count)};
  links_.sum_over_stages(sums);
  if (replicas_ != nullptr) replicas_->sum(sums);
  return sums[1] > 0 ? sums[0] / sums[1] : 0.0;  // 0 batches: stopped before the first
}

std::vector<float> PipelineStageTrainer::gather_params() {
  finish_update();
  std::vector<float> all(whole_layout_.total(), 0.0f);
  for (auto& chunk : chunks_) {
    std::vector<float> host(chunk->model->buffer_floats());
    backend_->copy_to_host(host.data(), chunk->model->params(), host.size() * sizeof(float));
    for (const model::ShardSegment& s : chunk->whole_segments)
      std::copy_n(host.begin() + static_cast<std::ptrdiff_t>(s.shard_offset), s.count,
                  all.begin() + static_cast<std::ptrdiff_t>(s.whole_offset));
  }
  // Every element is owned by one stage (and one tensor rank): the others add exact zeros.
  links_.sum_over_stages(std::span<float>(all));
  if (tensor_ != nullptr) tensor_->all_reduce_sum(all.data(), all.size());
  return all;
}

namespace {
// The ranges virtual stage `range` contributes to a checkpoint, in a fixed order both the
// sender and stage 0 compute: the embedding (wte, wpe) on the first, its blocks, the
// final LayerNorm on the last (the head's copy of wte is the embedding's).
std::vector<model::ParamRange> checkpoint_ranges(const model::ParamLayout& layout,
                                                 model::LayerRange range) {
  const model::GptShape& s = layout.shape();
  const size_t C = static_cast<size_t>(s.dim);
  std::vector<model::ParamRange> ranges;
  if (range.begin == 0)
    ranges.push_back({layout.wte(), layout.wpe() + static_cast<size_t>(s.context) * C - layout.wte()});
  for (int64_t l = range.begin; l < range.end; ++l)
    ranges.push_back({layout.block_begin(l), layout.block_end(l) - layout.block_begin(l)});
  if (range.end == s.layers) ranges.push_back({layout.lnf_w(), layout.lnf_b() + C - layout.lnf_w()});
  return ranges;
}

size_t count_of(const std::vector<model::ParamRange>& ranges) {
  size_t count = 0;
  for (const auto& r : ranges) count += r.count;
  return count;
}
}  // namespace

const model::ParamLayout& PipelineStageTrainer::whole_layout() const { return whole_layout_; }

// Counts an update still running (overlap) as taken: its step is decided.
int64_t PipelineStageTrainer::optimizer_steps() const {
  return chunks_.front()->optimizer->steps_taken() + (chunks_.front()->update->pending() ? 1 : 0);
}

bool PipelineStageTrainer::first_stage_decides(bool value) {
  if (tensor_ != nullptr) {  // tensor rank 0's value on the stage's every rank first
    float vote = tensor_->rank() == 0 && value ? 1.0f : 0.0f;
    tensor_->all_reduce_sum(&vote, 1);
    value = vote > 0.0f;
  }
  std::array<double, 1> decision{value ? 1.0 : 0.0};
  links_.broadcast_from_first(decision);
  // Under ZeRO (and fp8_state_per_replica) every replica takes part in a checkpoint:
  // replica 0's decision to all.
  if (zero_ || fp8_state_per_replica()) {
    if (replica() != 0) decision[0] = 0.0;
    replicas_->sum(decision);
  }
  return decision[0] > 0.0;
}

void PipelineStageTrainer::gather_state_to_first(float* params, float* adam_m, float* adam_v) {
  if (replica() != 0) {
    // Only under ZeRO (they hold moment pieces) or for their fp8 state (gathered next, in
    // gather_precision_state) do the other replicas take part.
    if (!(zero_ || fp8_state_per_replica()) || params != nullptr)
      throw std::logic_error("gather_state_to_first: a replica other than 0 takes part under "
                             "ZeRO or fp8 only, and passes no buffers");
    if (zero_) lend_moment_pieces();
    return;
  }
  finish_update();
  if (tensor_ != nullptr) return gather_sharded_state_to_first(params, adam_m, adam_v);
  const model::ParamLayout& layout = whole_layout();
  const size_t total = layout.total();
  if ((stage_ == 0) != (params != nullptr && adam_m != nullptr && adam_v != nullptr))
    throw std::logic_error("gather_state_to_first: stage 0, and only stage 0, passes buffers");
  // Each chunk's whole buffers on the host, then its ranges: written in place on stage
  // 0, packed (params, then m, then v) and sent to stage 0 from the others.
  std::vector<float> host_params(total), host_m(total), host_v(total);
  std::vector<std::vector<float>> packed;
  std::vector<PipelineLinks::Handle> sends;
  for (auto& chunk : chunks_) {
    const auto ranges = checkpoint_ranges(layout, chunk->model->range());
    if (count_of(ranges) != count_of(chunk->norm_ranges.local))
      throw std::logic_error("pipeline checkpoint: a chunk's ranges disagree with what it owns");
    backend_->copy_to_host(host_params.data(), chunk->model->params(), total * sizeof(float));
    moments_to_host(*chunk, host_m.data(), host_v.data());
    if (stage_ == 0) {
      for (const auto& r : ranges) {
        const auto at = static_cast<std::ptrdiff_t>(r.offset);
        std::copy_n(host_params.begin() + at, r.count, params + r.offset);
        std::copy_n(host_m.begin() + at, r.count, adam_m + r.offset);
        std::copy_n(host_v.begin() + at, r.count, adam_v + r.offset);
      }
      continue;
    }
    auto& buffer = packed.emplace_back();
    buffer.reserve(3 * count_of(ranges));
    for (const std::vector<float>* source : {&host_params, &host_m, &host_v})
      for (const auto& r : ranges)
        buffer.insert(buffer.end(), source->begin() + static_cast<std::ptrdiff_t>(r.offset),
                      source->begin() + static_cast<std::ptrdiff_t>(r.offset + r.count));
    sends.push_back(links_.post_send(buffer.data(), buffer.size(), 0));
  }
  for (const auto handle : sends) links_.wait(handle);
  if (stage_ != 0) return;
  // The other stages' chunks, by virtual stage: per peer in the order it sent them.
  std::vector<float> incoming;
  for (int64_t g = 0; g < static_cast<int64_t>(plan_.ranges.size()); ++g) {
    const int64_t from = schedule_.stage_of(g);
    if (from == 0) continue;
    const auto ranges = checkpoint_ranges(layout, plan_.ranges[static_cast<size_t>(g)]);
    const size_t count = count_of(ranges);
    incoming.resize(3 * count);
    links_.wait(links_.post_recv(incoming.data(), incoming.size(), from));
    size_t at = 0;
    for (float* target : {params, adam_m, adam_v})
      for (const auto& r : ranges) {
        std::copy_n(incoming.begin() + static_cast<std::ptrdiff_t>(at), r.count, target + r.offset);
        at += r.count;
      }
  }
}

void PipelineStageTrainer::restore_state(const float* params, const float* adam_m,
                                         const float* adam_v, int64_t optimizer_steps) {
  if (tensor_ != nullptr) return restore_sharded_state(params, adam_m, adam_v, optimizer_steps);
  finish_update();
  for (auto& chunk : chunks_) {
    chunk->update->forget_host_params();
    for (const auto& r : chunk->owned)
      backend_->copy_from_host(chunk->model->params() + r.offset, params + r.offset,
                               r.count * sizeof(float));
    chunk->optimizer->moments_from_host(adam_m, adam_v);
    chunk->optimizer->set_steps_taken(optimizer_steps);
  }
}

}  // namespace dseek::train
