// Implementation of trainer.hpp.
#include "runtime/train/trainer.hpp"

#include "runtime/train/gather_host_shards.hpp"
#include "runtime/train/replica_check.hpp"
#include "runtime/optim/adamw_settings.hpp"
#include "runtime/optim/loss_scaler_of.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "runtime/metrics/trace_spans.hpp"
#include "runtime/util/sha256.hpp"

namespace dseek::train {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The sequences of the global batch that `reducer`'s replica computes, checked.
struct Slice {
  int64_t first = 0, size = 0;
};
Slice slice_of(const config::TrainConfig& t, const GradientReducer* reducer) {
  if (reducer == nullptr) return {0, t.batch_size};
  const int64_t world = reducer->world_size();
  const int64_t rank = reducer->rank();
  if (world < 1 || rank < 0 || rank >= world)
    throw std::invalid_argument("Trainer: replica " + std::to_string(rank) + " of " +
                                std::to_string(world) + " is not a valid data-parallel rank");
  if (t.batch_size % world != 0)
    throw std::invalid_argument(
        "train.batch_size = " + std::to_string(t.batch_size) +
        " does not split evenly over the data-parallel world size " + std::to_string(world) +
        ": every replica computes the same number of sequences of the global batch");
  const int64_t size = t.batch_size / world;
  if (t.micro_batch_size > 0 && size % t.micro_batch_size != 0)
    throw std::invalid_argument(
        "train.micro_batch_size = " + std::to_string(t.micro_batch_size) +
        " does not divide a replica's slice of train.batch_size (" +
        std::to_string(t.batch_size) + " / world size " + std::to_string(world) + " = " +
        std::to_string(size) + " sequences)");
  return {rank * size, size};
}

}  // namespace

model::GptShape shape_of(const config::ModelConfig& m) {
  return model::GptShape{m.dim, m.layers, m.heads, m.context, m.vocab};
}

model::RecomputePolicy recompute_of(const config::ModelConfig& m) {
  if (auto policy = model::parse_recompute_policy(m.recompute)) return *policy;
  throw std::invalid_argument("model.recompute: expected \"none\" or \"every:N\" with an "
                              "integer N >= 1, got \"" + m.recompute + "\"");
}

Trainer::Trainer(const config::JobConfig& config, BatchSource& train_batches,
                 GradientReducer* reducer, const OptimizerShardsFactory& make_optimizer,
                 const BackendFactory& make_backend)
    : config_(config), batches_(train_batches), reducer_(reducer),
      backend_(make_backend ? make_backend(config) : make_runtime_backend(config)),
      micro_batch_(0) {
  const auto& t = config.train;
  const Slice slice = slice_of(t, reducer);
  slice_first_ = slice.first;
  slice_size_ = slice.size;
  micro_batch_ = t.micro_batch_size > 0 ? t.micro_batch_size : slice_size_;
  model_ = std::make_unique<model::GptModel>(shape_of(config.model),
                                             model::LayerRange{0, config.model.layers},
                                             *backend_, micro_batch_, 1,
                                             recompute_of(config.model));
  model_->init_weights(static_cast<uint64_t>(t.seed), config.model.init_std);
  const backend::MatmulFormat format = model::matmul_format_of(t.precision);
  model_->set_precision(model::PrecisionPolicy(*backend_, format, config.model.layers,
                                               {t.fp8_amax_history, t.fp8_margin}));
  loss_scaler_ = optim::loss_scaler_of(config);  // fp8 only
  const optim::AdamWSettings settings = optim::adamw_settings(config, reducer_ != nullptr);
  params_host_ = std::make_unique<HostStaging>(*backend_, model_->params(), model_->num_params());
  grads_host_ = std::make_unique<HostStaging>(*backend_, model_->grads(), model_->num_params());
  // A data plane of host memory (UCX) works on the gradients' host staging; one that
  // reads the backend's memory (NCCL) on the backend's own gradient buffer.
  if (reducer_ != nullptr) {
    if (reducer_->reduces_backend_memory()) reducer_->bind_backend(*backend_);
    reducer_->attach(reducer_->reduces_backend_memory() ? model_->grads() : grads_host_->host(),
                     model_->num_params(), model_->gradient_ranges_in_backward_order());
  }
  owned_ = {model::ParamRange{0, model_->num_params()}};
  if (reducer_ != nullptr && reducer_->shards_optimizer_state()) owned_ = reducer_->shard();
  const OptimizerSpec spec{*backend_, model_->layout(), settings, owned_,
                          backend_->host_memory()};
  if (make_optimizer) optimizer_ = make_optimizer(spec);
  if (!optimizer_) optimizer_ = std::make_unique<LocalOptimizer>(spec);
  // The overlapped offload needs the whole buffer here (ZeRO 0: see trainer.hpp) and an
  // optimizer on other threads that reports chunks.
  const bool whole_buffer =
      owned_.size() == 1 && owned_[0] == model::ParamRange{0, model_->num_params()};
  if (t.offload_overlap && whole_buffer && optimizer_->updates_on_host() &&
      optimizer_->updates_in_chunks()) {
    chunks_ = model_->gradient_ranges_in_backward_order();
    std::reverse(chunks_.begin(), chunks_.end());  // layout order: wte+wpe, blocks, lnf
    chunk_on_backend_.assign(chunks_.size(), 1);
    model_->set_before_params_read([this](model::ParamRange range) { await_params(range); });
  }
  schedule_ = optim::LrSchedule{t.lr, t.min_lr, t.warmup_steps, t.steps};
  const size_t tokens = static_cast<size_t>(micro_batch_ * config.model.context);
  inputs_.resize(tokens);
  targets_.resize(tokens);
}

// The reducer may still be writing into the gradient buffer if a step was cut short.
// An update left running writes into this trainer's buffers until it ends.
Trainer::~Trainer() {
  try {
    finish_update();
  } catch (const std::exception&) {
    // The failure was (or will be) reported by the step that hit it.
  }
  if (reducer_ != nullptr) reducer_->detach();
}

double Trainer::accumulate(int64_t step, int64_t first, int64_t count, int64_t micro_steps,
                           const model::GradientsReady& on_ready, StepReport& report) {
  const int64_t batch = config_.train.batch_size;
  const int64_t T = config_.model.context;
  // Each micro-batch's mean loss, scaled so the accumulated gradient (summed over
  // replicas) is the gradient of the mean over the whole global batch.
  const float dloss = 1.0f / static_cast<float>(micro_batch_ * T) /
                      static_cast<float>(micro_steps) *
                      (loss_scaler_ ? loss_scaler_->scale() : 1.0f);
  double loss = 0.0;
  for (int64_t start = first; start < first + count; start += micro_batch_) {
    const auto data_start = Clock::now();
    batches_.fill(static_cast<uint64_t>(step), batch, start, micro_batch_, T, inputs_.data(),
                  targets_.data());
    report.data_wait_ms += ms_since(data_start);
    {
      const metrics::ScopedSpan span("forward", "forward");
      loss += model_->forward(inputs_.data(), targets_.data(), micro_batch_, T) /
              static_cast<double>(micro_steps);
    }
    if (start == first) {
      // The forward has read every chunk: an overlapped update of the last step is done
      // but for its answers. The gradients it read are zeroed only now.
      finish_update();
      model_->zero_grads();
    }
    const bool last = start + micro_batch_ >= first + count;
    const metrics::ScopedSpan span("backward", "backward");
    model_->backward(dloss, last ? on_ready : nullptr);
  }
  return loss;
}

StepReport Trainer::train_step(int64_t step) {
  if (reducer_ != nullptr) return data_parallel_step(step);
  const auto start = Clock::now();
  const int64_t batch = config_.train.batch_size;
  const int64_t T = config_.model.context;
  StepReport report;
  report.step = step;
  report.lr = schedule_.at(step);
  offload_wait_ms_ = 0.0;
  report.loss = accumulate(step, 0, batch, batch / micro_batch_, nullptr, report);
  if (after_reduction_) {
    grads_host_->all_to_host();
    after_reduction_(step, grads_host_->host(), model_->num_params());
    grads_host_->all_to_backend();
  }
  // The norm of the whole gradient, summed as AdamW::step sums it: the same bits.
  double norm = 0.0;
  if (apply_loss_scale(backend_->sum_squares(model_->grads(), model_->num_params()), norm,
                       report, /*host_grads=*/nullptr)) {
    report.grad_norm = update_parameters(report.lr, norm, /*grads_on_host=*/false).grad_norm;
  }
  model_->precision().end_step();
  report.offload_overlap = overlaps_update();
  report.offload_wait_ms = offload_wait_ms_;
  report.peak_memory_bytes = backend_->memory_usage().peak_bytes;
  report.step_ms = ms_since(start);
  report.compute_ms = report.step_ms - report.data_wait_ms;
  report.tokens_per_s = static_cast<double>(batch * T) / (report.step_ms / 1000.0);
  return report;
}

StepReport Trainer::data_parallel_step(int64_t step) {
  const auto start = Clock::now();
  const int64_t batch = config_.train.batch_size;
  StepReport report;
  report.step = step;
  report.lr = schedule_.at(step);
  offload_wait_ms_ = 0.0;
  // The reducer reads the backend's gradients itself (NCCL) or their host staging.
  const bool on_backend = reducer_->reduces_backend_memory();
  const model::GradientsReady stage_and_reduce = [this, on_backend](model::ParamRange range) {
    // Each bucket goes to the host as backward finishes it, so its reduction still
    // overlaps the rest of backward.
    if (!on_backend) grads_host_->to_host(range);
    reducer_->gradients_ready(range);
  };
  // Loss scaling into a reducer with state (compression): decided and unscaled first,
  // after backward (trainer_unscaled_reduction.cpp).
  const bool unscale_first = reduces_unscaled();
  reducer_->begin_step(step);
  const double local_loss =
      accumulate(step, slice_first_, slice_size_, batch / micro_batch_,
                 unscale_first ? model::GradientsReady{} : stage_and_reduce, report);
  if (!unscale_first) {
    reducer_->finish();
  } else if (!reduce_unscaled_if_finite(local_loss, stage_and_reduce, report)) {
    return end_data_parallel_step(step, start, report);  // skipped on every replica
  }
  if (const float* v = reducer_->refreshed_second_moment()) optimizer_->set_second_moment(v);
  if (after_reduction_) {
    if (on_backend) grads_host_->all_to_host();  // fault injection edits host values
    after_reduction_(step, grads_host_->host(), model_->num_params());
    if (on_backend) grads_host_->all_to_backend();
  }
  // The reduced gradient of the parameters this replica updates back to the backend.
  if (!on_backend) grads_host_->to_backend(owned_);
  const bool check = replica_check_at(step);
  // Under ZeRO 0 every replica holds the same reduced gradient: compare it before it is
  // used; sharded stages hold different pieces, so only the parameters are compared.
  if (check && !reducer_->shards_optimizer_state()) {
    if (on_backend) grads_host_->all_to_host();  // the checksum is taken on the host
    check_replicas(step, "gradients", grads_host_->host(), model_->num_params());
  }
  // Each replica squares its shard only (also for ZeRO 0, where it holds the whole sum):
  // the global norm is then added up in the same order whatever the ZeRO stage.
  double shard_squares = 0.0;
  for (const auto& range : reducer_->shard())
    shard_squares += backend_->sum_squares(model_->grads() + range.offset, range.count);
  std::array<double, 2> sums{local_loss, shard_squares};
  reducer_->sum_over_ranks(sums);
  report.loss = sums[0];
  // Every replica decides on the same all-reduced sum: all skip, or none.
  double norm = 0.0;
  // The optimizer reads the host copy of the gradients when they are staged (the UCX
  // data plane; grads_on_host below): where it is a separate copy, it is unscaled too.
  if (apply_loss_scale(sums[1], norm, report,
                       !on_backend && grads_host_->copies() ? grads_host_->host() : nullptr,
                       /*decided_and_unscaled=*/unscale_first)) {
    report.grad_norm = update_parameters(report.lr, norm, /*grads_on_host=*/!on_backend).grad_norm;
    if (reducer_->shards_optimizer_state() && on_backend) {
      reducer_->gather_shards(model_->params());
    } else if (reducer_->shards_optimizer_state()) {
      params_host_->to_host(reducer_->shard());
      reducer_->gather_shards(params_host_->host());
      params_host_->all_to_backend();
    }
  }
  return end_data_parallel_step(step, start, report);
}

bool Trainer::replica_check_at(int64_t step) const {
  return replica_check_due(config_.train.replica_check_every, step);
}

StepReport Trainer::end_data_parallel_step(int64_t step, std::chrono::steady_clock::time_point start,
                                           StepReport& report) {
  const int64_t batch = config_.train.batch_size;
  const int64_t T = config_.model.context;
  model_->precision().end_step();
  if (replica_check_at(step)) {
    finish_update();  // the parameters compared are the updated ones
    params_host_->all_to_host();
    check_replicas(step, "parameters", params_host_->host(), model_->num_params());
  }
  const ReducerTraffic traffic = reducer_->step_traffic();
  report.comm_ms = traffic.exposed_ms;
  report.comm_bytes_sent = traffic.bytes_sent;
  report.comm_bytes_received = traffic.bytes_received;
  report.gradient_bytes = traffic.gradient_bytes;
  report.encoded_gradient_bytes = traffic.encoded_bytes;
  report.offload_overlap = overlaps_update();
  report.offload_wait_ms = offload_wait_ms_;
  report.peak_memory_bytes = backend_->memory_usage().peak_bytes;
  report.step_ms = ms_since(start);
  report.compute_ms = report.step_ms - report.data_wait_ms - report.comm_ms;
  report.tokens_per_s = static_cast<double>(batch * T) / (report.step_ms / 1000.0);
  return report;
}

bool Trainer::apply_loss_scale(double sum_squares, double& norm, StepReport& report,
                               float* host_grads, bool decided_and_unscaled) {
  report.precision = config::name_string(config_.train.precision);
  norm = std::sqrt(sum_squares);
  report.grad_norm = norm;
  if (!loss_scaler_ || decided_and_unscaled) return true;
  const float scale = loss_scaler_->scale();
  report.loss_scale = scale;
  if (!loss_scaler_->update(sum_squares)) {
    report.skipped = true;
    return false;
  }
  // The optimizer reads the gradients of the parameters it owns: its shard under ZeRO.
  // They are unscaled where they live, through the backend (device memory on a GPU).
  std::vector<model::ParamRange> owned{model::ParamRange{0, model_->num_params()}};
  if (reducer_ != nullptr && reducer_->shards_optimizer_state()) owned = reducer_->shard();
  for (const auto& range : owned) {
    backend_->scale(model_->grads() + range.offset, range.count, 1.0f / scale);
    if (host_grads != nullptr)
      optim::unscale_gradients(host_grads + range.offset, range.count, scale);
  }
  norm /= scale;  // exact: the scale is a power of two
  report.grad_norm = norm;
  return true;
}

optim::StepStats Trainer::update_parameters(double lr, double grad_norm, bool grads_on_host) {
  if (overlaps_update()) {
    // The host copy is rewritten below: no async copy of the last update may still read it.
    params_host_->finish_copies();
    // It is the FP32 master copy: after the first update it already holds what the
    // device holds (only the updates and restore() write the parameters), so the
    // parameters do not come down again every step.
    if (!host_params_current_) params_host_->to_host(owned_);
    host_params_current_ = true;
    if (!grads_on_host) grads_host_->to_host(owned_);
    optimizer_->start_update(params_host_->host(), grads_host_->host(), lr, grad_norm, chunks_);
    update_pending_ = true;
    std::fill(chunk_on_backend_.begin(), chunk_on_backend_.end(), 0);
    // The step reports the norm only; the clip scale stays the optimizer's business.
    return optim::StepStats{grad_norm, 1.0};
  }
  if (!optimizer_->updates_on_host() || !params_host_->copies())
    return optimizer_->update(model_->params(), model_->grads(), lr, grad_norm);
  // The CPU offload: the owned parameters and gradients to the host, the update there,
  // the parameters back.
  params_host_->to_host(owned_);
  if (!grads_on_host) grads_host_->to_host(owned_);
  const auto stats = optimizer_->update(params_host_->host(), grads_host_->host(), lr, grad_norm);
  params_host_->to_backend(owned_);
  return stats;
}

void Trainer::await_params(model::ParamRange range) {
  if (!update_pending_) return;
  auto send = [&](size_t c) {
    params_host_->to_backend_async(chunks_[c]);
    chunk_on_backend_[c] = 1;
  };
  // Every chunk updated by now goes back at once, in layout order ...
  for (size_t c = 0; c < chunks_.size(); ++c)
    if (!chunk_on_backend_[c] && optimizer_->chunk_updated(c)) send(c);
  // ... and the forward waits only for the chunks it is about to read.
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const bool overlaps = chunks_[c].offset < range.end() && range.offset < chunks_[c].end();
    if (!overlaps || chunk_on_backend_[c]) continue;
    const auto wait_start = Clock::now();
    optimizer_->wait_for_chunk(c);
    offload_wait_ms_ += ms_since(wait_start);
    send(c);
  }
}

void Trainer::finish_update() {
  if (!update_pending_) return;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (chunk_on_backend_[c]) continue;
    const auto wait_start = Clock::now();
    optimizer_->wait_for_chunk(c);
    offload_wait_ms_ += ms_since(wait_start);
    params_host_->to_backend_async(chunks_[c]);
    chunk_on_backend_[c] = 1;
  }
  update_pending_ = false;
  optimizer_->finish_update();
}

int Trainer::dp_rank() const { return reducer_ != nullptr ? reducer_->rank() : 0; }

void Trainer::check_replicas(int64_t step, const char* checked, const float* data,
                             size_t count) {
  const std::vector<int> off = compare_replicas(*reducer_, data, count);
  if (off.empty()) return;
  if (on_disagreement_) on_disagreement_(step, checked, off);
  for (int rank : off)
    if (rank == reducer_->rank()) throw ReplicaMismatch(step, checked, off);
}

double Trainer::evaluate(BatchSource& batches, int64_t eval_batches,
                         const std::function<bool()>& stop) {
  finish_update();
  const int64_t batch = config_.train.batch_size;
  const int64_t T = config_.model.context;
  double total = 0.0;
  int64_t count = 0;
  for (int64_t b = 0; b < eval_batches; ++b) {
    if (stop && stop()) break;
    for (int64_t first = slice_first_; first < slice_first_ + slice_size_; first += micro_batch_) {
      batches.fill(static_cast<uint64_t>(b), batch, first, micro_batch_, T, inputs_.data(),
                   targets_.data());
      total += model_->forward(inputs_.data(), targets_.data(), micro_batch_, T);
      ++count;
    }
  }
  if (reducer_ != nullptr) {
    std::array<double, 2> sums{total, static_cast<double>(count)};
    reducer_->sum_over_ranks(sums);
    return sums[0] / sums[1];
  }
  return total / static_cast<double>(count);
}

bool Trainer::snapshot_is_collective() const {
  return reducer_ != nullptr && reducer_->shards_optimizer_state();
}

void Trainer::snapshot(float* params, float* adam_m, float* adam_v) {
  finish_update();
  const size_t bytes = model_->num_params() * sizeof(float);
  backend_->copy_to_host(params, model_->params(), bytes);
  optimizer_->moments_to_host(adam_m, adam_v);
  if (snapshot_is_collective()) {
    gather_host_shards(*reducer_, *backend_, adam_m, model_->num_params());
    gather_host_shards(*reducer_, *backend_, adam_v, model_->num_params());
  }
}

void Trainer::snapshot_owned(float* params, float* adam_m, float* adam_v) {
  finish_update();
  backend_->copy_to_host(params, model_->params(), model_->num_params() * sizeof(float));
  optimizer_->moments_to_host(adam_m, adam_v);
}

void Trainer::restore(const float* params, const float* adam_m, const float* adam_v,
                      int64_t optimizer_steps) {
  finish_update();
  const size_t bytes = model_->num_params() * sizeof(float);
  backend_->copy_from_host(model_->params(), params, bytes);
  host_params_current_ = false;  // the master copy comes down at the next update
  optimizer_->moments_from_host(adam_m, adam_v);
  optimizer_->set_steps_taken(optimizer_steps);
}

std::string Trainer::params_sha256() {
  finish_update();
  std::vector<float> host(model_->num_params());
  backend_->copy_to_host(host.data(), model_->params(), host.size() * sizeof(float));
  return util::sha256_hex(host.data(), host.size() * sizeof(float));
}

}  // namespace dseek::train
