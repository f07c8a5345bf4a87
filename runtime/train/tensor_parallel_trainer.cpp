// Implementation of tensor_parallel_trainer.hpp.
#include "runtime/train/tensor_parallel_trainer.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/optim/loss_scaler_of.hpp"

namespace dseek::train {

namespace {
using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}
}  // namespace

// The model's group with the time spent in its all-reduces counted: they block, so that
// time is the step's exposed communication (comm_ms).
class TensorParallelTrainer::TimedGroup final : public model::TensorGroup {
 public:
  explicit TimedGroup(model::TensorGroup& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void all_reduce_sum(float* data, size_t count) override {
    const auto start = Clock::now();
    inner_.all_reduce_sum(data, count);
    spent_ms_ += ms_between(start, Clock::now());
  }
  double take_spent_ms() { return std::exchange(spent_ms_, 0.0); }

 private:
  model::TensorGroup& inner_;
  double spent_ms_ = 0.0;
};

TensorParallelTrainer::TensorParallelTrainer(const config::JobConfig& config, BatchSource& batches,
                                             model::TensorGroup& group, ReplicaGroup* replica_group,
                                             const BackendFactory& make_backend,
                                             const OptimizerShardsFactory& optimizer_shards)
    : config_(config), batches_(batches), group_(group), replicas_(replica_group),
      timed_group_(std::make_unique<TimedGroup>(group)),
      backend_(make_backend ? make_backend(config) : make_runtime_backend(config)) {
  const auto& t = config.train;
  slice_ = replica_slice(t.batch_size, replicas_ != nullptr ? replicas_->replicas() : 1,
                         replicas_ != nullptr ? replicas_->replica() : 0);
  micro_batch_ = t.micro_batch_size > 0 ? t.micro_batch_size : slice_.size;
  if (slice_.size % micro_batch_ != 0)
    throw std::invalid_argument("train.micro_batch_size = " + std::to_string(t.micro_batch_size) +
                                " does not divide a replica's slice of train.batch_size (" +
                                std::to_string(slice_.size) +
                                " sequences; every rank of a tensor-parallel group runs its "
                                "replica's whole slice)");
  model_ = std::make_unique<model::TensorParallelGpt>(shape_of(config.model), *timed_group_,
                                                      *backend_, micro_batch_,
                                                      recompute_of(config.model));
  model_->init_weights(static_cast<uint64_t>(t.seed), config.model.init_std);
  const backend::MatmulFormat format = model::matmul_format_of(t.precision);
  model_->set_precision(model::PrecisionPolicy(*backend_, format, config.model.layers,
                                               {t.fp8_amax_history, t.fp8_margin}));
  loss_scaler_ = optim::loss_scaler_of(config);  // fp8 only
  settings_ = optim::AdamWSettings{t.beta1, t.beta2, t.eps, t.weight_decay, t.grad_clip};
  lr_schedule_ = optim::LrSchedule{t.lr, t.min_lr, t.warmup_steps, t.steps};
  moments_ = {0, model_->num_params()};
  if (config.parallel.zero > 0 && replicas_ != nullptr && replicas_->replicas() > 1) {
    zero_ = std::make_unique<DataGroupShards>(
        *replicas_, std::vector<model::ParamRange>{{0, model_->num_params()}});
    moments_ = zero_->pieces().empty() ? model::ParamRange{0, 0} : zero_->pieces().front();
  }
  if (replicas_ != nullptr)
    grads_host_ = std::make_unique<HostStaging>(*backend_, model_->grads(), model_->num_params());
  if (zero_)
    params_host_ = std::make_unique<HostStaging>(*backend_, model_->params(), model_->num_params());
  plan_update_runs();
  // The shard's buffer is no ParamLayout: each run carries its decay (OptimizerSpec).
  OptimizerSpec spec{*backend_, model_->layout().whole(), settings_, {}, backend_->host_memory(),
                     runs_};
  for (const optim::DecayRange& run : runs_) spec.owned.push_back(run.range);
  optimizer_ = make_optimizer_in_place(optimizer_shards, spec);
  const size_t tokens = static_cast<size_t>(micro_batch_ * config.model.context);
  inputs_.resize(tokens);
  targets_.resize(tokens);
}

TensorParallelTrainer::~TensorParallelTrainer() = default;

// Each segment of the shard cut where the whole model's tensor changes (for its decay
// flag); neighbours with the same flag merge, as AdamW::plan_runs merges them. The
// segments are also sorted into sharded and replicated ranges for the norm.
void TensorParallelTrainer::plan_update_runs() {
  const model::TensorParallelLayout& layout = model_->layout();
  const auto& tensors = layout.whole().tensors();
  for (const model::ShardSegment& segment : layout.segments()) {
    auto& norm_ranges = layout.replicated(segment.shard_offset) ? replicated_ : sharded_;
    norm_ranges.push_back({segment.shard_offset, segment.count});
    const size_t whole_end = segment.whole_offset + segment.count;
    for (const model::ParamTensor& tensor : tensors) {
      const size_t begin = std::max(segment.whole_offset, tensor.offset);
      const size_t end = std::min(whole_end, tensor.offset + tensor.size());
      if (begin >= end) continue;
      const size_t shard_begin = segment.shard_offset + (begin - segment.whole_offset);
      if (!runs_.empty() && runs_.back().decay == tensor.decay &&
          runs_.back().range.end() == shard_begin) {
        runs_.back().range.count += end - begin;
        continue;
      }
      runs_.push_back({{shard_begin, end - begin}, tensor.decay});
    }
  }
  // This replica's optimizer covers moments_ only (the whole shard without ZeRO).
  std::vector<optim::DecayRange> in_moments;
  for (const optim::DecayRange& run : runs_) {
    const size_t begin = std::max(run.range.offset, moments_.offset);
    const size_t end = std::min(run.range.end(), moments_.end());
    if (begin < end) in_moments.push_back({{begin, end - begin}, run.decay});
  }
  runs_ = std::move(in_moments);
  if (zero_) {
    sharded_ = zero_->within_pieces(sharded_);
    replicated_ = zero_->within_pieces(replicated_);
  }
}

// The squares of the sharded tensors travel as one float (the group's all-reduce is
// f32): ~1e-7 relative on the norm, below what the split's own rounding leaves.
double TensorParallelTrainer::global_grad_norm() {
  const float* grads = model_->grads();
  double sharded = 0.0, replicated = 0.0;
  for (const auto& range : sharded_) sharded += backend_->sum_squares(grads + range.offset, range.count);
  for (const auto& range : replicated_)
    replicated += backend_->sum_squares(grads + range.offset, range.count);
  if (zero_) {  // each replica squared its piece: every element once over the group
    std::array<double, 2> pieces{sharded, replicated};
    replicas_->sum(pieces);
    sharded = pieces[0];
    replicated = pieces[1];
  }
  float group_squares = static_cast<float>(sharded);
  timed_group_->all_reduce_sum(&group_squares, 1);
  return std::sqrt(static_cast<double>(group_squares) + replicated);
}

double TensorParallelTrainer::sum_over_group(double value) {
  float sum = static_cast<float>(value);
  group_.all_reduce_sum(&sum, 1);
  std::array<double, 1> total{static_cast<double>(sum)};
  if (replicas_ != nullptr) replicas_->sum(total);
  return total[0];
}

StepReport TensorParallelTrainer::train_step(int64_t step) {
  const auto start = Clock::now();
  const int64_t batch = config_.train.batch_size;
  const int64_t T = config_.model.context;
  const int64_t micro_steps = batch / micro_batch_;  // of the global batch, over the replicas
  StepReport report;
  report.step = step;
  report.lr = lr_schedule_.at(step);
  model_->zero_grads();
  timed_group_->take_spent_ms();
  const float loss_scale = loss_scaler_ ? loss_scaler_->scale() : 1.0f;
  const float dloss =
      1.0f / static_cast<float>(micro_batch_ * T) / static_cast<float>(micro_steps) * loss_scale;
  double loss = 0.0;
  for (int64_t first = slice_.first; first < slice_.first + slice_.size; first += micro_batch_) {
    const auto wait_start = Clock::now();
    batches_.fill(static_cast<uint64_t>(step), batch, first, micro_batch_, T, inputs_.data(),
                  targets_.data());
    report.data_wait_ms += ms_between(wait_start, Clock::now());
    loss += model_->forward(inputs_.data(), targets_.data(), micro_batch_, T) /
            static_cast<double>(micro_steps);
    model_->backward(dloss);
  }
  if (replicas_ != nullptr) {
    const auto reduce_start = Clock::now();
    grads_host_->all_to_host();
    if (zero_) zero_->reduce_scatter(grads_host_->host());  // the piece's sum only
    else replicas_->sum(grads_host_->host(), grads_host_->count());
    grads_host_->all_to_backend();
    std::array<double, 1> total{loss};
    replicas_->sum(total);
    loss = total[0];
    report.comm_ms += ms_between(reduce_start, Clock::now());
  }
  report.loss = loss;
  report.precision = config_.train.precision;
  double norm = global_grad_norm();
  report.grad_norm = norm;
  if (loss_scaler_ && !apply_loss_scale(norm, report)) {
    model_->precision().end_step();
    return finish_report(report, start);
  }
  optimizer_->update(model_->params(), model_->grads(), report.lr, norm);
  if (zero_) {  // every replica's updated piece to every replica
    const auto gather_start = Clock::now();
    params_host_->all_to_host();
    zero_->all_gather(params_host_->host());
    params_host_->all_to_backend();
    report.comm_ms += ms_between(gather_start, Clock::now());
  }
  model_->precision().end_step();
  return finish_report(report, start);
}

// The norm is the same on every rank of the group and every replica (the sum over the
// group and the replicas' summed gradients), so all take the same decision and keep the
// same scale: an overflow on any rank skips the step everywhere.
bool TensorParallelTrainer::apply_loss_scale(double& norm, StepReport& report) {
  const float scale = loss_scaler_->scale();
  report.loss_scale = scale;
  // The scaler decides on finiteness: the square of a non-finite norm stays non-finite.
  if (!loss_scaler_->update(norm * norm)) {
    report.skipped = true;
    return false;
  }
  backend_->scale(model_->grads(), model_->num_params(), 1.0f / scale);
  norm /= scale;  // exact: the scale is a power of two
  report.grad_norm = norm;
  return true;
}

StepReport TensorParallelTrainer::finish_report(StepReport& report, Clock::time_point start) {
  const int64_t tokens = config_.train.batch_size * config_.model.context;
  report.comm_ms += timed_group_->take_spent_ms();
  report.step_ms = ms_between(start, Clock::now());
  report.compute_ms = report.step_ms - report.comm_ms - report.data_wait_ms;
  report.tokens_per_s = static_cast<double>(tokens) / (report.step_ms / 1000.0);
  report.peak_memory_bytes = backend_->memory_usage().peak_bytes;
  return report;
}

// The model's loss is already the group's (the vocabulary-parallel cross-entropy
// all-reduces it), so the ranks of a group agree without another reduction; the
// replicas' slices are summed.
double TensorParallelTrainer::evaluate(BatchSource& batches, int64_t eval_batches) {
  const int64_t batch = config_.train.batch_size;
  const int64_t T = config_.model.context;
  double total = 0.0;
  int64_t count = 0;
  for (int64_t b = 0; b < eval_batches; ++b) {
    for (int64_t first = slice_.first; first < slice_.first + slice_.size; first += micro_batch_) {
      batches.fill(static_cast<uint64_t>(b), batch, first, micro_batch_, T, inputs_.data(),
                   targets_.data());
      total += model_->forward(inputs_.data(), targets_.data(), micro_batch_, T);
      ++count;
    }
  }
  std::array<double, 2> sums{total, static_cast<double>(count)};
  if (replicas_ != nullptr) replicas_->sum(sums);
  return sums[1] > 0 ? sums[0] / sums[1] : 0.0;
}

// Each rank writes its slices into zeros, rank 0 also the replicated tensors, and the
// group sums: every element has one non-zero contribution, so the sum is exact.
std::vector<float> TensorParallelTrainer::gather_params() {
  const model::TensorParallelLayout& layout = model_->layout();
  std::vector<float> shard(layout.total());
  backend_->copy_to_host(shard.data(), model_->params(), shard.size() * sizeof(float));
  std::vector<float> whole(layout.whole().total(), 0.0f);
  for (const model::ShardSegment& segment : layout.segments()) {
    if (layout.replicated(segment.shard_offset) && group_.rank() != 0) continue;
    std::copy_n(shard.begin() + static_cast<std::ptrdiff_t>(segment.shard_offset), segment.count,
                whole.begin() + static_cast<std::ptrdiff_t>(segment.whole_offset));
  }
  group_.all_reduce_sum(whole.data(), whole.size());
  return whole;
}

bool TensorParallelTrainer::first_rank_decides(bool value) {
  float decision = group_.rank() == 0 && value ? 1.0f : 0.0f;
  group_.all_reduce_sum(&decision, 1);
  // Under ZeRO (and fp8_state_per_replica) every replica takes part in a checkpoint:
  // replica 0's decision to all.
  if (zero_ || fp8_state_per_replica()) {
    std::array<double, 1> replica0{replica() == 0 ? static_cast<double>(decision) : 0.0};
    replicas_->sum(replica0);
    return replica0[0] > 0.0;
  }
  return decision > 0.0f;
}

void TensorParallelTrainer::moments_to_host(std::vector<float>& m_shard,
                                            std::vector<float>& v_shard) {
  optimizer_->moments_to_host(m_shard.data(), v_shard.data());
  if (!zero_) return;
  zero_->all_gather(m_shard.data());
  zero_->all_gather(v_shard.data());
}

void TensorParallelTrainer::gather_state_to_first(float* params, float* adam_m, float* adam_v) {
  const model::TensorParallelLayout& layout = model_->layout();
  if (replica() != 0) {
    // Only under ZeRO (they lend their moment pieces) or for their fp8 state (gathered
    // next, in gather_precision_state) do the other replicas take part.
    if (!(zero_ || fp8_state_per_replica()) || params != nullptr)
      throw std::logic_error("gather_state_to_first: a replica other than 0 takes part under "
                             "ZeRO or fp8 only, and passes no buffers");
    if (!zero_) return;
    std::vector<float> m_shard(layout.total()), v_shard(layout.total());
    moments_to_host(m_shard, v_shard);
    return;
  }
  const bool first = group_.rank() == 0;
  if (first != (params != nullptr && adam_m != nullptr && adam_v != nullptr))
    throw std::logic_error("gather_state_to_first: rank 0, and only rank 0, passes buffers");
  const size_t whole_count = layout.whole().total();
  std::vector<float> param_shard(layout.total()), m_shard(layout.total()), v_shard(layout.total());
  std::vector<float> scratch(first ? 0 : whole_count);
  backend_->copy_to_host(param_shard.data(), model_->params(), param_shard.size() * sizeof(float));
  moments_to_host(m_shard, v_shard);
  const std::pair<const std::vector<float>*, float*> parts[] = {
      {&param_shard, params}, {&m_shard, adam_m}, {&v_shard, adam_v}};
  for (const auto& [source, target] : parts) {
    const std::vector<float>& shard = *source;
    float* whole = first ? target : scratch.data();
    std::fill_n(whole, whole_count, -0.0f);
    for (const model::ShardSegment& segment : layout.segments()) {
      if (layout.replicated(segment.shard_offset) && !first) continue;
      std::copy_n(shard.begin() + static_cast<std::ptrdiff_t>(segment.shard_offset), segment.count,
                  whole + segment.whole_offset);
    }
    group_.all_reduce_sum(whole, whole_count);
  }
}

void TensorParallelTrainer::restore_state(const float* params, const float* adam_m,
                                          const float* adam_v, int64_t optimizer_steps) {
  const model::TensorParallelLayout& layout = model_->layout();
  std::vector<float> shard(layout.total());
  layout.scatter(params, shard.data());
  backend_->copy_from_host(model_->params(), shard.data(), shard.size() * sizeof(float));
  // The optimizer reads the moments of its ranges only (under ZeRO this replica's piece).
  std::vector<float> v_shard(layout.total());
  layout.scatter(adam_m, shard.data());
  layout.scatter(adam_v, v_shard.data());
  optimizer_->moments_from_host(shard.data(), v_shard.data());
  optimizer_->set_steps_taken(optimizer_steps);
}

}  // namespace dseek::train
